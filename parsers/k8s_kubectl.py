"""kubectl's text outputs -> ``platform_events`` and ``platform_pods``: ``kubectl get pods`` (and ``get all``),
``kubectl describe pod`` (its containers' State / Last State, Restart Count, Limits and Requests, its Events
table) and ``kubectl get events``, alone or pasted together in one file.

    NAME                                                               READY   STATUS    RESTARTS       AGE
    pod/vllm-standalone-3b-vllm-llama-3-3b-instruct-57c8d4996c-qtr8b   0/1     Running   6 (118s ago)   20m
        Last State:     Terminated
          Reason:       OOMKilled
          Exit Code:    137
      Warning  Unhealthy  21m (x44 over 2d1h)  kubelet  Liveness probe failed: Get "http://10.244.54.71:18051/...": context deadline exceeded (Client.Timeout exceeded while awaiting headers)
    LAST SEEN   TYPE      REASON      OBJECT          MESSAGE
    5m49s       Warning   Unhealthy   pod/launcher-x  Liveness probe failed: Get "http://10.129.7.110:8001/health": dial tcp ...: connect: connection refused

Layouts: kubectl's printers (k8s.io/kubectl pkg/describe ``describePod`` / ``DescribeEvents``; the table printer's
pod and event columns). An Events age ('25m', '21m (x44 over 2d1h)') is the time since kubectl was run: it becomes a
time only where the file gives the moment of the capture (a timestamp in front of each line, as CI logs write it,
or a ``date`` line printed before the output); else ``ts`` stays null, ``age_s`` keeps it and the file's messages
say so. Describe's Started / Finished are written times (their offset kept). Lines of a ``get all`` for other kinds
(deployments, replica sets, services) are kubectl's and counted as read, without a row.
"""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS

from . import _platform as plat
from ._common import ascii_classes
from .base import ChunkResult, ParseContext, counted, nonblank, one_head, per_head

NAME = "k8s_kubectl"
KIND = "platform"
DESCRIPTION = (
    "kubectl get pods / describe pod / get events (text): restarts, OOMKilled, probe kills, evictions"
)
MODE = "lines"
SAMPLES = [
    "NAME                                                               READY   STATUS    RESTARTS       AGE",
    "pod/vllm-standalone-3b-vllm-llama-3-3b-instruct-57c8d4996c-qtr8b   0/1     Running   6 (118s ago)   20m",
    "  Warning  Unhealthy               25m (x3 over 25m)     kubelet                  Liveness probe failed: HTTP probe failed with statuscode: 404",
    "  Normal   Killing                 25m                   kubelet                  Container vllm-standalone-3b-vllm-llama-3-3b-instruct failed liveness probe, will be restarted",
]

_AGE = plat.AGE
_DNS = r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?"
_LEAD = (
    r"^(?:> ?)?(?:(?P<cap>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z) )?"  # a quote, a CI log's capture time
)
_POD_ROW = ascii_classes(
    _LEAD
    + rf"(?:(?P<ns>{_DNS})\s+)?(?:pod/)?(?P<pod>{_DNS})\s+(?P<ready>\d+/\d+)\s+(?P<status>[A-Za-z][\w:-]*)\s+"
    rf"(?P<restarts>\d+)(?:\s+\((?P<ago>{_AGE}) ago\))?\s+(?P<age>{_AGE})(?:\s+(?P<ip>\S+)\s+(?P<node>\S+))?"
)
# an Events row: describe's (indented: type, reason, age, from, message) or get events' (age, type, reason, object)
_EVENT = ascii_classes(
    r"^(?:> ?)?\s*(?P<type>Normal|Warning)\s+(?P<reason>[A-Za-z]+)\s+(?P<age>" + _AGE + r"|<unknown>)"
    r"(?:\s+\(x(?P<count>\d+) over (?P<over>"
    + _AGE
    + r")\))?\s+(?P<from>[\w.-]+(?:, [\w.-]+)?)\s{2,}(?P<msg>.*)$"
)
_GET_EVENT = ascii_classes(
    _LEAD
    + rf"(?:(?P<ns>{_DNS})\s+)?(?P<age>{_AGE}|<unknown>)(?:\s+\(x(?P<count>\d+) over (?P<over>{_AGE})\))?\s+"
    r"(?P<type>Normal|Warning)\s+(?P<reason>[A-Za-z]+)\s+(?P<object>[a-z.]+/\S+)\s+(?P<msg>.*)$"
)
_HEADERS = (
    r"^(?:> ?)?(?:NAMESPACE\s+)?(?:NAME\s+(?:READY|DESIRED|TYPE|STATUS|AGE)|LAST SEEN\s+TYPE\s+REASON)\b"
    r"|^\s*(?:Type\s+Reason\s+Age\s+From\s+Message|----\s+------\s+----)\s"
)
_OTHER_ROW = ascii_classes(r"^(?:> ?)?[a-z]+(?:\.[a-z.]+)?/\S+\s{2,}\S")  # deployment.apps/x  0/1  1 ...
_FIELD = ascii_classes(r"^(?:> ?)?(?P<ind> *)(?P<key>[A-Z][A-Za-z .]*?):(?:\s+(?P<val>\S.*?))?\s*$")
_CONTAINER = ascii_classes(rf"^(?:> ?)?(?P<ind> +)(?P<ctr>{_DNS}):\s*$")
_RESOURCE = ascii_classes(r"^\s+(?P<res>cpu|memory|nvidia\.com/gpu|ephemeral-storage):\s+(?P<qty>\S+)\s*$")
_DATE = r"^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d \d\d:\d\d:\d\d (?:UTC|GMT) \d{4}$"
_STRONG = (
    r"\b(?:Last State|Restart Count|Container ID|Controlled By):|^\s*(?:Events|Containers):\s*$"
    r"|^Reason:\s+(?:Evicted|Preempting)\s*$"  # a failed pod's own reason (describe pod, unindented)
    r"|(?:^|\s)(?:Normal|Warning)\s+[A-Z][a-z]+[A-Za-z]*\s+"
    + _AGE
    + r"|^(?:NAMESPACE\s+)?NAME\s+READY\s+STATUS\s+RESTARTS|LAST SEEN\s+TYPE\s+REASON"
)


def _recognized(line: pl.Expr) -> pl.Expr:
    return (
        line.str.contains(_POD_ROW)
        | line.str.contains(_EVENT)
        | line.str.contains(_GET_EVENT)
        | line.str.contains(_HEADERS)
        | line.str.contains(_OTHER_ROW)
        | line.str.contains(_FIELD)
        | line.str.contains(_CONTAINER)
        | line.str.contains(_RESOURCE)
        | line.str.contains(r"^\s*(?:Events|Containers|Init Containers|Conditions|Volumes):\s*$")
        | line.str.contains(r"^\s+\S")  # a describe block's value lines (Args, Labels, Mounts, Environment)
    )


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    strong = s.str.contains(_STRONG) | s.str.contains(_GET_EVENT) | s.str.contains(_POD_ROW)
    g = per_head(nonblank(frame), n, strong=strong.any(), m=_recognized(s).mean())
    return g.select(pl.when(pl.col("strong")).then(0.85 * pl.col("m")).otherwise(0.0)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    df = lines.select("line_no", pl.col("line").str.strip_suffix("\r").alias("line"))
    line = pl.col("line")
    df = df.with_columns(
        _recognized(line).alias("_ok"),
        pl.when(line.str.contains(_DATE))
        .then(
            line.str.replace_all(" +", " ").str.to_datetime(
                "%a %b %d %H:%M:%S %Z %Y", strict=False, time_unit="us"
            )
        )
        .alias("_date"),
    )
    state.setdefault("anchor", None)
    # a describe's pod: what its Events rows are about
    name = pl.when(line.str.contains(r"^\s*Name:\s+\S")).then(line.str.extract(r"^\s*Name:\s+(\S+)", 1))
    df = df.with_columns(name.fill_null(pl.lit(state.get("name"))).forward_fill().alias("_name"))
    if df["_name"].drop_nulls().len():
        state["name"] = df["_name"].drop_nulls()[-1]
    df = df.with_columns(
        pl.col("_date").fill_null(pl.lit(state["anchor"])).forward_fill().dt.replace_time_zone(None)
    )
    if df["_date"].drop_nulls().len():
        state["anchor"] = df["_date"].drop_nulls()[-1]
    from ._k8s_describe import describe  # the describe blocks: a module of their own (statement cap)

    ev = _events(df, ctx)
    term, ctrs = describe(df, ctx, state)
    res = ChunkResult(recognized=df["_ok"])
    frames = [f for f in (ev, term) if f.height]
    if frames:
        res.tables["platform_events"] = plat.events(pl.concat(frames, how="diagonal_relaxed"))
    pods = (
        pl.concat([f for f in (_pods(df, ctx), ctrs) if f.height], how="diagonal_relaxed")
        if (_pods(df, ctx).height or ctrs.height)
        else None
    )
    if pods is not None:
        res.tables["platform_pods"] = plat.pods(pods)
    rel = ev.filter(pl.col("ts").is_null()).height if ev.height else 0
    state["relative"] = state.get("relative", 0) + rel
    return res


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    return counted(
        state,
        "relative",
        "{n} event row(s) give only an age ('25m', '21m (x44 over 2d1h)'), the time since kubectl ran, and the "
        "file gives no capture time (a timestamp in front of each line, or a `date` line before the output): "
        "their times are unknown, kept as ages (platform_events.age_s)",
    )


def _events(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    line = pl.col("line")
    d = df.with_columns(
        line.str.extract_groups(_EVENT).alias("d"), line.str.extract_groups(_GET_EVENT).alias("e")
    )
    d = d.filter(
        pl.col("d").struct.field("type").is_not_null() | pl.col("e").struct.field("type").is_not_null()
    )
    if not d.height:
        return pl.DataFrame()

    def f(name: str) -> pl.Expr:
        e = pl.col("e").struct.field(name) if name in ("cap", "ns", "object") else None
        both = pl.coalesce(pl.col("d").struct.field(name), pl.col("e").struct.field(name)) if e is None else e
        return both

    age, over = plat.age_seconds(f("age")), plat.age_seconds(f("over"))
    cap = pl.coalesce(
        f("cap").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", strict=False, time_unit="us"), pl.col("_date")
    )

    def at(s):
        return (
            (cap - pl.duration(microseconds=(s * 1e6).round(0).cast(pl.Int64)))
            .dt.replace_time_zone("UTC")
            .cast(TS)
        )

    msg = f("msg")
    obj = f("object")
    ctr = msg.str.extract(rf"(?:[Cc]ontainer|container=)\s?({_DNS})", 1)
    probe = plat.probe_kind(msg)
    result = plat.probe_result(msg)
    basis = (
        pl.when(age.is_null())
        .then(pl.lit("relative"))
        .when(f("cap").is_not_null())
        .then(pl.lit("age-anchored: the capture time in front of the line"))
        .when(pl.col("_date").is_not_null())
        .then(pl.lit("age-anchored: the `date` line before the output"))
        .otherwise(pl.lit("relative"))
    )
    return d.select(
        at(age).alias("ts"),
        basis.alias("ts_basis"),
        age.alias("age_s"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("kubernetes").alias("layer"),
        pl.lit("event").alias("kind"),
        f("reason").alias("reason"),
        f("type").alias("event_type"),
        obj.alias("object"),
        f("ns").alias("namespace"),
        pl.when(obj.str.starts_with("pod/"))
        .then(obj.str.strip_prefix("pod/"))
        .otherwise(pl.col("_name"))
        .alias("pod"),
        pl.when(ctr != "image").then(ctr).alias("container"),
        _node(obj, pl.col("d").struct.field("from"), msg).alias("host"),
        f("count").cast(pl.Int64).alias("count"),
        over.alias("first_age_s"),
        at(over).alias("first_ts"),
        probe.alias("probe"),
        result.alias("probe_result"),
        msg.str.slice(0, 500).alias("message"),
        "line_no",
    )


def _node(obj: pl.Expr, frm: pl.Expr, msg: pl.Expr) -> pl.Expr:
    """The node an event names: get events' object ``node/<name>``, an older kubectl's From ``kubelet, <node>``,
    or the node conditions' own message ('Node <name> status is now: NodeNotReady')."""
    return pl.coalesce(
        obj.str.extract(r"^[Nn]ode/(\S+)", 1),
        frm.str.extract(r"^[\w.-]+, ([\w.-]+)$", 1),
        msg.str.extract(r"^Node (\S+) (?:status is now|event):", 1),
    )


def _pods(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    g = df.select("line_no", pl.col("line").str.extract_groups(_POD_ROW).alias("g")).unnest("g")
    g = g.filter(pl.col("pod").is_not_null())
    return g.select(
        pl.lit(ctx.source).alias("source"),
        "pod",
        pl.col("ns").alias("namespace"),
        "status",
        "ready",
        pl.col("restarts").cast(pl.Int64),
        plat.age_seconds(pl.col("ago")).alias("last_restart_age_s"),
        plat.age_seconds(pl.col("age")).alias("age_s"),
        "node",
        "line_no",
    )
