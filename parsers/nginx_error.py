"""nginx error.log -> ``gateway_errors``.

Sample (/work/shared/fixtures/lab/retry-storm/nginx-error.log)::

    2026/11/29 08:31:09 [error] 5806#5806: *752 upstream timed out (110: Connection timed out) while reading response header from upstream, client: 127.0.0.1, server: , request: "POST /v1/completions HTTP/1.1", upstream: "http://127.0.0.1:8001/v1/completions", host: "127.0.0.1:8080"

Layout: ``src/core/ngx_log.c`` (``YYYY/MM/DD HH:MM:SS [level] PID#TID: *CONN``) and the context
appended by ``ngx_http_log_error()`` in ``src/http/ngx_http_request.c`` (client, server, request,
upstream, host), nginx/nginx. The time is local time without a zone.
"""

from __future__ import annotations

import polars as pl
from polars.expr.whenthen import ChainedThen, Then

from logscope.numbers import to_int

from ._common import bad_times, local_to_utc
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "nginx_error"
KIND = "gateway"
DESCRIPTION = "nginx error.log (upstream timeouts, connect failures, no live upstreams, client aborts)"
MODE = "lines"
SPEED = 165  # MB/s on one core (bench/, 1 GB folder): orders the streams
INDEPENDENT_CHUNKS = True  # one line, one record: a chunk needs nothing from the one before
SAMPLES = [
    '2026/11/29 08:31:09 [error] 5806#5806: *752 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: "POST /v1/completions HTTP/1.1", upstream: "http://vllm_edge/v1/completions", host: "127.0.0.1:8080"',
    '2026/11/29 08:29:15 [warn] 5806#5806: *3 upstream server temporarily disabled while connecting to upstream, client: 127.0.0.1, server: , request: "POST /v1/completions HTTP/1.1", upstream: "http://127.0.0.1:8002/v1/completions", host: "127.0.0.1:8080"',
    "2026/11/29 08:33:32 [notice] 8222#8222: nginx/1.22.1",
]

_LEVELS = "debug|info|notice|warn|error|crit|alert|emerg"
# the header only: capturing the message too would run the slow capture engine over whole lines
# (10x the cost); the message is the rest of the line, less one trailing CR
_HEADER = (
    rf"^(?P<hdr>(?P<ts>\d{{4}}/\d{{2}}/\d{{2}} \d{{2}}:\d{{2}}:\d{{2}}) \[(?P<level>{_LEVELS})\] "
    r"(?P<pid>\d+)#(?P<tid>\d+): (?:\*(?P<conn>\d+) )?)"
)
_DETECT = rf"^\d{{4}}/\d{{2}}/\d{{2}} \d{{2}}:\d{{2}}:\d{{2}} \[(?:{_LEVELS})\] \d+#\d+: "
_CONTEXT = r", client: "
_CLIENT = r", client: ([^,]*)"
_REQUEST = r', request: "((?:[^"\\]|\\.)*)"'
_UPSTREAM = r', upstream: "([^"]*)"'
_HOST = r', host: "([^"]*)"'

# (kind, regex on the message) in priority order; level 'notice' lines are 'notice'
_STOP = r"^signal \d+ \(SIG[A-Z]+\) received(?: from \d+)?, (?:shutting down|exiting)$"
_KINDS = [
    ("keepalive_closed", r"closed keepalive connection"),
    ("upstream_timeout", r"upstream timed out \(110"),
    ("connect_failed", r"connect\(\) (?:to \S+ )?failed \("),
    ("no_live_upstreams", r"no live upstreams"),
    ("upstream_closed", r"upstream prematurely closed connection"),
    ("upstream_disabled", r"upstream server temporarily disabled"),
    ("client_closed", r"client prematurely closed connection"),
    ("broken_pipe", r"failed \(32: Broken pipe\)"),
    ("upstream_reset", r"\(104: Connection reset by peer\) while [^,]*upstream"),
    # ngx_http_limit_req_module: a request held back by a rate limit (limit_req without nodelay), or refused
    ("limit_req_delayed", r"^delaying request, excess: "),
    ("limit_req_rejected", r"^limiting requests, excess: "),
]


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    return per_head(nonblank(frame), n, s=share(_DETECT)).select(0.95 * pl.col("s")).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    g = lines.select("line_no", "line", pl.col("line").str.extract_groups(_HEADER).alias("g")).unnest("g")
    ok = g.get_column("ts").is_not_null()
    # the header is ASCII, so its length in bytes is its length in characters
    rows = g.filter(ok).with_columns(
        pl.col("line").str.slice(pl.col("hdr").str.len_bytes()).str.strip_suffix("\r").alias("msg")
    )
    msg = pl.col("msg")
    # the master's stop on a signal (ngx_signal_handler: SIGQUIT ", shutting down", SIGTERM/SIGINT ", exiting"), a
    # notice that is more than a notice: a stop while requests were still answered is a finding (gateway_stop)
    kind: Then | ChainedThen = pl.when(msg.str.contains(_STOP)).then(pl.lit("shutdown"))
    kind = kind.when(pl.col("level") == "notice").then(pl.lit("notice"))
    for name, rx in _KINDS:
        kind = kind.when(msg.str.contains(rx)).then(pl.lit(name))
    naive = pl.col("ts").str.to_datetime("%Y/%m/%d %H:%M:%S", time_unit="us", strict=False)
    head = pl.when(msg.str.contains(_CONTEXT)).then(msg.str.split(_CONTEXT).list.first()).otherwise(msg)
    out = rows.select(
        local_to_utc(naive, ctx.tz).alias("ts"),
        pl.lit(ctx.source).alias("source"),
        pl.lit("nginx").alias("gateway"),
        "level",
        kind.otherwise(pl.lit("other")).alias("kind"),
        pl.col("conn").pipe(to_int).alias("conn_id"),
        msg.str.extract(_CLIENT, 1).alias("client"),
        msg.str.extract(_REQUEST, 1).alias("request"),
        msg.str.extract(_UPSTREAM, 1).alias("upstream"),
        msg.str.extract(_HOST, 1).alias("host"),
        head.str.slice(0, 500).alias("message"),
        "line_no",
    )
    assumptions = [f"nginx error.log times have no zone: read as {ctx.tz} (--tz)"]
    n_bad, example = bad_times(
        pl.DataFrame([rows["line_no"], rows["ts"].alias("raw"), out["ts"]]), "raw", "ts"
    )
    return ChunkResult(
        tables={"gateway_errors": out},
        recognized=ok,
        assumptions=assumptions,
        bad_times=n_bad,
        bad_time_example=example,
    )
