"""The timeline's GPU memory panel (issue #40): the framebuffer in use per GPU (and pod) over time, with vLLM's own
reservation marked (its weights + KV cache from its start-up lines), when the folder holds the DCGM exporter's series
(a scrape loop, a query_range export, a TSDB dump) or nvidia-smi's tables (each at the date printed above it)."""

from __future__ import annotations

import polars as pl

from .load import Loaded
from .panels import PANEL_H, PURPLE, WIDTH, Backdrop, XEnc
from .vl import Data, legend, tip

USED, FREE = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"
SMI_USED = "nvidia_smi_memory_used_mib"  # parsers/nvidia_smi.py: the Memory-Usage column, MiB
TOOLS = {USED: "DCGM exporter", SMI_USED: "nvidia-smi"}
MAX_SERIES = 8  # GPUs drawn; the rest are named in the title


def _series(ld: Loaded) -> pl.DataFrame:
    m = ld.table("server_metrics").filter(pl.col("name").is_in(list(TOOLS))).drop_nulls("ts")
    if not m.height:
        return m.with_columns(pl.lit(None, dtype=pl.String).alias("tool"))
    lab = pl.col("labels")
    gpu = lab.str.extract(r"(?:^|,)gpu=([^,]*)", 1)
    pod = pl.coalesce(lab.str.extract(r"(?:^|,)pod=([^,]+)", 1), lab.str.extract(r"exported_pod=([^,]+)", 1))
    tool = pl.col("name").replace_strict(TOOLS, return_dtype=pl.String)
    name = pl.concat_str(
        pl.lit("GPU "),
        gpu.fill_null("?"),
        pl.when(pod.is_not_null()).then(pl.lit(" · ") + pod).otherwise(pl.lit("")),
        # two tools, or nvidia-smi's tables of several hosts, are told apart by their file
        pl.when(pl.col("name") == SMI_USED).then(pl.lit(" · ") + pl.col("source")).otherwise(pl.lit("")),
    )
    return m.select(
        pl.col("ts").dt.epoch("ms").alias("t"), name.alias("series"), pl.col("value"), tool.alias("tool")
    ).sort("t")


def _reservation(summary: dict) -> tuple[float, str] | None:
    """vLLM's device reservation in MiB and its label: weights + KV cache when its start-up lines give both."""
    cap = summary.get("capacity") or {}
    kv, w = cap.get("kv_memory_gib"), cap.get("weights_gib")
    if kv is None or w is None:
        return None
    return (kv + w) * 1024, f"vLLM's weights + KV cache budget (its log's start-up lines): {w + kv:.1f} GiB"


def panel(ld: Loaded, summary: dict, back: Backdrop, x: XEnc, d: Data) -> dict | None:
    data = _series(ld)
    if not data.height:
        return None
    names = (
        data.group_by("series").agg(pl.col("value").max()).sort("value", descending=True)["series"].to_list()
    )
    shown = names[:MAX_SERIES]
    tools = ", ".join(sorted(set(data["tool"].drop_nulls().to_list())))
    data = data.filter(pl.col("series").is_in(shown)).drop("tool")
    ref = d.add("panel-gpu-memory", data)
    color = {"field": "series", "type": "nominal", "title": None, "legend": legend(shown, WIDTH)}
    y = {"field": "value", "type": "quantitative", "title": "MiB used", "axis": {"format": ",.0f"}}
    layers = [
        *back.behind,
        {
            "data": ref,
            "mark": {"type": "line", "point": {"size": 14}, "clip": True},
            "encoding": {
                "x": x("t"),
                "y": y,
                "color": color,
                "tooltip": [tip("series", "GPU"), tip("value", "MiB used", "quantitative", ",.0f")],
            },
        },
    ]
    res = _reservation(summary)
    if res is not None:
        rule = d.add("gpu-reservation", [{"mib": res[0], "label": res[1]}])
        layers += [
            {
                "data": rule,
                "mark": {"type": "rule", "strokeDash": [5, 4], "color": PURPLE},
                "encoding": {"y": {"field": "mib", "type": "quantitative"}},
            },
            {
                "data": rule,
                "mark": {"type": "text", "align": "left", "dx": 4, "dy": -6, "color": PURPLE, "fontSize": 10},
                "encoding": {
                    "y": {"field": "mib", "type": "quantitative"},
                    "x": {"value": 0},
                    "text": {"field": "label", "type": "nominal"},
                },
            },
        ]
    layers += back.over
    more = f" ({len(names) - len(shown)} more GPUs not drawn)" if len(names) > len(shown) else ""
    why = "" if res is not None else " (vLLM's weights + KV budget not in its log)"
    return {
        "layer": layers,
        "width": WIDTH,
        "height": PANEL_H,
        "title": f"GPU memory in use ({tools}){why}{more}",
    }
