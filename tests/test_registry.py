"""Every format module is registered, fulfils the contract, and its own samples are not claimed
by another format (lnav's cross-check, pygments' never-raising detection)."""

from __future__ import annotations

import pkgutil

import pytest

import logscope.parsers as parsers
from logscope.parsers.base import safe_detect


def test_every_module_is_registered():
    mods = {
        m.name
        for m in pkgutil.iter_modules(parsers.__path__)
        if not m.name.startswith("_") and m.name != "base"
    }
    assert mods == {m.__name__.rsplit(".", 1)[1] for m in parsers.FORMATS}


@pytest.mark.parametrize("mod", parsers.FORMATS, ids=lambda m: m.NAME)
def test_contract(mod):
    assert mod.KIND in {"server", "gateway", "client", "metrics", "config", "traces", "platform"}
    assert mod.MODE in {"lines", "document"}
    assert isinstance(mod.DESCRIPTION, str) and mod.DESCRIPTION
    assert hasattr(mod, "parse_chunk" if mod.MODE == "lines" else "parse_document")
    assert mod.SAMPLES, "each format carries real sample lines"


@pytest.mark.parametrize("mod", parsers.FORMATS, ids=lambda m: m.NAME)
def test_samples_are_claimed_by_their_own_format_only(mod):
    own = safe_detect(mod, list(mod.SAMPLES))
    assert own >= 0.5, f"{mod.NAME} scores its own samples {own:.2f}"
    for other in parsers.FORMATS:
        if other is not mod:
            assert safe_detect(other, list(mod.SAMPLES)) < own, f"{other.NAME} claims {mod.NAME}'s samples"


@pytest.mark.parametrize("mod", parsers.FORMATS, ids=lambda m: m.NAME)
@pytest.mark.parametrize("head", [[], [""], ["\x00\x01\x02"], ["{"], ["x" * 100_000], ["\ufffd" * 10]])
def test_detect_never_raises(mod, head):
    assert 0.0 <= safe_detect(mod, head) <= 1.0
    assert mod.detect(head) is not None


def test_detect_many_is_detect_file_by_file(tmp_path):
    """Format by format over many heads (ingest's order, on a pool or not) gives each file's own detection:
    every format's samples, the lab recordings and tests/data, and heads that no format claims."""
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    from conftest import DATA, LAB, ROOT
    from logscope.ingest import sources

    heads = [list(m.SAMPLES) for m in parsers.FORMATS]
    for root in (ROOT / "samples", DATA, LAB):
        if root.exists():
            for f in sources.discover(Path(root)):
                lines, binary = sources.head(f)
                if not binary:
                    heads.append(lines)
    heads += [[], ["nothing a parser knows"], ["\x00\x01"]]
    assert len(heads) > 60
    one_by_one = [parsers.detect(h) for h in heads]
    assert parsers.detect_many(heads) == one_by_one
    with ThreadPoolExecutor(3) as pool:
        assert parsers.detect_many(heads, pool, 3) == one_by_one
    assert {m.NAME for m, _, _ in one_by_one if m is not None} >= {
        "vllm_server",
        "nginx_access",
        "client_jsonl",
        "openai_client",
        "prometheus_tsdb_dump",
    }
