"""The fleet generator (bench/generate.py --gateways): replicas behind gateways, every line in the format of
the lab line it was made from, ids that join client -> gateway -> vLLM across the folders."""

from __future__ import annotations

import sys

import polars as pl

from conftest import ROOT
from logscope.ingest import IngestOptions, ingest

sys.path.insert(0, str(ROOT / "bench"))
from generate import generate_fleet  # noqa: E402


def test_a_fleet_parses_whole_and_its_ids_join(tmp_path, lab):
    info = generate_fleet(tmp_path / "fleet", 12, replicas=6, gateways=2, lab=lab)
    res = ingest(tmp_path / "fleet", tmp_path / "out", IngestOptions())
    files = res.files
    assert info["gateways"] == 2 and files.filter(pl.col("path").str.ends_with("vllm-server.log")).height == 6
    parsed = files.filter(
        pl.col("format").is_in(["nginx_access", "vllm_server", "client_jsonl", "openai_client"])
    )
    assert parsed.height == 2 + 6 + 6 + 6
    assert (parsed["lines_parsed"] == parsed["lines_total"]).all()  # every line still in its real format
    ga = pl.read_parquet(tmp_path / "out" / "gateway_attempts.parquet")
    sr = pl.read_parquet(tmp_path / "out" / "server_requests.parquet")
    # replica r sits behind gateway r % 2: its requests are in that gateway's log, under the same ids
    for r in range(6):
        ids = sr.filter(pl.col("source") == f"replica-{r:03d}/vllm-server.log")[
            "base_request_id"
        ].drop_nulls()
        seen = ga.filter(pl.col("request_id").is_in(ids.implode()))["source"].unique().to_list()
        assert seen == [f"gateway-{r % 2:02d}/nginx-access.log"], (r, seen)
    assert ga["request_id"].drop_nulls().n_unique() == ga.filter(pl.col("attempt") == 1).height
    # a gateway's log is in time order, as nginx writes it
    for src, g in ga.group_by("source"):
        assert g["ts_end"].drop_nulls().is_sorted(), src
