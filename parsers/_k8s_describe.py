"""``kubectl describe pod``'s blocks, for ``k8s_kubectl``: each container's State and Last State (a Terminated
block becomes a ``terminated`` row of ``platform_events``: Reason OOMKilled / Error, Exit Code, Started, Finished)
and a ``platform_pods`` row per container (State, Restart Count, Limits and Requests).

The layout is indentation (k8s.io/kubectl pkg/describe ``describeContainerState``, ``describeContainerResource``)::

    Name:             vllm-0
    Containers:
      vllm:
        Container ID:   containerd://41bb...
        State:          Running
          Started:      Fri, 08 Sep 2023 00:57:11 +0530
        Last State:     Terminated
          Reason:       OOMKilled
          Exit Code:    137
        Restart Count:  5
        Limits:
          memory:          4Gi
          nvidia.com/gpu:  1

A container's header is a lowercase name alone on its line followed by its ``Container ID`` or ``Image``; a pasted
block without one (only its ``Last State``) has no container name.
"""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS

from . import _platform as plat
from .base import ParseContext

_STATE_KEYS = ("State", "Last State")
_STATE_FIELDS = ("Reason", "Exit Code", "Started", "Finished", "Message", "Signal")
# a failed pod's own Reason: the kubelet evicted it (node pressure) or preempted it to admit a critical pod
_FAILED = ("Evicted", "Preempting")
_TIME = "%a, %d %b %Y %H:%M:%S %z"  # describe's Started / Finished: 'Fri, 08 Sep 2023 00:57:11 +0530'


def describe(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``terminated`` event rows, per-container pod rows) of the describe lines in ``df`` (line_no, line)."""
    from .k8s_kubectl import _CONTAINER, _FIELD, _RESOURCE

    line = pl.col("line")
    f = df.select(
        "line_no",
        line.str.extract_groups(_FIELD).alias("f"),
        line.str.extract_groups(_CONTAINER).struct.field("ctr").alias("ctr"),
        line.str.extract_groups(_RESOURCE).alias("r"),
    ).unnest("f", "r")
    key = pl.col("key")
    failed = (key == "Reason") & pl.col("val").is_in(_FAILED)  # a pasted head: Status / Reason / Message only
    if not f.filter(key.is_in(["Name", *_STATE_KEYS, "Restart Count", "Limits", "Requests"]) | failed).height:
        return pl.DataFrame(), pl.DataFrame()
    nxt = key.shift(-1)
    is_ctr = pl.col("ctr").is_not_null() & nxt.is_in(["Container ID", "Image"])
    f = f.with_columns(
        pl.when(key == "Name")
        .then(pl.col("val"))
        .fill_null(pl.lit(state.get("pod")))
        .forward_fill()
        .alias("_pod"),
        pl.when(key == "Namespace").then(pl.col("val")).forward_fill().alias("_ns"),
        pl.when(key == "Node").then(pl.col("val").str.replace(r"/.*$", "")).forward_fill().alias("_node"),
        (key == "Name").fill_null(False).cum_sum().alias("_pg"),
        pl.when(is_ctr).then(pl.col("ctr")).alias("_ctr"),
        pl.when(key.is_in(_STATE_KEYS))
        .then(key)
        .when(key.is_in(_STATE_FIELDS))
        .then(None)
        .when(key.is_not_null() | pl.col("ctr").is_not_null())
        .then(pl.lit(""))
        .forward_fill()
        .alias("_sblk"),
        pl.when(key.is_in(["Limits", "Requests"]))
        .then(key)
        .when(pl.col("res").is_not_null())
        .then(None)
        .when(key.is_not_null() | pl.col("ctr").is_not_null())
        .then(pl.lit(""))
        .forward_fill()
        .alias("_lblk"),
        key.is_in(_STATE_KEYS).fill_null(False).cum_sum().alias("_blk"),
    ).with_columns(
        pl.col("_ctr").forward_fill().over("_pg"),
        pl.col("_ns").forward_fill(),
    )
    state["pod"] = f["_pod"].drop_nulls()[-1] if f["_pod"].drop_nulls().len() else state.get("pod")
    ev = [x for x in (_terminated(f, ctx), _evicted(f, ctx)) if x.height]
    return (pl.concat(ev, how="diagonal_relaxed") if ev else pl.DataFrame()), _containers(f, ctx)


def _evicted(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """The pod's own 'Status: Failed / Reason: Evicted / Message: The node was low on resource: ...' or 'Reason:
    Preempting / Message: Preempted in order to admit critical pod' (unindented, before its containers): an ``event``
    row with that reason; describe writes no time for it."""
    top = f.filter((pl.col("ind") == "") & pl.col("key").is_in(["Reason", "Message"]))
    if not top.filter((pl.col("key") == "Reason") & pl.col("val").is_in(_FAILED)).height:
        return pl.DataFrame()
    g = top.group_by("_pg", maintain_order=True).agg(
        _val("Reason").alias("reason"),
        _val("Message").alias("message"),
        pl.col("line_no").filter(pl.col("key") == "Reason").first(),
        pl.col("_pod").first(),
        pl.col("_ns").first(),
        pl.col("_node").first(),
    )
    return g.filter(pl.col("reason").is_in(_FAILED)).select(
        pl.lit(None, dtype=TS).alias("ts"),
        pl.lit("relative").alias("ts_basis"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("kubernetes").alias("layer"),
        pl.lit("event").alias("kind"),
        "reason",
        pl.col("_ns").alias("namespace"),
        pl.col("_pod").alias("pod"),
        pl.col("_node").alias("host"),
        pl.coalesce("message", "reason").alias("message"),
        "line_no",
    )


def _val(k: str) -> pl.Expr:
    return pl.col("val").filter(pl.col("key") == k).first()


def _terminated(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    blocks = (
        f.filter((pl.col("_blk") > 0) & (pl.col("_sblk") != ""))
        .group_by("_blk", maintain_order=True)
        .agg(
            pl.col("key").first().alias("which"),
            pl.col("val").first().alias("state"),
            _val("Reason").alias("reason"),
            _val("Exit Code").alias("exit_code"),
            _val("Started").alias("started"),
            _val("Finished").alias("finished"),
            pl.col("_pod").first(),
            pl.col("_ns").first(),
            pl.col("_node").first(),
            pl.col("_ctr").first(),
            pl.col("line_no").first(),
        )
        .filter(pl.col("state") == "Terminated")
    )
    if not blocks.height:
        return pl.DataFrame()

    def when(c):
        return (
            pl.col(c)
            .str.to_datetime(_TIME, strict=False, time_unit="us")
            .dt.convert_time_zone("UTC")
            .cast(TS)
        )

    return blocks.select(
        when("finished").alias("ts"),
        pl.when(pl.col("finished").is_not_null())
        .then(pl.lit("written"))
        .otherwise(pl.lit("relative"))
        .alias("ts_basis"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("kubernetes").alias("layer"),
        pl.lit("terminated").alias("kind"),
        "reason",
        pl.col("_ns").alias("namespace"),
        pl.col("_pod").alias("pod"),
        pl.col("_ctr").alias("container"),
        pl.col("_node").alias("host"),
        pl.col("exit_code").cast(pl.Int64, strict=False),
        when("started").alias("started"),
        when("finished").alias("finished"),
        pl.concat_str(
            pl.col("which"),
            pl.lit(": Terminated"),
            pl.when(pl.col("reason").is_not_null())
            .then(pl.lit(", Reason ") + pl.col("reason"))
            .otherwise(pl.lit("")),
            pl.when(pl.col("exit_code").is_not_null())
            .then(pl.lit(", Exit Code ") + pl.col("exit_code"))
            .otherwise(pl.lit("")),
        ).alias("message"),
        "line_no",
    )


def _containers(f: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    rows = f.filter(pl.col("_pod").is_not_null() | pl.col("_ctr").is_not_null())
    if not rows.height:
        return pl.DataFrame()

    def res(block: str, name: str) -> pl.Expr:
        return pl.col("qty").filter((pl.col("_lblk") == block) & (pl.col("res") == name)).first()

    g = rows.group_by("_pg", "_ctr", maintain_order=True).agg(
        pl.col("_pod").drop_nulls().first(),
        pl.col("_ns").drop_nulls().first(),
        pl.col("_node").drop_nulls().first(),
        _val("Status").alias("status"),
        pl.col("val").filter(pl.col("key") == "State").first().alias("state"),
        pl.col("val")
        .filter((pl.col("key") == "Reason") & (pl.col("_sblk") == "State"))
        .first()
        .alias("state_reason"),
        _val("Restart Count").alias("restarts"),
        res("Limits", "memory").alias("mem_lim"),
        res("Requests", "memory").alias("mem_req"),
        res("Limits", "nvidia.com/gpu").alias("gpu_lim"),
        pl.col("line_no").first(),
    )
    g = g.filter(
        pl.col("_ctr").is_not_null() | pl.col("state").is_not_null() | pl.col("restarts").is_not_null()
    )
    return g.select(
        pl.lit(ctx.source).alias("source"),
        pl.col("_pod").alias("pod"),
        pl.col("_ns").alias("namespace"),
        pl.col("_ctr").alias("container"),
        "status",
        pl.col("restarts").cast(pl.Int64, strict=False),
        pl.col("_node").alias("node"),
        "state",
        "state_reason",
        plat.quantity_bytes(pl.col("mem_lim")).alias("memory_limit_bytes"),
        plat.quantity_bytes(pl.col("mem_req")).alias("memory_request_bytes"),
        pl.col("gpu_lim").cast(pl.Int64, strict=False).alias("gpu_limit"),
        "line_no",
    )
