"""A decode far slower than any working engine's while nothing waits and the cache is nearly empty: the engine is
slow, not full (public-2 n14: 0.4 tokens/s for 2 running; vLLM #8847: 0.8 tokens/s for 1 running on a GPU). A
stall (0 tokens/s) is ``crash.stall_finding``'s; capacity (a queue, a full cache) is ``pressure``'s."""

from __future__ import annotations

import polars as pl

from ... import clock
from ..claims import Fact
from ..context import Context
from ..records import Finding
from .record import make_finding, num, pct

SHOWN = 3  # runs named per replica; the rest are counted


def _runs(ctx: Context) -> pl.DataFrame:
    """Runs of consecutive stats samples (per replica) decoding below ``slow_decode_tps`` per running request,
    with nothing waiting and no prompt prefilled, at least ``stall_min_samples`` long."""
    srv = ctx.server
    if not srv.height:
        return pl.DataFrame()
    th = ctx.th
    per = pl.col("gen_tps") / pl.col("running")
    slow = (
        (pl.col("running") >= 1)
        & (pl.col("gen_tps") > 0)
        & (per < th.slow_decode_tps)
        & (pl.col("waiting").fill_null(0) == 0)
        & (pl.col("prompt_tps").fill_null(0) == 0)
    ).fill_null(False)
    s = (
        srv.sort(["replica", "ts"])
        .with_columns(slow.alias("_slow"), per.alias("_per"))
        .with_columns(
            (pl.col("_slow") != pl.col("_slow").shift(1))
            .fill_null(True)
            .cum_sum()
            .over("replica")
            .alias("_run")
        )
    )
    return (
        s.filter(pl.col("_slow"))
        .group_by(["replica", "_run"], maintain_order=True)
        .agg(
            pl.col("ts").min().alias("start"),
            pl.col("ts").max().alias("end"),
            pl.len().alias("samples"),
            pl.col("_per").median().alias("per_request"),
            pl.col("gen_tps").median().alias("gen_tps"),
            pl.col("running").max().alias("running"),
            pl.col("kv").max().alias("kv"),
        )
        .filter(pl.col("samples") >= th.stall_min_samples)
        .sort(["start", "replica"])
    )


def slow_decode_findings(ctx: Context) -> list[Finding]:
    runs = _runs(ctx)
    out = []
    for replica in runs["replica"].unique(maintain_order=True).to_list() if runs.height else []:
        mine = runs.filter(pl.col("replica") == replica)
        r = mine.row(0, named=True)
        # still slow on the replica's last stats line: how long it lasted is not in the logs (the verdict says so)
        last = ctx.server.filter(pl.col("replica") == replica)["ts"].max()
        to_end = mine.height == 1 and last is not None and r["end"] >= last
        more = f"; {mine.height - 1} more such run(s) after it" if mine.height > 1 else ""
        on = f"{replica}: " if replica and runs["replica"].n_unique() > 1 else ""
        dur = (r["end"] - r["start"]).total_seconds()
        out.append(
            make_finding(
                "high",
                f"{on}Decode at {num(r['per_request'], 2)} tokens/s per running request "
                f"{clock.hms_range(r['start'], r['end'])}, with nothing waiting: a slow engine, not a full one",
                f"{num(r['gen_tps'])} generation tokens/s for up to {r['running']} running request(s) on "
                f"{r['samples']} stats lines in a row ({dur:.0f} s); a reply of 200 tokens takes minutes",
                f"the server's stats lines: per running request {num(r['per_request'], 2)} tokens/s (below "
                f"{ctx.th.slow_decode_tps:g}), 0 waiting, no prompt being prefilled, KV at most {pct(r['kv'])}"
                f"{more}",
                "not capacity (nothing waits and the cache is nearly empty): each decode step itself is slow, as with "
                "a device falling back to a slow path, a kernel or attention backend problem, a CPU-bound sampler "
                "or swapping host memory",
                "Time one request alone with the same prompt and max_tokens (--max-num-seqs 1): if it decodes as "
                "slowly, profile one decode step (torch profiler or nsys); if only 2 or more running are slow, the "
                "batched path is the cause: change the attention backend and measure again",
                None,
                r["start"],
                r["end"],
                kind="stall",
                facts=[
                    Fact("per_request_tps", r["per_request"], "server_stats", unit="tokens/s"),
                    Fact("gen_tps", r["gen_tps"], "server_stats", unit="tokens/s"),
                    Fact("running_max", r["running"], "server_stats"),
                    Fact("waiting_max", 0, "server_stats"),
                    Fact("kv_max", r["kv"], "server_stats", unit="share"),
                    Fact("samples", r["samples"], "server_stats"),
                    Fact("to_the_end", to_end, "server_stats"),
                    Fact("threshold", ctx.th.slow_decode_tps, unit="tokens/s per request"),
                ],
            )
        )
    return out
