"""Each request's outcome and the record that stated it, decided once for analyze and compare (evid27).

TGI 1374's one 'Success' line read "1 unknown (no caller's or gateway's record)" in analyze while compare counted
it as 1 ok from the engine log's own end: two answers to one question. Both now read ``stated_outcome`` and
``stated_by`` from here: the correlation's outcome, stated by the record of the row's origin (the caller's, the
gateway's, the engine's: a request it failed); or, for a request only the engine logged whose every execution it
logged as ended well (``server_requests.finished_ts`` with no abort or failure: TGI's 'Success', SGLang's 'Finish'
of a non-abort, vLLM V0's 'Finished request'), ok stated by the engine; else null, unknown (an abort is the caller
leaving, no outcome the engine can judge).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

UNKNOWN = "unknown"  # requests.outcome where no record states one
BY_ORIGIN = {"client": "caller", "gateway": "gateway", "server": "engine"}
# how each stater is named to a reader
BY_TEXT = {"caller": "the caller's record", "gateway": "the gateway's record", "engine": "the engine log"}
# an ok only the engine's own end states: the status column's words (analyze) and the source compare names
ENGINE_END = "stated by the engine log's own end alone: no caller's or gateway's record"


# why a request's outcome is unknown: no caller's or gateway's record of it is here (the engine's own lines or spans
# alone), or the record that is here gives no status (a router's exception line, a client's retry line)
NO_RECORD = "no caller's or gateway's record"
NO_STATUS = "no status in the caller's or gateway's record"


@dataclass(frozen=True)
class Unknown:
    """Requests no record states the outcome of, as analyze and compare both say them ('1 unknown (no caller's or
    gateway's record)'): vllm-public 05's pending request read so in analyze, and '1 of its requests of unknown
    outcome left out' in compare."""

    requests: int
    recorded: int  # of them, those a caller's or a gateway's record logged, with no status

    @property
    def why(self) -> str:
        """The records missing (analyze's status column for an unknown outcome)."""
        if self.recorded == 0:
            return NO_RECORD
        if self.recorded == self.requests:
            return NO_STATUS
        return f"{self.requests - self.recorded:,} with {NO_RECORD}, {self.recorded:,} with {NO_STATUS}"

    @property
    def text(self) -> str:
        """'1 unknown (no caller's or gateway's record)'."""
        return f"{self.requests:,} {UNKNOWN} ({self.why})"


def recorded(req: pl.DataFrame) -> pl.Expr:
    """A request a caller's or a gateway's record logged (its attempts there)."""
    out = pl.lit(False)
    for c in ("client_attempts", "gateway_attempts"):
        if c in req.columns:
            out = out | (pl.col(c).fill_null(0) > 0)
    return out


def unknown(req: pl.DataFrame) -> Unknown | None:
    """The requests of ``req`` (``of``'s frame) whose outcome no record states; None when every one is stated."""
    if "stated_outcome" not in req.columns:
        return None
    un = req.filter(pl.col("stated_outcome").is_null())
    return Unknown(un.height, int(un.select(recorded(un).sum()).item())) if un.height else None


def of(req: pl.DataFrame, server_requests: pl.DataFrame) -> pl.DataFrame:
    """``req`` (the requests table: origin, outcome, logical_request_id) with ``stated_outcome`` and
    ``stated_by`` (caller, gateway, engine; both null where no record states the outcome)."""
    if req.height == 0 or not {"outcome", "origin"} <= set(req.columns):
        return req.with_columns(
            pl.lit(None, pl.String).alias("stated_outcome"), pl.lit(None, pl.String).alias("stated_by")
        )
    known = (pl.col("outcome") != UNKNOWN).fill_null(False)
    engine_ok = (pl.col("outcome") == UNKNOWN).fill_null(False) & _ended_well(req, server_requests)
    by_origin = pl.col("origin").replace_strict(BY_ORIGIN, default=None, return_dtype=pl.String)
    return req.with_columns(
        pl.when(known).then(pl.col("outcome")).when(engine_ok).then(pl.lit("ok")).alias("stated_outcome"),
        pl.when(known).then(by_origin).when(engine_ok).then(pl.lit("engine")).alias("stated_by"),
    )


def _ended_well(req: pl.DataFrame, sr: pl.DataFrame) -> pl.Expr:
    """An engine-only request (origin server) whose every execution the engine logged as ended well."""
    need = {"request_id", "finished_ts", "aborted_ts", "failed_ts"}
    if sr.height == 0 or not need <= set(sr.columns) or "logical_request_id" not in req.columns:
        return pl.lit(False)
    key = (
        pl.coalesce("base_request_id", "request_id")
        if "base_request_id" in sr.columns
        else pl.col("request_id")
    )
    ended = (
        pl.col("finished_ts").is_not_null() & pl.col("aborted_ts").is_null() & pl.col("failed_ts").is_null()
    )
    # the correlation keys an engine-only request by its file and id: every execution of that id must have ended well
    done = sr.group_by(key.alias("_id")).agg(ended.all().alias("_ended")).filter(pl.col("_ended"))["_id"]
    return (pl.col("origin") == "server") & pl.col("logical_request_id").is_in(done.implode())
