"""Registry of the log formats logscope knows: one module per format.

Adding a format = one module in this package + its name in ``_MODULES`` + a fixture and a
test. ``tests/test_registry.py`` fails if a module here is not registered, or if a format's
own samples score higher on another format.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .base import ChunkResult, ParseContext, safe_detect

# Order matters only for ties: more specific formats first.
_MODULES = (
    "vllm_server",
    "prometheus_tsdb_dump",
    "prometheus_query_range",
    "prometheus_text",
    "nginx_access",
    "nginx_error",
    "nginx_conf",
    "envoy_access",
    "haproxy",
    "traefik",
    "litellm",
    "openai_client",
    "client_jsonl",
    "vllm_bench",
    "aiperf",
    "guidellm",
)

MIN_CONFIDENCE = 0.3


FORMATS: list[ModuleType] = [importlib.import_module(f"{__name__}.{name}") for name in _MODULES]
BY_NAME: dict[str, ModuleType] = {m.NAME: m for m in FORMATS}


def scores(head: list[str]) -> dict[str, float]:
    return {m.NAME: safe_detect(m, head) for m in FORMATS}


def detect(head: list[str]) -> tuple[ModuleType | None, float, dict[str, float]]:
    """Best format for these head lines, its score, and every format's score."""
    sc = scores(head)
    best = max(FORMATS, key=lambda m: sc[m.NAME], default=None)
    if best is None or sc[best.NAME] < MIN_CONFIDENCE:
        return None, max(sc.values(), default=0.0), sc
    return best, sc[best.NAME], sc


__all__ = ["FORMATS", "BY_NAME", "detect", "scores", "ParseContext", "ChunkResult", "MIN_CONFIDENCE"]
