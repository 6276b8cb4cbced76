"""vLLM's request lifecycle lines (received, added, finished, aborted, failed, preempted) are read by the compiled
scanner (parsers/_vllm_requests.toml, issue #42): the same rows as the polars regexes they replaced (kept as the
oracle in tests/vllm_requests_before.py), on every real vLLM log of the fixtures and on lines mutated from them."""

from __future__ import annotations

import polars as pl
import vllm_requests_before as before
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import real_vllm_lines, vllm_rows
from logscope.parsers import _vllm_requests, vllm_server
from logscope.parsers.base import ParseContext


def _rows(lines: list[str]) -> pl.DataFrame:
    """The parser's rows of these lines (header, time, kinds), as _requests gets them."""
    return vllm_rows(lines)


def _equal(lines: list[str], prompts: bool = False) -> pl.DataFrame:
    df = _rows(lines)
    ctx = ParseContext(source="x", replica="r", year=2026, include_prompts=prompts)
    want, got = before._requests(df, ctx), _vllm_requests._requests(df, ctx)
    # --enable-log-outputs' 'Generated response' is read beside the scanner, by no regex it replaced
    outputs = df.filter(pl.col("msg").str.starts_with("Generated response "))["line_no"]
    got = got.filter(~pl.col("line_no").is_in(outputs.implode()))
    if want.height == 0:
        assert got.height == 0
        return got
    assert got.select(want.columns).equals(want)
    return got


def _real_lines() -> list[str]:
    return list(real_vllm_lines())


def test_request_kinds_read_real_lines_as_the_regexes_did():
    got = _equal(_real_lines())
    n = dict(got.group_by("event").len().iter_rows())
    # every kind is there (13,734 received, 13,699 added, 3,096 aborted, 36 failed, 7 preempted, 2 finished), with a
    # received request's settings (13,697 max_tokens) and V0's token ids (268 prompt lengths)
    assert n["received"] >= 13_000 and n["added"] >= 13_000 and n["aborted"] >= 3_000
    assert n["failed"] >= 30 and n["preempted"] >= 5 and n["finished"] >= 2
    rec = got.filter(pl.col("event") == "received")
    assert rec["max_tokens"].is_not_null().sum() >= 13_000 and rec["prompt_tokens"].is_not_null().sum() >= 250
    assert rec["temperature"].is_not_null().sum() >= 13_000 and rec["ignore_eos"].sum() >= 13_000
    # an 'Aborted request(s)' line of several ids gives a row per id
    assert got.filter(pl.col("event") == "aborted").group_by("line_no").len()["len"].max() > 1


def test_received_prompts_as_the_regexes_read_them():
    got = _equal([x for x in _real_lines() if "Received request" in x], prompts=True)
    assert got["prompt"].is_not_null().sum() >= 250  # V0's lines carry the prompt's repr (269)


def test_request_kinds_read_the_samples_as_the_regexes_did():
    got = _equal(list(vllm_server.SAMPLES))
    assert got.select("event", "request_id").rows() == [
        ("added", "cmpl-04055ac11e0a42e06d65aaf34e7f61ed-0-8cc11aeb"),
        ("preempted", "cmpl-3f332f98cfc3a1617a32cc73a50891dc-0"),
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_request_kinds_read_mutated_lines_as_the_regexes_did(data):
    real = [x for x in _real_lines() if "request" in x or "Sequence group" in x][:20_000]
    lines = []
    for _ in range(8):
        line = data.draw(st.sampled_from(real))
        at = data.draw(st.integers(0, len(line)))
        cut = data.draw(st.integers(0, 6))
        ins = data.draw(st.text(" ,.:'\"\\[]()=_-0123456789TrueFalsepromptNone\t\u00a0é", max_size=6))
        lines.append(line[:at] + ins + line[at + cut :])
    _equal(lines, prompts=data.draw(st.booleans()))


def test_a_comma_before_a_received_id_leaves_one_request():
    """Found by the mutation test above (a random seed, scanner5's run): ', ' spliced before a real Received line's
    id. The old code split every kind's id on ', ' and gave two rows, one with an empty id; only an abort list names
    several requests, so the oracle splits that kind alone and both read one request."""
    line = next(x for x in _real_lines() if "] Received request cmpl-" in x)
    at = line.index("Received request ") + len("Received request ")
    got = _equal([line[:at] + ", " + line[at:]])
    assert got["event"].to_list() == ["received"]
    assert got["request_id"].to_list()[0].startswith(", cmpl-")


def test_a_non_ascii_character_in_a_received_id():
    """Found by the mutation test above on the CI's fresh install (polars 2.2, whose str.find counts characters
    where 2.1 counted bytes): a no-break space spliced into a real Received line's id. The oracle cut the id at
    str.find's offset as bytes and split the character; it now asks tests/offsets.py for the unit it cuts in."""
    line = next(x for x in _real_lines() if "] Received request cmpl-" in x)
    at = line.index("Received request ") + len("Received request ") + 5
    got = _equal([line[:at] + "\u00a0é" + line[at:]])
    rid = got["request_id"].to_list()
    assert got["event"].to_list() == ["received"] and "\u00a0é" in rid[0] and not rid[0].endswith(":")
    assert got["max_tokens"].to_list()[0] is not None


def test_long_lines_read_as_the_regexes_did():
    """Real request lines made long (a 48,000-character id, an abort of 5,000 ids): the scanner's work on a line grows
    with its length, as the regexes' did, rather than stopping at a fixed budget."""
    real = _real_lines()
    added = next(x for x in real if "] Added request " in x)
    aborted = next(x for x in real if "] Aborted request(s) " in x)
    head, rid = added.rsplit("Added request ", 1)
    ahead, ids = aborted.rsplit("Aborted request(s) ", 1)
    lines = [
        f"{head}Added request {rid.rstrip('.') * 1_000}"[:60_000] + ".",
        f"{ahead}Aborted request(s) " + ", ".join([ids.rstrip(".")] * 5_000) + ".",
    ]
    got = _equal(lines)
    assert got.height == 5_001 and got["request_id"].str.len_chars().max() > 40_000
