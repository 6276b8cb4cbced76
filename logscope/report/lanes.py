"""The timeline's top lane (``lane``): the load the client gave (``load_phases``) as labelled bands, and the
server's starts, stops and deaths (``server_events``) as labelled rules below them; and the backdrop every panel
below it is drawn on (``backdrop``): the phases and the episodes shaded behind, the server's events as rules over.
The callers' outcomes by status are in ``outcome_panel``, the server's token throughput in ``token_throughput``.
"""

from __future__ import annotations

import polars as pl

from .load_phases import phase_shading
from .panels import WIDTH, Backdrop, XEnc, episode_shading
from .server_events import event_color, event_rows, event_rules, event_tips
from .time_cols import hms
from .vl import Data, tip

MAX_LABEL_ROWS = 3  # event labels stack in this many rows at most; past that, tooltips name them
CHAR_PX = 6.6  # ~ width of a character of an 11 px label


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
        evr = event_rows(ev)
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
                        loading.select("t", "ready", hms("t").alias("from"), hms("ready").alias("to")),
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
                    "color": event_color(ev),
                    "tooltip": event_tips(),
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
                            "color": event_color(ev),
                            "tooltip": event_tips(),
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


def backdrop(ph: pl.DataFrame, ev: pl.DataFrame, eps: pl.DataFrame, x: XEnc, d: Data) -> Backdrop:
    # the phases fainter than the episodes: an episode shows through the load it happened in
    faint = ph.with_columns((pl.col("shade") * 0.6).alias("shade")) if ph.height else ph
    return Backdrop(
        behind=[*phase_shading(faint, x, d), *episode_shading(eps, x, d)], over=event_rules(ev, x, d)
    )
