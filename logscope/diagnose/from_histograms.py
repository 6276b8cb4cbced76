"""Figures the requests lack, from vLLM's histograms (``histograms``), each tagged with its source.

A ladder step, an episode and the baseline window before it get TTFT and e2e quantiles from the
histograms when no request in the range carries them, and TTFT also when the only per-request
figure is the gateway's: nginx's ``upstream_header_time`` is the time to the response headers,
which vLLM sends before the first token when streaming (lab ladder at c=64: 0.08 s at the gateway,
8.1 s mean TTFT at the client) and after the last token when not; it is kept as
``ttft_p95_gateway``. Queue, prefill and decode times exist only in the histograms. Prompt, output
and requested lengths are filled with the histograms' exact means (``_sum`` / ``_count``) where
the requests have none. Every latency figure names its source: ``client``, ``gateway``,
``server log`` or ``metrics histogram`` (with its bucket for a histogram quantile).
"""

from __future__ import annotations

import polars as pl

from ..scalars import float_or_none
from . import figures
from .claims import CLOCK_LAYER, clock_of
from .context import Context
from .histograms import LATENCIES, ORIGIN_SOURCE, SOURCE, Histograms, load
from .records import Episode

__all__ = [
    "load",
    "fill_step",
    "fill_episodes",
    "fill_lengths",
    "stated",
    "over",
    "undecided",
    "not_measured",
]

GATEWAY_TTFT_NOTE = (
    "the gateway's TTFT is its upstream header time, which vLLM sends before the first token "
    "when streaming and after the last when not: not a TTFT"
)
# the per-request latencies a range may already have, and the columns they come from
PER_REQUEST = {"ttft": "ttft_s", "e2e": "e2e_s"}
LENGTHS = {
    "output_tokens": "output_tokens_mean",
    "max_tokens": "max_tokens_mean",
    "prompt_tokens": "prompt_tokens_mean",
}
_SHOWN = ("n", "mean", "p50", "p50_bucket", "p95", "p95_bucket", "p95_bucket_lo", "p95_bucket_hi", "metric")


def request_source(req: pl.DataFrame, col: str) -> str | None:
    """Which layers' clocks gave the range's per-request ``col`` (client, gateway, server log), None when none
    did: each row's ``latency_clock`` (correlate: the clock its ttft_s / e2e_s were measured on, which need not be
    its origin's: a client row without latencies takes the gateway's), else its origin."""
    if req.height == 0 or col not in req.columns:
        return None
    got = req.filter(pl.col(col).is_not_null())
    if "latency_clock" in req.columns:
        clocks = got["latency_clock"].drop_nulls().unique().to_list()
        return " + ".join(sorted(CLOCK_LAYER.get(c, c) for c in clocks)) or None
    if "origin" not in req.columns:
        return None
    origins = got["origin"].drop_nulls().unique().to_list()
    return " + ".join(sorted(ORIGIN_SOURCE.get(o, o) for o in origins)) or None


def fill(fig: dict | Episode, sources: dict[str, str | None], measured: dict[str, dict]) -> dict:
    """The keys to set on a range's figures ``fig`` (a step row or an episode): the latencies of
    PER_REQUEST from the histograms where the requests gave none (TTFT: or only the gateway's), their
    sources and buckets; queue / prefill / decode p95; the lengths the requests lack."""
    add: dict = {}
    for f in PER_REQUEST:
        src = sources.get(f) if fig.get(f"{f}_p95") is not None else None
        h = measured.get(f)
        if h is not None and h["p95"] is not None and (src is None or (f == "ttft" and src == "gateway")):
            if src == "gateway":
                add["ttft_p95_gateway"], add["ttft_note"] = fig.get("ttft_p95"), GATEWAY_TTFT_NOTE
            add.update({k: h[k.removeprefix(f + "_")] for k in (f"{f}_p50", f"{f}_p95") if k in fig})
            add.update({f"{f}_p50_bucket": h["p50_bucket"]} if f"{f}_p50" in fig else {})
            add.update(
                {
                    f"{f}_source": SOURCE,
                    f"{f}_p95_bucket": h["p95_bucket"],
                    f"{f}_p95_bucket_lo": h["p95_bucket_lo"],
                    f"{f}_p95_bucket_hi": h["p95_bucket_hi"],
                }
            )
        else:
            add[f"{f}_source"] = src
            if src == "gateway" and f == "ttft":
                add["ttft_note"] = GATEWAY_TTFT_NOTE
            if h is not None and h["p95"] is not None and src is not None:
                # the engine's own figure beside the callers': two clocks, never one figure (their gap: clockgap)
                add.update(
                    {
                        f"{f}_p95_engine": h["p95"],
                        f"{f}_p95_engine_bucket": h["p95_bucket"],
                        f"{f}_p95_engine_lo": h["p95_bucket_lo"],
                        f"{f}_p95_engine_hi": h["p95_bucket_hi"],
                    }
                )
    for f in LATENCIES:
        if f in PER_REQUEST:
            continue
        h = measured.get(f) or {}
        add.update(
            {
                f"{f}_p95": h.get("p95"),
                f"{f}_p95_bucket": h.get("p95_bucket"),
                f"{f}_p95_bucket_lo": h.get("p95_bucket_lo"),
                f"{f}_p95_bucket_hi": h.get("p95_bucket_hi"),
                f"{f}_source": SOURCE if h.get("p95") is not None else None,
            }
        )
    for f, key in LENGTHS.items():
        h = measured.get(f)
        if key in fig and fig[key] is None and h is not None and h["mean"] is not None:
            add[key] = h["mean"]
            add["lengths_source"] = SOURCE
    return add


def shown(measured: dict[str, dict]) -> dict[str, dict]:
    """The histogram figures as diagnosis.json keeps them."""
    return {f: {"source": SOURCE, **{k: v[k] for k in _SHOWN}} for f, v in measured.items()}


def fill_step(ctx: Context, row: dict, req: pl.DataFrame) -> None:
    """A ladder step's figures (``row``, over ts_start..ts_end, all replicas; ``req``: its requests)."""
    hist: Histograms | None = getattr(ctx, "hist", None)
    measured = hist.measure_all(row["ts_start"], row["ts_end"]) if hist is not None else {}
    row.update(fill(row, {f: request_source(req, c) for f, c in PER_REQUEST.items()}, measured))
    row["metrics_histograms"] = shown(measured) or None


def fill_episodes(ctx: Context, eps: list[Episode]) -> None:
    """Each episode's figures during it (on its replica when the metrics name it, all for a folder-wide one),
    and the histogram figures of its baseline window beside them (details.metrics_histograms)."""
    hist: Histograms | None = getattr(ctx, "hist", None)
    req = ctx.by_time(ctx.inputs.requests, "ts_start")
    during = [(e["start"], e["end"]) for e in eps]
    before = [(e["details"]["baseline_window"]["start"], e["details"]["baseline_window"]["end"]) for e in eps]
    sources = sources_many(req, during)
    for e, rng_d, rng_b, src in zip(eps, during, before, sources, strict=True):
        ok, rep = hist.replica_for(e["replica"]) if hist is not None else (False, None)
        tied = hist if ok else None  # the histograms of the episode's replica (or of the folder)
        m_d = tied.measure_all(*rng_d, rep) if tied is not None else {}
        m_b = tied.measure_all(*rng_b, rep) if tied is not None and rng_b[0] is not None else {}
        add = fill(e, src, m_d)
        e.update(add)
        e["ttft_clock"], e["e2e_clock"] = clock_of(e.get("ttft_source")), clock_of(e.get("e2e_source"))
        # the sources, buckets and notes beside the episode's figures (the episodes table keeps a few)
        e["details"]["latency"] = {
            k: v for k, v in add.items() if v is not None and not k.endswith(("_p50", "_p95", "_mean"))
        } or None
        lengths = e["details"].get("output_lengths")
        if isinstance(lengths, dict):
            lengths.update(
                {
                    k: v
                    for k, v in fill(lengths, {}, m_d).items()
                    if k in LENGTHS.values() or k == "lengths_source"
                }
            )
        if m_d or m_b:
            e["details"]["metrics_histograms"] = {
                "during": shown(m_d),
                "before": shown(m_b),
                "replica": rep or "all",
            }


def sources_many(req: pl.DataFrame, ranges: list[tuple]) -> list[dict[str, str | None]]:
    read = [*PER_REQUEST.values(), "latency_clock", "origin"]  # what request_source reads
    parts = figures.gathered(req, "ts_start", ranges, columns=read) if "origin" in req.columns else None
    if parts is None:
        return [
            {f: request_source(figures.between(req, "ts_start", lo, hi), c) for f, c in PER_REQUEST.items()}
            for lo, hi in ranges
        ]
    got: dict[int, dict[str, str | None]] = {}
    for rows in parts:  # a bounded batch of ranges at a time (figures.GATHER_BYTES)
        for (k,), part in rows.partition_by("_k", as_dict=True).items():
            got[k] = {f: request_source(part, c) for f, c in PER_REQUEST.items()}
    return [got.get(k, {}) for k in range(len(ranges))]


def fill_lengths(ctx: Context, overall: dict) -> dict:
    """The run's output lengths: the requests' own when they have them, else the histograms' (means, and
    p50 / p95 with their buckets)."""
    hist: Histograms | None = getattr(ctx, "hist", None)
    if hist is None or overall.get("output_tokens_mean") is not None:
        return overall
    m = hist.measure_all(None, None)
    out = m.get("output_tokens")
    if out is None or not out["n"]:
        return overall
    got = {
        **overall,
        "output_tokens_mean": out["mean"],
        "output_tokens_p50": out["p50"],
        "output_tokens_p50_bucket": out["p50_bucket"],
        "output_tokens_p95_bucket": out["p95_bucket"],
        "requests_in_histogram": out["n"],
        "source": SOURCE,
    }
    for f in ("max_tokens", "prompt_tokens"):
        key = LENGTHS[f]
        if got.get(key) is None and m.get(f) is not None:
            got[key] = m[f]["mean"]
    req = ctx.inputs.requests
    cap = float_or_none(req["max_tokens"].max()) if req.height and "max_tokens" in req.columns else None
    return bounded(got, out, cap)


def bounded(got: dict, out: dict, cap: float | None) -> dict:
    """The histogram's output-token quantiles held to what the folder states: no request generates more than its
    max_tokens, so a quantile interpolated above the largest max_tokens (``cap``, the requests' own) is cut to
    it, given as its bucket's range below the cap; when the exact mean (``_sum / _count``) equals the cap, every
    request generated exactly the cap, and the quantiles are that value, exact."""
    if cap is None or out.get("mean") is None:
        return got
    if abs(out["mean"] - cap) <= 1e-9 * max(cap, 1.0):
        return {
            **got,
            "output_tokens_p50": cap,
            "output_tokens_p50_bucket": None,
            "output_tokens_p95_bucket": None,
            "output_tokens_bound": (
                f"each of the {out['n']:g} requests the histogram counts generated exactly {cap:g} tokens: its "
                "exact mean equals the largest max_tokens any request asked for"
            ),
        }
    for q in ("p50", "p95"):
        lo = out.get(f"{q}_bucket_lo")
        if out.get(q) is not None and out[q] > cap and lo is not None:
            got[f"output_tokens_{q}"] = None
            got[f"output_tokens_{q}_bucket"] = (
                f"{max(lo, 0):g}–{cap:g} tokens (histogram bucket {out[f'{q}_bucket']}, no request asked for "
                f"more than {cap:g})"
            )
            got["output_tokens_bound"] = f"max_tokens at most {cap:g} (the requests' own)"
    return got


def stated(fig: dict, f: str) -> str:
    """A p95 as a sentence states it: a histogram's as its bucket ('in 5–7.5 s, metrics histogram'), not
    with the false precision of its interpolation; a per-request one in seconds."""
    if fig.get(f"{f}_source") == SOURCE and fig.get(f"{f}_p95_bucket"):
        return f"in {fig[f'{f}_p95_bucket']} ({SOURCE})"
    return f"{fig[f'{f}_p95']:.2f} s"


def over(fig: dict, f: str, limit: float) -> bool | None:
    """Whether the range's p95 of ``f`` is above ``limit``: a histogram's only when its whole bucket is (a
    bucket holding the limit cannot tell: None); a per-request one by its value; None when there is none, and
    for the gateway's TTFT (its header time: below the TTFT when streaming, above it when not)."""
    v = fig.get(f"{f}_p95")
    if v is None or (f == "ttft" and fig.get("ttft_source") == "gateway"):  # header time: below or above TTFT
        return None
    if fig.get(f"{f}_source") == SOURCE and fig.get(f"{f}_p95_bucket_lo") is not None:
        lo, hi = fig[f"{f}_p95_bucket_lo"], fig[f"{f}_p95_bucket_hi"]
        return True if lo >= limit else False if hi <= limit else None
    return v > limit


def not_measured(fig: dict) -> list[str]:
    """The SLO figures a range has a value for that is not that figure: the gateway's TTFT (its upstream header
    time, before the first token when streaming and after the last when not)."""
    return ["ttft_p95"] if fig.get("ttft_p95") is not None and fig.get("ttft_source") == "gateway" else []


def undecided(fig: dict, slo) -> list[str]:
    """The SLO figures of a range that its histogram cannot judge (the SLO lies inside the p95's bucket);
    their reason in ``fig['slo_undecided']``."""
    out, why = [], []
    for f, limit in (("ttft", slo.ttft_s), ("e2e", slo.e2e_s)):
        if f"{f}_p95" in not_measured(fig) or fig.get(f"{f}_p95") is None or over(fig, f, limit) is not None:
            continue
        out.append(f"{f}_p95")
        lo, hi = fig[f"{f}_p95_bucket_lo"], fig[f"{f}_p95_bucket_hi"]
        why.append(f"{f}_p95 between {lo:g} and {hi:g} s (its histogram bucket holds the SLO {limit:g} s)")
    fig["slo_undecided"] = "; ".join(why) or None
    return out
