"""A request's outcome is one field, read by analyze and compare alike: the outcome and the record that stated it
(diagnose.stated: caller, gateway, engine, or unknown). TGI 1374's one 'Success' read "1 unknown (no caller's or
gateway's record)" in analyze while compare counted it 1 ok from the engine log's own end (evid27). Where only
the engine log states the end (SGLang 23049's 'Finish', vllm-public 05's two V0 'Finished request' lines, placed
by their end alone) every output of analyze says ok, stated by the engine log, as many as compare's completed ok;
where nothing states it (SGLang 4045's 'Receive' and no end) both say unknown and name what is missing."""

from __future__ import annotations

import pytest
from compare_helpers import metric_row

from conftest import DATA, PUBLIC
from logscope.api import compare
from logscope.diagnose.stated import ENGINE_END

SGLANG, UNSEEN = DATA / "sglang", DATA / "unseen"
NO_RECORD = "no caller's or gateway's record"
# (an engine log alone, its requests, those the engine logged as ended well, those no record states the end of)
ENDED = [
    (UNSEEN / "tgi-1374-v1.3.3-compose-compat-generate-success-2.46s.log", 1, 1, 0),  # TGI's 'Success'
    (SGLANG / "23049-diffusion-request-lines-text-and-json.log", 4, 4, 0),  # 'Finish ... error: None'
    (PUBLIC / "05-v0-0.3-stuck-pending-115-kv-99.log", 3, 2, 1),  # 2 'Finished request', 1 pending
]


def _both(src, analyzed, rendered, tmp_path):
    out, s, _ = analyzed(src)
    res = compare(out, out, tmp_path / "c")
    return s, rendered(out, s), res


@pytest.mark.parametrize(("src", "n", "ended", "unknown"), ENDED, ids=lambda x: getattr(x, "name", None))
def test_the_engines_own_end_is_one_answer_everywhere(src, n, ended, unknown, analyzed, rendered, tmp_path):
    s, seen, res = _both(src, analyzed, rendered, tmp_path)
    o = s["outcomes"]
    rows = [(r["outcome"], r["stated_by"], r["status_text"], r["requests"]) for r in o["by_status"]]
    want = [("ok", "engine", ENGINE_END, ended)] + (
        [("unknown", None, NO_RECORD, unknown)] if unknown else []
    )
    assert rows == want
    assert o["requests"] == n and o["by_outcome"] == {
        "ok": ended,
        **({"unknown": unknown} if unknown else {}),
    }
    assert o["source"].startswith("engine log alone")
    assert f"| ok | {ENGINE_END} | {ended} |" in seen["summary.md"]
    assert f"<td>ok</td><td>{ENGINE_END}</td>" in seen["report.html"]
    assert f"{ended} ok ({ENGINE_END})" in seen["terminal"]
    assert "as seen by the engine log alone" in seen["summary.md"] + seen["report.html"]
    # compare reads the same field: its requests and completed ok are analyze's, from the engine log
    assert metric_row(res["doc"], "requests")["a"] == n
    done = metric_row(res["doc"], "completed")
    assert (done["a"], done["clock"], done["source"]["a"]) == (ended, "engine", "engine_log")
    md = res["paths"]["compare_md"].read_text()
    assert f"| completed ok | engine's clock · engine log | {ended} | {ended} |" in md


def test_nothing_states_it_unknown_everywhere(analyzed, rendered, tmp_path):
    """SGLang 4045: a 'Receive' line and no end: unknown in every output, naming the record that is missing."""
    s, seen, res = _both(SGLANG / "4045-receive-request-line.log", analyzed, rendered, tmp_path)
    rows = [
        (r["outcome"], r["stated_by"], r["status_text"], r["requests"]) for r in s["outcomes"]["by_status"]
    ]
    assert rows == [("unknown", None, NO_RECORD, 1)]
    assert f"| unknown | {NO_RECORD} | 1 |" in seen["summary.md"]
    assert f"<td>unknown</td><td>{NO_RECORD}</td>" in seen["report.html"]
    assert f"1 unknown ({NO_RECORD})" in seen["terminal"]
    assert ENGINE_END not in seen["summary.md"] + seen["report.html"] + seen["terminal"]
    done = metric_row(res["doc"], "completed")
    assert (done["a"], done["b"]) == (None, None)
    assert f"1 unknown ({NO_RECORD})" in done["noise"]  # analyze's words
    assert "| completed ok | engine's clock | unknown | unknown |" in res["paths"]["compare_md"].read_text()
