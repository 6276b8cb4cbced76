"""The server's starts, restarts, graceful stops and deaths (``events``), and the dashed rules that draw them across
a panel (``event_rules``): the server's starts (summary ``cold_start``) and its deaths and graceful stops (summary
``server_lifecycle``), or, without a diagnosis, the windows' counts of starts, OOMs and engine deaths.
"""

from __future__ import annotations

import polars as pl

from .load import Loaded
from .panels import XEnc
from .time_cols import hms, ms
from .vl import Data, tip

EVENT_COLORS = {"start": "#2ca02c", "restart": "#2ca02c", "SIGTERM": "#b7791f", "killed": "#b3261e",
                "OOM": "#000000", "engine died": "#b3261e", "engine timeout": "#b3261e"}  # fmt: skip
DEATH_NAMES = {
    "silent": "killed",
    "oom": "OOM",
    "engine_dead": "engine died",
    "engine_timeout": "engine timeout",
    "kernel_oom": "kernel OOM kill",  # the platform's cause of a death (diagnose.platform.attach)
    "oom_killed": "OOMKilled",
    "gpu_xid": "GPU Xid",  # a GPU fault the kernel logged just before the death (diagnose.gpu_faults)
}


def events(ld: Loaded, summary: dict) -> pl.DataFrame:
    """(t, kind, label, replica, detail) of every server start, restart, graceful stop and death; ``ready``
    is the time a start became ready (null for the others)."""
    rows: list[dict] = []
    life = summary.get("server_lifecycle") or {}
    starts = (summary.get("cold_start") or {}).get("server_starts") or []
    ended: dict[str, list[str]] = {}  # replica -> times it stopped or died (a start after one is a restart)
    for d in life.get("deaths") or []:
        names = [DEATH_NAMES.get(k, k) for k in d.get("kinds") or []] or ["killed"]
        kind = "OOM" if "OOM" in names else names[0]
        rows.append(
            {
                "t": d.get("ts"),
                "kind": kind,
                "label": " + ".join(names),
                "replica": d.get("replica"),
                "ready": None,
                "detail": f"pid {d['pid']}" if d.get("pid") is not None else "",
                "errors_after": d.get("gateway_5xx_after") or 0,
            }
        )
        ended.setdefault(str(d.get("replica")), []).append(d.get("ts") or "")
    for g in life.get("graceful_shutdowns") or []:
        rows.append(
            {
                "t": g.get("ts"),
                "kind": "SIGTERM",
                "label": "SIGTERM (graceful stop)",
                "replica": g.get("replica"),
                "ready": None,
                "detail": "",
                "errors_after": g.get("gateway_5xx_after") or 0,
            }
        )
        ended.setdefault(str(g.get("replica")), []).append(g.get("ts") or "")
    for s in starts:
        again = any(e and s.get("ts") and e < s["ts"] for e in ended.get(str(s.get("replica")), []))
        bits = [
            f"pid {s['pid']}" if s.get("pid") is not None else "",
            f"vLLM {s['version']}" if s.get("version") else "",
        ]
        rows.append(
            {
                "t": s.get("ts"),
                "kind": "restart" if again else "start",
                "label": "restart" if again else "start",
                "replica": s.get("replica"),
                "ready": s.get("ready"),
                "detail": ", ".join(b for b in bits if b),
                "errors_after": 0,
            }
        )
    schema = {
        "t": pl.String,
        "kind": pl.String,
        "label": pl.String,
        "replica": pl.String,
        "ready": pl.String,
        "detail": pl.String,
        "errors_after": pl.Int64,
    }
    df = pl.DataFrame([r for r in rows if r["t"]], schema=schema)
    if df.height == 0 and not summary.get("server_lifecycle"):
        return _window_events(ld)
    # the gateway 5xx after each stop and death: diagnosis.json's count (stop_errors.errors_after), as the findings
    return df.with_columns(ms("t"), ms("ready"), pl.col("replica").fill_null("")).sort("t", "kind")


def _window_events(ld: Loaded) -> pl.DataFrame:
    """Without a diagnosis: the windows' counts of server starts, OOMs and engine deaths, as events."""
    w = ld.table("windows")
    parts = []
    for col, kind, label in (
        ("server_restarts", "start", "start"),
        ("oom_events", "OOM", "OOM"),
        ("engine_deaths", "engine died", "engine died"),
    ):
        if col in w.columns:
            parts.append(
                w.filter(pl.col(col).fill_null(0) > 0).select(
                    pl.col("ts").dt.epoch("ms").alias("t"),
                    pl.lit(kind).alias("kind"),
                    pl.lit(label).alias("label"),
                    pl.lit("").alias("replica"),
                    pl.lit(None, pl.Int64).alias("ready"),
                    pl.lit("(window of the event)").alias("detail"),
                )
            )
    df = pl.concat(parts).sort("t") if parts else pl.DataFrame()
    return df.with_columns(pl.lit(0, pl.Int64).alias("errors_after")) if df.height else df


def event_rules(ev: pl.DataFrame, x: XEnc, d: Data) -> list[dict]:
    """The events as dashed rules across a panel (no label: the lane above names them)."""
    if ev.height == 0:
        return []
    return [
        {
            "data": d.add("server-events", event_rows(ev)),
            "mark": {"type": "rule", "strokeDash": [4, 3], "strokeWidth": 1.3, "opacity": 0.85},
            # stroke, not color: the series' colour legend of the panel must not list the events
            "encoding": {"x": x("t"), "stroke": event_color(ev), "tooltip": event_tips()},
        }
    ]


def event_rows(ev: pl.DataFrame) -> pl.DataFrame:
    """The events as drawn: 'killed → 220 gateway 5xx', with the replica named when there are several."""
    counts = {n: f"{n:,}" for n in ev["errors_after"].unique().to_list()}  # a few distinct counts
    label = pl.col("label")
    if ev["replica"].n_unique() > 1:
        label = label + pl.when(pl.col("replica") == "").then(pl.lit("")).otherwise(
            " (" + pl.col("replica") + ")"
        )
    text = (
        pl.when(pl.col("errors_after") > 0)
        .then(
            label
            + " → "
            + pl.col("errors_after").replace_strict(counts, return_dtype=pl.String)
            + " gateway 5xx"
        )
        .otherwise(label)
    )
    return ev.select(
        "t",
        "kind",
        text.alias("text"),
        pl.when(pl.col("replica") == "").then(pl.lit("–")).otherwise(pl.col("replica")).alias("replica"),
        pl.col("detail").fill_null(""),
        hms("t").alias("time"),
    )


def event_color(ev: pl.DataFrame) -> dict:
    kinds = list(dict.fromkeys(ev["kind"].to_list()))
    return {
        "field": "kind",
        "type": "nominal",
        "legend": None,
        "scale": {"domain": kinds, "range": [EVENT_COLORS.get(k, "#b3261e") for k in kinds]},
    }


def event_tips() -> list[dict]:
    return [tip("text", "server"), tip("time", "at (UTC)"), tip("replica", "replica"), tip("detail", "")]
