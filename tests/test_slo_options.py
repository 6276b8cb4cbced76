"""An SLO no step could be judged by is a bad option (issue #44, item 6): ``--slo-ttft nan`` crashed in the JSON
encoder (exit 70) and ``--slo-success 7`` was taken. Each command that takes ``--slo-*`` (analyze, report) and
the library refuse it with exit 2 / a LogscopeError naming the option and what it takes, before any file is
read; the real spike sample is the input."""

from __future__ import annotations

import pytest

from clirun import SAMPLE, cli, error_lines
from logscope import api
from logscope.errors import LogscopeError

BAD = [
    ("--slo-ttft", "nan"),
    ("--slo-ttft", "inf"),
    ("--slo-ttft", "-1"),
    ("--slo-ttft", "0"),
    ("--slo-e2e", "nan"),
    ("--slo-e2e", "-inf"),
    ("--slo-e2e", "-5"),
    ("--slo-success", "7"),
    ("--slo-success", "-1"),
    ("--slo-success", "nan"),
]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    out = tmp_path_factory.mktemp("slo") / "out"
    r = cli("analyze", SAMPLE, "-o", out, "-q")
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize(("opt", "value"), BAD)
def test_analyze_refuses_an_impossible_slo(tmp_path, opt, value):
    r = cli("analyze", SAMPLE, "-o", tmp_path / "out", "-q", f"{opt}={value}", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    (line,) = error_lines(r.stderr)
    assert line.startswith(f"logscope: error: {opt}: ") and "not a possible SLO" in line
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()  # refused before any file is read


@pytest.mark.parametrize(("opt", "value"), BAD[::3])
def test_report_refuses_an_impossible_slo(analysed, opt, value):
    before = (analysed / "summary.json").read_bytes()
    r = cli("report", analysed, f"{opt}={value}", timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert error_lines(r.stderr)[0].startswith(f"logscope: error: {opt}: ")
    assert (analysed / "summary.json").read_bytes() == before


def test_the_edges_are_taken(analysed):
    """A share of 0 or 1 and a small positive latency are SLOs (strict ones): diagnosed again against them."""
    r = cli("report", analysed, "--slo-success=1", "--slo-ttft=0.001", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    import json

    slo = json.loads((analysed / "summary.json").read_text())["slo"]
    assert slo["success"] == 1 and slo["ttft_s"] == 0.001


@pytest.mark.parametrize("field", [{"slo_ttft_s": float("nan")}, {"slo_e2e_s": -5.0}, {"slo_success": 7.0}])
def test_the_library_refuses_it_too(analysed, field):
    with pytest.raises(LogscopeError) as e:
        api.diagnose(analysed, api.AnalyzeOptions(**field))
    assert e.value.code == 2 and "not a possible SLO" in e.value.what
    with pytest.raises(LogscopeError):
        api.compare(SAMPLE, SAMPLE, analysed.parent / "cmp", api.AnalyzeOptions(compare_slo={"success": 2}))
