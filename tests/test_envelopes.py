"""Wrapped log files around real logs: a vLLM or nginx log collected from a Kubernetes node (CRI: containerd,
CRI-O, named and rotated by kubelet), from Docker's json-file driver, or printed by journalctl (tests/data/journald)
gives the rows of the plain log.

The files are written here the way the runtimes write them (``wrap``): CRI ``<RFC 3339 time> <stream> <P|F>
<text>``, containerd in UTC with nanoseconds, CRI-O with the node's offset; json-file ``{"log":...,"stream":...,
"time":...}`` with moby's escaping (``_docker_text``). Lines past ``split`` characters are cut into records
as the runtimes cut lines past 16 KiB (the lab's lines are shorter, so the tests cut them at a few hundred)."""

from __future__ import annotations

import json
import re
import shutil
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest
from test_ingest_segments import _same_as_whole_read

from conftest import LAB, ROOT, need
from logscope.api import AnalyzeOptions, analyze, ingest
from logscope.ingest import envelopes

SPIKE = LAB / "spike"
_VLLM_TIME = re.compile(r" (\d\d)-(\d\d) (\d\d):(\d\d):(\d\d) ")
_NGINX_TIME = re.compile(r"\[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) \+0000\]")
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def _own_time(line: str) -> datetime | None:
    """The second a lab line was written at (vLLM and nginx logged UTC on the lab machine)."""
    m = _VLLM_TIME.search(line)
    if m:
        return datetime(2026, *map(int, m.groups()), tzinfo=UTC)
    m = _NGINX_TIME.search(line)
    if m:
        d, mon, y, hh, mm, ss = m.groups()
        return datetime(int(y), _MONTHS[mon], int(d), int(hh), int(mm), int(ss), tzinfo=UTC)
    return None


def _go_time(t: datetime, nanos: int, offset: timedelta | None) -> str:
    """Go's RFC3339Nano of second ``t`` plus ``nanos``: UTC 'Z' with trailing zeros trimmed (containerd,
    Docker), or CRI-O's fixed nine digits with the node's offset."""
    if offset is None:
        frac = f"{nanos:09d}".rstrip("0")
        return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"
    local = t.astimezone(timezone(offset))
    sign, off = ("-", -offset) if offset < timedelta(0) else ("+", offset)
    hh, mm = divmod(int(off.total_seconds()) // 60, 60)
    return local.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}{sign}{hh:02d}:{mm:02d}"


def _docker_text(s: str) -> str:
    """A string as json-file writes it (moby's jsonlog.ffjsonWriteJSONBytesAsString): backslash, quote, LF and CR
    escaped short, other control characters and < > & as \\u00XX, U+2028/2029 as \\u202X, the rest raw UTF-8."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif o < 0x20 or ch in "<>&":
            out.append(f"\\u00{o:02x}")
        elif ch in "\u2028\u2029":
            out.append(f"\\u202{o & 0xF:x}")
        else:
            out.append(ch)
    return "".join(out)


def wrap(
    src: Path,
    dest: Path,
    kind: str,
    split: int | None = None,
    offset: timedelta | None = None,
    step_ns: int = 1000,
) -> int:
    """``src``'s lines as the runtime's records in ``dest``; returns the number of records written. Each line
    is stamped with the second it was logged at (the last one seen, for lines without a time) plus
    ``step_ns`` a line, as a runtime stamps lines arriving in order. The true sub-second is not in the lab's
    logs: with microseconds, the stamps say the lines came early in their second (the clock estimate then
    finds the server late by most of a second, rightly for such stamps); with nanoseconds, they are the
    plain log's whole seconds to the microsecond polars keeps."""
    base, k, n = datetime(2026, 11, 29, tzinfo=UTC), 0, 0
    out = []
    text = src.read_bytes().decode("utf-8")  # no newline translation: a CR stays in its line
    for line in text.removesuffix("\n").split("\n"):
        own = _own_time(line)
        if own is not None and own != base:
            base, k = own, 0
        k += 1
        ts = _go_time(base, k * step_ns, offset)
        stream = "stdout"
        pieces = [line[j : j + split] for j in range(0, len(line), split)] if split and line else [line]
        for j, piece in enumerate(pieces):
            last = j == len(pieces) - 1
            if kind == "cri":
                out.append(f"{ts} {stream} {'F' if last else 'P'} {piece}")
            else:
                log = _docker_text(piece + ("\n" if last else ""))
                out.append(f'{{"log":"{log}","stream":"{stream}","time":"{ts}"}}')
            n += 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("\n".join(out) + "\n", encoding="utf-8")
    return n


def _rows(out: Path, table: str) -> pl.DataFrame:
    """A table without what names the file (its path, its replica, record numbers), times to the second and the
    intervals between them to a tenth: the runtime's stamps add the sub-second."""
    df = pl.read_parquet(out / f"{table}.parquet")
    df = df.drop([c for c in ("line_no", "seq", "rec", "source", "replica") if c in df.columns])
    ts = [c for c, t in df.schema.items() if isinstance(t, pl.Datetime)]
    df = df.with_columns(pl.col(ts).dt.truncate("1s"), pl.col(pl.Float64).round(3))
    if "interval_s" in df.columns:  # between stamps a few ms off the whole second
        df = df.with_columns(pl.col("interval_s").round(1))
    return df.sort(df.columns, nulls_last=True)


def _files(res) -> dict[str, dict]:
    return {r["path"]: r for r in res.files.iter_rows(named=True)}


@pytest.mark.parametrize("kind,offset", [("cri", None), ("cri", timedelta(hours=-5)), ("docker", None)])
def test_a_vllm_log_in_a_container_log_gives_the_plain_rows(tmp_path, kind, offset):
    """The spike run's vLLM log (1,184 lines) inside a container log, lines past 300 characters cut into
    records (the request lines of 600 and the 3.4 KB config line) and read in 16 KiB chunks, so that cut
    lines span chunks: every table holds the plain log's rows, times to the second (the runtime's stamps add
    the sub-second), and the file's line count is the log's."""
    src = need(SPIKE / "vllm-server.log")
    plain, boxed = tmp_path / "plain", tmp_path / "boxed"
    shutil.copy(src, (plain.mkdir() or plain) / "vllm-server.log")
    records = wrap(src, boxed / "0.log", kind, split=300, offset=offset)
    opts = AnalyzeOptions(chunk_bytes=16 * 1024)
    a, b = ingest(plain, tmp_path / "a", opts), ingest(boxed, tmp_path / "b", opts)
    fa, fb = _files(a)["vllm-server.log"], _files(b)["0.log"]
    assert fb["format"] == "vllm_server"
    assert (fb["lines_total"], fb["lines_parsed"]) == (fa["lines_total"], fa["lines_parsed"]) == (1184, 1184)
    joined = records - 1184
    assert joined > 100
    assert f"{joined:,} partial record(s) joined into the lines the runtime had cut" in fb["messages"]
    assert any(
        m.startswith(envelopes.NAMES[kind]) and m.endswith("each with the runtime's time")
        for m in fb["messages"]
    )
    for table in ("server_stats", "server_requests", "server_request_events"):
        assert _rows(tmp_path / "b", table).equals(_rows(tmp_path / "a", table)), table
    stats = pl.read_parquet(tmp_path / "b" / "server_stats.parquet")
    assert stats.height == 86  # truth.json vllm.stats_lines
    # the runtime's stamps were used: sub-second times, on UTC whatever the node's offset
    assert stats["ts"].dt.microsecond().gt(0).all()
    # the first stats line, 08:25:06 in the log, was the first record of its second (+1 µs)
    assert stats["ts"].min() == datetime(2026, 11, 29, 8, 25, 6, 1, tzinfo=UTC)


def test_a_gateway_log_in_a_container_log_is_read_without_the_runtime_time(tmp_path):
    """nginx's access log (its own full times) inside a Docker json-file log: its lines alone are parsed, the
    same gateway rows as the plain file."""
    src = need(SPIKE / "nginx-access.log")
    plain, boxed = tmp_path / "plain", tmp_path / "boxed"
    plain.mkdir()
    for d in (plain, boxed):
        d.mkdir(exist_ok=True)
        shutil.copy(SPIKE / "nginx.conf", d / "nginx.conf")
    shutil.copy(src, plain / "nginx-access.log")
    wrap(src, boxed / "nginx-access.log", "docker")
    a, b = ingest(plain, tmp_path / "a", AnalyzeOptions()), ingest(boxed, tmp_path / "b", AnalyzeOptions())
    fb = _files(b)["nginx-access.log"]
    assert fb["format"] == _files(a)["nginx-access.log"]["format"]
    assert fb["lines_parsed"] == fb["lines_total"] == _files(a)["nginx-access.log"]["lines_total"]
    assert any(
        m == f"{envelopes.NAMES['docker']}: the lines inside its records were read" for m in fb["messages"]
    )
    assert _rows(tmp_path / "b", "gateway_attempts").equals(_rows(tmp_path / "a", "gateway_attempts"))


def test_the_spike_found_in_container_logs(tmp_path):
    """The spike sample collected from a node: its vLLM log in CRI records, nginx's logs in json-file ones (the
    clients and Prometheus as they were); analyze finds the run's one episode (lab README: 136 preemptions
    08:26:26-08:26:49) and joins the layers by id as on the plain sample."""
    src = ROOT / "samples" / "spike"
    d = tmp_path / "in"
    shutil.copytree(src, d)
    wrap(src / "vllm-server.log", d / "vllm-server.log", "cri", split=500, step_ns=1)
    for name in ("nginx-access.log", "nginx-error.log"):
        wrap(src / name, d / name, "docker", step_ns=1)
    analyze(d, tmp_path / "out", AnalyzeOptions())
    diag = json.loads((tmp_path / "out" / "diagnosis.json").read_text())
    [e] = diag["episodes"]
    assert (e["signal"], e["count"], e["start"][:19], e["end"][:19]) == (
        "preemptions",
        136,
        "2026-11-29T08:26:26",
        "2026-11-29T08:26:49",
    )
    corr = json.loads((tmp_path / "out" / "correlation.json").read_text())
    # truth.json: 284 requests, every one joined by id from client to gateway to vLLM
    assert corr["match"]["gateway_server"] == {
        "exact": 284,
        "inferred": 0,
        "unmatched_gateway_requests": 0,
        "unmatched_server_executions": 0,
    }
    assert corr["match"]["logical_requests"] == {"exact": 284, "inferred": 0, "none": 0}
    offsets = pl.read_parquet(tmp_path / "out" / "clock_offsets.parquet")
    # as plain (-0.009 s there too: the upstream attempts' starts are anchored at nginx's log time since #37)
    assert offsets.filter(pl.col("source") == "vllm-server.log")["offset_s"].item() == -0.009


def test_pieces_of_lines_join_per_stream():
    """Records of stdout and stderr interleave while a long line is cut: each line is joined from its own
    stream's pieces, at the place of the record that ends it; pieces left at the end are a line."""
    lines = [
        "2026-11-29T08:24:00.1Z stdout P (APIServer pid=3887) INFO 11-29 08:24:00 [api_server.py:1] Rec",
        "2026-11-29T08:24:00.2Z stderr F Triton is installed, but doesn't include CPU backend. Disabling Triton.",
        "2026-11-29T08:24:00.3Z stdout P eived request cmpl-1",
        "2026-11-29T08:24:00.4Z stdout F : params: x",
        "not a record",
        "2026-11-29T08:24:00.5Z stdout P cut by the end",
    ]
    assert envelopes.head_lines("cri", lines) == [
        "Triton is installed, but doesn't include CPU backend. Disabling Triton.",
        "(APIServer pid=3887) INFO 11-29 08:24:00 [api_server.py:1] Received request cmpl-1: params: x",
        "not a record",
        "cut by the end",
    ]
    # across chunks: the pieces wait in the unwrapper
    u = envelopes.Unwrapper("cri", keep_time=True)
    df = pl.DataFrame({"line_no": range(1, 7), "line": lines})
    first, second = u(df.slice(0, 3)), u(df.slice(3))
    assert first["line"].to_list() == [
        "2026-11-29T08:24:00.2Z Triton is installed, but doesn't include CPU backend. Disabling Triton."
    ]
    assert second["line_no"].to_list() == [4, 5]
    assert second["line"][0].startswith("2026-11-29T08:24:00.1Z (APIServer pid=3887) INFO")
    assert u.flush()["line"].to_list() == ["2026-11-29T08:24:00.5Z cut by the end"]
    assert u.joined == 2


def test_which_logs_are_wrapped():
    """No lab or public log is taken for a wrapped one (kubectl's --timestamps lines are plain lines); rsyslog's
    files of HAProxy (RFC 3339 and traditional) are syslog records, HAProxy's own stdout is not."""
    lab, public = need(LAB), need(LAB.parent / "vllm-public")
    files = sorted(lab.glob("*/*.log")) + sorted(lab.glob("*/*.jsonl")) + sorted(public.glob("*.log"))
    assert len(files) >= 30

    def kind(f: Path) -> str | None:
        return envelopes.detect(f.read_text(encoding="utf-8", errors="replace").splitlines()[:200])

    assert [f.name for f in files if kind(f) is not None] == []
    haproxy = ROOT / "tests" / "data" / "haproxy"
    assert [kind(haproxy / n) for n in ("haproxy.log", "haproxy-traditional.log", "haproxy-id.log")] == [
        "syslog",
        "syslog",
        None,
    ]
    # an application's own prefix of the same shape, '<ISO time> <LEVEL> <logger>: ', as Python's logging writes it
    import io
    import logging

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S%z")
    )
    log = logging.getLogger("openai._base_client")
    log.addHandler(handler)
    log.propagate, log.level = False, logging.DEBUG
    for i in range(5):
        log.info("Retrying request to /completions in 0.4%d seconds", i)
    log.removeHandler(handler)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 5 and envelopes.detect(lines) is None


def test_kubelet_rotated_container_logs_are_one_stream(tmp_path):
    """kubelet rotates a container's log to ``0.log.<YYYYMMDD-HHMMSS>`` and gzips all but the newest rotated
    one (pkg/kubelet/logs/container_log_manager.go): the three files of the spike's vLLM log, in CRI records,
    are one stream, oldest first, with the plain log's rows."""
    import gzip

    src = need(SPIKE / "vllm-server.log")
    whole = tmp_path / "whole.log"
    wrap(src, whole, "cri", split=300)
    records = whole.read_bytes().split(b"\n")[:-1]
    # kubelet rotates between records: cut after a line's last record (one with the F tag)
    cuts = [
        next(i for i in range(n * len(records) // 3, len(records)) if b" stdout F " in records[i - 1])
        for n in (1, 2)
    ]
    parts = [records[: cuts[0]], records[cuts[0] : cuts[1]], records[cuts[1] :]]
    d = tmp_path / "pods" / "lab_vllm-0_0f3c" / "vllm"
    d.mkdir(parents=True)
    (d / "0.log.20261129-082500.gz").write_bytes(gzip.compress(b"\n".join(parts[0]) + b"\n"))
    (d / "0.log.20261129-082630").write_bytes(b"\n".join(parts[1]) + b"\n")
    (d / "0.log").write_bytes(b"\n".join(parts[2]) + b"\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(src, plain / "vllm-server.log")
    ingest(plain, tmp_path / "a", AnalyzeOptions())
    res = ingest(tmp_path / "pods", tmp_path / "b", AnalyzeOptions())
    f = _files(res)
    names = [
        "lab_vllm-0_0f3c/vllm/0.log.20261129-082500.gz",
        "lab_vllm-0_0f3c/vllm/0.log.20261129-082630",
        "lab_vllm-0_0f3c/vllm/0.log",
    ]
    assert len({f[n]["stream"] for n in names}) == 1
    assert sum(f[n]["lines_total"] for n in names) == 1184
    stats = pl.read_parquet(tmp_path / "b" / "server_stats.parquet").sort("seq")
    assert stats["source"].unique(maintain_order=True).to_list() == names  # oldest first
    assert stats["ts"].is_sorted() and set(stats["replica"]) == {"vllm"}
    for table in ("server_stats", "server_requests"):
        assert _rows(tmp_path / "b", table).equals(_rows(tmp_path / "a", table)), table


JOURNALD = ROOT / "tests" / "data" / "journald"


@pytest.mark.parametrize("fmt", ["short", "short-iso", "short-iso-precise"])
def test_a_vllm_log_printed_by_journalctl(tmp_path, fmt):
    """The spike's vLLM log as journalctl 252 printed it (tests/data/journald/README.md): the rows of the plain
    log, times to the second. An ISO header's time is each line's (short-iso-precise: the milliseconds the
    journal held); a traditional one has no year, so vLLM's own stamps are read. Two lines journalctl printed
    as '[77B blob data]' (a carriage return without --all) are all that is not recognised."""
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(need(SPIKE / "vllm-server.log"), plain / "vllm-server.log")
    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(JOURNALD / f"vllm-{fmt}.log", d / "vllm.log")
    ingest(plain, tmp_path / "a", AnalyzeOptions())
    res = ingest(d, tmp_path / "b", AnalyzeOptions())
    f = _files(res)["vllm.log"]
    assert (f["format"], f["lines_total"], f["lines_parsed"]) == ("vllm_server", 1184, 1182)
    assert f["messages"][0].startswith("syslog / journalctl output: the lines inside its records were read")
    for table in ("server_stats", "server_requests", "server_request_events"):
        assert _rows(tmp_path / "b", table).equals(_rows(tmp_path / "a", table)), table
    first = pl.read_parquet(tmp_path / "b" / "server_stats.parquet")["ts"].min()
    # the first stats line, 08:25:06 in vLLM's stamp, the journal's first entry of that second (+1 ms)
    assert first == datetime(2026, 11, 29, 8, 25, 6, 1000 if fmt == "short-iso-precise" else 0, tzinfo=UTC)
    unrec = pl.read_parquet(tmp_path / "b" / "unrecognized.parquet")
    assert unrec["count"].sum() == 2 and all("blob data]" in e for ex in unrec["examples"] for e in ex)


@pytest.mark.parametrize("kind", ["cri", "docker"])
@pytest.mark.parametrize("run", ["retry-storm", "spike"])
def test_a_container_log_read_in_pieces_gives_the_rows_of_a_whole_read(tmp_path, held, kind, run):
    """A large container log of vLLM is read in pieces on every core like a plain one (logscope.ingest.pieces): cut
    only after a record that ends its line, each piece's lines unwrapped, the lines before a cut too (the
    state a piece is guessed from). The sample's log, lines cut into records past 300 characters, read in 8 KiB
    chunks and 6 segments: every table, and each file's coverage and messages, as a whole read's."""
    src = ROOT / "samples" / run / "vllm-server.log"
    log = tmp_path / "src" / "vllm-server.log"
    records = wrap(src, log, kind, split=300)
    _same_as_whole_read(tmp_path, log, chunk=8192, segments=6)
    assert held == {"kept": 5, "again": 0}  # every piece's guessed state held
    files = pl.read_parquet(tmp_path / "cut" / "files.parquet")
    lines = src.read_bytes().count(b"\n")
    assert files["lines_total"].to_list() == [lines]
    assert (
        f"{records - lines:,} partial record(s) joined into the lines the runtime had cut"
        in files["messages"][0]
    )


def test_logs_collected_from_a_node_are_named_by_their_pod(tmp_path):
    """A node's logs as kubelet keeps them: /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restarts>.log
    (the folder is the container's, 'vllm' in every pod) and the links /var/log/containers/<pod>_<namespace>_
    <container>-<id>.log. Each server is its pod. The crash run's pod restarted its container: the killed
    server's lines in 0.log, the new one's in 1.log, and the death is found across them, as in one log (lab
    README: killed 08:34:22, ready again 08:35:31)."""
    crash = need(LAB / "crash")
    d = tmp_path / "node"
    lines = (crash / "vllm-server.log").read_bytes().split(b"\n")[:-1]
    restart = next(i for i, ln in enumerate(lines) if b"(APIServer pid=8600)" in ln)
    pod0 = d / "pods" / "lab_vllm-0_7c9e6679-7425-40de-944b-e07fc1f90ae7" / "vllm"
    parts = {pod0 / "0.log": lines[:restart], pod0 / "1.log": lines[restart:]}
    for dest, part in parts.items():
        plain = tmp_path / "part.log"
        plain.write_bytes(b"\n".join(part) + b"\n")
        wrap(plain, dest, "cri", step_ns=1)
    wrap(
        need(LAB / "calm" / "vllm-server.log"),
        d / "pods" / "lab_vllm-1_0b3f8f8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b" / "vllm" / "0.log",
        "cri",
        step_ns=1,
    )
    link = d / "containers" / f"vllm-2_lab_vllm-{'3f' * 32}.log"
    wrap(need(SPIKE / "vllm-server.log"), link, "cri", step_ns=1)
    analyze(d, tmp_path / "out", AnalyzeOptions())
    replicas = dict(pl.read_parquet(tmp_path / "out" / "files.parquet").select("path", "replica").iter_rows())
    assert sorted(set(replicas.values())) == ["vllm-0", "vllm-1", "vllm-2"]
    assert replicas[str(pod0.relative_to(d) / "1.log")] == "vllm-0"
    diag = json.loads((tmp_path / "out" / "diagnosis.json").read_text())
    crashes = [e for e in diag["episodes"] if e["class"] == "crash"]
    assert [(e["replica"], e["start"][:19]) for e in crashes] == [("vllm-0", "2026-11-29T08:34:22")]
    assert crashes[0]["reason"].startswith(
        "silent death (log stops, new banner) at 08:34:22, restarted (pid 8600) "
        "and ready at 08:35:31: down 69 s"
    )


def test_public_excerpts_in_a_container_log(tmp_path):
    """Every public vLLM excerpt (wrapped lines, glued records, tracebacks, docker timestamps already in front)
    inside a node's CRI records, lines past 200 characters cut: the same format, coverage and rows as the plain
    excerpt; only times differ, where the excerpt gave none and the runtime's now stands (no longer inferred)."""
    from conftest import PUBLIC

    files = sorted(need(PUBLIC).glob("*.log"))
    assert len(files) >= 20
    for f in files:
        d = tmp_path / f.stem
        (d / "a").mkdir(parents=True)
        shutil.copy(f, d / "a" / f.name)
        wrap(f, d / "b" / f.name, "cri", split=200, step_ns=1)
        a, b = ingest(d / "a", d / "oa", AnalyzeOptions()), ingest(d / "b", d / "ob", AnalyzeOptions())
        cols = ["format", "lines_total", "lines_parsed"]
        assert a.files.select(cols).equals(b.files.select(cols)), f.name
        assert _rows(d / "oa", "server_stats").equals(_rows(d / "ob", "server_stats")), f.name
        for table in ("server_events", "server_request_events"):
            plain, boxed = (_rows(d / o, table).drop("ts", "ts_inferred", strict=False) for o in ("oa", "ob"))
            assert plain.sort(plain.columns, nulls_last=True).equals(
                boxed.sort(boxed.columns, nulls_last=True)
            ), (f.name, table)
