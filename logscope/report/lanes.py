"""What the timeline draws besides the windows' series: the load the client gave (its phases, or the ladder's
steps) as labelled bands, the server's starts, stops and deaths as labelled rules, the callers' outcomes by
status, and the server's token throughput.

Sources, all already in the output folder: the ladder steps of diagnosis.json (summary ``ladder``), else
``client_phases.parquet`` (a load generator's own phase lines); the server's starts (summary ``cold_start``)
and its deaths and graceful stops (summary ``server_lifecycle``), or, without a diagnosis, the windows'
counts of starts, OOMs and engine deaths; ``requests.parquet`` for the outcomes; ``server_stats.parquet``
for the throughput. Nothing here guesses phases from the arrival rate: without a phase source there is no band.
"""

from __future__ import annotations

import polars as pl

from .. import clock
from ..correlate.broken import CUT, READ_TIMEOUT
from ..correlate.stream_failures import FAILED
from ..scalars import int_value
from .load import Loaded
from .panels import (
    GAP_SAMPLES,
    WIDTH,
    Backdrop,
    Panel,
    XEnc,
    bridged,
    clipped,
    episode_shading,
    title,
    y_axis,
)
from .vl import Data, legend, tip

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
MAX_LABEL_ROWS = 3  # event labels stack in this many rows at most; past that, tooltips name them
# a break-off named by what its log says, and which log says it: nginx's error log after the access log's 2xx
# ('upstream prematurely closed connection', or its own read timeout's 'upstream timed out ... while reading
# upstream': correlate.broken), LiteLLM's stream-error line tied to its access line (stream_failures), the caller
# that gave up (its own log's timeout) or left (nginx's 499: 'client closed request')
BROKE_OFF = {
    CUT: "2xx, upstream closed (nginx error log)",
    READ_TIMEOUT: "2xx, read timeout cut (nginx error log)",
    FAILED: "2xx, stream failed (LiteLLM log)",
}
TRUNCATED = "2xx, then broken off"  # an analysis that predates requests.mid_stream
TIMED_OUT = "caller timed out (client log)"
CLIENT_LEFT = "499, client left (gateway log)"
OUTCOME_COLORS = {"ok": "#2ca02c", TIMED_OUT: "#ff7f0e", CLIENT_LEFT: "#ffbb78", "error, no status": "#7f0000",
                  BROKE_OFF[CUT]: "#f3a712", BROKE_OFF[READ_TIMEOUT]: "#e6550d", BROKE_OFF[FAILED]: "#c98a00",
                  TRUNCATED: "#f3a712",
                  "unfinished (log ended)": "#9aa5b1", "unknown": "#c7c7c7"}  # fmt: skip
STATUS_COLORS = (
    "#d62728",
    "#8c564b",
    "#e377c2",
    "#9467bd",
    "#bcbd22",
)  # the most frequent statuses, in order
MAX_STATUSES = len(STATUS_COLORS)  # more HTTP statuses than this share one 'HTTP other'
CHAR_PX = 6.6  # ~ width of a character of an 11 px label


def _ms(col: str) -> pl.Expr:
    return pl.col(col).str.to_datetime(time_zone="UTC").dt.epoch("ms")


def _hms(col: str) -> pl.Expr:
    return (
        pl.from_epoch(pl.col(col), time_unit="ms")
        .dt.replace_time_zone("UTC")
        .dt.strftime(clock.time_format())
    )


# ---------------------------------------------------------------- load phases


def phases(ld: Loaded, summary: dict) -> tuple[pl.DataFrame, str]:
    """(start, end, label, shade) of each ladder step, else of each client phase, and what they are."""
    steps = [
        s for s in (summary.get("ladder") or {}).get("steps") or [] if s.get("ts_start") and s.get("ts_end")
    ]
    if steps:
        rows = [
            {
                "start": s["ts_start"],
                "end": s["ts_end"],
                "mode": s.get("mode") or "concurrency",
                "value": s.get("concurrency"),
                "name": f"step {s.get('step')}",
            }
            for s in steps
        ]
        df, what = pl.DataFrame(rows, infer_schema_length=None), "ladder steps"
        df = df.with_columns(_ms("start"), _ms("end"))
    else:
        ph = ld.table("client_phases").drop_nulls(["ts_start", "ts_end"])
        if ph.height == 0:
            return pl.DataFrame(), ""
        used = (ld.doc("correlation").get("sources") or {}).get("client") or []
        srcs = sorted(ph["source"].unique().to_list())
        src = next(
            (s for s in srcs if s in used), srcs[0]
        )  # a client's .jsonl and .log state the same phases
        df = (
            ph.filter(pl.col("source") == src)
            .sort("ts_start")
            .select(
                pl.col("ts_start").dt.epoch("ms").alias("start"),
                pl.col("ts_end").dt.epoch("ms").alias("end"),
                pl.col("mode").fill_null("concurrency"),
                "value",
                ("phase " + pl.col("phase")).alias("name"),
            )
        )
        what = "client load phases"
    v = pl.col("value").cast(pl.Float64).round(3).cast(pl.String).str.replace(r"\.0$", "")
    label = (
        pl.when(pl.col("value").is_null())
        .then(pl.col("name"))
        .when(pl.col("mode") == "rate")
        .then(v + " req/s")
        .when(pl.col("mode") == "inflight")
        .then("~" + v + " in flight")
        .otherwise("c=" + v)
    )
    df = (
        df.sort("start")
        .with_row_index("i")
        .with_columns(
            label.alias("label"),
            _hms("start").alias("from"),
            _hms("end").alias("to"),
            # neighbouring bands alternate in depth so that touching phases stay apart
            pl.when(pl.col("i") % 2 == 0).then(0.09).otherwise(0.045).alias("shade"),
        )
    )
    return df.drop("i"), what


# ---------------------------------------------------------------- server starts, stops and deaths


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
    # the gateway 5xx after each stop and death: diagnosis.json's count (lifecycle.errors_after), as the findings
    return df.with_columns(_ms("t"), _ms("ready"), pl.col("replica").fill_null("")).sort("t", "kind")


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


def _label_rows(items: list[tuple[float, float]], rows: int) -> tuple[list[int], list[bool]] | None:
    """A row for each label (rule px, width px) so that none overlaps another in its row, and whether it goes
    left of its rule (a label that would pass the plot's right edge); None when more than ``rows`` rows would
    be needed."""
    ends: list[float] = []
    out, left = [], []
    for x, w in items:
        flip = x + 3 + w > WIDTH
        x0 = x - 3 - w if flip else x + 3
        row = next((i for i, e in enumerate(ends) if x0 >= e + 6), None)
        if row is None:
            if len(ends) >= rows:
                return None
            ends.append(float("-inf"))
            row = len(ends) - 1
        ends[row] = x0 + w
        out.append(row)
        left.append(flip)
    return out, left


def event_rules(ev: pl.DataFrame, x: XEnc, d: Data) -> list[dict]:
    """The events as dashed rules across a panel (no label: the lane above names them)."""
    if ev.height == 0:
        return []
    return [
        {
            "data": d.add("server-events", _event_rows(ev)),
            "mark": {"type": "rule", "strokeDash": [4, 3], "strokeWidth": 1.3, "opacity": 0.85},
            # stroke, not color: the series' colour legend of the panel must not list the events
            "encoding": {"x": x("t"), "stroke": _event_color(ev), "tooltip": _event_tips()},
        }
    ]


def _event_rows(ev: pl.DataFrame) -> pl.DataFrame:
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
        _hms("t").alias("time"),
    )


def _event_color(ev: pl.DataFrame) -> dict:
    kinds = list(dict.fromkeys(ev["kind"].to_list()))
    return {
        "field": "kind",
        "type": "nominal",
        "legend": None,
        "scale": {"domain": kinds, "range": [EVENT_COLORS.get(k, "#b3261e") for k in kinds]},
    }


def _event_tips() -> list[dict]:
    return [tip("text", "server"), tip("time", "at (UTC)"), tip("replica", "replica"), tip("detail", "")]


def lane(ph: pl.DataFrame, what: str, ev: pl.DataFrame, x: XEnc, d: Data) -> dict | None:
    """The top lane: the load phases as labelled bands, and the server's events as labelled rules below them
    (start→ready shaded: the time the server took to load)."""
    if ph.height == 0 and ev.height == 0:
        return None
    layers: list[dict] = []
    top = 0
    if ph.height:
        ref = d.add("phases", ph)
        layers.append(
            {
                "data": ref,
                "mark": {"type": "rect", "fill": "#52606d"},
                "encoding": {
                    "x": x("start", "top"),
                    "x2": {"field": "end"},
                    "y": {"value": 2},
                    "y2": {"value": 20},
                    "opacity": {"field": "shade", "type": "quantitative", "scale": None},
                    "tooltip": [tip("label", what), tip("from", "from (UTC)"), tip("to", "to")],
                },
            }
        )
        # a label centred on its band, kept when it stays clear of its neighbours' (a short ladder step's label
        # may pass its band's edges: the steps have idle gaps between them)
        keep, end = [], float("-inf")
        for a, b, label in ph.select("start", "end", "label").rows():
            w = CHAR_PX * len(label) + 4
            mid = (x.px(a) + x.px(b)) / 2
            ok = mid - w / 2 >= max(end + 6, 0) and mid + w / 2 <= WIDTH
            keep.append(ok)
            end = mid + w / 2 if ok else end
        fits = ph.filter(pl.Series(keep, dtype=pl.Boolean))
        if fits.height:
            layers.append(
                {
                    "data": d.add(
                        "phase-labels",
                        fits.with_columns(((pl.col("start") + pl.col("end")) // 2).alias("mid")),
                    ),
                    "mark": {
                        "type": "text",
                        "fontSize": 11,
                        "fontWeight": 600,
                        "color": "#1f2933",
                        "baseline": "middle",
                    },
                    "encoding": {
                        "x": x("mid", "top"),
                        "y": {"value": 11},
                        "text": {"field": "label", "type": "nominal"},
                    },
                }
            )
        top = 24
    rows_used = 0
    if ev.height:
        evr = _event_rows(ev)
        loading = ev.filter(pl.col("ready").is_not_null() & (pl.col("ready") > pl.col("t")))
        placed = _label_rows(
            [(x.px(t), CHAR_PX * len(s)) for t, s in evr.select("t", "text").rows()], MAX_LABEL_ROWS
        )
        rows, flip = placed if placed else ([0] * evr.height, [False] * evr.height)
        rows_used = max(rows) + 1 if placed else 1
        height = top + 16 * rows_used + 6
        if loading.height:
            layers.append(
                {
                    "data": d.add(
                        "loading",
                        loading.select("t", "ready", _hms("t").alias("from"), _hms("ready").alias("to")),
                    ),
                    "mark": {"type": "rect", "fill": "#2ca02c", "opacity": 0.12},
                    "encoding": {
                        "x": x("t", "top"),
                        "x2": {"field": "ready"},
                        "y": {"value": top},
                        "y2": {"value": height},
                        "tooltip": [tip("from", "server loading from"), tip("to", "ready at")],
                    },
                }
            )
        evr = evr.with_columns(pl.Series("y", [top + 9 + 16 * r for r in rows]), pl.Series("left", flip))
        layers.append(
            {
                "data": d.add("server-event-rules", evr),
                "mark": {"type": "rule", "strokeDash": [4, 3], "strokeWidth": 1.3},
                "encoding": {
                    "x": x("t", "top"),
                    "y": {"value": top},
                    "y2": {"value": height},
                    "color": _event_color(ev),
                    "tooltip": _event_tips(),
                },
            }
        )
        for side, align, dx in ((False, "left", 3), (True, "right", -3)):
            part = evr.filter(pl.col("left") == side)
            if placed and part.height:
                layers.append(
                    {
                        "data": d.add("server-event-labels", part),
                        "mark": {
                            "type": "text",
                            "align": align,
                            "dx": dx,
                            "fontSize": 11,
                            "fontWeight": 600,
                            "baseline": "middle",
                        },
                        "encoding": {
                            "x": x("t", "top"),
                            "y": {"field": "y", "type": "quantitative", "scale": None},
                            "text": {"field": "text", "type": "nominal"},
                            "color": _event_color(ev),
                            "tooltip": _event_tips(),
                        },
                    }
                )
    height = top + (16 * rows_used + 6 if ev.height else 0)
    parts = [what.capitalize()] if ph.height else []
    if ev.height:
        parts.append(
            "server starts, stops and deaths" + ("" if rows_used or ev.height <= 1 else " (hover for names)")
        )
    return {"layer": layers, "width": WIDTH, "height": max(height, 20), "title": " and ".join(parts)}


def phase_shading(ph: pl.DataFrame, x: XEnc, d: Data) -> list[dict]:
    if ph.height == 0:
        return []
    return [
        {
            "data": d.add("phase-bands", ph.select("start", "end", "shade")),
            "mark": {"type": "rect", "fill": "#52606d"},
            "encoding": {
                "x": x("start"),
                "x2": {"field": "end"},
                "opacity": {"field": "shade", "type": "quantitative", "scale": None},
            },
        }
    ]


def backdrop(ph: pl.DataFrame, ev: pl.DataFrame, eps: pl.DataFrame, x: XEnc, d: Data) -> Backdrop:
    # the phases fainter than the episodes: an episode shows through the load it happened in
    faint = ph.with_columns((pl.col("shade") * 0.6).alias("shade")) if ph.height else ph
    return Backdrop(
        behind=[*phase_shading(faint, x, d), *episode_shading(eps, x, d)], over=event_rules(ev, x, d)
    )


# ---------------------------------------------------------------- outcomes by status


def outcomes(ld: Loaded, lo_ms: int, width_ms: int) -> pl.DataFrame:
    """Logical requests per window of their outcome (when the caller saw it: the end, else the start), by
    outcome and HTTP status: (t, end, time, outcome, n, k) with k the stacking order."""
    r = ld.scan("requests")
    mid = pl.col("mid_stream") if "mid_stream" in r.collect_schema().names() else pl.lit(None, pl.String)
    r = r.select(
        pl.coalesce("ts_end", "ts_start").dt.epoch("ms").alias("at"), "outcome", "status", mid.alias("how")
    ).drop_nulls("at")
    counts = (
        r.group_by(((pl.col("at") - lo_ms) // width_ms).alias("bin"), "outcome", "status", "how")
        .agg(pl.len().alias("n"))
        .collect()
    )
    if counts.height == 0:
        return pl.DataFrame()
    errs = counts.filter(
        (pl.col("outcome") == "error") & pl.col("status").is_not_null() & (pl.col("status") != 499)
    )
    ranked = errs.group_by("status").agg(pl.col("n").sum()).sort(["n", "status"], descending=[True, False])
    top = ranked["status"].head(MAX_STATUSES).sort().to_list()
    name = (
        pl.when(pl.col("outcome") == "ok")
        .then(pl.lit("ok"))
        .when((pl.col("outcome") == "error") & (pl.col("status") == 499))
        .then(pl.lit(CLIENT_LEFT))
        .when((pl.col("outcome") == "error") & pl.col("status").is_in(top))
        .then("HTTP " + pl.col("status").cast(pl.String))
        .when((pl.col("outcome") == "error") & pl.col("status").is_not_null())
        .then(pl.lit("HTTP other"))
        .when(pl.col("outcome") == "error")
        .then(pl.lit("error, no status"))
        .when(pl.col("outcome") == "truncated")
        .then(pl.col("how").replace_strict(BROKE_OFF, default=TRUNCATED, return_dtype=pl.String))
        .when(pl.col("outcome") == "unfinished")
        .then(pl.lit("unfinished (log ended)"))
        .when(pl.col("outcome") == "timeout")
        .then(pl.lit(TIMED_OUT))
        .otherwise(pl.lit("unknown"))
    )
    order = [
        "ok",
        *[f"HTTP {s}" for s in top],
        "HTTP other",
        "error, no status",
        CLIENT_LEFT,
        TIMED_OUT,
        *BROKE_OFF.values(),
        TRUNCATED,
        "unfinished (log ended)",
        "unknown",
    ]
    out = counts.group_by("bin", name.alias("outcome")).agg(pl.col("n").sum().cast(pl.Int64))
    # stacked here (y0..y1 in the window's column, ok at the bottom): Vega-Lite stacks no bar spanning x..x2
    return (
        out.with_columns(
            (lo_ms + pl.col("bin") * width_ms).alias("t"),
            (lo_ms + (pl.col("bin") + 1) * width_ms).alias("end"),
            pl.col("outcome")
            .replace_strict(order, list(range(len(order))), return_dtype=pl.Int64)
            .alias("k"),
        )
        .sort("t", "k")
        .with_columns(
            _hms("t").alias("time"),
            pl.col("n").cum_sum().over("t").alias("y1"),
        )
        .with_columns((pl.col("y1") - pl.col("n")).alias("y0"))
        .drop("bin")
    )


def outcome_colors(present: list[str]) -> list[str]:
    statuses = iter(STATUS_COLORS)
    return [
        OUTCOME_COLORS.get(o) or (next(statuses, "#b3261e") if o != "HTTP other" else "#f7b6d2")
        for o in present
    ]


OUTCOMES = Panel("outcomes", "Outcomes as callers saw them", "per window", (), "step", integer=True)


def outcome_panel(oc: pl.DataFrame, back: Backdrop, x: XEnc, per: str, d: Data) -> dict:
    present = oc.sort("k")["outcome"].unique(maintain_order=True).to_list()
    totals = oc.group_by("t").agg(pl.col("n").sum().alias("value"), pl.col("time").first())
    y, cap = y_axis(OUTCOMES, per, totals["value"].cast(pl.Float64))
    y["field"] = "y1"
    color = {
        "field": "outcome",
        "type": "nominal",
        "title": None,
        "legend": legend(present, WIDTH, "square"),
        "scale": {"domain": present, "range": outcome_colors(present)},
    }
    bars = {
        "data": d.add("outcomes", oc),
        "mark": {"type": "rect", "clip": True},
        "encoding": {
            "x": x("t"),
            "x2": {"field": "end"},
            "y": y,
            "y2": {"field": "y0"},
            "color": color,
            "tooltip": [
                tip("time", "window start (UTC)"),
                tip("outcome", "outcome"),
                tip("n", "requests", "quantitative", ","),
            ],
        },
    }
    note = totals.sort("value", descending=True)
    return {
        "layer": [*back.behind, bars, *clipped(totals, cap, x, d, "outcomes"), *back.over],
        "width": WIDTH,
        "height": 90,
        "title": title("Outcomes as callers saw them (requests by how they ended)", note, cap),
    }


# ---------------------------------------------------------------- token throughput


def tokens(ld: Loaded, grid: pl.Series, width_ms: int, panel: Panel) -> pl.DataFrame:
    """Prompt and generation tokens/s of the server, summed over replicas, as the panel's long rows: each
    replica's stats lines (its log's, else its metrics', never both) averaged per window and carried back over
    the windows up to its next line (a line states the average since the one before), within GAP_SAMPLES of its
    usual interval."""
    cols = [c for c, _, _ in panel.series]
    st = (
        ld.scan("server_stats")
        .select("ts", "replica", "origin", *cols)
        .filter(pl.any_horizontal(pl.col(c).is_not_null() for c in cols))
        .collect()
    )
    if st.height == 0 or grid.len() == 0:
        return pl.DataFrame()
    lo = int_value(grid.min())
    st = st.with_columns(pl.col("replica").fill_null(""), pl.col("ts").dt.epoch("ms").alias("t"))
    has_log = st.group_by("replica").agg((pl.col("origin") == "log").any().alias("has_log"))
    st = st.join(has_log, on="replica").filter((pl.col("origin") == "log") == pl.col("has_log"))
    usual = st.sort("replica", "t").select(pl.col("t").diff().over("replica").median()).item() or width_ms
    reach = max(1, int(GAP_SAMPLES * usual // width_ms))
    per = st.group_by("replica", ((pl.col("t") - lo) // width_ms).alias("bin")).agg(
        pl.col(c).mean() for c in cols
    )
    bins = pl.DataFrame({"bin": ((grid - lo) // width_ms).unique().sort()})
    full = bins.join(per.select("replica").unique(), how="cross").join(per, on=["replica", "bin"], how="left")
    full = full.sort("replica", "bin").with_columns(
        pl.col(c).fill_null(strategy="backward", limit=reach).over("replica") for c in cols
    )
    tot = (
        full.group_by("bin")
        .agg(pl.when(pl.col(c).count() > 0).then(pl.col(c).sum()).alias(c) for c in cols)
        .sort("bin")
    )
    tot = tot.with_columns((lo + pl.col("bin") * width_ms).alias("t")).with_columns(_hms("t").alias("time"))
    frames = []
    for col, label, _ in panel.series:
        f = tot.select(
            "t",
            "time",
            pl.lit(panel.key).alias("panel"),
            pl.lit(label).alias("series"),
            pl.col(col).cast(pl.Float64).alias("value"),
        )
        f = bridged(f, width_ms)
        if f.height:
            v = pl.col("value")
            frames.append(
                f.with_columns((v.is_not_null() & v.shift(1).is_null() & v.shift(-1).is_null()).alias("lone"))
            )
    return pl.concat(frames) if frames else pl.DataFrame()
