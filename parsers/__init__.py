"""Registry of the log formats logscope knows: one module per format.

Adding a format = one module in this package + its name in ``_MODULES`` + a fixture and a
test (docs/formats.md). ``tests/test_registry.py`` fails if a module here is not registered, does
not fulfil ``base.FormatModule``, or if a format's own samples score higher on another format.
"""

from __future__ import annotations

import importlib
from concurrent.futures import Executor
from types import ModuleType

import polars as pl

from .base import ChunkResult, ParseContext, head_frame, safe_detect

# Order matters only for ties: more specific formats first.
_MODULES = (
    "vllm_server",
    "sglang_server",
    "tgi_router",
    "prometheus_tsdb_dump",
    "prometheus_query_range",
    "prometheus_text",
    "nginx_access",
    "nginx_error",
    "nginx_conf",
    "envoy_access",
    "haproxy",
    "traefik",
    "aws_alb",
    "access_generic",
    "envoy_config",
    "llama_swap",
    "litellm",
    "vllm_router",
    "openai_client",
    "client_jsonl",
    "vllm_bench",
    "aiperf",
    "guidellm",
    "otlp_json",
    "jaeger_json",
    "zipkin_json",
    "otel_console",
    "otel_debug",
    "kernel_log",  # the platform around the engine (issue #40)
    "k8s_kubectl",
    "k8s_events_doc",  # kubectl get events -o json / -o yaml
    "nvidia_smi",
    "aiperf_console",
    "lm_eval",
    "request_table",
)

MIN_CONFIDENCE = 0.3


FORMATS: list[ModuleType] = [importlib.import_module(f"{__name__}.{name}") for name in _MODULES]
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in FORMATS}


def scores(head: list[str]) -> dict[str, float]:
    return {m.NAME: safe_detect(m, head) for m in FORMATS}


def detect(head: list[str]) -> tuple[ModuleType | None, float, dict[str, float]]:
    """Best format for these head lines, its score, and every format's score."""
    return _best(scores(head))


def detect_many(
    heads: list[list[str]], pool: Executor | None = None, threads: int = 1
) -> list[tuple[ModuleType | None, float, dict[str, float]]]:
    """``detect`` of many files' heads: every format scores all heads at once (``detect_heads`` over one frame of
    their lines; 2,000 small files: 8.5 ms a file one head at a time, below 0.1 ms so). With a pool, the formats
    are shared out among ``threads`` of its threads. A format whose batch raises is asked head by head (an
    exception costs only its head, as in ``detect``)."""
    frame = head_frame(heads)
    n = len(heads)

    def one(m: ModuleType) -> list[float]:
        if not hasattr(m, "detect_heads"):  # a format that scores one head at a time
            return [safe_detect(m, head) for head in heads]
        try:
            got = (
                m.detect_heads(frame, n)
                .cast(pl.Float64)
                .fill_nan(0.0)
                .fill_null(0.0)
                .clip(0.0, 1.0)
                .to_list()
            )
        except Exception:  # noqa: BLE001 - detection must never take the run down
            return [safe_detect(m, head) for head in heads]
        return got if len(got) == n else [safe_detect(m, head) for head in heads]

    def run(mods: list[ModuleType]) -> dict[str, list[float]]:
        return {m.NAME: one(m) for m in mods}

    k = max(1, threads) if pool is not None and n > 1 else 1
    groups = [list(FORMATS[i::k]) for i in range(k)]
    by_format: dict[str, list[float]] = {}
    for part in pool.map(run, groups) if pool is not None and k > 1 else map(run, groups):
        by_format.update(part)
    return [_best({m.NAME: by_format[m.NAME][i] for m in FORMATS}) for i in range(n)]


def _best(sc: dict[str, float]) -> tuple[ModuleType | None, float, dict[str, float]]:
    best = max(FORMATS, key=lambda m: sc[m.NAME], default=None)
    if best is None or sc[best.NAME] < MIN_CONFIDENCE:
        return None, max(sc.values(), default=0.0), sc
    return best, sc[best.NAME], sc


__all__ = [
    "FORMATS",
    "BY_NAME",
    "detect",
    "detect_many",
    "scores",
    "ParseContext",
    "ChunkResult",
    "MIN_CONFIDENCE",
]
