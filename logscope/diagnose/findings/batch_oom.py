"""An out-of-memory error a server survives: TGI's batch OOM (kind ``oom_batch``, parsers/tgi_router.py).

TGI's shard catches an exception of a prefill or decode call and answers the router with an error; the router fails
that batch's requests, clears the cache and goes on (text-generation-inference ``router/src/infer`` and
``server/text_generation_server/interceptor.py``). Such an OOM is no death: a death of that server is its own line
('Shard N terminated', 'Webserver Crashed', the launcher's 'Error: ShardFailed'), read as ``engine_dead``. What the
finding claims rests on what the logs show after it: answers served later, a death, or neither (not in the logs).
"""

from __future__ import annotations

import polars as pl

from ...scalars import time_or_none
from ..claims import facts
from ..context import Context
from ..records import Finding
from .record import clock_time, make_finding

KIND = "oom_batch"
ROUTER = "text_generation_client"  # the router's gRPC client, which logs a batch's error


TITLE_AFTER = {
    "served on": "its requests failed, the server served on",
    "died later": "its requests failed; the server died later",
    "not observed": "its requests failed; no death line follows, no later answer either",
    "unknown": "its requests failed; what followed is unknown",
}


def batch_oom_findings(ctx: Context) -> list[Finding]:
    ev = ctx.inputs.events
    oom = ev.filter(pl.col("kind") == KIND).sort("ts", nulls_last=True, maintain_order=True)
    if oom.height == 0:
        return []
    # one batch's error is told twice: the shard's traceback and the router's 'Server error' line (its client's
    # target); the router's lines count the batches where there are any
    router = oom.filter(pl.col("process").fill_null("") == ROUTER)
    oom = router if router.height else oom
    first, last = time_or_none(oom["ts"].min()), time_or_none(oom["ts"].max())
    deaths = [d for d in ctx.life.deaths if last is not None and d.ts >= last]
    sreq = ctx.inputs.server_requests
    served_after = 0
    if last is not None and sreq.height and "finished_ts" in sreq.columns:
        served_after = sreq.filter(pl.col("finished_ts") > last).height
    if deaths:
        after = f"the server died later, at {clock_time(deaths[0].ts)} (its own death line)"
        went_on = "died later"
    elif served_after:
        after = f"the server went on: {served_after} request(s) answered after it (Success lines)"
        went_on = "served on"
    elif last is None:
        after = "its time is not in the record, so what followed is unknown"
        went_on = "unknown"
    else:
        after = "whether the server served again is not in the logs: no answered request after it, and no death line"
        went_on = "not observed"
    said = (oom["message"][0] or "")[:240]
    when = clock_time(first) if first is not None else "an unknown time"
    span = f"{oom.height} batch errors, {when} to {clock_time(last)}" if oom.height > 1 else when
    return [
        make_finding(
            "high",
            f"Out of device memory in {'a batch' if oom.height == 1 else 'batches'} ({span}): "
            + TITLE_AFTER[went_on],
            "the engine ran out of device memory inside a prefill or decode batch; the requests of that batch "
            "failed",
            f"{oom.height} out-of-memory error(s) in TGI's batch calls, first: {said}; {after}",
            "the batch's tokens (prefill tokens of the requests batched together, or the growing decode batch) "
            "needed more device memory than the KV cache and activations left free",
            "Lower --max-batch-prefill-tokens (the largest prefill batch) and replay the same traffic; the batch "
            "errors should stop while the requests per second hold",
            None,
            first,
            last,
            kind="errors",
            facts=facts(
                "engine_log",
                batch_errors=oom.height,
                first=first,
                last=last,
                after=went_on,
                served_after=served_after,
            ),
        )
    ]
