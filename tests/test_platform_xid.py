"""A GPU fault tied to a server's death (issue #40): a kernel `NVRM: Xid` line shortly before a vLLM engine death is
that death's platform cause, with its lines and their clock; one far from any death, or one with no wall time, is
context. Real vLLM death pastes (tests/data/vllm-deaths) beside real kernel excerpts (tests/data/platform).

No public thread found holds a vLLM death and the kernel's Xid lines of the same incident with wall times on both:
the tie itself is tested on a real pair whose kernel clock is shifted as a whole (every dmesg -T stamp moved by one
offset, the lines and their intervals kept), the metamorphic form the OOM tests use for a clock an hour off."""

from __future__ import annotations

import html
import json
import re
import shutil
from datetime import datetime
from pathlib import Path

import polars as pl

from conftest import DATA

PLATFORM, DEATHS = DATA / "platform", DATA / "vllm-deaths"
D13673 = (
    DEATHS / "13673-v0.7.3-enginecore-hit-an-exception.log"
)  # V1 0.7.3, illegal memory access: 02-21 06:30:25
D17227 = DEATHS / "17227-v0.8.4-enginecore-hit-an-exception-keyerror.log"  # V1 0.8.4: 04-26 11:29:08
GPUD = (
    PLATFORM / "kernel-dmesg-ctime-xid-gpud-46.log"
)  # Xid 13 x3 at 11:43:09, Xid 109 at 11:43:14 (2024-08-30)
AKASH = PLATFORM / "kernel-dmesg-ctime-xid-akash-244.log"  # Xid 43, 43, 31, 94 over 9 days (2024)
MONO = PLATFORM / "kernel-dmesg-monotonic-xid13-vllm-5901.log"  # six Xid 13, seconds since boot only
_CTIME = re.compile(r"\[(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]")


def _shifted(src: Path, dest: Path, first: str, to: datetime) -> Path:
    """``src`` with every dmesg -T stamp moved by one offset, so that the stamp ``first`` becomes ``to``."""
    delta = to - datetime.strptime(first, "%a %b %d %H:%M:%S %Y")

    def move(m: re.Match) -> str:
        t = datetime.strptime(re.sub(" +", " ", m.group(1)), "%a %b %d %H:%M:%S %Y") + delta
        return f"[{t.strftime('%a %b')} {t.day:>2} {t.strftime('%H:%M:%S %Y')}]"

    dest.write_text(_CTIME.sub(move, src.read_text()))
    return dest


def _analyze(tmp_path: Path, *files: Path) -> tuple[Path, dict]:
    from logscope.api import AnalyzeOptions, analyze

    src = tmp_path / "in"
    src.mkdir(exist_ok=True)
    for p in files:
        if p.parent != src:
            shutil.copy2(p, src / p.name)
    out = tmp_path / "out"
    analyze(src, out, AnalyzeOptions())
    return out, json.loads((out / "summary.json").read_text())


def _titled(s: dict, start: str) -> dict:
    return next(f for f in s["findings"] if f["title"].startswith(start))


def test_an_xid_far_from_the_death_stays_context(tmp_path):
    """gpud#46's Xid lines (2024-08-30) beside vllm#13673's engine death (02-21 06:30:25, read in 2024 from the
    kernel log's own stamps: six months before): the death keeps its own finding, whose unknown killer names the
    kernel log's span; the Xids are findings of their own that say they are far from it."""
    _, s = _analyze(tmp_path, D13673, GPUD)
    assert s["verdict"][0] == (
        "The vLLM server died (its engine process is gone) at 02-21 06:30:25, with no restart in the logs."
    )
    death = _titled(s, "Engine died at 02-21 06:30:25")
    assert (
        "covers 08-30 11:43:09–08-30 11:43:14 on the kernel host's clock, not 02-21 06:30:25"
        in death["evidence"]
    )
    assert not any(f["title"].startswith("GPU fault") for f in s["findings"])
    xids = [f for f in s["findings"] if f["title"].startswith("GPU error: Xid")]
    assert [f["title"] for f in xids] == [
        "GPU error: Xid 13 on PCI:0000:cb:00 (3×; no process named)",
        "GPU error: Xid 109 on PCI:0000:cb:00 (1×; pt_main_thread)",
    ]
    for f in xids:
        assert "no server death within 120 s after it (1 death(s) in the folder)" in f["cause"]
        assert f["cause"].endswith("context, not a death's cause")


def test_an_xid_with_only_seconds_since_boot_cannot_be_placed(tmp_path):
    """vllm#5901's dmesg (six Xid 13 lines, seconds since boot only; the paste's code fence glued to the first
    line) beside a real death: all six lines are read, none can be placed, and both findings say so."""
    out, s = _analyze(tmp_path, D13673, MONO)
    ev = pl.read_parquet(out / "platform_events.parquet").filter(pl.col("source") == MONO.name)
    assert ev["xid"].to_list() == [13] * 6 and ev["ts"].null_count() == 6
    assert ev["uptime_s"][0] == 93297.027938 and set(ev["gpu"]) == {"PCI:0000:43:00"}
    files = pl.read_parquet(out / "files.parquet").filter(pl.col("path") == MONO.name)
    assert files["lines_unrecognized"][0] == 0
    death = _titled(s, "Engine died at 06:30:25")
    assert (
        f"the kernel log ({MONO.name}) gives only seconds since boot: none of its lines can be placed"
        in (death["evidence"])
    )
    xid = _titled(s, "GPU error: Xid 13 on PCI:0000:43:00 (6×")
    assert xid["cause"].endswith(
        "only seconds since boot were written: it cannot be placed beside the servers' deaths"
    )


def test_an_xid_just_before_the_death_is_its_cause(tmp_path):
    """gpud#46's kernel clock shifted so that its first Xid 13 falls 16 s before vllm#13673's engine death: the
    death's finding names the GPU fault, its four lines (the Xid 109 five seconds later among them), the clock they
    were read on and how the tie was made (the folder's only server: a guess, said as one). The verdict, summary.md
    and the page say the same; the Xid lines are no second finding."""
    kern = _shifted(GPUD, tmp_path / GPUD.name, "Fri Aug 30 11:43:09 2024", datetime(2026, 2, 21, 6, 30, 9))
    (tmp_path / "in").mkdir()
    shutil.move(kern, tmp_path / "in" / GPUD.name)
    out, s = _analyze(tmp_path, D13673)
    title = "GPU fault (Xid 13, Xid 109 on PCI:0000:cb:00) 16 s before the engine died at 06:30:25, no restart in the logs"
    top = s["findings"][0]
    assert top["title"] == title and top["severity"] == "critical"
    assert s["verdict"][0] == (
        "The vLLM server died after a GPU fault (the kernel's NVIDIA Xid) at 06:30:25, with no restart in the logs."
    )
    for n in (2, 3, 4, 5):
        assert f"{GPUD.name} line {n}: NVRM: Xid (PCI:0000:cb:00)" in top["evidence"]
    assert (
        "tied to the server: a guess: 13673-v0.7.3-enginecore-hit-an-exception is the folder's only server; the Xid "
        "names pid 1797828, which its log does not name"
    ) in top["evidence"]
    assert "the kernel host's clock: the wall time dmesg / journalctl wrote on the line" in top["symptom"]
    assert "a kernel bug hit by a request's shape, not a hardware fault" in top["cause"]
    assert not any(f["title"].startswith("GPU error: Xid") for f in s["findings"])
    assert s["server_lifecycle"]["deaths"][0]["kinds"] == ["engine_dead", "gpu_xid"]
    md = (out / "summary.md").read_text().replace("\\", "")
    page = html.unescape((out / "report.html").read_text())
    for text in (s["verdict"][0], title):
        assert text in md and text in page, text


def test_only_the_xid_in_the_window_is_the_cause_the_rest_stays_context(tmp_path):
    """akash#244's dmesg (Xid 43, 43, 31, 94 over nine days) shifted so that its Xid 94 falls 40 s before
    vllm#17227's engine death: that one line is the cause (a contained ECC error: the GPU itself), the three older
    Xids stay findings of their own, far from the death."""
    (tmp_path / "in").mkdir()
    _shifted(
        AKASH, tmp_path / "in" / AKASH.name, "Fri Aug  9 13:32:56 2024", datetime(2026, 4, 26, 11, 28, 28)
    )
    _, s = _analyze(tmp_path, D17227)
    top = s["findings"][0]
    assert top["title"] == (
        "GPU fault (Xid 94 on PCI:0000:00:08) 40 s before the engine died at 04-26 11:29:08, no restart in the logs"
    )
    assert f"{AKASH.name} line 12: NVRM: Xid (PCI:0000:00:08): 94" in top["evidence"]
    assert "a fault of the GPU itself" in top["cause"] and "dcgmi diag -r 3" in top["next_test"]
    rest = sorted(f["title"] for f in s["findings"] if f["title"].startswith("GPU error: Xid"))
    assert rest == [
        "GPU error: Xid 31 on PCI:0000:00:07 (1×; python3.10)",
        "GPU error: Xid 43 on PCI:0000:00:05 (2×; pt_main_thread)",
    ]


def test_an_xid_beside_two_servers_is_not_guessed_onto_one(tmp_path):
    """The same shifted gpud#46 beside two dead servers (vllm#13673 and vllm#17227): the Xid names no pid of either
    log, so it is tied to neither (no guess with two candidates) and stays context."""
    (tmp_path / "in").mkdir()
    _shifted(GPUD, tmp_path / "in" / GPUD.name, "Fri Aug 30 11:43:09 2024", datetime(2026, 2, 21, 6, 30, 9))
    _, s = _analyze(tmp_path, D13673, D17227)
    assert not any(f["title"].startswith("GPU fault") for f in s["findings"])
    assert all("gpu_xid" not in d["kinds"] for d in s["server_lifecycle"]["deaths"])
    xid = _titled(s, "GPU error: Xid 13 on PCI:0000:cb:00")
    assert "(2 death(s) in the folder)" in xid["cause"]


def test_the_year_of_vllm_stamps_comes_from_dmesg_not_a_gpu_serial(tmp_path):
    """akash#244's dmesg -T lines carry their year (2024) and a GPU's 'Board Serial Number: 1650423013443', 13
    digits that read as an epoch in milliseconds (2022-04-20): vllm#17227's yearless stamps take 2024 from the
    dmesg stamps, never 2022 from the serial number."""
    out, _ = _analyze(tmp_path, D17227, AKASH)
    f = pl.read_parquet(out / "files.parquet").filter(pl.col("path") == D17227.name).row(0, named=True)
    assert f"vLLM timestamps have no year: year 2024 from full timestamps in {AKASH.name}" in f["assumptions"]
    assert f["first_ts"].year == 2024


def test_the_shift_keeps_the_lines(tmp_path):
    """The shifted copy differs from the real excerpt in its stamps only (the metamorphic transform is honest)."""
    moved = _shifted(AKASH, tmp_path / "a.log", "Fri Aug  9 13:32:56 2024", datetime(2026, 4, 26, 11, 28, 28))
    a, b = AKASH.read_text().splitlines(), moved.read_text().splitlines()
    assert len(a) == len(b) and [_CTIME.sub("", x) for x in a] == [_CTIME.sub("", x) for x in b]
    assert b[11].startswith("[Sun Apr 26 11:28:28 2026] NVRM: Xid (PCI:0000:00:08): 94,")


def test_a_kernel_clock_an_hour_off_ties_nothing(tmp_path):
    """The same pair with the kernel's clock an hour ahead (a time zone dmesg -T read in another zone): the Xid
    falls an hour after the death, so no fault is tied, the verdict keeps the engine's own death and the Xids stay
    context."""
    (tmp_path / "in").mkdir()
    _shifted(GPUD, tmp_path / "in" / GPUD.name, "Fri Aug 30 11:43:09 2024", datetime(2026, 2, 21, 7, 30, 9))
    _, s = _analyze(tmp_path, D13673)
    assert s["verdict"][0].startswith("The vLLM server died (its engine process is gone) at 06:30:25")
    assert not any(f["title"].startswith("GPU fault") for f in s["findings"])
    xid = _titled(s, "GPU error: Xid 13 on PCI:0000:cb:00 (3×")
    assert "no server death within 120 s after it (1 death(s) in the folder)" in xid["cause"]
