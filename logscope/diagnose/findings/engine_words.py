"""A finding's advice in the words of the engine it is about. The findings name vLLM's flags, tools and metrics;
on an SGLang server those do not exist (public sglang #26248 and #14972 were told to "cap --max-num-seqs" and run
"vllm bench serve"), so the next test of a finding about an SGLang replica names SGLang's own: the same knob under
its name (sglang.srt.server_args), its benchmark (python -m sglang.bench_serving) and its metrics
(docs/references/production_metrics.md)."""

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
_SGLANG_RE = re.compile("|".join(re.escape(k) for k in sorted(SGLANG, key=len, reverse=True)))
FIELDS = ("title", "symptom", "cause", "next_test")  # evidence quotes the logs: never reworded


def engines(ctx: Context) -> dict[str, str]:
    """{replica: engine kind} from the stats lines ('' for a folder's single unnamed server)."""
    st = ctx.inputs.stats
    if "engine_kind" not in st.columns or not st.height:
        return {}
    rows = st.select(pl.col("replica").fill_null(""), "engine_kind").unique().drop_nulls("engine_kind")
    return dict(rows.iter_rows())


def sglang_words(text: str) -> str:
    return _SGLANG_RE.sub(lambda m: SGLANG[m.group(0)], text)


def in_engine_words(ctx: Context, out: list, eps: list[Episode]) -> None:
    """Reword the findings about SGLang servers: those of an episode on an SGLang replica, and every run-level
    finding when each server in the folder is SGLang's."""
    kinds = engines(ctx)
    if "sglang" not in kinds.values():
        return
    replica_of = {e["episode_id"]: e.get("replica") or "" for e in eps}
    every = set(kinds.values()) == {"sglang"}
    for f in out:
        rep = replica_of.get(f.get("episode_id"))
        if (kinds[rep] if rep in kinds else "sglang" if every else None) == "sglang":
            for k in FIELDS:
                if isinstance(f.get(k), str):
                    f[k] = sglang_words(f[k])
