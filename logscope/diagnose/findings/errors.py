"""Findings of failed requests: errors at the gateway or client, an upstream that never answers."""

from __future__ import annotations

import polars as pl

from ... import clock
from ..context import Context
from .record import _f, _req


def _errors(ctx: Context, ep: dict) -> dict:
    d = ep["details"]
    kinds = ", ".join(f"{k.replace('_', ' ')} {d[k]}" for k in ("gateway_5xx", "gateway_499", "timeouts", "errors")
                      if d.get(k))
    sev = "high" if ep["class"] == "sustained" else "medium"
    return _f(sev, f"Errors {clock.hms_range(ep['start'], ep['end'])}: {ep['count']} failed",
              f"{ep['count']} failed requests in {ep['duration_s']:.0f} s", "; ".join([ep["reason"], kinds, _req(ep)]),
              "failures at the gateway or client with no pressure sign on the server: upstream unreachable or timeouts",
              "Look at the gateway's error log for this range: if it marks the upstream down (no live upstreams), "
              "add an active health check so one slow reply does not take the upstream out", ep, kind="errors")


def _gateway(ctx: Context) -> list[dict]:
    ga = ctx.inputs.gateway
    if ga.height == 0 or ga["upstream"].null_count() == ga.height:
        return []
    per = (ga.group_by("upstream")  # a category (diagnose.tables): grouped first, its few values then read as text
           .agg(pl.len().alias("n"), (pl.col("upstream_status").is_between(200, 399)).sum().alias("ok"),
                pl.col("ts_end").min().alias("lo"), pl.col("ts_end").max().alias("hi"))
           .with_columns(pl.col("upstream").cast(pl.String))
           .filter(pl.col("upstream").str.contains(":") & (pl.col("ok") == 0) & (pl.col("n") >= 3)).sort("upstream"))
    return [_f("low", f"Upstream {r['upstream']} never answered ({r['n']} attempts)",
               "the gateway kept sending attempts to an upstream that never returned a response",
               f"{r['n']} attempts {clock.hms_range(r['lo'], r['hi'])}, none answered; each costs a connect failure "
               "and a gateway retry", "a dead member of the upstream group",
               "Remove it from the upstream group (or give the gateway an active health check)", None, r["lo"], r["hi"],
               kind="other")
            for r in per.iter_rows(named=True)]
