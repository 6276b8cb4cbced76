"""HAProxy ``option httplog`` access log -> ``gateway_attempts``, one row per request.

Sample (Debian 12 HAProxy 2.6.12 through rsyslog, tests/data/haproxy/haproxy.log)::

    2026-11-29T09:50:19+00:00 localhost haproxy[16480]: 127.0.0.1:54240 [29/Nov/2026:09:50:19.211] fe_llm be_vllm/vllm-1 0/0/0/55/55 200 409 - - ---- 1/1/0/0/+1 0/0 "POST /v1/completions HTTP/1.1"

Format (its line kind as data: haproxy.toml, read by the compiled scanner): the HTTP log format of the HAProxy
configuration manual §8.2.3
(``%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq
%hr %hs %{+Q}r``; 1.x printed ``%Tq/%Tw/%Tc/%Tr/%Tt`` in the same five slots). Any syslog prefix
(rsyslog RFC 3339 or traditional, ``<PRI>``, none with ``log stdout format raw``) is skipped. Optional:
captured headers ``{...}`` and one trailing token after the request line, read as ``%ID``
(``unique-id-format``), the common way of logging it.

HAProxy logs one line per request, not per attempt: the row is the last attempt (``attempt`` =
``attempts_total`` = ``%rc`` + 1, the server named is the last one tried). A ``+`` before ``%rc``
means the request was redispatched to another server: flags gets ``,redispatch``. ``flags`` is the
termination state ``%tsc``; ``error`` spells out its first two characters. ``upstream_status`` is the
status only when the server answered (``%Tr`` >= 0); a 503/504 that HAProxy made itself has none.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from . import _kinds
from ._common import local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "haproxy"
KIND = "gateway"
DESCRIPTION = "HAProxy option httplog access log (any syslog prefix), optional %ID"
MODE = "lines"
INDEPENDENT_CHUNKS = True  # one line, one record: a chunk needs nothing from the one before
SAMPLES = [
    '2026-11-29T09:50:19+00:00 localhost haproxy[16480]: 127.0.0.1:54240 [29/Nov/2026:09:50:19.211] fe_llm be_vllm/vllm-1 0/0/0/55/55 200 409 - - ---- 1/1/0/0/+1 0/0 "POST /v1/completions HTTP/1.1"',
    'Nov 29 09:50:19 localhost haproxy[16480]: 127.0.0.1:54228 [29/Nov/2026:09:50:19.056] fe_llm be_vllm/vllm-1 0/0/0/54/54 200 409 - - ---- 1/1/0/0/0 0/0 "POST /v1/completions HTTP/1.1"',
    '127.0.0.1:56648 [29/Nov/2026:09:50:27.725] fe_llm_id be_vllm/vllm-dead 0/0/-1/-1/0 503 217 - - SC-- 3/3/2/0/2 0/0 {client-burst-009-2} "POST /v1/completions HTTP/1.1" 7F000001:DD48_7F000001:46A1_6B0BF563_000A:4062',
]

_DETECT = (
    r"\[\d{2}/[A-Za-z]{3}/\d{4}:\d{2}:\d{2}:\d{2}\.\d{3}\] \S+ \S+/\S+ "
    r"-?\d+/-?\d+/-?\d+/-?\d+/\+?-?\d+ -?\d+ \+?\d+ \S+ \S+ [A-Za-z-]{4} \d+/\d+/\d+/\d+/\+?\d+ "
)
_REQ = r"^(?P<method>[A-Z]+) (?P<path>\S+)"
_ID_LIKE = r"^[0-9A-Za-z_-]{6,}$"  # a captured X-Request-Id: no dots/colons, so not a host or address
# %tsc first character: who or what ended the session; second: the phase it was in (manual §8.5)
_CAUSE = {
    "C": "client aborted",
    "S": "server aborted or refused",
    "P": "proxy blocked",
    "L": "served locally",
    "R": "resource exhausted",
    "I": "internal error",
    "D": "server down",
    "U": "server up",
    "K": "killed by admin",
    "c": "client timeout",
    "s": "server timeout",
}
_PHASE = {
    "R": "waiting for the request",
    "Q": "waiting in queue",
    "C": "connecting to server",
    "H": "waiting for response headers",
    "D": "transferring data",
    "L": "sending last data",
    "T": "tarpitted",
    "-": "after the session",
}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    return per_head(nonblank(frame), n, s=share(_DETECT)).get_column("s")


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _ms(col: str) -> pl.Expr:
    v = pl.col(col).pipe(to_int)
    return pl.when(v >= 0).then(v / 1000.0)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    f = pl.concat([lines.select("line_no"), _kinds.scan(__file__, lines)], how="horizontal")
    ok = f.get_column("kind").is_not_null()  # one kind: haproxy.toml's httplog
    rows = f.filter(ok)
    tables = {}
    if rows.height:
        tables["gateway_attempts"] = _rows(rows, ctx)
    assumptions = []
    if rows.height and ctx.tz in ("UTC", "Z", "+00:00"):
        assumptions.append("HAProxy %tr is local time without a zone: read as UTC (--tz)")
    elif rows.height:
        assumptions.append(f"HAProxy %tr is local time without a zone: read as {ctx.tz} (--tz)")
    if rows.height:
        assumptions.append(
            "HAProxy logs one line per request: attempts_total = retries (%rc) + 1, the row is the last attempt"
        )
    return ChunkResult(tables=tables, recognized=ok, assumptions=assumptions)


def _rows(rows: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    start = local_to_utc(
        pl.col("tr").str.strptime(pl.Datetime("us"), "%d/%b/%Y:%H:%M:%S%.f", strict=False), ctx.tz
    )
    ta = pl.col("Ta").pipe(to_int)
    tsc = pl.col("tsc")
    cause = tsc.str.slice(0, 1).replace_strict(_CAUSE, default=None, return_dtype=pl.String)
    phase = tsc.str.slice(1, 1).replace_strict(_PHASE, default=None, return_dtype=pl.String)
    connected = pl.all_horizontal([pl.col(c).pipe(to_int) >= 0 for c in ("TR", "Tw", "Tc", "Tr")])
    status = pl.col("st").pipe(to_int)
    total = pl.col("rc").pipe(to_int) + 1
    req = pl.col("req").str.extract_groups(_REQ)
    hr_first = pl.col("hr").str.split("|").list.first()
    return rows.select(
        start.cast(TS).alias("ts_start"),
        pl.when(ta >= 0).then(start + pl.duration(milliseconds=ta)).cast(TS).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit("haproxy").alias("gateway"),
        pl.col("uid").alias("request_id"),
        pl.when(hr_first.str.contains(_ID_LIKE)).then(hr_first).alias("client_request_id"),
        total.alias("attempt"),
        total.alias("attempts_total"),
        pl.when(pl.col("srv") == "<NOSRV>")
        .then(pl.col("be"))
        .otherwise(pl.col("be") + "/" + pl.col("srv"))
        .alias("upstream"),
        pl.when(status >= 0).then(status).alias("status"),
        pl.when(pl.col("Tr").pipe(to_int) >= 0).then(status).alias("upstream_status"),
        pl.when(connected & (ta >= 0))
        .then((ta - pl.sum_horizontal([pl.col(c).pipe(to_int) for c in ("TR", "Tw", "Tc")])) / 1000.0)
        .alias("duration_s"),
        (ta / 1000.0).alias("request_time_s"),
        _ms("Tc").alias("connect_s"),
        _ms("Tr").alias("header_s"),
        pl.when(pl.col("plus") == "+").then(tsc + ",redispatch").otherwise(tsc).alias("flags"),
        pl.when(cause.is_not_null())
        .then(pl.concat_str([cause, phase], separator=" while ", ignore_nulls=True))
        .alias("error"),
        req.struct.field("method").alias("method"),
        req.struct.field("path").alias("path"),
        pl.col("bytes").pipe(to_int).alias("bytes_sent"),
        pl.col("line_no"),
    )
