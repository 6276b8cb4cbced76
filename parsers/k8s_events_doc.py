"""``kubectl get events -o json`` and ``-o yaml`` -> ``platform_events``: each Event object's reason, message, type,
count, times and involvedObject, read line by line so that an excerpt cut mid-object (as pasted in a thread) still
gives the events it holds whole.

    apiVersion: v1                                   {
    items:                                               "apiVersion": "v1",
    - apiVersion: v1                                     "items": [
      count: 1                                               {
      eventTime: null                                            "count": 25,
      firstTimestamp: "2026-03-17T08:45:28Z"                     "firstTimestamp": "2020-01-17T04:56:28Z",
      involvedObject:                                            "involvedObject": {
        fieldPath: spec.containers{log-test}                         "kind": "Pod",
        kind: Pod                                                    "name": "pvc",
        name: log-test

Layouts: kubectl's printers (k8s.io/cli-runtime printers: JSONPrinter indents by 4, YAMLPrinter by 2, keys sorted).
An item starts at a bare ``{`` (JSON) or a ``- `` (YAML); its fields sit one level in, involvedObject's and
source's one further. The times are the API server's: ``lastTimestamp`` (the last time of a counted event),
else ``eventTime`` (events.k8s.io, a microsecond time), else ``firstTimestamp``; all UTC as written ('Z').
"""

from __future__ import annotations

import re

import polars as pl

from logscope.schemas import TS

from . import _platform as plat
from .base import ChunkResult, ParseContext, one_head, per_head

NAME = "k8s_events_doc"
KIND = "platform"
DESCRIPTION = "kubectl get events -o json / -o yaml (Event objects: reason, message, count, times, object)"
MODE = "document"
SAMPLES = [
    '{\n    "apiVersion": "v1",\n    "items": [\n        {\n            "apiVersion": "v1",\n            "count": 25,\n'
    '            "involvedObject": {\n                "kind": "Pod",\n                "name": "pvc",\n'
    '            },\n            "kind": "Event",\n            "reason": "FailedScheduling",'
]

# one line of either printer: indent, a YAML item's dash, a key (quoted in JSON) and its value
_KV = r'^(?P<ind> *)(?P<dash>- )?"?(?P<key>[A-Za-z][A-Za-z0-9]*)"?: ?(?P<val>.*?),?\s*$'
_OPEN = r"^ *[\{\[]\s*$|^ *[\}\]],?\s*$"  # JSON's bare braces and brackets
_EVENT = r'(?m)^ *"?kind"?: "?Event"?,?\s*$|^ *"?(?:firstTimestamp|lastTimestamp|eventTime)"?: '
_OBJ = r'(?m)^ *"?involvedObject"?: ?\{?\s*$'
_TOP = (
    "reason",
    "message",
    "type",
    "count",
    "firstTimestamp",
    "lastTimestamp",
    "eventTime",
    "reportingInstance",
)
_NESTED = ("involvedObject.kind", "involvedObject.name", "involvedObject.namespace", "involvedObject.fieldPath",
           "source.host", "source.component", "metadata.namespace")  # fmt: skip


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    g = per_head(frame, n, text=pl.col("line").str.join("\n"))
    t = pl.col("text")
    # an Event's time keys and its involvedObject: no other format of the registry writes both
    return g.select(
        pl.when(t.str.contains(_EVENT) & t.str.contains(_OBJ)).then(0.95).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def _unquote(v: pl.Expr) -> pl.Expr:
    v = v.str.strip_chars()
    return (
        pl.when(v.str.contains(r'^".*"$'))
        .then(v.str.slice(1, v.str.len_chars() - 2).str.replace_all(r'\\"', '"'))
        .when(v.str.contains(r"^'.*'?$"))
        .then(v.str.strip_chars("'").str.replace_all("''", "'"))
        .when(v.is_in(["null", "{}", "", "{", "["]))
        .then(None)
        .otherwise(v)
    )


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    lines = pl.DataFrame({"line": text.split("\n")}).with_row_index("line_no", offset=1)
    if text.endswith("\n"):
        lines = lines.head(lines.height - 1)
    step = (
        4 if re.search(r'(?m)^ *"involvedObject": \{', text) else 2
    )  # JSONPrinter's indent, or YAMLPrinter's
    line = pl.col("line").str.strip_suffix("\r")
    d = lines.with_columns(line.alias("line")).with_columns(pl.col("line").str.extract_groups(_KV).alias("g"))
    d = d.unnest("g").with_columns(
        (pl.col("ind").str.len_chars() + pl.when(pl.col("dash").is_not_null()).then(2).otherwise(0)).alias(
            "lvl"
        ),
        (pl.col("dash").is_not_null() | pl.col("line").str.contains(r"^ *\{\s*$")).alias("start"),
    )
    # a JSON item's '{' opens it one level (4) in; a YAML '- key:' line is its first field, at the dash + 2
    d = d.with_columns(
        pl.when(pl.col("start") & pl.col("dash").is_null())
        .then(pl.col("line").str.len_chars() - pl.col("line").str.strip_chars_start().str.len_chars() + step)
        .when(pl.col("start"))
        .then(pl.col("lvl"))
        .alias("field_lvl"),
        pl.col("start").cum_sum().alias("item"),
    )
    # an excerpt starting mid-item: its fields sit at the level the first item's fields take
    first = d["field_lvl"].drop_nulls()
    d = d.with_columns(pl.col("field_lvl").forward_fill().fill_null(first[0] if first.len() else 0))
    top = pl.col("key").is_not_null() & (pl.col("lvl") == pl.col("field_lvl"))
    d = d.with_columns(pl.when(top).then(pl.col("key")).forward_fill().over("item").alias("parent"))
    nested = pl.col("key").is_not_null() & (pl.col("lvl") == pl.col("field_lvl") + step)
    # a YAML scalar folded over lines (message: 'Successfully pulled ...\n    Image size: ...'): its tail lines
    tail = pl.col("key").is_null() & (pl.col("parent") == "message") & pl.col("line").str.contains(r"^ +\S")
    tail = tail | (
        pl.col("key").is_not_null() & (pl.col("lvl") > pl.col("field_lvl")) & (pl.col("parent") == "message")
    )
    d = d.with_columns(
        pl.when(top)
        .then(pl.col("key"))
        .when(nested)
        .then(pl.col("parent") + "." + pl.col("key"))
        .alias("name"),
        pl.when(tail).then(pl.col("line").str.strip_chars()).alias("_tail"),
    )
    recognized = (
        pl.col("key").is_not_null() | pl.col("line").str.contains(_OPEN) | pl.col("_tail").is_not_null()
    )
    n_ok = d.filter(recognized).height
    msg_tail = (
        d.filter(pl.col("_tail").is_not_null())
        .group_by("item")
        .agg(pl.col("_tail").str.join(" ").str.strip_chars("'\"").alias("_more"))
    )
    vals = d.filter(pl.col("name").is_in([*_TOP, *_NESTED])).with_columns(_unquote(pl.col("val")).alias("v"))
    wide = vals.group_by("item").agg(
        pl.col("line_no").filter(pl.col("name") == "reason").first().alias("line_no"),  # the evidence line
        *[pl.col("v").filter(pl.col("name") == k).first().alias(k) for k in (*_TOP, *_NESTED)],
    )
    wide = wide.join(msg_tail, on="item", how="left").filter(pl.col("reason").is_not_null()).sort("item")
    res = ChunkResult(lines_parsed=n_ok)
    if wide.height:
        res.tables["platform_events"] = plat.events(_rows(wide, ctx))
    return res


def _ts(c: str) -> pl.Expr:
    return (
        pl.col(c)
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", strict=False, time_unit="us")
        .dt.replace_time_zone("UTC")
        .cast(TS)
    )


def _rows(w: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    msg = pl.concat_str(
        pl.col("message"),
        pl.when(pl.col("_more").is_not_null()).then(" " + pl.col("_more")).otherwise(pl.lit("")),
    )
    kind, name = pl.col("involvedObject.kind"), pl.col("involvedObject.name")
    probe = plat.probe_kind(msg)
    result = plat.probe_result(msg)
    ts = pl.coalesce(_ts("lastTimestamp"), _ts("eventTime"), _ts("firstTimestamp"))
    return w.select(
        ts.alias("ts"),
        pl.when(ts.is_not_null()).then(pl.lit("written")).otherwise(pl.lit("relative")).alias("ts_basis"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("kubernetes").alias("layer"),
        pl.lit("event").alias("kind"),
        "reason",
        pl.col("type").alias("event_type"),
        (kind.str.to_lowercase() + "/" + name).alias("object"),
        pl.coalesce("involvedObject.namespace", "metadata.namespace").alias("namespace"),
        pl.when(kind == "Pod").then(name).alias("pod"),
        pl.col("involvedObject.fieldPath")
        .str.extract(r"spec\.(?:init)?[cC]ontainers\{([^}]+)\}", 1)
        .alias("container"),
        pl.coalesce("source.host", "reportingInstance").alias("host"),
        pl.col("count").cast(pl.Int64, strict=False).alias("count"),
        _ts("firstTimestamp").alias("first_ts"),
        probe.alias("probe"),
        result.alias("probe_result"),
        msg.str.slice(0, 500).alias("message"),
        "line_no",
    )
