"""The platform around the engine (issue #40): kernel and kubectl outputs read into declared tables, every line
accounted. Real excerpts only (tests/data/platform/INDEX.md)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA

PLATFORM = DATA / "platform"


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> Path:
    from logscope.api import AnalyzeOptions, ingest

    tmp = tmp_path_factory.mktemp("platform")
    src = tmp / "in"
    shutil.copytree(PLATFORM, src, ignore=shutil.ignore_patterns("INDEX.md"))
    ingest(src, tmp / "out", AnalyzeOptions())
    return tmp / "out"


def _rows(out: Path, table: str, name: str) -> pl.DataFrame:
    return pl.read_parquet(out / f"{table}.parquet").filter(pl.col("source") == name)


def test_every_sample_is_detected_and_every_line_accounted(ingested):
    files = pl.read_parquet(ingested / "files.parquet")
    by_format = dict(zip(files["path"], files["format"], strict=True))
    for p in PLATFORM.iterdir():
        if p.name == "INDEX.md":
            continue
        want = {"kernel": "kernel_log", "k8s": "k8s_kubectl", "dcgm": "prometheus_text"}[p.name.split("-")[0]]
        assert by_format[p.name] == want, p.name
    assert (files["lines_parsed"] + files["lines_unrecognized"] == files["lines_total"]).all()
    # what is not kubectl's or the kernel's stays counted, not read: the shell prompts, a cut first line
    unread = dict(zip(files["path"], files["lines_unrecognized"], strict=True))
    assert unread["kernel-dmesg-ctime-xid-akash-244.log"] == 1  # 'root@node4:~# dmesg -T |grep NVRM'
    assert unread["k8s-describe-events-liveness-404-llm-d-inference-sim-45.txt"] == 1  # 'luding waiting)...'
    assert unread["kernel-dmesg-iso-oom-global-ert-7797.log"] == 0


def test_kernel_oom_kill_of_every_header_form(ingested):
    iso = _rows(ingested, "platform_events", "kernel-dmesg-iso-oom-global-ert-7797.log")
    kill = iso.filter(pl.col("kind") == "oom_kill").row(0, named=True)
    assert (kill["pid"], kill["process"]) == (1440763, "perl")
    assert kill["ts"].isoformat() == "2024-04-29T12:55:41.679700+00:00"  # +02:00 read
    assert kill["rss_bytes"] == 60356340 * 1024
    assert iso.filter(pl.col("kind") == "oom_constraint")["constraint"].to_list() == ["CONSTRAINT_NONE"]
    mono = _rows(ingested, "platform_events", "kernel-dmesg-monotonic-oom-deepseek-vl2-90.log")
    k = mono.filter(pl.col("kind") == "oom_kill").row(0, named=True)
    assert k["ts"] is None and k["ts_basis"] == "relative" and k["uptime_s"] == pytest.approx(26002.109061)
    ctime = _rows(ingested, "platform_events", "kernel-dmesg-ctime-oom-py-autovod-7.log")
    assert ctime.filter(pl.col("kind") == "oom_kill")["pid"].to_list() == [7899]
    old = _rows(ingested, "platform_events", "kernel-journal-memcg-docker-for-linux-1001.log")
    assert old.filter(pl.col("kind") == "oom_kill")["pid"].to_list() == [4254, 4255]
    assert old.filter(pl.col("kind") == "oom_select")["pid"].to_list() == [4142, 4142]
    assert old["uptime_s"].min() == pytest.approx(152.700479)


def test_kernel_memcg_limit_and_constraint(ingested):
    lim = _rows(ingested, "platform_events", "kernel-journal-memcg-limit-dpservice-74.log")
    assert lim.filter(pl.col("kind") == "memcg_usage")["memory_limit_bytes"].to_list() == [1048576 * 1024]
    c = _rows(ingested, "platform_events", "kernel-journal-memcg-constraint-gpud-70.log").row(0, named=True)
    assert (c["constraint"], c["process"], c["pid"]) == ("CONSTRAINT_MEMCG", "pt_main_thread", 461754)
    assert "kubepods-burstable" in c["memcg"]


def test_kernel_xid_and_lost_gpu(ingested):
    ak = _rows(ingested, "platform_events", "kernel-dmesg-ctime-xid-akash-244.log").filter(
        pl.col("kind") == "xid"
    )
    assert ak["xid"].to_list() == [43, 43, 31, 94]
    assert ak["process"].to_list()[:3] == ["pt_main_thread", "pt_main_thread", "python3.10"]
    assert ak["process"][3] is None  # name=<unknown>
    g = _rows(ingested, "platform_events", "kernel-dmesg-ctime-xid-gpud-46.log")
    assert g["xid"].to_list() == [13, 13, 13, 109] and set(g["gpu"]) == {"PCI:0000:cb:00"}
    lost = _rows(ingested, "platform_events", "kernel-dmesg-monotonic-fallen-off-bus-nvsentinel-155.log")
    assert lost["kind"].to_list() == ["gpu_lost"] and lost["gpu"][0] == "0000:b3:00.0"


def test_kubectl_probe_kills(ingested):
    ev = _rows(ingested, "platform_events", "k8s-describe-events-liveness-404-llm-d-inference-sim-45.txt")
    un = ev.filter(pl.col("reason") == "Unhealthy").row(0, named=True)
    assert (un["probe"], un["probe_result"], un["count"], un["age_s"]) == ("liveness", "HTTP 404", 3, 1500.0)
    kill = ev.filter(pl.col("reason") == "Killing").row(0, named=True)
    assert kill["probe"] == "liveness" and kill["container"] == "vllm-standalone-3b-vllm-llama-3-3b-instruct"
    assert ev["ts"].null_count() == ev.height  # ages only, no capture time: kept relative
    to = _rows(ingested, "platform_events", "k8s-describe-events-liveness-timeout-kubernetes-115469.txt")
    assert to["probe"].to_list() == ["liveness", "readiness"] and set(to["probe_result"]) == {"timeout"}
    assert to["count"].to_list() == [44, 49] and to["first_age_s"][0] == 2 * 86400 + 3600
    ci = _rows(ingested, "platform_events", "k8s-get-events-ci-stamped-liveness-llm-d-fma-703.txt")
    first = ci.row(0, named=True)
    assert first["ts"].isoformat() == "2026-08-11T17:02:56.907030+00:00"  # 17:08:45.907 less 5m49s
    assert first["pod"] == "launcher-11-16-55-35-6w58s" and first["probe_result"] == "connection refused"


def test_kubectl_oomkilled_and_restarts(ingested):
    t = _rows(ingested, "platform_events", "k8s-describe-container-oomkilled-137-troubleshoot-1301.txt").row(
        0, named=True
    )
    assert (t["kind"], t["reason"], t["exit_code"]) == ("terminated", "OOMKilled", 137)
    assert t["finished"].isoformat() == "2023-09-07T19:27:10+00:00"  # 00:57:10 +0530
    pods = _rows(ingested, "platform_pods", "k8s-get-pods-oomkilled-hmcts-28772.txt").row(0, named=True)
    assert (pods["status"], pods["restarts"], pods["last_restart_age_s"]) == ("OOMKilled", 4, 57.0)
    sim = _rows(ingested, "platform_pods", "k8s-get-all-describe-liveness-404-llm-d-inference-sim-45.txt")
    assert sim["pod"].to_list() == ["vllm-standalone-3b-vllm-llama-3-3b-instruct-57c8d4996c-qtr8b"]
    assert (sim["restarts"][0], sim["last_restart_age_s"][0]) == (6, 118.0)
    lim = _rows(ingested, "platform_pods", "k8s-describe-pod-pending-gpu-limits-device-plugin-33.txt").row(
        0, named=True
    )
    assert (lim["container"], lim["memory_limit_bytes"], lim["memory_request_bytes"], lim["gpu_limit"]) == (
        "aadhar",
        4 * 2**30,
        2**30,
        1,
    )
