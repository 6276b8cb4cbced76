"""Streamed answers that failed after the access log's 200 (LiteLLM's ``async_data_generator(): Exception occured``,
``gateway_attempts.flags`` 'failed,stream'), and the request each is tied to where the evidence decides it.

uvicorn writes an access line when the response's headers go out; a streamed body is written after, so a stream the
upstream breaks off (public-2 g09: Gemini's 503 'The model is overloaded') still reads 200 in the access log. The
error line names no request id, so it is tied by its file's order alone: its request's access line is one of the
2xx POSTs before it in the same file, not already taken by an earlier failure (a stream fails once). It is tied
only when exactly one such line is left AND the file shows the proxy's start before them (uvicorn's 'Started server
process', gateway_errors kind 'start'): an excerpt that begins mid-traffic may have lost the access line of the
stream that failed. Time cannot narrow it: a stream may last minutes, and uvicorn's lines carry no time of their own.

A rotated set's files (``vllm.log.1``, ``vllm.log``: one stream, files.parquet) are one log: its order runs on from
the older file into the newer, so an access line before the cut is a candidate of a failure after it.

The ties are decided over the whole of each file, whatever the range analysed (a range that left out an earlier
failure would free the access line it took). Correlation reads them (``marks``) to end the tied request as cut
mid-stream and to mark the access lines an untied one may belong to; the diagnosis' finding reads ``load``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import polars as pl

from .. import schemas
from ..ingest import inputs
from ..resources import time_range
from ..scalars import int_or_none, time_or_none

STREAM = "stream"  # the flag of a streamed answer's failure (parsers/litellm.py)
START = "start"  # gateway_errors.kind of the proxy's start (uvicorn's 'Started server process')
# requests.mid_stream of an access line a failure is tied to, and of one an untied failure may belong to
FAILED = "failed"
MAYBE = "may have failed"


@dataclass(frozen=True)
class StreamFailure:
    """One failed stream: where its record is, what it says, and which access lines could be its request's."""

    source: str
    line_no: int | None
    ts: datetime | None  # the record's own time (LiteLLM's HH:MM:SS), None when the record has none
    upstream: str | None
    upstream_status: int | None  # the status its error text names (None: it names none)
    error: str | None
    candidates: tuple[int, ...]  # line numbers of the access lines (2xx POST) it could belong to
    from_start: bool  # the file shows the proxy's start before them: no access line is missing before it
    tied: int | None  # the one access line it is tied to, when the evidence decides it
    tied_ts: datetime | None  # that access line's time (the previous record's: uvicorn's lines carry none)
    untimed_candidates: int = 0  # candidates with no time at all (before the file's first LiteLLM record)
    reason: str | None = None  # the upstream's words in the error (reason())
    # the file of each candidate (an older file of its rotated set, else its own) and of the tied one
    where: tuple[str, ...] = ()
    tied_source: str | None = None

    def labels(self) -> list[str]:
        """Each candidate as a reader finds it: its line, after its file's name when that is another file."""
        return [
            f"{w} line {n}" if w != self.source else str(n)
            for w, n in zip(self.where, self.candidates, strict=True)
        ]


@dataclass
class StreamFailures:
    failures: list[StreamFailure] = field(default_factory=list)

    @property
    def tied(self) -> list[StreamFailure]:
        return [f for f in self.failures if f.tied is not None]

    @property
    def untied(self) -> list[StreamFailure]:
        return [f for f in self.failures if f.tied is None]


# the reason an error text gives: the upstream's JSON message (g09: Gemini's body inside LiteLLM's exception), else
# what follows LiteLLM's '<Provider>Exception - ' ('Connection error.': a cut stream)
_MESSAGE = re.compile(r'\\?"message\\?": ?\\?"((?:[^"\\]|\\[^"n])+)')
_AFTER = re.compile(r"\w*Exception - (.+)$")
REASON_CHARS = 100


def reason(error: str | None) -> str | None:
    """The upstream's own words in a LiteLLM error text, cut to REASON_CHARS; None when it gives none."""
    if not error:
        return None
    m = _MESSAGE.search(error) or _AFTER.search(error)
    if m is None:
        return None
    text = m.group(1).strip()
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


_FILE_STEP = 1 << 40  # a place's file rank is counted in steps past any line number
_FAIL_COLS = ("ts_start", "source", "line_no", "upstream", "upstream_status", "error", "flags")
_ACCESS_COLS = ("ts_start", "source", "line_no", "status", "method")


def _read(out: Path, name: str, columns: tuple[str, ...], where: pl.Expr) -> pl.DataFrame:
    """``columns`` of a table's rows ``where``, the whole file (no range); empty when absent or unreadable."""
    try:
        return time_range.scan(out, name).filter(where).select(columns).collect()
    except Exception:  # noqa: BLE001 - a half-written table must not stop the analysis
        return schemas.empty(name).select(columns)


def load(out: Path, rng: time_range.Range = time_range.ALL) -> StreamFailures:
    """The folder's failed streams in the range (and those with no time: no range can place them), tied where the
    evidence of the whole file decides it."""
    every = _tie(out)
    if not rng:
        return every
    return StreamFailures([f for f in every.failures if f.ts is None or rng.contains(f.ts)])


def marks(out: Path) -> pl.DataFrame:
    """The access lines (source, line_no) a failed stream is tied to (mid_stream FAILED, with its error and the
    upstream status it names) or that an untied one may belong to (MAYBE): correlation's input."""
    rows: dict[tuple[str, int], tuple[str, str | None, int | None]] = {}
    for f in _tie(out).failures:
        if f.tied is not None:
            rows[(f.tied_source or f.source, f.tied)] = (FAILED, f.error, f.upstream_status)
        for w, c in zip(f.where, f.candidates, strict=True) if f.tied is None else ():
            rows.setdefault((w, c), (MAYBE, None, None))
    return pl.DataFrame(
        [(s, n, *v) for (s, n), v in sorted(rows.items())],
        schema=MARKS,
        orient="row",
    )


MARKS = {
    "source": pl.String,
    "line_no": pl.Int64,
    "mid_stream": pl.String,
    "error": pl.String,
    "upstream_status": pl.Int64,
}


def _tie(out: Path) -> StreamFailures:
    # the flag as a whole word of the comma-separated flags: nginx's 'no_live_upstreams' holds 'stream' too
    flagged = pl.col("flags").cast(pl.String).str.contains(rf"(?:^|,){STREAM}(?:,|$)").fill_null(False)
    fails = _read(out, "gateway_attempts", _FAIL_COLS, flagged)
    if not fails.height:
        return StreamFailures()
    srcs = sorted(fails["source"].cast(pl.String).unique().to_list())
    logs = _logs(out, srcs)
    # every access line of those files, whatever the range: the order of the whole file decides
    acc = _read(
        out,
        "gateway_attempts",
        _ACCESS_COLS,
        pl.col("source").is_in(list(logs)) & pl.col("flags").is_null() & pl.col("status").is_not_null(),
    ).filter(pl.col("status").is_between(200, 299) & (pl.col("method").fill_null("POST") == "POST"))
    starts = _read(
        out, "gateway_errors", ("source", "kind", "line_no"), pl.col("kind").cast(pl.String) == START
    )
    rank = {k: r for k, (_, r) in logs.items()}
    # a row's place in its log: its file's rank in its rotated set (oldest first), then its line
    place = pl.col("source").cast(pl.String).replace_strict(
        rank, default=0, return_dtype=pl.Int64
    ) * _FILE_STEP + (pl.col("line_no").fill_null(0))
    fails, acc, starts = (d.with_columns(place.alias("_at")) for d in (fails, acc, starts))
    out_: list[StreamFailure] = []
    for src in srcs:
        log = [k for k, (stream, _) in logs.items() if stream == logs[src][0]]
        mine = fails.filter(pl.col("source").cast(pl.String) == src).sort("line_no", nulls_last=True)
        lines = acc.filter(pl.col("source").cast(pl.String).is_in(log)).sort("_at")
        first = starts.filter(pl.col("source").cast(pl.String).is_in(log))["_at"]
        taken: set[tuple[str, int]] = set()
        for r in mine.iter_rows(named=True):
            at = r["_at"] if r["line_no"] is not None else None
            # the access lines since the last start before it (a restart's process answers anew)
            begun = first.filter(first < at) if at is not None else first.clear()
            since = int_or_none(begun.max()) if begun.len() else None
            cand = (
                lines.filter((pl.col("_at") < at) & (pl.col("_at") > (since if since is not None else -1)))
                if at is not None
                else lines.clear()
            )
            cand = cand.filter(
                ~pl.concat_str("source", pl.lit("\x00"), "line_no").is_in([f"{w}\x00{n}" for w, n in taken])
            )
            free = list(zip(cand["source"].cast(pl.String).to_list(), cand["line_no"].to_list(), strict=True))
            tied = free[0] if len(free) == 1 and since is not None else None
            if tied is not None:
                taken.add(tied)
            tied_ts = (
                time_or_none(cand.filter(pl.col("line_no") == tied[1])["ts_start"][0])
                if tied is not None
                else None
            )
            out_.append(
                StreamFailure(
                    src,
                    r["line_no"],
                    time_or_none(r["ts_start"]),
                    str(r["upstream"]) if r["upstream"] is not None else None,
                    int_or_none(r["upstream_status"]),
                    r["error"],
                    tuple(n for _, n in free),
                    since is not None,
                    tied[1] if tied is not None else None,
                    tied_ts,
                    int(cand["ts_start"].is_null().sum()),
                    reason(r["error"]),
                    tuple(w for w, _ in free),
                    tied[0] if tied is not None else None,
                )
            )
    return StreamFailures(out_)


def _logs(out: Path, srcs: list[str]) -> dict[str, tuple[str, int]]:
    """Each file of the failures' logs (their rotated sets: files.parquet's ``stream``): its log and its rank in
    it, the oldest 0; a file the table does not name is a log of its own."""
    try:
        files = pl.read_parquet(out / "files.parquet", columns=["path", "stream"])
    except Exception:  # noqa: BLE001 - no files table (a table written alone): each file is its own log
        files = pl.DataFrame(schema={"path": pl.String, "stream": pl.String})
    streams = files.filter(pl.col("path").is_in(srcs))["stream"].unique().to_list()
    out_: dict[str, tuple[str, int]] = {}
    for (stream,), group in files.filter(pl.col("stream").is_in(streams)).group_by("stream"):
        paths = sorted(group["path"].to_list(), key=lambda p: -inputs.rotation_of(p))
        out_.update({p: (str(stream), i) for i, p in enumerate(paths)})
    return out_ | {s: (s, 0) for s in srcs if s not in out_}
