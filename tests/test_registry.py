"""Every format module is registered, fulfils the contract, and its own samples are not claimed
by another format (lnav's cross-check, pygments' never-raising detection)."""

from __future__ import annotations

import inspect
import pkgutil

import pytest

import logscope.parsers as parsers
from logscope.parsers.base import (
    KINDS,
    MODES,
    DocumentFormat,
    FormatModule,
    LinesFormat,
    safe_detect,
)


def test_every_module_is_registered():
    mods = {
        m.name
        for m in pkgutil.iter_modules(parsers.__path__)
        if not m.name.startswith("_") and m.name != "base"
    }
    assert mods == {m.__name__.rsplit(".", 1)[1] for m in parsers.FORMATS}


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


@pytest.mark.parametrize("mod", parsers.FORMATS, ids=lambda m: m.NAME)
def test_contract(mod):
    """The module is a ``FormatModule`` and, by its MODE, a ``LinesFormat`` or a ``DocumentFormat``: every
    attribute there, KIND and MODE among the Literals' values, each function taking the Protocol's parameters."""
    assert isinstance(mod, FormatModule)
    assert mod.KIND in KINDS and mod.MODE in MODES
    assert isinstance(mod.NAME, str) and isinstance(mod.DESCRIPTION, str) and mod.DESCRIPTION
    assert mod.SAMPLES and all(isinstance(s, str) for s in mod.SAMPLES), (
        "each format carries real sample lines"
    )
    shape = LinesFormat if mod.MODE == "lines" else DocumentFormat
    assert isinstance(mod, shape)
    for fn in ("detect", "parse_chunk" if mod.MODE == "lines" else "parse_document"):
        assert len(_params(getattr(mod, fn))) == len(_params(getattr(shape, fn))), (mod.NAME, fn)


def test_the_contract_check_sees_a_module_that_breaks_it():
    """A module without parse_chunk, or with a KIND no stage reads, fails the checks above."""
    from types import SimpleNamespace

    ok = parsers.BY_NAME["nginx_access"]
    broken = SimpleNamespace(
        **{k: getattr(ok, k) for k in ("NAME", "KIND", "DESCRIPTION", "MODE", "SAMPLES")}
    )
    assert not isinstance(broken, FormatModule)  # no detect
    broken.detect = ok.detect
    assert isinstance(broken, FormatModule) and not isinstance(broken, LinesFormat)
    assert "gpu" not in KINDS and set(KINDS) >= {m.KIND for m in parsers.FORMATS}


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


@pytest.mark.slow  # detection of every real file's head, each one alone and all at once
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
