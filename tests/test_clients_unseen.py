"""openai-python's retries as applications log them (public-2 c01, c02, c05 and tests/data/clients-public; their
INDEX.md / README.md name each thread): N 'Retrying request ... in S seconds' lines are N + 1 attempts, the error a
request ended with ends it as failed, and the application's other records are read as such."""

from __future__ import annotations

import polars as pl

from conftest import DATA, PUBLIC2, ingest_files, need


def _read(tmp_path, path):
    res = ingest_files(tmp_path, need(path))
    f = res.files.row(0, named=True)
    assert f["format"] == "openai_client"
    return res, f


def test_last_retry_is_an_attempt(tmp_path):
    """LiteLLM#3274 (2024): two 429s, each followed by 'Retrying request to /chat/completions in S seconds', and
    the excerpt ends: three attempts, the third announced with its delay, its outcome unknown; the time is the
    second bracket of a custom prefix ('[277.618 ms] [2024-04-25 09:36:21,443.443] ...')."""
    res, f = _read(
        tmp_path, PUBLIC2 / "c01-openai-python-via-litellm-groq-429-retry-backoff-custom-format.log"
    )
    assert f["lines_unrecognized"] == 0
    att = res.table("client_attempts")
    assert att.select("attempt", "status", "retry_delay_s").rows() == [
        (1, 429, None),
        (2, 429, 0.886601),
        (3, None, 1.631223),
    ]
    assert att["ts_end"].dt.strftime("%H:%M:%S%.3f").to_list() == ["09:36:21.443", "09:36:22.578", None]
    req = res.table("client_requests")
    assert req.select("attempts", "status", "error").rows() == [(3, None, None)]  # records of retries only
    assert any("N + 1 attempts" in a for a in f["assumptions"])


def test_retries_then_gave_up(tmp_path):
    """LangBot#606 (2023, a paste that kept an ANSI colour code without its ESC, '[37m['): the SDK retried twice on
    429 and gave up on the third; 44 minutes later another request's 429. The application's own records are read as
    such. comfyui_LLM_party#160 (2025): the same messages printed bare, the SDK's last words 'Error code: 502'."""
    res, f = _read(tmp_path, PUBLIC2 / "c02-openai-python-langbot-429-retry-backoff.log")
    assert f["lines_unrecognized"] == 0
    req = res.table("client_requests")
    assert req.select("attempts", "status").rows() == [(3, 429), (1, 429)]
    assert res.table("client_attempts")["retry_delay_s"].drop_nulls().to_list() == [0.915115, 1.881526]
    res, f = _read(tmp_path / "b", DATA / "clients-public" / "comfyui-160-bare-messages-502-retries.log")
    assert f["lines_unrecognized"] == 1  # ComfyUI's 'Prompt executed in 2.07 seconds'
    assert res.table("client_requests").select("attempts", "status").rows() == [(3, 502)]
    assert res.table("client_attempts")["status"].to_list() == [502, 502, 502]


def test_connection_error_ends_the_request(tmp_path):
    """guardkit (2026, python logging's 'INFO:logger:msg' with no time, two agent tasks at once): 200s, two 502s,
    then 'Retrying request to /responses' x4 and '/chat/completions' x4 with no response between them, each task
    ending in the SDK's 'Connection error.' inside the application's WARNING (and its console's last 'Error:' line):
    8 retries, the requests told apart by their route, each ending as APIConnectionError."""
    res, f = _read(
        tmp_path,
        PUBLIC2 / "c05-openai-python-httpx-502-bad-gateway-then-retries-connection-error-llama-swap.log",
    )
    assert f["lines_unrecognized"] == 0
    att = res.table("client_attempts")
    assert att.filter(pl.col("attempt") > 1).height == 8
    assert att["status"].value_counts().sort("status").rows() == [(None, 10), (200, 5), (502, 2)]
    req = res.table("client_requests")
    failed = req.filter(pl.col("error") == "APIConnectionError")
    assert failed["attempts"].to_list() == [5, 2, 4] and failed["status"].null_count() == 3
    assert req.filter(pl.col("status") == 200).height == 5


def test_a_log_of_retries_is_client_records(tmp_path):
    """A client log whose records are all retries (c01: INFO level, no send time) still says what the clients saw:
    the verdict counts their attempts, never 'no client records'."""
    import json
    import shutil

    from logscope.api import AnalyzeOptions, analyze

    path = need(PUBLIC2 / "c01-openai-python-via-litellm-groq-429-retry-backoff-custom-format.log")
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(path, src / path.name)
    analyze(src, tmp_path / "out", AnalyzeOptions())
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        s["retries"]["logical_requests"],
        s["retries"]["client_attempts"],
        s["retries"]["client_retries"],
    ) == (
        1,
        3,
        2,
    )
    # one request, retried twice: said as the spread, not a mean per request (retry_spread)
    assert s["verdict"][0] == "Retries: 1 of 1 requests retried (up to 3 attempts)."
    assert not any("no server, gateway or client records" in f["title"] for f in s["findings"])


# ---------------------------------------------------------------- lm-evaluation-harness (parsers/lm_eval.py)
def test_lm_eval_timeout_glued_on_its_bar(tmp_path):
    """public-2 c03 (tt-inference-server#661, 2025): a record glued onto the 'Requesting API' bar (no newline),
    'Exception:TimeoutError(), undefined, retrying.' then 'Retry attempt 1': one request, its first attempt timed
    out, the second started 20 ms later; the bar says 1008 requests over 2:11:41."""
    res = ingest_files(tmp_path, need(PUBLIC2 / "c03-lm-eval-harness-client-timeout-retry-tqdm-glued.log"))
    f = res.files.row(0, named=True)
    assert (f["format"], f["lines_unrecognized"]) == ("lm_eval", 0)
    att = res.table("client_attempts").sort("attempt")
    assert att.select("attempt", "timed_out", "error").rows() == [(1, True, "TimeoutError"), (2, None, None)]
    assert att["ts_end"].dt.strftime("%H:%M:%S%.3f").to_list() == ["21:36:58.994", None]
    assert att["ts_start"].dt.strftime("%H:%M:%S%.3f").to_list() == [None, "21:36:59.014"]
    assert res.table("client_requests").select("client", "attempts").rows() == [("lm-eval-harness", 2)]
    lt = res.table("load_tests")
    assert lt.select("tool", "requests", "duration_s").rows() == [("lm-eval-harness", 1008, 7901.0)]


def test_lm_eval_behind_another_programs_logging(tmp_path):
    """instructlab/eval#197 (2024, lm-eval run by ilab, whose logging prefixes 'WARNING <date> lm-eval:347:'): three
    'Internal Server Error. Retrying...' while the bar stands at 52/56168 are one request's retries: 4 attempts,
    3 of them answered 500."""
    res = ingest_files(tmp_path, need(DATA / "clients-public" / "instructlab-197-lm-eval-500-retrying.log"))
    f = res.files.row(0, named=True)
    assert (f["format"], f["lines_unrecognized"]) == ("lm_eval", 0)
    att = res.table("client_attempts").sort("attempt")
    assert att.select("attempt", "status").rows() == [(1, 500), (2, 500), (3, 500), (4, None)]
    assert att["logical_request_id"].n_unique() == 1
    assert res.table("load_tests")["requests"].to_list() == [56168]


# ---------------------------------------------------------------- a pasted per-request table (parsers/request_table.py)
def test_pasted_per_request_table(tmp_path):
    """public-2 c06 (vllm#31602): a header of '|'-separated names, a '---' rule, rows after Markdown list markers,
    10 cells each: 6 client records, columns mapped by their names (and said so), 'success' read as 200."""
    res = ingest_files(
        tmp_path, need(PUBLIC2 / "c06-custom-client-per-request-ttft-table-6-reqs-success.log")
    )
    f = res.files.row(0, named=True)
    assert (f["format"], f["lines_unrecognized"]) == ("request_table", 0)
    req = res.table("client_requests").sort("logical_request_id")
    assert req.height == 6 and set(req["status"]) == {200} and set(req["client"]) == {"custom"}
    assert req["ttft_s"].max() == 4.0879 and req["e2e_s"].max() == 6.555
    assert req.select("prompt_tokens", "output_tokens").row(0) == (3768, 135)
    assert any("ttft <- 'TTFT (s)'" in a and "status <- 'Status'" in a for a in f["assumptions"])
