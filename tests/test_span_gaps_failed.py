"""Why an attempt has no engine span, when its engine failed it (issue #38): vLLM V1 logs 'Request ... failed
(engine dead)' for every request in flight when its engine core dies (server_requests.failed_ts), writes no span
for them, and its API server then shuts down cleanly, so the folder shows no stop of the process. The note read
that fact nowhere and called such a request "not exported" (its span left unexported: sampling, the exporter's
queue), or "unknown" where no span names the replica; it is cut by the death, on the engine's own word.

No traced lab run has an engine that failed a request (traced-2r-kill's replica was SIGKILLed: no such line), so
the note is tested on the server tables' side: the lab's enginecore-kill (4 requests failed at 04:09:36) and
oom-cgroup (the engine core OOM-killed), each request's facts joined as correlate's span notes join them (the
engine's request id is the gateway's $request_id; the gateway's X-Request-Id is the client's)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from conftest import LAB, need
from logscope.api import AnalyzeOptions, analyze
from logscope.correlate import span_gaps


def _rows(out: Path) -> tuple[list[dict], list[span_gaps.Stop], dict[str, str]]:
    """The facts span_gaps.classify joins for each request the engine failed (no span: the run is untraced)."""
    t = {n: pl.read_parquet(out / f"{n}.parquet") for n in ("server_requests", "gateway_attempts")}
    t |= {
        n: pl.read_parquet(out / f"{n}.parquet") for n in ("server_events", "server_stats", "gateway_errors")
    }
    sr = t["server_requests"].filter(pl.col("failed_ts").is_not_null())
    ga = t["gateway_attempts"].select(
        pl.col("request_id").alias("base_request_id"),
        pl.col("client_request_id"),
        pl.col("status").alias("gw_status"),
        pl.col("upstream_status").alias("up_status"),
        pl.col("ts_start").alias("gw_start"),
        pl.col("ts_end").alias("gw_end"),
    )
    # one access line per $request_id holds every upstream it tried: its last, as classify keeps
    ga = ga.sort("gw_start").unique("base_request_id", keep="last", maintain_order=True)
    ca = pl.read_parquet(out / "client_attempts.parquet").select(
        pl.col("request_id").alias("client_request_id"),
        pl.col("error").alias("cl_error"),
        pl.col("timed_out").alias("cl_timeout"),
        pl.lit(True).alias("cl_seen"),
        pl.col("ts_start"),
    )
    # a client's attempts share its X-Request-Id: the one the gateway line ends with is its last
    ca = ca.sort("ts_start").unique("client_request_id", keep="last", maintain_order=True).drop("ts_start")
    x = (
        sr.select(
            pl.col("replica").alias("srv_replica"),
            "base_request_id",
            "received_ts",
            "aborted_ts",
            "failed_ts",
        )
        .join(ga, on="base_request_id", how="left")
        .join(ca, on="client_request_id", how="left")
        .with_columns(
            pl.lit(False).alias("has_engine"),
            pl.col("gw_end").alias("end"),
            pl.lit(None).alias("gw_upstream"),
        )
        .sort("base_request_id")
    )
    spans = pl.DataFrame(
        schema={"layer": pl.String, "service": pl.String, "base_request_id": pl.String, "role": pl.String}
    )
    found = span_gaps.stops(spans, t)
    svc, _ = span_gaps.replica_map(spans, t)
    return x.to_dicts(), found, svc


def _failed_in_log(folder: Path) -> dict[str, str]:
    """The raw server log's 'Request cmpl-<id>-0 failed (engine dead).' lines: <id> -> the line's HH:MM:SS."""
    pat = re.compile(
        r" (\d\d:\d\d:\d\d) \[async_llm\.py:\d+\] Request cmpl-([0-9a-f]+)-0 failed \(engine dead\)\."
    )
    return {m[2]: m[1] for m in pat.finditer((folder / "vllm-server.log").read_text())}


@pytest.mark.parametrize(("run", "n"), [("enginecore-kill", 4), ("oom-cgroup", 32)])
def test_a_request_the_engine_failed_is_cut_by_its_death(tmp_path, run, n) -> None:
    out = tmp_path / "out"
    analyze(need(LAB / run), out, AnalyzeOptions())
    raw = _failed_in_log(LAB / run)
    rows, found, svc = _rows(out)
    assert len(raw) == len(rows) == n and found == []  # the API server shut down cleanly: no stop to find
    for r in rows:
        cls, why = span_gaps._why(r, found, svc)
        assert cls == "cut by death", why  # before: "unknown" (no span names a request of the replica)
        rep = r["srv_replica"]
        assert why.startswith(
            f"cut by the death of {rep}'s engine: {rep} logged at {raw[r['base_request_id']]} that it failed the "
            "request (vLLM's 'Request ... failed (engine dead)')"
        )
        assert why.endswith("[engine log, client record]" if r["cl_error"] else "[engine log]")
