"""AWS Application Load Balancer access log -> ``gateway_attempts``, one row per request.

Sample (tests/data/unseen/alb-3095-h2-200-then-504-target-silent-10s.log,
kubernetes-sigs/aws-load-balancer-controller#3095)::

    h2 2023-03-08T12:05:52.352228Z app/xxxxxx/xxxxxx xxx.xx.xx.xxx:12653 10.0.8.248:31130 -1 -1 -1 504 - 49 202 "GET https://argocd-pj-1-sample-1.kahiro.c16e-dev.com:443/ HTTP/2.0" "curl/7.86.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:...:targetgroup/k8s-.../f138b1630cf46114 "Root=1-64087a16-1b7f18347fcdb5bd1573907d" "argocd-pj-1-sample-1.kahiro.c16e-dev.com" "arn:aws:acm:...:certificate/xxxxxx" 2 2023-03-08T12:05:42.351000Z "forward" "-" "-" "10.0.8.248:31130" "-" "-" "-"

Fields, space-separated, in the order of AWS's page (elasticloadbalancing/latest/application/load-balancer-access-logs):
type time elb client:port target:port request_processing_time target_processing_time response_processing_time
elb_status_code target_status_code received_bytes sent_bytes "request" "user_agent" ssl_cipher ssl_protocol
target_group_arn "trace_id" "domain_name" "chosen_cert_arn" matched_rule_priority request_creation_time
"actions_executed" "redirect_url" "error_reason" and the fields AWS appended since (read up to ``error_reason``).

``time`` is when the load balancer answered (or gave up), ``request_creation_time`` when it received the request:
the row's ts_end and ts_start, ``request_time_s`` their difference. A processing time of -1 is no measure (the load
balancer could not dispatch the request, or the target closed or went silent past the idle timeout), and a
``target_status_code`` of '-' no answer from the target: the status was the load balancer's own (502, 504; 460 when
the client left first), as the flags say. The load balancer does not retry: one attempt per request.
"""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.schemas import TS

from ._common import ascii_classes
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head, share

NAME = "aws_alb"
KIND = "gateway"
DESCRIPTION = (
    "AWS Application Load Balancer access log (the load balancer's and the target's statuses and times)"
)
MODE = "lines"
INDEPENDENT_CHUNKS = True  # one line, one record
SAMPLES = [
    'h2 2023-03-08T12:05:42.292034Z app/xxxxxx/xxxxxx xxx.xx.xx.xxx:8557 10.0.7.136:31130 0.002 0.004 0.000 200 200 49 1010 "GET https://argocd-pj-1-sample-1.kahiro.c16e-dev.com:443/ HTTP/2.0" "curl/7.86.0" ECDHE-RSA-AES128-GCM-SHA256 TLSv1.2 arn:aws:elasticloadbalancing:ap-northeast-1:xxxxxx:targetgroup/k8s-contoure-contoure-347a67d9c6/f138b1630cf46114 "Root=1-64087a16-082edb6208fd63d3010207cb" "argocd-pj-1-sample-1.kahiro.c16e-dev.com" "arn:aws:acm:ap-northeast-1:xxxxxx:certificate/xxxxxx" 2 2023-03-08T12:05:42.285000Z "forward" "-" "-" "10.0.7.136:31130" "200" "-" "-"',
]

_TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?Z"
_Q = r'"((?:[^"\\]|\\.)*)"'  # a quoted field (the load balancer escapes its quotes)
_QN = r'"(?:[^"\\]|\\.)*"'  # one not read
_DETECT = ascii_classes(
    rf"^(?:https?|h2|grpcs|wss?) {_TIME} app/\S+ \S+ \S+ -?[\d.]+ -?[\d.]+ -?[\d.]+ (?:\d{{3}}|-) "
)
_LINE = ascii_classes(
    rf"^(?P<type>https?|h2|grpcs|wss?) (?P<time>{_TIME}) (?P<elb>app/\S+) (?P<client>\S+) (?P<target>\S+) "
    r"(?P<rpt>-?[\d.]+) (?P<tpt>-?[\d.]+) (?P<spt>-?[\d.]+) (?P<status>\d{3}|-) (?P<tstatus>\d{3}|-) "
    rf"(?P<rx>\d+|-) (?P<tx>\d+|-) {_Q.replace('(', '(?P<request>', 1)} {_Q.replace('(', '(?P<ua>', 1)} "
    rf"\S+ \S+ \S+ {_Q.replace('(', '(?P<trace>', 1)}"
    rf"(?: {_QN} {_QN} \S+ (?P<created>{_TIME}|-) {_QN} {_QN} {_Q.replace('(', '(?P<error>', 1)})?"
)
_REQUEST = (
    r"^(?P<method>[A-Z]+) (?:[A-Za-z][\w+.-]*://[^/\s]*?(?::(?P<port>\d+))?)?(?P<path>/\S*|\*)? HTTP/[\d.]+$"
)
# the statuses the load balancer writes itself when no target answered
_OWN = {460: "client_closed", 502: "bad_gateway", 504: "gateway_timeout"}


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    return per_head(nonblank(frame), n, s=share(_DETECT)).get_column("s")


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    f = lines.select("line_no", pl.col("line").str.strip_chars_end("\r").str.extract_groups(_LINE).alias("g"))
    f = f.unnest("g").filter(pl.col("time").is_not_null())
    ok = lines.select(pl.col("line_no").is_in(f["line_no"].implode())).to_series()
    if f.height == 0:
        return ChunkResult(tables={}, recognized=ok)
    notes = [
        "AWS ALB: ts_start is request_creation_time, ts_end the answer's time, request_time_s between them; "
        "a processing time of -1 and a target status '-' are no measure and no answer (the load balancer's own status)"
    ]
    return ChunkResult(tables={"gateway_attempts": _rows(f, ctx)}, recognized=ok, assumptions=notes)


def _rows(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    def stamp(c: str) -> pl.Expr:
        return pl.col(c).str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", time_zone="UTC", strict=False
        )

    def secs(c: str) -> pl.Expr:  # -1: no measure
        v = pl.col(c).cast(pl.Float64, strict=False)
        return pl.when(v >= 0).then(v)

    req = pl.col("request").str.extract_groups(_REQUEST)
    status = pl.col("status").pipe(to_int)  # '-': none
    upstream_status = pl.col("tstatus").pipe(to_int)
    start, end = stamp("created"), stamp("time")
    return f.select(
        start.cast(TS).alias("ts_start"),
        end.cast(TS).alias("ts_end"),
        pl.lit(ctx.source).alias("source"),
        pl.lit("aws_alb").alias("gateway"),
        pl.lit(1, pl.Int64).alias("attempt"),
        pl.lit(1, pl.Int64).alias("attempts_total"),
        pl.when(pl.col("target") != "-").then(pl.col("target")).alias("upstream"),
        status.alias("status"),
        upstream_status.alias("upstream_status"),
        secs("tpt").alias("duration_s"),
        ((end - start).dt.total_microseconds() / 1e6).round(6).alias("request_time_s"),
        pl.when(upstream_status.is_null())
        .then(status.replace_strict(_OWN, default=None, return_dtype=pl.String))
        .alias("flags"),
        pl.when(pl.col("error").is_not_null() & (pl.col("error") != "-"))
        .then(pl.col("error"))
        .alias("error"),
        req.struct.field("method").alias("method"),
        req.struct.field("path").alias("path"),
        pl.col("tx").pipe(to_int).alias("bytes_sent"),
        pl.col("ua").alias("user_agent"),
        pl.col("trace").str.extract(r"Root=([^;\s]+)").alias("trace_id"),
        req.struct.field("port").pipe(to_int).alias("port"),
        "line_no",
    )
