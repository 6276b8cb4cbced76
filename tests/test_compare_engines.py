"""compare names the engine its rows' figures came from: SGLang's and TGI's runs read 'vLLM executions per logical
request' (and 'vLLM's spans'), and the requests / windows tables' descriptions said 'vLLM requests' of columns
every engine's records fill. Where the runs' engines differ or are unknown the row says 'engine'."""

from __future__ import annotations

import polars as pl
import pytest
from compare_helpers import metric_row

from conftest import DATA
from logscope.api import compare
from logscope.schemas import TABLES

SGLANG, UNSEEN = DATA / "sglang", DATA / "unseen"

# (A, B, the engine the rows name, the executions per logical request in A and B)
PAIRS = [
    (SGLANG / "4045-receive-request-line.log", SGLANG / "25887-finish-abort-headerless.log", "SGLang"),
    (
        UNSEEN / "tgi-1374-v1.3.3-compose-compat-generate-success-2.46s.log",
        UNSEEN / "tgi-2593-v3.0.2-v3-client-illegal-memory-access-clear-cache.log",
        "TGI",
    ),
    (
        UNSEEN / "vllm-29208-v0.11.1-received-no-prompt-added-generated-response.log",
        SGLANG / "4045-receive-request-line.log",
        None,  # vLLM against SGLang: neither alone
    ),
]


def _outputs(res: dict) -> str:
    return "\n".join(res["paths"][k].read_text() for k in ("compare_json", "compare_md", "compare_html"))


@pytest.mark.parametrize(("a", "b", "engine"), PAIRS)
def test_a_row_names_the_engine_its_records_came_from(a, b, engine, analyzed, tmp_path):
    res = compare(analyzed(a)[0], analyzed(b)[0], tmp_path / "c")
    doc = res["doc"]
    server = next(r for r in doc["settings"] if r["name"] == "server")
    assert engine is None or engine in (server["a"], server["b"])  # the engine the run's parsers tagged
    amp = metric_row(doc, "amplification")
    assert amp["a"] is not None  # the row holds a figure of A's engine's records
    assert amp["title"] == f"{engine or 'engine'} executions per logical request"
    spans = metric_row(doc, "span_ttft_p95")["title"]
    assert (
        spans
        == f"TTFT p95 ({f'{engine}' + chr(39) + 's' if engine else 'the engine' + chr(39) + 's'} spans, clock engine)"
    )
    text = _outputs(res)
    assert amp["title"] in text
    assert "vLLM executions" not in text and "vLLM's spans" not in text and "vLLM's queue" not in text


# columns every engine's records fill: (table, column)
FILLED = [("requests", "server_requests"), ("windows", "server_requests"), ("windows", "inflight_server")]


@pytest.mark.parametrize(
    "src",
    [
        SGLANG / "4045-receive-request-line.log",
        UNSEEN / "tgi-1374-v1.3.3-compose-compat-generate-success-2.46s.log",
    ],
)
def test_the_tables_do_not_call_another_engines_requests_vllm_requests(src, analyzed):
    out = analyzed(src)[0]
    for table, col in FILLED:
        got = pl.read_parquet(out / f"{table}.parquet")[col].drop_nulls()
        assert got.len() and (col != "server_requests" or got.max() > 0), (table, col)  # from its records
        desc = TABLES[table][col][1]
        assert desc.startswith(("engine requests", "mean engine requests")), (table, col, desc)
    assert TABLES["requests"]["server_aborted"][1].startswith("engine requests")
    assert TABLES["windows"]["server_aborts"][1] == "engine aborts"
