"""openai-python's and httpx's lines are read by the compiled scanner (parsers/_openai_lines.toml, issue #42): the same
event rows, recognised lines and parser state as the polars regexes they replaced (kept as the oracle in
tests/openai_lines_before.py), on every real openai-python log of the fixtures and on lines mutated from them."""

from __future__ import annotations

from pathlib import Path

import openai_lines_before as before
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_helpers import CTX, distinct, files, logs, same_events
from openai_helpers import frame as _frame

from logscope import _scan
from logscope.parsers import _kinds, _openai_lines, openai_client
from logscope.parsers.base import ParseContext


def _equal(lines: list[str], chunk: int = 0, ctx: ParseContext = CTX) -> pl.DataFrame:
    """The event rows of these lines, read in chunks of ``chunk`` lines (0: one), as the regexes read them."""
    return same_events(before._events, lines, chunk, ctx)


def test_lines_read_as_the_regexes_read_them():
    # every file read, each under a name of its own; the lab's clients among them
    assert len(logs()) == len(files()) and any(Path(n).name.startswith("client-") for n in logs())
    n: dict[str, int] = {}
    for lines in logs().values():
        ev = _equal(lines)
        for kind, count in ev.group_by("kind").len().iter_rows():
            n[kind] = n.get(kind, 0) + count
    # every kind of the SDK's messages and the lab client's lines is read (this round's fixtures: 19,789 build, 19,804
    # send, 17,628 response, 17,644 httpx, 3,114 retrying, 1,682 timeout, 4,830 status errors, 2,991 re-raised, 428
    # raised timeouts, 16,200 done, 47 phases, 15 request options, 17 traceback exceptions, 4 + 3 connection errors)
    assert n["build"] >= 19_000 and n["send"] >= 19_000 and n["response"] >= 17_000 and n["httpx"] >= 17_000
    assert n["retrying"] >= 3_000 and n["timeout"] >= 1_600 and n["done"] >= 16_000 and n["phase"] >= 40
    assert (
        n["status_error"] >= 4_800
        and n["reraise"] >= 2_900
        and n["raise_timeout"] >= 400
        and n["raise_conn"] >= 3
    )
    assert n["options"] >= 15 and n["exc"] >= 15 and n["conn_error"] >= 4 and n["final_conn"] >= 3


def test_chunks_carry_their_state_as_before():
    """Tracebacks cut between chunks (the logs of an SDK that wrote them, in chunks of 7 lines) and sequence numbers
    carried from chunk to chunk (every log's first 3,000 lines in chunks of 500)."""
    tracebacks = [lines for lines in logs().values() if any(x.startswith("Traceback") for x in lines)]
    assert tracebacks  # openai-v1-threads.log: the SDK 1.x wrote its exceptions with exc_info
    for lines in tracebacks:
        _equal(lines, chunk=7)
    for lines in logs().values():
        _equal(lines[:3_000], chunk=500)


@pytest.mark.parametrize("tz", ["UTC", "Europe/Paris"])
def test_times_in_a_zone_as_before(tz):
    ctx = ParseContext(source="x", replica="r", year=2026, tz=tz)
    for lines in logs().values():
        _equal(lines[:2_000], ctx=ctx)


def test_samples_read_as_before():
    ev = _equal(list(openai_client.SAMPLES))
    assert ev["kind"].to_list() == ["build", "timeout", "retrying", "httpx", "status_error", "done"]
    assert ev["thread"].to_list()[:2] == ["Thread-1 (one_request)", "Thread-213 (one_request)"]
    assert ev.row(2, named=True)["max_retries"] == 3 and ev.row(3, named=True)["status"] == 200


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_lines_read_as_the_regexes_did(data):
    real = distinct()
    lines = []
    for _ in range(8):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 6))
        # ASCII, Unicode's white space and non-ASCII characters that are no digit nor word character (the scanner's
        # \d and \w are ASCII's: _openai_lines.toml)
        ins = data.draw(st.text(" ,.:'\"[]()=_-/0123456789TZ+xs\t\u00a0\u2014\u2717", max_size=6))
        lines.append(line[:at] + ins + line[at + cut :])
    try:
        want = before._events(_frame(lines), CTX, {})
    except pl.exceptions.InvalidOperationError:
        # the regexes' strict casts of a delay, latency or phase value such as '0.5.1' raised: the scanner's is null
        ev, _ = _openai_lines._events(_frame(lines), CTX, {})
        assert ev.height >= 0
        return
    got = _openai_lines._events(_frame(lines), CTX, {})
    assert got[0].equals(want[0]) and got[1].equals(want[1])


def test_a_lead_names_its_kind_in_the_core():
    """The scanner gives each message's kind by the lead its alternative took (``code``), a lead of no kind none, and
    refuses a code on a field that is no literal."""
    lines = [line for line in openai_client.SAMPLES] + [
        "2026-11-29T08:30:27.389 DEBUG openai._base_client [w1] Encountered something else",
        "2026-11-29T08:30:27.389 DEBUG openai._base_client [w1] Not retrying",
    ]
    got = _kinds.scan(_openai_lines.__file__, _frame(lines))
    assert got["lead"].to_list() == [
        "build",
        "timeout",
        "retrying",
        "httpx",
        "status_error",
        "done",
        "encountered",
        None,
    ]
    assert got["kind"].to_list() == [0] * 8  # each a message
    # the message's alternation is spliced into both ways of the prefix ([define] and `use`), none left unspliced
    spec = repr(_kinds.spec(_openai_lines.__file__))
    assert "'use'" not in spec and spec.count("'Building HTTP request: '") == 2
    with pytest.raises(ValueError, match="a code names a literal"):
        _scan.Plan([{"name": "k", "steps": [{"field": "f", "run": "a-z", "code": "x"}]}])
