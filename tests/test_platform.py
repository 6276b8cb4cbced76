"""The platform around the engine (issue #40): kernel and kubectl outputs read into declared tables, every line
accounted. Real excerpts only (tests/data/platform/INDEX.md)."""

from __future__ import annotations

import json
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


def _analyze(tmp_path: Path, *names: str, extra: tuple[Path, ...] = ()) -> tuple[Path, dict]:
    from logscope.api import AnalyzeOptions, analyze

    src = tmp_path / "in"
    src.mkdir()
    for n in names:
        shutil.copy2(PLATFORM / n, src / n)
    for p in extra:
        shutil.copy2(p, src / p.name)
    out = tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    return out, json.loads((out / "summary.json").read_text())


def test_a_folder_of_kubectl_outputs_alone_names_the_probe_kill(tmp_path):
    """llm-d-inference-sim#45: get all + describe Events, nothing else: 'restarted 6 times: liveness probe 404, then
    Killing', never 'Nothing to diagnose'; summary.json, summary.md and the terminal's verdict say the same."""
    out, s = _analyze(
        tmp_path,
        "k8s-get-all-describe-liveness-404-llm-d-inference-sim-45.txt",
        "k8s-describe-events-liveness-404-llm-d-inference-sim-45.txt",
    )
    top = s["findings"][0]
    diag = json.loads((out / "diagnosis.json").read_text())
    assert top["severity"] == "critical" and diag["findings"][0]["kind"] == "platform"
    assert (
        "restarted 6 times" in top["title"] and "liveness probe HTTP 404 (3×), then Killing" in top["title"]
    )
    assert "a guess" in top["title"]  # the events name no pod: the folder's only pod, said as a guess
    assert "/health" in top["next_test"]
    assert "line 3: Killing" in top["evidence"]
    assert not any(f["title"].startswith("Nothing to diagnose") for f in s["findings"])
    assert s["verdict"][0].rstrip(".") == top["title"]
    assert top["title"] in (out / "summary.md").read_text()


def test_probe_timeouts_get_the_saturated_server_advice(tmp_path):
    _, s = _analyze(tmp_path, "k8s-describe-events-liveness-timeout-kubernetes-115469.txt")
    live = next(f for f in s["findings"] if "liveness probe timeout (44×)" in f["title"])
    assert live["severity"] == "high"  # failing, no Killing in the excerpt
    assert "timeoutSeconds the saturated server meets" in live["next_test"] and "/health" in live["next_test"]
    ready = next(f for f in s["findings"] if "readiness probe timeout (49×)" in f["title"])
    assert ready["severity"] == "medium"


def test_an_oomkilled_pod_is_named_as_such(tmp_path):
    _, s = _analyze(
        tmp_path,
        "k8s-describe-container-oomkilled-137-troubleshoot-1301.txt",
        "k8s-get-pods-oomkilled-hmcts-28772.txt",
    )
    titles = [f["title"] for f in s["findings"]]
    assert "Container kotsadm killed by Kubernetes at 19:27:10 (memory limit unknown)" in titles
    assert (
        "Pod tax-tribunals-application-base-74464f6b98-2kj6g: OOMKilled, restarted 4 times (the last 57 s before the capture)"
        in titles
    )
    kill = next(f for f in s["findings"] if f["title"].startswith("Container kotsadm"))
    assert "Exit Code 137" in kill["evidence"] and "not device memory" in kill["cause"]


def test_a_kernel_oom_kill_not_of_a_server_is_not_tied_to_one(tmp_path):
    """A real vLLM log (the lab's spike) beside a real kernel OOM excerpt of another machine: the killed pid is none of
    the server's, so the kill stays apart and no death is added to the server."""
    from conftest import LAB

    _, s = _analyze(
        tmp_path, "kernel-dmesg-iso-oom-global-ert-7797.log", extra=(LAB / "spike" / "vllm-server.log",)
    )
    kill = next(f for f in s["findings"] if "killed by the kernel OOM killer" in f["title"])
    assert (
        kill["title"]
        == "Process perl (pid 1440763) killed by the kernel OOM killer at 04-29 12:55:41 (host out of memory)"
    )
    assert "pid 1440763 (perl) is no process of a server log in the folder" in kill["evidence"]
    assert s["server_lifecycle"]["deaths"] == []


def test_gpu_memory_panel_from_dcgm(ingested):
    from logscope.report import gpu_panel
    from logscope.report.load import load
    from logscope.report.panels import Backdrop, XEnc
    from logscope.report.vl import Data

    ld = load(ingested)
    d = Data()
    spec = gpu_panel.panel(ld, {"capacity": {}}, Backdrop([], []), XEnc(0, 1), d)
    assert spec is not None and spec["title"].startswith("GPU memory in use (DCGM exporter)")
    assert "budget not in its log" in spec["title"]
    series = set(gpu_panel._series(ld)["series"].to_list())
    assert "GPU 0 · vllm-medgemma-4b-it-d599b4c99-f95nk" in series and "GPU 0" in series


def test_kubectl_logs_previous_is_a_server_log(tmp_path):
    """`kubectl logs --previous <pod> > vllm-0.previous.log` is the container's stdout: a vLLM server log like any
    other, read by vllm_server (the lab's real vLLM 0.32 log stands for it: kubectl adds nothing to the lines)."""
    from conftest import LAB, ingest_files

    src = tmp_path / "vllm-0.previous.log"
    shutil.copy2(LAB / "spike" / "vllm-server.log", src)
    res = ingest_files(tmp_path / "x", src)
    files = res.files
    assert files["format"].to_list() == ["vllm_server"] and files["lines_unrecognized"][0] == 0


def test_a_range_keeps_the_untimed_platform_records(tmp_path):
    """--since/--until: a kill in the range is kept, one outside it goes, an age with no time stays (nothing places
    it outside)."""
    from datetime import UTC, datetime

    from logscope.diagnose import platform
    from logscope.resources.scope import Range

    out, _ = _analyze(
        tmp_path,
        "kernel-dmesg-iso-oom-global-ert-7797.log",
        "kernel-dmesg-ctime-oom-py-autovod-7.log",
        "k8s-describe-events-liveness-timeout-kubernetes-115469.txt",
    )
    f = platform.load(out, Range(since=datetime(2025, 1, 1, tzinfo=UTC)))
    kinds = f.events.filter(pl.col("kind") == "oom_kill")["pid"].to_list()
    assert kinds == [7899]  # 2025-03-30 kept, 2024-04-29 left out
    assert f.events.filter(pl.col("reason") == "Unhealthy").height == 2  # ages: no time, kept
