"""Many small files (issue #30: 10,000 took 159 s): detection scores every head in one pass, and small files of
one format and folder are parsed in batches. The inputs are the lab runs' real records cut into one-record files
(bench/smallfiles.py); the figures are in docs/performance.md (item 36), not asserted here."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import logscope.parsers as parsers
from conftest import LAB, ROOT, need
from logscope.ingest import COPY_NOTE, IngestOptions, ingest

sys.path.insert(0, str(ROOT / "bench"))
import smallfiles  # noqa: E402

FILES = int(os.environ.get("LOGSCOPE_SMALLFILES", "2000"))  # 10,000 by hand; 2,000 in CI
SPIKE = LAB / "spike"


def _sorted(df: pl.DataFrame, drop: tuple[str, ...] = ()) -> pl.DataFrame:
    df = df.drop(*drop, strict=False)
    return df.sort(df.columns, nulls_last=True)


def test_small_files_give_the_tables_of_their_concatenation(tmp_path):
    """Each run's access and error lines one per file, its client records one request per file: the same rows as
    the same records in one file per run and kind, but for the file and line each row names. The client's
    ``concurrency`` comes from its phase records, which a one-request file does not hold (not compared)."""
    need(LAB)
    assert smallfiles.write(tmp_path / "small", FILES) == FILES
    smallfiles.concatenated(tmp_path / "whole", FILES)
    small = ingest(tmp_path / "small", tmp_path / "out-small", IngestOptions())
    whole = ingest(tmp_path / "whole", tmp_path / "out-whole", IngestOptions())
    assert small.files.height == FILES + len(list((tmp_path / "small").glob("*/nginx.conf")))
    for name in ("gateway_attempts", "gateway_errors", "client_phases"):
        a, b = small.table(name), whole.table(name)
        assert a.height > 0 or name == "client_phases"
        assert_frame_equal(_sorted(a, ("source", "line_no")), _sorted(b, ("source", "line_no")))
    for name in ("client_attempts", "client_requests"):
        a, b = small.table(name), whole.table(name)
        assert a.height > 100
        assert_frame_equal(
            _sorted(a, ("source", "line_no", "concurrency")),
            _sorted(b, ("source", "line_no", "concurrency")),
            rel_tol=1e-12,
        )
    f = small.files.filter(pl.col("format") != "nginx_conf")
    assert (
        f["lines_unrecognized"].sum() == 0
        and f["lines_parsed"].sum()
        == whole.files.filter(pl.col("format") != "nginx_conf")["lines_parsed"].sum()
    )
    batched = f.filter(
        pl.col("assumptions").list.eval(pl.element().str.contains("read in one batch")).list.any()
    )
    assert batched.height == f.height  # every nginx and client JSONL file (client JSONL keyed by file)


def _damaged(tmp_path: Path) -> Path:
    """Spike's access and error lines one per file; one access file's line cut short (left unrecognised), one
    access and one error line stamped 1970 (outliers)."""
    d = tmp_path / "in" / "gw"
    d.mkdir(parents=True)
    (d / "nginx.conf").write_bytes(need(SPIKE / "nginx.conf").read_bytes())
    access = (SPIKE / "nginx-access.log").read_text().splitlines()[:60]
    errors = [ln for ln in (SPIKE / "nginx-error.log").read_text().splitlines() if ln.strip()][:60]
    access[7] = access[7][:40]
    access[20] = access[20].replace("msec=1795", "msec=0000", 1)
    errors[9] = "1970/01/01" + errors[9][10:]
    for k, ln in enumerate(access):
        (d / f"access-{k:03d}.log").write_text(ln + "\n")
    for k, ln in enumerate(errors):
        (d / f"error-{k:03d}.log").write_text(ln + "\n")
    return d.parent


def test_a_batch_gives_each_file_what_reading_it_alone_gives(tmp_path):
    """The same tables and per-file tallies with batches as with every file read alone (``small_bytes=0``), with
    a file the batch's layouts leave a line of (read again alone) and outliers (the batch read file by file)."""
    src = _damaged(tmp_path)
    alone = ingest(src, tmp_path / "alone", IngestOptions(small_bytes=0))
    batch = ingest(src, tmp_path / "batch", IngestOptions())
    for name in ("gateway_attempts", "gateway_errors", "unrecognized"):
        assert_frame_equal(_sorted(batch.table(name)), _sorted(alone.table(name)))
    assert_frame_equal(batch.files.select(_FILE_COLS), alone.files.select(_FILE_COLS))
    f = batch.files
    cut = f.filter(pl.col("path") == "gw/access-007.log").row(0, named=True)
    assert cut["lines_unrecognized"] == 1 and not any("batch" in a for a in cut["assumptions"])
    for path in ("gw/access-020.log", "gw/error-009.log"):
        said = f.filter(pl.col("path") == path)["messages"].to_list()[0]
        assert any(m.startswith("1 record(s) with a time outside") for m in said), said
    others = f.filter(pl.col("path") == "gw/access-021.log")["messages"].to_list()[0]
    assert not any("outside" in m for m in others)
    # the files read again alone: the one the batch's layouts leave a line of, the two with an outlier
    kept = f.filter(
        pl.col("assumptions").list.eval(pl.element().str.contains("read in one batch")).list.any()
    )
    assert kept.height == 60 + 60 - 3 and set(kept["format"]) == {"nginx_access", "nginx_error"}


@pytest.mark.slow  # detection of every real file's head, each one alone and all at once
@pytest.mark.parametrize("blank", ["", " ", "\x1c", " \x1f\t", "\u3000"])
def test_detection_in_one_pass_is_detection_one_head_at_a_time(blank):
    """Every format's batch scores are its one-head scores, with blank lines of every kind ``str.strip`` empties
    (Rust's white space lacks \\x1c-\\x1f) and one-line heads cut from the samples, in any company."""
    heads = [[blank, *m.SAMPLES[:2], blank] for m in parsers.FORMATS]
    heads += [[ln] for m in parsers.FORMATS for ln in m.SAMPLES] + [
        [],
        [blank],
        [blank, "# a comment", blank],
    ]
    heads += [["# c", blank, *parsers.BY_NAME["nginx_conf"].SAMPLES]]
    one = [parsers.detect(h) for h in heads]
    assert parsers.detect_many(heads) == one
    assert parsers.detect_many(heads[::-1]) == one[::-1]
    assert {m.NAME for m, _, _ in one if m is not None} >= {"nginx_access", "nginx_error", "vllm_server"}


def test_many_client_sources_are_compared_at_once_with_the_pairwise_choice(tmp_path, monkeypatch):
    """Which client views correlation keeps, for many sources at once (``correlate.dupes``) and pair by pair: the
    same, on the storm's JSONL and DEBUG log (one view of the other) beside one-request client files. The
    one-request files are all kept: a few sends coinciding within 30 ms under load make no copy (they did)."""
    from logscope.correlate import client_sources, dupes

    need(LAB)
    smallfiles.write(tmp_path / "in", 420)
    for name in ("client-storm.jsonl", "client-storm.log"):
        (tmp_path / "in" / name).write_bytes((LAB / "retry-storm" / name).read_bytes())
    res = ingest(tmp_path / "in", tmp_path / "out", IngestOptions())
    ca, cr = res.table("client_attempts"), res.table("client_requests")
    assert ca["source"].n_unique() > dupes.MANY
    at_once = client_sources.pick_client_sources(ca, cr)
    monkeypatch.setattr(dupes, "MANY", 10**9)
    assert client_sources.pick_client_sources(ca, cr) == at_once
    kept, dropped = at_once
    assert list(dropped) == ["client-storm.log"] and "client-storm.jsonl" in kept
    monkeypatch.setattr(dupes, "MANY", 0)
    monkeypatch.setattr(
        dupes, "MIN_SENDS", 0
    )  # the rule before: a third of the one-request files were dropped
    assert len(client_sources.pick_client_sources(ca, cr)[1]) > 10
    assert (
        len(kept)
        == ca["source"].n_unique()
        + cr.filter(~pl.col("source").is_in(ca["source"].unique().implode()))["source"].n_unique()
        - 1
    )


def _client_folder(tmp_path: Path) -> Path:
    """Every lab client JSONL of at most 256 KiB, whole (phases, retries, timeouts, a killed client's open
    requests); the retry storm's (538 KB) cut in three files (the requests in flight at a cut have records in two);
    the spike's first 400 lines (an earlier collection of its log: a copy), all in one folder: small files of one
    format, read as one batch."""
    d = tmp_path / "in" / "clients"
    d.mkdir(parents=True)
    for p in sorted(LAB.glob("*/client-*.jsonl")):
        if p.stat().st_size <= IngestOptions().small_bytes:
            (d / f"{p.parent.name}-{p.name}").write_bytes(p.read_bytes())
    storm = need(LAB / "retry-storm" / "client-storm.jsonl").read_text().splitlines(keepends=True)
    for k, cut in enumerate((storm[:1200], storm[1200:2400], storm[2400:])):
        (d / f"storm-part{k + 1}.jsonl").write_text("".join(cut))
    spike = (SPIKE / "client-spike.jsonl").read_text().splitlines(keepends=True)
    (d / "spike-earlier.jsonl").write_text("".join(spike[:400]))
    return d.parent


def _equal(a, b, names) -> None:
    for name in names:
        # e2e_s: polars divides a column of one row exactly and a longer one by the reciprocal (1 ulp apart)
        assert_frame_equal(_sorted(a.table(name)), _sorted(b.table(name)), rel_tol=1e-12)


_FILE_COLS = [
    "path",
    "format",
    "replica",
    "lines_total",
    "lines_parsed",
    "lines_unrecognized",
    "first_ts",
    "last_ts",
    "messages",
]


def test_client_logs_in_one_batch_give_what_each_gives_alone(tmp_path):
    """Client JSONL is batched though its parser carries state (attempts wait for their request record, phases
    give the concurrency, a client's timeout is learnt from its requests): every state is kept per file, so the
    batch's rows are those of each file read alone, a request cut across two files included."""
    need(LAB)
    src = _client_folder(tmp_path)
    alone = ingest(src, tmp_path / "alone", IngestOptions(small_bytes=0))
    batch = ingest(src, tmp_path / "batch", IngestOptions())
    _equal(batch, alone, ("client_attempts", "client_requests", "client_phases", "unrecognized"))
    assert_frame_equal(batch.files.select(_FILE_COLS), alone.files.select(_FILE_COLS))
    f = batch.files
    files = sorted((src / "clients").glob("*.jsonl"))  # counted here, not typed in: each recording adds some
    assert f.height == len(files) >= 15 and set(f["format"]) == {"client_jsonl"}
    assert f.filter(
        ~pl.col("assumptions").list.eval(pl.element().str.contains("read in one batch")).list.any()
    ).is_empty()
    req = batch.table("client_requests")
    # grep -c '"kind": "request"' over the files, the storm's 653 in its parts; the spike's earlier collection adds
    # none (its lines are all in the spike's log), as when read alone
    said = sum(p.read_text().count('"kind": "request"') for p in files if p.name != "spike-earlier.jsonl")
    storm = sum(p.read_text().count('"kind": "request"') for p in files if p.name.startswith("storm-part"))
    assert storm == 653 and req.height == said >= 2082 + 653
    (earlier,) = f.filter(pl.col("path") == "clients/spike-earlier.jsonl")["messages"].to_list()
    assert earlier[0].startswith(COPY_NOTE + "clients/spike-client-spike.jsonl")
    # the phases of each file give its own requests' concurrency, none of another file's
    assert req.filter(pl.col("concurrency").is_not_null())["source"].n_unique() > 5
    cut = batch.table("client_attempts").filter(pl.col("source").str.starts_with("clients/storm-part"))
    both = cut.group_by("request_id").agg(pl.col("source").n_unique()).filter(pl.col("source") == 2)
    assert both.height > 0  # requests with attempts in both parts, each part's rows as read alone


def test_small_client_and_gateway_files_batched_equal_each_read_alone(tmp_path):
    """The lab runs' records one per file (nginx access and error lines, client requests), one client file with a
    line cut short (read again alone, its line unrecognised): every table and every file's tallies as when each
    file is read alone."""
    need(LAB)
    src = tmp_path / "small"
    smallfiles.write(src, 600)
    p = sorted(src.glob("client-spike/requests-*.jsonl"))[3]
    text = p.read_text().splitlines(keepends=True)
    p.write_text("".join([text[0][:40] + "\n", *text[1:]]))
    alone = ingest(src, tmp_path / "alone", IngestOptions(small_bytes=0))
    batch = ingest(src, tmp_path / "batch", IngestOptions())
    _equal(
        batch,
        alone,
        (
            "client_attempts",
            "client_requests",
            "client_phases",
            "gateway_attempts",
            "gateway_errors",
            "unrecognized",
        ),
    )
    assert_frame_equal(batch.files.select(_FILE_COLS), alone.files.select(_FILE_COLS))
    in_batch = pl.col("assumptions").list.eval(pl.element().str.contains("read in one batch")).list.any()
    cut = batch.files.filter(pl.col("path") == p.relative_to(src).as_posix()).row(0, named=True)
    assert cut["lines_unrecognized"] == 1 and not any("batch" in a for a in cut["assumptions"])
    clients = batch.files.filter(pl.col("format") == "client_jsonl")
    assert clients.height > 150 and clients.filter(~in_batch).height == 1
    assert batch.table("client_requests").height == alone.table("client_requests").height > 150
