"""A finding's advice in the words of the engine it is about. The findings name vLLM's flags, tools and metrics;
on an SGLang server those do not exist (public sglang #26248 and #14972 were told to "cap --max-num-seqs" and run
"vllm bench serve"), so the next test of a finding about an SGLang replica names SGLang's own: the same knob under
its name (sglang.srt.server_args), its benchmark (python -m sglang.bench_serving) and its metrics
(docs/references/production_metrics.md). A TGI server's likewise: its launcher's flags (launcher/src/main.rs:
--max-batch-size caps a batch's requests, --max-total-tokens a request's tokens, --max-batch-prefill-tokens a prefill
batch's) and its router's metrics."""

from __future__ import annotations

import re

import polars as pl

from ..context import Context
from ..records import Episode

# vLLM's word -> SGLang's, for the same knob or figure
SGLANG = {
    "vllm bench serve": "python -m sglang.bench_serving",
    "--max-num-seqs": "--max-running-requests",
    "--max-model-len": "--context-length",
    "--max-num-batched-tokens": "--chunked-prefill-size",  # the prefill tokens one step takes (s01: 8192 a batch)
    "--gpu-memory-utilization": "--mem-fraction-static",
    "--enable-log-requests": "--log-requests",
    "vllm:num_preemptions_total": "sglang:num_retracted_requests_total",
    "vllm:num_requests_waiting": "sglang:num_queue_reqs",
}
# vLLM's word -> TGI's (its launcher's flags, its router's metrics; a word TGI has none for stays vLLM's)
TGI = {
    "--max-num-seqs": "--max-batch-size",
    "--max-model-len": "--max-total-tokens",
    "--max-num-batched-tokens": "--max-batch-prefill-tokens",
    "--gpu-memory-utilization": "--cuda-memory-fraction",
    "stdout of vllm serve": "output of text-generation-launcher",
    "the vLLM server log": "TGI's log",
    "vllm:num_requests_waiting": "tgi_queue_size",
}
WORDS = {"sglang": SGLANG, "tgi": TGI}
_RE = {
    k: re.compile("|".join(re.escape(w) for w in sorted(m, key=len, reverse=True))) for k, m in WORDS.items()
}
FIELDS = ("title", "symptom", "cause", "next_test")  # evidence quotes the logs: never reworded


def engines(ctx: Context) -> dict[str, str]:
    """{replica: engine kind} from the stats lines, else from the server's events (TGI writes no stats line) ('' for
    a folder's single unnamed server)."""
    out: dict[str, str] = {}
    for frame in (ctx.inputs.events, ctx.inputs.stats):  # the stats' word last: it wins
        if "engine_kind" not in frame.columns or not frame.height:
            continue
        rows = frame.select(pl.col("replica").fill_null(""), "engine_kind").unique().drop_nulls("engine_kind")
        out.update(dict(rows.sort(pl.all()).iter_rows()))
    return out


def engine_words(text: str, kind: str) -> str:
    words = WORDS[kind]
    return _RE[kind].sub(lambda m: words[m.group(0)], text)


def in_engine_words(ctx: Context, out: list, eps: list[Episode]) -> None:
    """Reword the findings about SGLang and TGI servers: those of an episode on such a replica, and every run-level
    finding when each server in the folder is that engine's."""
    kinds = engines(ctx)
    if not set(WORDS) & set(kinds.values()):
        return
    replica_of = {e["episode_id"]: e.get("replica") or "" for e in eps}
    every = next(iter(set(kinds.values()))) if len(set(kinds.values())) == 1 else None
    for f in out:
        rep = replica_of.get(f.get("episode_id"))
        kind = kinds[rep] if rep in kinds else every
        if kind in WORDS:
            for k in FIELDS:
                if isinstance(f.get(k), str):
                    f[k] = engine_words(f[k], kind)
