"""The comparison's charts, as Vega-Lite dicts: each step figure of A and B on one axis per figure, and
the two timelines one above the other on the same relative time (seconds from each run's start)."""

from __future__ import annotations

import altair as alt
import polars as pl

from ..report.charts import VALIDATE, coarsen, theme
from ..scalars import float_value
from . import sources
from .runs import Run

A_COLOR, B_COLOR = "#1f77b4", "#e4572e"
RUN_SCALE = alt.Scale(domain=["A", "B"], range=[A_COLOR, B_COLOR])
STEP_FIGURES = (("ttft_p95", "TTFT p95, callers (s)"), ("engine_ttft_p95", "TTFT p95, engine (s)"),
                ("e2e_p95", "e2e p95, callers (s)"), ("gateway_e2e_p95", "e2e p95, gateway (s)"),
                ("queue_p95", "queue time p95, engine (s)"), ("queue_mean_s", "queue time mean, engine (s)"),
                ("success_share", "success share"), ("preemptions", "preemptions"), ("waiting_max", "waiting, max"),
                ("throughput_tps", "output tokens/s"), ("amplification", "executions per request"))  # fmt: skip
STEP_PANELS = 9  # three rows of three: the card's width at 1024 px
TIMELINE = (("arrivals", "arrivals"), ("waiting_max", "waiting (max)"), ("kv_max", "KV usage (max)"),
            ("preemptions", "preemptions"), ("ttft_p95", "TTFT p95 (s)"), ("e2e_p95", "e2e p95 (s)"),
            ("client_retries", "client retries"))  # fmt: skip
WIDTH = 860


def _finish(chart) -> dict:
    spec = chart.to_dict(validate=VALIDATE)
    spec["config"] = theme()
    return spec


def steps_chart(steps: list[dict]) -> dict | None:
    """One small chart per figure: A and B by matched step."""
    rows = []
    for i, s in enumerate(steps):
        for m in s["metrics"]:
            for side in ("a", "b"):
                if m[side] is not None:
                    lo, hi, shown = _bucket(
                        (m.get("bucket") or {}).get(side), (m.get("bucket_bounds") or {}).get(side)
                    )
                    rows.append(
                        {
                            "order": i,
                            "step": s["label"],
                            "figure": m["name"],
                            "run": side.upper(),
                            "value": float(m[side]),
                            "lo": lo,
                            "hi": hi,
                            "shown": shown,
                        }
                    )
    if not rows:
        return None
    df = pl.DataFrame(rows, schema_overrides={"lo": pl.Float64, "hi": pl.Float64, "shown": pl.String})
    order = [s["label"] for s in steps]
    charts = []
    for name, title in STEP_FIGURES:
        d = df.filter(pl.col("figure") == name)
        if d.height == 0:
            continue
        x = alt.X("step:N", sort=order, title=None, axis=alt.Axis(labelAngle=0))
        color = alt.Color("run:N", scale=RUN_SCALE, title="run", legend=alt.Legend(orient="top"))
        chart = _figure(d, x, color, offset="run:N", tooltip=["step:N", "run:N"])
        charts.append(chart.properties(width=220, height=130, title=title))
    charts = charts[:STEP_PANELS]
    return _finish(alt.concat(*charts, columns=3)) if charts else None


def _figure(d: pl.DataFrame, x, color, offset, tooltip: list) -> alt.Chart:
    """One figure's chart: a histogram's quantile as a bar over its bucket (not a point in it), any other figure as a
    line with points; ``offset`` sets a bar's place beside the others of its x, ``tooltip`` names the row."""
    if d["shown"].drop_nulls().len() == d.height:
        return (
            alt.Chart(d.drop("value"))
            .mark_bar(opacity=0.6)
            .encode(
                x=x,
                xOffset=offset,
                y=alt.Y("lo:Q", title=None),
                y2="hi:Q",
                color=color,
                tooltip=[*tooltip, alt.Tooltip("shown:N", title="bucket")],
            )
        )
    return (
        alt.Chart(d.drop("lo", "hi", "shown"))
        .mark_line(point=True)
        .encode(
            x=x,
            y=alt.Y("value:Q", title=None),
            color=color,
            tooltip=[*tooltip, alt.Tooltip("value:Q", format=".4~g")],
        )
    )


def _bucket(text: str | None, got: list | None) -> tuple[float | None, float | None, str | None]:
    """A histogram quantile's bucket for a bar (lo, hi, its words); an open top drawn as a line at its lower bound
    (the words say '> 20 s'); (None, None, None) for any other figure."""
    if not text or not got:
        return None, None, None
    lo, hi = got
    lo = 0.0 if lo is None else lo
    return lo, (lo if hi is None else hi), text


def _relative(run: Run) -> pl.DataFrame:
    w = coarsen(run.table("windows").sort("ts"))
    if w.height == 0:
        return w
    busy = w.filter(pl.col("arrivals").fill_null(0) > 0)
    t0 = (busy if busy.height else w)["ts"].min()
    return w.with_columns(((pl.col("ts") - t0).dt.total_milliseconds() / 1000).alias("t"))


LATENCY = {"ttft_p95", "e2e_p95"}


def _clock_words(run: Run) -> str:
    """', callers' clock' for a run whose requests' latencies are the callers' (the windows' percentiles are the
    requests')."""
    r = sources.requests(run)
    c = r["latency_clock"].drop_nulls() if r.height else None
    if c is None or c.len() == 0:
        return ""
    return ", " + sources.CLOCK_TEXT.get(str(c.mode().sort()[0]), str(c.mode()[0]))


def timelines(ra: Run, rb: Run) -> dict | None:
    """Per figure, A's timeline above B's, on one time axis (seconds since each run's first arrival)."""
    wa, wb = _relative(ra), _relative(rb)
    if wa.height == 0 and wb.height == 0:
        return None
    t_hi = max(float_value(w["t"].max()) for w in (wa, wb) if w.height)
    t_lo = min(float_value(w["t"].min()) for w in (wa, wb) if w.height)
    clocks = {lab: _clock_words(run) for lab, run in (("A", ra), ("B", rb))}
    panels = []
    for col, title in TIMELINE:
        frames = [
            w.select("t", pl.col(col).cast(pl.Float64).alias("value")).with_columns(pl.lit(lab).alias("run"))
            for w, lab in ((wa, "A"), (wb, "B"))
            if w.height and col in w.columns
        ]
        d = pl.concat(frames).drop_nulls() if frames else pl.DataFrame()
        if d.height == 0 or not (d["value"] != 0).any():
            continue
        top = float_value(d["value"].max()) or 1.0
        for lab in ("A", "B"):
            part = d.filter(pl.col("run") == lab)
            panels.append(
                alt.Chart(part)
                .mark_line(interpolate="step-after", color=A_COLOR if lab == "A" else B_COLOR)
                .encode(
                    x=alt.X(
                        "t:Q",
                        scale=alt.Scale(domain=[t_lo, t_hi]),
                        title="seconds from the run's first arrival" if col == TIMELINE[-1][0] else None,
                    ),
                    y=alt.Y("value:Q", scale=alt.Scale(domain=[0, top]), title=None),
                    tooltip=[alt.Tooltip("t:Q", format=".0f"), alt.Tooltip("value:Q", format=".4~g")],
                )
                .properties(
                    width=WIDTH, height=56, title=f"{lab} · {title}{clocks[lab] if col in LATENCY else ''}"
                )
            )
    return _finish(alt.vconcat(*panels, spacing=6)) if panels else None


SWEEP_FIGURES = (("ttft_p95", "TTFT p95, callers (s)"), ("engine_ttft_p95", "TTFT p95, engine (s)"),
                 ("e2e_p95", "e2e p95, callers (s)"), ("gateway_e2e_p95", "e2e p95, gateway (s)"),
                 ("queue_p95", "queue time p95, engine (s)"), ("throughput_tps", "output tokens/s"),
                 ("preemptions", "preemptions"))  # fmt: skip


def sweep_chart(doc: dict) -> dict | None:
    """Each figure against the swept setting, one line per load step, and the working boundary per value."""
    sw = doc["sweep"]
    name = (sw["setting"] or {}).get("name") or "run"
    order = [str(t["value"]) if sw["setting"] else t["run"].upper() for t in sw["table"]]
    rows = []
    for t, x in zip(sw["table"], order, strict=True):
        for i, c in enumerate(t["steps"]):
            for fig, title in SWEEP_FIGURES:
                if c.get(fig) is not None:
                    lo, hi, shown = _bucket(
                        (c.get("buckets") or {}).get(fig), (c.get("bucket_bounds") or {}).get(fig)
                    )
                    rows.append({"x": x, "step": c["label"], "order": i, "figure": title, "value": float(c[fig]),
                                 "lo": lo, "hi": hi, "shown": shown})  # fmt: skip
    if not rows:
        return None
    df = pl.DataFrame(rows, schema_overrides={"lo": pl.Float64, "hi": pl.Float64, "shown": pl.String})
    steps = [c["label"] for c in sw["table"][0]["steps"]]
    charts = []
    for _, title in SWEEP_FIGURES:
        d = df.filter(pl.col("figure") == title)
        if d.height == 0:
            continue
        x_ = alt.X("x:O", sort=order, title=name, axis=alt.Axis(labelAngle=0))
        color = alt.Color("step:O", sort=steps, title="step", scale=alt.Scale(scheme="viridis"),
                          legend=alt.Legend(orient="top", columns=8))  # fmt: skip
        chart = _figure(d, x_, color, offset=alt.XOffset("step:O", sort=steps), tooltip=["x:O", "step:N"])
        charts.append(chart.properties(width=200, height=140, title=title))
    bd = [
        {"x": x, "boundary": t["boundary"], "known": t["boundary_known"]}
        for t, x in zip(sw["table"], order, strict=True)
        if t["boundary_known"] and t["boundary"] is not None
    ]
    if bd:
        charts.append(
            alt.Chart(pl.DataFrame(bd))
            .mark_bar(color="#2f6f4e")
            .encode(
                x=alt.X("x:O", sort=order, title=name, axis=alt.Axis(labelAngle=0)),
                y=alt.Y("boundary:Q", title=None),
                tooltip=["x:O", alt.Tooltip("boundary:Q", format=".4~g")],
            )
            .properties(width=200, height=140, title="working boundary (load)")
        )
    return _finish(alt.concat(*charts, columns=3)) if charts else None
