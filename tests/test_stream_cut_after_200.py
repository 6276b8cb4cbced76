"""A stream the gateway cut after its 200 reads as what the logs show, with the error lines that say it.

spike-read-timeout/read8s (tests/data/pairs, notes.md): nginx :8081 with ``proxy_read_timeout 8s``. nginx logged 200
for all 275 requests (truth.json gateway.statuses), wrote 11 'upstream timed out (110: Connection timed out) while
reading upstream' lines during the burst (headers sent, 192 bytes, then nothing for 8 s), and the client saw 11
APIConnectionError with 0 chunks. logscope read those 11 as 'error (no HTTP answer)'; they are streams cut by the
gateway's own read timeout after its 200: outcome truncated, mid_stream read_timeout, each tied to one of the 11
error lines. The lab's crash is the other real stream cut after a 200 (8 'upstream prematurely closed connection'
after the SIGKILL): its outcome stays the upstream's cut and now names its error lines too. compare on the pair
(A: spike-kv/kv112, the same scenario with 300 s) counts the 11 cuts as the gateway acting; the crash's, which are the
upstream's doing, it does not.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import jsonschema
import polars as pl
import pytest
from compare_helpers import SCHEMA, reader_text

from conftest import LAB, ROOT, need
from logscope.api import compare

PAIR = ROOT / "tests" / "data" / "pairs"
READ8S = PAIR / "spike-read-timeout" / "read8s"
KV112 = PAIR / "spike-kv" / "kv112"
TIMED_OUT = "upstream timed out (110: Connection timed out) while reading upstream"
CLOSED = "upstream prematurely closed connection while reading upstream"

# (folder, requests.mid_stream, the error line's words, the outcome's words, the timeline's label)
CUTS = {
    "read8s": (
        READ8S,
        "read_timeout",
        TIMED_OUT,
        "2xx at the gateway, then cut by the gateway's read timeout (nginx error log: "
        "'upstream timed out ... while reading upstream')",
        "2xx, read timeout cut (nginx error log)",
    ),
    "crash": (
        LAB / "crash",
        "cut",
        CLOSED,
        "2xx at the gateway, the answer cut mid-response",
        "2xx, upstream closed (nginx error log)",
    ),
}


def _lines(folder: Path) -> list[str]:
    """nginx's error log as it is in the folder, one string a line (line 1 first)."""
    (path,) = [p for p in folder.iterdir() if p.name.startswith("nginx-error.log")]
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return raw.decode().splitlines()


def _timeline(out: Path) -> dict[str, int]:
    page = (out / "report.html").read_text(encoding="utf-8")
    block = re.search(r'<script type="application/json" id="spec-timeline">(.*?)</script>', page, re.S)
    assert block, "the page holds no timeline"
    rows = pl.DataFrame(json.loads(block.group(1))["datasets"]["outcomes"])
    return dict(rows.group_by("outcome").agg(pl.col("n").sum()).rows())


@pytest.mark.parametrize("run", sorted(CUTS))
def test_a_stream_cut_after_its_200_says_what_cut_it(analyzed, rendered, run):
    folder, how, line, words, label = CUTS[run]
    truth = json.loads((need(folder) / "truth.json").read_text())
    n = truth["client"]["outcomes"]["APIConnectionError"]  # read8s 11, crash 8: each a stream cut after a 200
    errors = _lines(folder)
    stated = [i for i, x in enumerate(errors, 1) if line in x]
    assert len(stated) == n
    out, summary, _ = analyzed(folder)

    # the requests the caller got no HTTP answer for (the crash's 199 others were answered 502): the cut ones
    req = pl.read_parquet(out / "requests.parquet").filter(
        (pl.col("outcome") != "ok") & pl.col("status").is_null()
    )
    assert req.height == n
    cut = req.filter(pl.col("outcome") == "truncated")
    assert cut.height == n and set(cut["mid_stream"]) == {how}
    # each cut names one error line that says it, each line once: the file's own line numbers
    cited = sorted(int(e.rpartition(":")[2]) for e in cut["mid_stream_evidence"])
    assert cited == stated

    row = next(r for r in summary["outcomes"]["by_status"] if r["outcome"] == "truncated")
    assert row["requests"] == n and row["status_text"] == words
    assert [int(e.rpartition(":")[2]) for e in row["evidence"]] == stated
    assert not [
        r for r in summary["outcomes"]["by_status"] if r["outcome"] == "error" and r["status"] is None
    ]
    first = ", ".join(row["evidence"][:3])
    said = rendered(out, summary)
    for name in ("summary.md", "report.html"):
        assert f"{words}; its error lines: {first} and {n - 3} more" in said[name], name
    assert f"{n} truncated" in said["terminal"]
    assert _timeline(out)[label] == n


def test_the_gateway_rule_counts_its_read_timeout_cuts(analyzed, tmp_path):
    """A's 300 s timeout cut nothing, B's 8 s cut 11 (its error log's lines), at the steps where they ended; the
    reach says so beside the retries to the dead replica, and the gateway e2e names the 11 it left out."""
    a, b = need(KV112), need(READ8S)
    res = compare(analyzed(a)[0], analyzed(b)[0], tmp_path / "c")
    doc = res["doc"]
    jsonschema.validate(doc, SCHEMA)
    n = sum(TIMED_OUT in x for x in _lines(b))
    assert n == 11 and not any(TIMED_OUT in x for x in _lines(a))
    cuts = {side: [s["reach"]["facts"][side]["gateway_cuts"] for s in doc["steps"]] for side in "ab"}
    assert sum(cuts["a"]) == 0 and sum(cuts["b"]) == n, cuts
    for s, got in zip(doc["steps"], cuts["b"], strict=True):
        assert s["reach"]["acts"] is True and f"streams it cut A 0, B {got})" in s["reach"]["text"]
    said = reader_text(res)
    assert f"not counted: B {n} cut after the gateway's 2xx by its read timeout" in said
    whole = next(r for r in doc["whole"]["metrics"] if r["name"] == "gateway_e2e_p95")
    assert whole["left_out"] == {"a": None, "b": {"truncated, read_timeout": n}}


# (folder, streams cut after a 200 that are no gateway cut): the crash's 8 were vLLM dying under nginx (upstream
# prematurely closed); the storms' timeouts came before any header ('upstream timed out ... while reading response
# header from upstream': a 504 and a retry, never a 2xx), retry-storm 3 lines, storm-retries/retries0 6
NOT_CUT_BY_GATEWAY = {
    "crash": (LAB / "crash", 8),
    "retry-storm": (LAB / "retry-storm", 0),
    "retries0": (PAIR / "storm-retries" / "retries0", 0),
}


@pytest.mark.parametrize("run", sorted(NOT_CUT_BY_GATEWAY))
def test_no_gateway_cut_where_its_log_states_none(analyzed, run):
    folder, cut = NOT_CUT_BY_GATEWAY[run]
    assert not any(TIMED_OUT in x for x in _lines(need(folder)))
    out, _, _ = analyzed(need(folder))
    w = pl.read_parquet(out / "windows.parquet")
    req = pl.read_parquet(out / "requests.parquet")
    assert int(w["gateway_cuts"].sum()) == 0 and int((req["mid_stream"] == "read_timeout").sum()) == 0
    assert int((req["mid_stream"] == "cut").sum()) == cut


def test_read8s_cuts_are_the_gateways(analyzed):
    out, _, _ = analyzed(need(READ8S))
    assert int(pl.read_parquet(out / "windows.parquet")["gateway_cuts"].sum()) == 11
