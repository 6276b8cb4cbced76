"""Node problems and the kubelet's evictions (issue #40), on real `kubectl describe` excerpts (tests/data/platform,
INDEX.md): a node NotReady (three clusters), SystemOOM, memory and disk pressure, a pod evicted for its node's disk,
a pod preempted for a critical pod; and the GPU memory panel with vLLM's budget marked beside a real DCGM scrape."""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import DATA

PLATFORM = DATA / "platform"


def _analyze(tmp_path: Path, *names: str) -> tuple[Path, dict]:
    from logscope.api import AnalyzeOptions, analyze

    src = tmp_path / "in"
    src.mkdir()
    for n in names:
        shutil.copy2(PLATFORM / n, src / n)
    out = tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    return out, json.loads((out / "summary.json").read_text())


def _one(s: dict, start: str) -> dict:
    found = [f for f in s["findings"] if f["title"].startswith(start)]
    assert len(found) == 1, [f["title"] for f in s["findings"]]
    return found[0]


@pytest.mark.parametrize(
    ("name", "node", "title", "lines", "restart"),
    [
        (
            "k8s-describe-node-events-notready-systemoom-k3s-838.txt",
            "kube-node-9f4e",
            "NotReady (3×), with its kernel's OOM killer outside the containers (SystemOOM 4×)",
            [
                "line 4: NodeNotReady (×3), 1500 s before the capture",
                "line 9: SystemOOM (×4), 720 s before the capture: System OOM encountered",
            ],
            None,
        ),
        (
            "k8s-describe-node-events-notready-k3s-8575.txt",
            "worker-0",
            "NotReady (1×)",
            ["line 5: NodeNotReady, 6720 s before the capture"],
            "line 8: Starting, 6720 s before the capture: Starting kubelet.",
        ),
        (
            "k8s-describe-node-events-notready-acs-engine-4236.txt",
            "k8s-agentpool-39580029-vmss000000",
            "NotReady (1×)",
            ["line 1: NodeNotReady, 1380 s before the capture"],
            "line 3: Starting, 1320 s before the capture: Starting kubelet.",
        ),
    ],
    ids=["k3s-838", "k3s-8575", "acs-engine-4236"],
)
def test_a_node_not_ready_is_named_as_the_node_s(tmp_path, name, node, title, lines, restart):
    """Three clusters' `describe node` Events: the node (from the old kubectl's 'kubelet, <node>' From, or the
    condition's own message), how many times, its lines and ages; the cause is the node, not the server's load."""
    out, s = _analyze(tmp_path, name)
    ev = pl.read_parquet(out / "platform_events.parquet").filter(pl.col("reason") == "NodeNotReady")
    assert (
        ev["host"].to_list() == [node] and ev["ts"].null_count() == 1
    )  # an age: no capture time in the file
    f = _one(s, f"Node {node}: ")
    assert f["title"] == f"Node {node}: {title}" and f["severity"] == "critical"  # every pod on it goes down
    for line in lines:
        assert f"{name} {line}" in f["evidence"], f["evidence"]
    assert "not the server's load" in f["cause"]
    assert ("a kubelet or node restart" in f["cause"]) == (restart is not None)
    if restart:
        assert f"{name} {restart}" in f["cause"]
    if "SystemOOM" in title:
        assert "outside every container's limit" in f["cause"]
    assert f"kubectl describe node {node}" in f["next_test"]


@pytest.mark.parametrize(
    ("name", "title", "sev", "line"),
    [
        (
            "k8s-describe-node-events-insufficient-memory-kubeasz-799.txt",
            "Node 192.168.144.102 under memory pressure (NodeHasInsufficientMemory 4×, the kubelet reclaiming "
            "memory 38×)",
            "high",
            "line 6: EvictionThresholdMet (×38), 468 s before the capture: Attempting to reclaim memory",
        ),
        (
            "k8s-describe-node-events-disk-pressure-kind-15.txt",
            "Node minikube under disk pressure (NodeHasDiskPressure 1×, the kubelet reclaiming ephemeral-storage 1×)",
            "high",
            "line 4: EvictionThresholdMet, 272 s before the capture: Attempting to reclaim ephemeral-storage",
        ),
        (
            "k8s-describe-node-events-disk-pressure-kubernetes-103032.txt",
            "Node marosset-d5gls under disk pressure (NodeHasDiskPressure 1×)",
            "medium",  # the condition, no reclaim in the excerpt
            "line 8: FreeDiskSpaceFailed, 362 s before the capture: failed to garbage collect",
        ),
    ],
    ids=["kubeasz-799", "kind-15", "kubernetes-103032"],
)
def test_node_pressure_names_its_resource(tmp_path, name, title, sev, line):
    """The kubelet's conditions and reclaim, by resource: memory and disk told apart (three real excerpts), where
    the same folder read nothing to diagnose before."""
    _, s = _analyze(tmp_path, name)
    f = _one(s, "Node ")
    assert f["title"] == title and f["severity"] == sev
    assert f"{name} {line}" in f["evidence"]
    res = "memory" if "memory" in title else "ephemeral-storage"
    assert f"the node ran short of {res}" in f["cause"] and "not the server's load" in f["cause"]
    assert not any(x["title"].startswith("Nothing to diagnose") for x in s["findings"])


@pytest.mark.parametrize(
    ("name", "line", "used"),
    [
        ("k8s-describe-events-evicted-ephemeral-storage-kubernetes-91600.txt", 7, "92Ki"),
        ("k8s-describe-events-evicted-ephemeral-storage-compliantkubernetes-1173.txt", 1, "2596Ki"),
    ],
    ids=["kubernetes-91600", "compliantkubernetes-1173"],
)
def test_an_eviction_for_the_node_s_disk_is_not_memory(tmp_path, name, line, used):
    """'The node was low on resource: ephemeral-storage': the disk, not memory (the memory evictions of k9s-174 and
    treetracker-49 keep their own cause, test_platform)."""
    _, s = _analyze(tmp_path, name)
    f = _one(s, "Evicted (1×): The node was low on resource: ephemeral-storage.")
    assert f["evidence"].startswith(f"{name} line {line}: The node was low on resource: ephemeral-storage.")
    assert f"was using {used}" in f["evidence"]
    assert "the node's disk ran short" in f["cause"] and "not memory" in f["cause"]
    assert "HF_HOME" in f["next_test"]


def test_a_pod_preempted_for_a_critical_pod(tmp_path):
    """kubernetes#92906's describe head (Status Failed, Reason Preempting): read, and said to be the node's
    capacity; the poster's '...' line stays counted, unread."""
    name = "k8s-describe-pod-preempting-critical-kubernetes-92906.txt"
    out, s = _analyze(tmp_path, name)
    files = pl.read_parquet(out / "files.parquet").row(0, named=True)
    assert (files["format"], files["lines_parsed"], files["lines_unrecognized"]) == ("k8s_kubectl", 4, 1)
    f = _one(s, "Preempting (1×): Preempted in order to admit critical pod")
    assert f["evidence"] == f"{name} line 4: Preempted in order to admit critical pod"
    assert "to admit a critical pod" in f["cause"] and "not the server" in f["cause"]


def test_two_nodes_in_one_folder_keep_their_own_findings(tmp_path):
    """A NotReady node and another node's memory pressure side by side: each finding names its own node and lines,
    nothing of one is folded into the other."""
    a = "k8s-describe-node-events-notready-systemoom-k3s-838.txt"
    b = "k8s-describe-node-events-insufficient-memory-kubeasz-799.txt"
    _, s = _analyze(tmp_path, a, b)
    nr = _one(s, "Node kube-node-9f4e: ")
    mem = _one(s, "Node 192.168.144.102 under memory pressure")
    assert b not in nr["evidence"] and a not in mem["evidence"]
    assert nr["title"].endswith("(SystemOOM 4×)")


def test_gpu_panel_marks_vllm_s_budget_beside_a_real_dcgm_scrape(tmp_path):
    """The budget mark on real data: NOT one incident. dcgm-exporter#432's scrape (an A100 shared by MPS, a vLLM
    pod's FB_USED) and Lvllm#35's vLLM start-up lines (an A40) come from two machines; the scrape carries no time,
    so its file time is set (here) 30 s after the log's last line to place it on the timeline. What is asserted is
    that the mark is the log's weights + KV cache, and that the report does not tie the GPU to that server."""
    from logscope.report import gpu_panel
    from logscope.report.load import load
    from logscope.report.panels import Backdrop, XEnc
    from logscope.report.vl import Data

    log = "vllm-startup-model-loading-kv-memory-lvllm-35.log"
    scrape = "dcgm-scrape-fb-used-vllm-pod-mps-dcgm-exporter-432.prom"
    src = tmp_path / "in"
    src.mkdir()
    for n in (log, scrape):
        shutil.copy2(PLATFORM / n, src / n)
    at = datetime(2026, 2, 12, 8, 34, 55, tzinfo=UTC).timestamp()  # the log's 08:34:25 + 30 s
    os.utime(src / scrape, (at, at))
    from logscope.api import AnalyzeOptions, analyze

    out = tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    s = json.loads((out / "summary.json").read_text())
    assert (s["capacity"]["weights_gib"], s["capacity"]["kv_memory_gib"]) == (11.55, 12.57)
    d = Data()
    spec = gpu_panel.panel(load(out), s, Backdrop([], []), XEnc(0, 1), d)
    assert spec is not None and spec["title"] == "GPU memory in use (DCGM exporter)"
    rule = d.sets["gpu-reservation"]
    assert rule == [
        {
            "mib": pytest.approx(24698.88),
            "label": "vLLM's weights + KV cache budget (its log's start-up lines): 24.1 GiB",
        }
    ]
    f = _one(s, "GPU memory (DCGM exporter): ")
    assert "GPU 0 (pod vllm-medgemma-4b-it-d599b4c99-f95nk): up to 15,866 MiB used" in f["title"]
    assert (
        "vLLM's weights + KV cache budget 24.12 GiB (24,699 MiB: weights 11.55 + KV cache 12.57) in "
        "vllm-startup-model-loading-kv-memory-lvllm-35's start-up lines, beside the GPU's 15,866 MiB in use"
    ) in f["evidence"]
    # two pods share the GPU and one server log: neither is taken for that server
    assert "2 pods and one server log: which pod it was is not guessed" in f["evidence"]
    assert "a guess" not in f["evidence"]


def test_a_vllm_pod_s_startup_probe_gave_up_before_the_model_loaded(tmp_path):
    """AIBrix#1054: a vLLM 0.7.1 pod's startup probe refused 3× and the pod in CrashLoopBackOff (5 restarts): the
    advice is the startup probe's own budget against the model's load time, not 'add a startupProbe'."""
    ev = "k8s-describe-events-startup-probe-refused-vllm-aibrix-1054.txt"
    _, s = _analyze(tmp_path, ev, "k8s-get-pods-crashloop-vllm-aibrix-1054.txt")
    f = _one(s, "Pod deepseek-r1-distill-llama-8b-5cc594fd46-hg5rw restarted 5 times, the last 150 s before")
    assert f["title"].endswith("(the folder's only pod: a guess): startup probe connection refused (3×)")
    assert f"{ev} line 9: Unhealthy Startup probe failed" in f["evidence"]
    assert "startupProbe's failureThreshold × periodSeconds longer than the load" in f["next_test"]
    assert "add a startupProbe" not in f["next_test"]


@pytest.mark.parametrize(
    ("name", "used"),
    [
        ("nvidia-smi-rtx3090-club-3090-96.txt", {"0": 22188, "1": 22188}),
        ("nvidia-smi-rtx4090-rlinf-255.txt", {"0": 507, "1": 459}),
    ],
    ids=["club-3090-96", "rlinf-255"],
)
def test_gpu_panel_draws_nvidia_smi_tables(tmp_path, name, used):
    """nvidia-smi's table (its date line above it) is drawn in the GPU memory panel beside the DCGM exporter's series,
    each GPU a series named with its file; no server log: the budget is said to be missing."""
    from logscope.report import gpu_panel
    from logscope.report.load import load
    from logscope.report.panels import Backdrop, XEnc
    from logscope.report.vl import Data

    out, s = _analyze(tmp_path, name)
    d = Data()
    spec = gpu_panel.panel(load(out), s, Backdrop([], []), XEnc(0, 1), d)
    assert spec is not None
    assert spec["title"] == "GPU memory in use (nvidia-smi) (vLLM's weights + KV budget not in its log)"
    rows = d.sets["panel-gpu-memory"]
    assert {r["series"]: r["value"] for r in rows} == {f"GPU {g} · {name}": v for g, v in used.items()}


_DESCRIBE_TIME = re.compile(r"\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d [+-]\d{4}")


def _describe_shifted(src: Path, dest: Path, finished: datetime) -> None:
    """troubleshoot#1301's describe with every Started / Finished moved by one offset (its +0530 kept), so that its
    Last State's Finished is ``finished``: the lines and their intervals are the excerpt's."""
    fmt = "%a, %d %b %Y %H:%M:%S %z"
    delta = finished - datetime.strptime("Fri, 08 Sep 2023 00:57:10 +0530", fmt)
    dest.write_text(
        _DESCRIBE_TIME.sub(
            lambda m: (datetime.strptime(m.group(0), fmt) + delta).strftime(fmt), src.read_text()
        )
    )


@pytest.mark.parametrize("shift", [True, False], ids=["at-the-death", "years-apart"])
def test_an_oomkilled_container_is_the_cause_of_the_server_s_death(tmp_path, shift):
    """OOMKilled tied to a server's death, on real data that is NOT one incident: the lab's crash run (vLLM's
    APIServer SIGKILLed at 08:34:23 UTC, truth.json) beside troubleshoot#1301's describe (a container OOMKilled,
    exit 137), its times moved as a whole so that Finished falls on the kill. The describe names no pod: the tie is
    said to be a guess (the folder's only server). Unshifted (2023), nothing is tied and the death's killer stays
    unknown."""
    from conftest import LAB, need

    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(need(LAB / "crash") / "vllm-server.log", src)
    name = "k8s-describe-container-oomkilled-137-troubleshoot-1301.txt"
    if shift:
        _describe_shifted(PLATFORM / name, src / name, datetime(2026, 11, 29, 8, 34, 23, tzinfo=UTC))
    else:
        shutil.copy2(PLATFORM / name, src / name)
    from logscope.api import AnalyzeOptions, analyze

    out = tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    s = json.loads((out / "summary.json").read_text())
    top = s["findings"][0]
    if not shift:
        assert top["title"].startswith("Server killed without a trace at 2026-11-29 08:34:22")
        assert (
            "who killed it: unknown" in top["evidence"]
            and "no OOMKilled container tied to this server" in top["evidence"]
        )
        return
    assert top["title"] == (
        "Server killed by Kubernetes at 08:34:23 (memory limit unknown), not a CUDA OOM, tied by a guess; back at "
        "08:35:31 (68 s down)"
    )
    assert top["evidence"].startswith(
        f"{name} line 9: Last State: Terminated, Reason OOMKilled, Exit Code 137; tied to the server: a guess: the "
        "kubectl output names no pod (a container block pasted alone); taken for the folder's only server "
        "(vllm-server); "
    )
    # where the server's log stops is the symptom's fact (the server wrote no death), said once
    assert top["symptom"].endswith(
        "vLLM prints nothing when killed: vllm-server's log logs no death and ends at 08:34:22, 1.0 s before the kill"
    )
    assert "vLLM's log holds no CUDA out-of-memory error" in top["evidence"]
    assert top["symptom"].startswith(
        "Kubernetes (OOMKilled: the container's memory limit) killed container kotsadm at 08:34:23.000 (read on the "
        "node's clock: the Finished time kubectl describe wrote"
    )
    assert s["verdict"][0] == (
        "The vLLM server was OOMKilled (its container's memory limit) at 08:34:23 and was ready again at 08:35:31; "
        "the kill is tied to it by a guess: the kubectl output names no pod (a container block pasted alone)."
    )
