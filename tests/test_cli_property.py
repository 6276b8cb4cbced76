"""A property over the CLI's options and kinds of input (issue #27): whatever the command line, a run ends with
a documented exit code, says a failure in one ``logscope: error:`` line, and never shows a traceback (that
is --debug's). Each run is ``python -m logscope`` in a subprocess, on real inputs (samples/spike)."""

from __future__ import annotations

import itertools
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clirun import SAMPLE, cli, error_lines

pytestmark = pytest.mark.slow  # the CLI in a child process, many generated runs

FAILURES = {2, 3, 4, 5}  # bad options, input, nothing known, output (README); 70 would be a bug
_count = itertools.count()

text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)


def maybe(good: list[str], bad: list[str]) -> st.SearchStrategy:
    """Mostly absent or good (runs that reach the pipeline), sometimes bad or random text."""
    return st.one_of(st.none(), st.none(), st.none(), st.sampled_from(good), st.sampled_from(bad), text)


windows = maybe(["10s", "1m", "500ms"], ["abc", "-5s", "0s", "1e9s", "1us"])
zones = maybe(["UTC", "Europe/Paris"], ["Mars/Base", "Invalid/Zone", "Factory"])
times = maybe(["2026-11-29T08:26:00Z", "2026-11-29 08:26"], ["yesterday", "2031-01-01T00:00:00Z"])
memories = maybe(["auto", "none", "4G"], ["abc", "-1G", "0"])
classes = st.lists(st.sampled_from(["spike", "crash", "sustained", "meltdown"]), max_size=2)
FLAGS = {
    "analyze": ["-q", "--json", "-v", "--reparse", "--force"],
    "ingest": ["-q", "--force"],
    "detect": ["--scores"],
    "report": ["-q", "--whole"],
}
flags = st.sets(
    st.sampled_from(["-q", "--json", "-v", "--reparse", "--force", "--whole", "--scores"]), max_size=3
)
bogus = st.sampled_from([None] * 9 + ["--bogus"])


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    base = tmp_path_factory.mktemp("kinds")
    (base / "empty").mkdir()
    (base / "unknown").mkdir()
    shutil.copy(SAMPLE / "prometheus" / "tsdb-dump.txt.gz", base / "unknown" / "dump.bin")  # bytes, no text
    (base / "pictures").mkdir()
    shutil.copy(SAMPLE / "prometheus" / "tsdb-dump.txt.gz", base / "pictures" / "shot.png")
    (base / "one").mkdir()
    shutil.copy(SAMPLE / "nginx-error.log", base / "one")
    (base / "a-file").write_text("not a folder\n")
    (base / "foreign").mkdir()
    (base / "foreign" / "summary.md").write_text("mine\n")
    analyzed = base / "analyzed"
    r = cli("analyze", SAMPLE, "-o", analyzed, "-q")
    assert r.returncode == 0, r.stderr
    return {
        "missing": base / "nope",
        "empty": base / "empty",
        "unknown": base / "unknown",
        "pictures": base / "pictures",
        "log": base / "one" / "nginx-error.log",
        "one": base / "one",
        "sample": SAMPLE,
        "analyzed": analyzed,
        "out-file": base / "a-file",
        "foreign": base / "foreign",
        "base": base,
    }


def _argv(
    inputs, command, kind, out_kind, window, tz, since, until, memory, fail_on, flag_set, bad
) -> list[str]:
    argv = [command, str(inputs[kind])]
    if command in ("analyze", "ingest"):
        out = {
            "new": inputs["base"] / f"out-{next(_count)}",
            "file": inputs["out-file"],
            "foreign": inputs["foreign"],
            "proc": "/proc/logscope",
            "inside": inputs[kind] / "out",
            "default": None,
        }[out_kind]
        if out is not None:
            argv += ["-o", str(out)]
        if tz is not None:
            argv.append(f"--tz={tz}")
    if command in ("analyze", "report"):
        for name, v in (("--since", since), ("--until", until), ("--max-memory", memory)):
            if v is not None:
                argv.append(f"{name}={v}")
    if command == "analyze":
        if window is not None:
            argv.append(f"--window={window}")
        argv += [f"--fail-on={c}" for c in fail_on]
    return argv + sorted(f for f in flag_set if f in FLAGS[command]) + ([bad] if bad else [])


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    command=st.sampled_from(["analyze", "analyze", "ingest", "detect", "report"]),
    kind=st.sampled_from(["missing", "empty", "unknown", "pictures", "log", "one", "sample", "analyzed"]),
    out_kind=st.sampled_from(["new", "new", "new", "file", "foreign", "proc", "inside", "default"]),
    window=windows,
    tz=zones,
    since=times,
    until=times,
    memory=memories,
    fail_on=classes,
    flag_set=flags,
    bad=bogus,
)
def test_every_run_ends_in_a_documented_way(
    inputs,
    tmp_path_factory,
    command,
    kind,
    out_kind,
    window,
    tz,
    since,
    until,
    memory,
    fail_on,
    flag_set,
    bad,
):
    argv = _argv(inputs, command, kind, out_kind, window, tz, since, until, memory, fail_on, flag_set, bad)
    r = cli(*argv, cwd=tmp_path_factory.getbasetemp())
    assert "Traceback" not in r.stderr, (argv, r.stderr[-3000:])
    assert r.returncode in {0, 1} | FAILURES, (argv, r.returncode, r.stderr[-3000:])
    errors = error_lines(r.stderr)
    if r.returncode in FAILURES:
        assert len(errors) == 1, (argv, r.stderr[-3000:])
    else:
        assert errors == [], (argv, r.stderr[-3000:])
    if r.returncode == 1:
        assert "--fail-on" in argv[-1] or any(a.startswith("--fail-on") for a in argv)
        assert "episode(s) matched" in r.stderr, (argv, r.stderr)
