"""nginx access/error parsers on real logs: the lab recordings (../shared/fixtures/lab) and the logs
written by Debian's nginx 1.22.1 here (tests/data/nginx, see its README and run.sh).

Expected lab figures are truth.json's ``gateway`` block, re-counted from the raw files with grep/awk
(commands in the comments); they agree."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from logscope.parsers import MIN_CONFIDENCE, nginx_access, nginx_error
from logscope.parsers import _nginx_format as nf
from logscope.parsers.base import ParseContext
from tests.conftest import DATA, LAB, need
from tests.conftest import ingest_files as _ingest_files

NGX = DATA / "nginx"
COMPLETIONS = "/v1/completions"

# run: (access lines, attempt rows of POST /v1/completions, downstream statuses of those requests,
#       requests with >1 attempt, attempts to 127.0.0.1:8002, rows flagged no_live_upstreams)
# Counted per run (f=<run>/nginx-access.log; c() { grep '"POST /v1/completions' $f; }):
#   lines      wc -l <$f
#   rows       c | grep -o ' us="[^"]*"' | awk -F, '{n+=NF} END{print n}'
#   statuses   c | grep -o ' status=[0-9]*' | sort | uniq -c
#   multi      c | grep -c ' ua="[^"]*,'
#   dead       c | grep -o ' ua="[^"]*"' | grep -o '127.0.0.1:8002' | wc -l
#   no live    c | grep -o ' ua="[^"]*"' | grep -oE '(vllm_edge|vllm_long)' | wc -l   (all with us 502)
LAB_ACCESS = {
    "ladder": (511, 480, {200: 476}, 4, 4, 0),
    "spike": (284, 297, {200: 284}, 13, 13, 0),
    "retry-storm": (1245, 1264, {200: 457, 499: 454, 502: 334}, 19, 16, 334),
    "crash": (1166, 1190, {200: 351, 502: 815}, 24, 18, 814),
    "orphan": (704, 716, {200: 704}, 12, 12, 0),
    "calm": (186, 186, {200: 186}, 0, 0, 0),
    "v0-ladder": (267, 277, {200: 267}, 10, 10, 0),
}
# every line of ladder (also /tokenize and GET /metrics): grep -o ' us="[^"]*"' $f | awk -F, '{n+=NF} END{print n}'
LADDER_ALL_ROWS = 522

# Per kind, f=<run>/nginx-error.log:  grep -c 'closed keepalive connection' (keepalive_closed),
# 'upstream timed out (110' (upstream_timeout), -E 'connect\(\) (to \S+ )?failed \(' (connect_failed),
# 'no live upstreams', 'upstream prematurely closed' (upstream_closed), 'upstream server temporarily
# disabled', 'client prematurely closed connection' (client_closed), 'failed (32: Broken pipe)',
# 'recv() failed (104' (upstream_reset), '\[notice\]' (notice). They add up to wc -l: no 'other'.
LAB_ERRORS = {
    "ladder": {
        "keepalive_closed": 134,
        "connect_failed": 11,
        "upstream_disabled": 11,
        "notice": 12,
        "shutdown": 1,
    },
    "spike": {
        "keepalive_closed": 265,
        "client_closed": 19,
        "connect_failed": 13,
        "upstream_disabled": 13,
        "notice": 12,
        "shutdown": 1,
    },
    "retry-storm": {
        "client_closed": 454,
        "no_live_upstreams": 334,
        "keepalive_closed": 75,
        "upstream_disabled": 19,
        "connect_failed": 16,
        "upstream_timeout": 3,
        "notice": 12,
        "shutdown": 1,
    },
    "crash": {
        "keepalive_closed": 945,
        "no_live_upstreams": 814,
        "upstream_disabled": 25,
        "connect_failed": 24,
        "client_closed": 14,
        "upstream_closed": 8,
        "upstream_reset": 1,
        "notice": 12,
        "shutdown": 1,
    },
    "orphan": {
        "broken_pipe": 379,
        "keepalive_closed": 194,
        "connect_failed": 12,
        "upstream_disabled": 12,
        "notice": 12,
        "shutdown": 1,
    },
    "calm": {"keepalive_closed": 34, "notice": 12, "shutdown": 1},
    "v0-ladder": {
        "keepalive_closed": 259,
        "connect_failed": 10,
        "upstream_disabled": 10,
        "client_closed": 8,
        "notice": 12,
        "shutdown": 1,
    },
}

LAB_FORMAT = (  # log_format lab, copied from the lab's nginx.conf
    '$time_iso8601 msec=$msec rid=$request_id port=$server_port client_rid="$http_x_request_id" "$request" '
    'status=$status rt=$request_time ua="$upstream_addr" us="$upstream_status" urt="$upstream_response_time" '
    'uct="$upstream_connect_time" uht="$upstream_header_time" req_len=$request_length sent=$bytes_sent '
    'retry_hdr="$http_x_stainless_retry_count" ua_client="$http_user_agent"'
)


def ingest_files(tmp: Path, *files: Path, **opts):
    tmp.mkdir(parents=True, exist_ok=True)  # several ingests per test, each in its own folder
    return _ingest_files(tmp, *files, **opts)


def _file_row(res, name: str) -> dict:
    row = res.files.filter(pl.col("path") == name).row(0, named=True)
    assert row["lines_parsed"] + row["lines_unrecognized"] == row["lines_total"]
    return row


def _attempts(res) -> pl.DataFrame:
    return res.table("gateway_attempts").sort("line_no", "attempt")


def _check_lab(att: pl.DataFrame, run: str) -> None:
    _, rows, statuses, multi, dead, no_live = LAB_ACCESS[run]
    c = att.filter((pl.col("path") == COMPLETIONS) & (pl.col("method") == "POST"))
    assert c.height == rows
    first = c.filter(pl.col("attempt") == 1)
    assert dict(first.group_by("status").len().iter_rows()) == statuses
    assert first.filter(pl.col("attempts_total") > 1).height == multi
    assert c.filter(pl.col("upstream") == "127.0.0.1:8002").height == dead
    flagged = c.filter(pl.col("flags") == "no_live_upstreams")
    assert flagged.height == no_live
    assert (
        flagged.filter(
            pl.col("upstream").is_in(["vllm_edge", "vllm_long"]) & (pl.col("upstream_status") == 502)
        ).height
        == no_live
    )
    # attempt numbers run 1..attempts_total inside each request
    per = c.group_by("line_no").agg(
        pl.len().alias("n"), pl.col("attempts_total").first(), pl.col("attempt").max()
    )
    assert (per["n"] == per["attempts_total"]).all() and (per["n"] == per["attempt"]).all()


@pytest.mark.parametrize("run", list(LAB_ACCESS))
def test_lab_access_from_conf_and_inferred(lab: Path, tmp_path: Path, run: str) -> None:
    log = lab / run / "nginx-access.log"
    with_conf = ingest_files(tmp_path / "conf", log, lab / run / "nginx.conf")
    row = _file_row(with_conf, "nginx-access.log")
    assert row["format"] == "nginx_access"
    assert row["lines_total"] == row["lines_parsed"] == LAB_ACCESS[run][0]
    assert any("log_format 'lab' in nginx.conf beside the log" in a for a in row["assumptions"])
    att = _attempts(with_conf)
    _check_lab(att, run)

    alone = ingest_files(tmp_path / "alone", log)  # no nginx.conf: the key=value layout is inferred
    row2 = _file_row(alone, "nginx-access.log")
    assert row2["lines_parsed"] == LAB_ACCESS[run][0]
    assert any("inferred from the log's own key=value" in a for a in row2["assumptions"])
    assert_frame_equal(_attempts(alone), att)


def test_lab_ladder_every_path(lab: Path, tmp_path: Path) -> None:
    att = _attempts(ingest_files(tmp_path, lab / "ladder" / "nginx-access.log"))
    assert att.height == LADDER_ALL_ROWS
    # grep -c '"GET /metrics' = 28, grep -c '"POST /tokenize' = 7 (first attempts)
    first = att.filter(pl.col("attempt") == 1)
    assert first.filter(pl.col("path") == "/metrics").height == 28
    assert first.filter(pl.col("path") == "/tokenize").height == 7


def test_lab_fields_of_one_retried_request(lab: Path, tmp_path: Path) -> None:
    """retry-storm line 'rid=c873f720...': ua="127.0.0.1:8001, vllm_edge" us="504, 502" urt="8.000, 0.000"."""
    att = _attempts(ingest_files(tmp_path, lab / "retry-storm" / "nginx-access.log"))
    r = att.filter(pl.col("request_id") == "c873f7209d99012968505a0956b3113e")
    assert r.select(
        "attempt", "attempts_total", "upstream", "upstream_status", "duration_s", "connect_s", "flags"
    ).rows() == [
        (1, 2, "127.0.0.1:8001", 504, 8.0, 0.0, None),
        (2, 2, "vllm_edge", 502, 0.0, None, "no_live_upstreams"),
    ]
    one = r.row(0, named=True)
    assert one["status"] == 502 and one["request_time_s"] == 8.001 and one["bytes_sent"] == 314
    assert one["client_request_id"] == "storm-r-00479" and one["client_retry"] == 0 and one["port"] == 8080
    assert (
        one["method"] == "POST" and one["path"] == COMPLETIONS and one["user_agent"] == "OpenAI/Python 3.57.0"
    )
    assert one["ts_end"] == datetime(2026, 11, 29, 8, 31, 9, 73000, tzinfo=UTC)  # msec=1795941069.073
    assert one["ts_start"] == datetime(2026, 11, 29, 8, 31, 1, 72000, tzinfo=UTC)  # - rt 8.001
    # attempt 2 starts after attempt 1's 8.000 s (sequential approximation)
    assert r.row(1, named=True)["ts_start"] == datetime(2026, 11, 29, 8, 31, 9, 72000, tzinfo=UTC)


def test_lab_crash_cut_stream_keeps_bytes_sent(lab: Path, tmp_path: Path) -> None:
    # README line: rid=557a5b7c... status=200 ... sent=18275 (a stream cut by the SIGKILL)
    att = _attempts(ingest_files(tmp_path, lab / "crash" / "nginx-access.log"))
    r = att.filter(pl.col("request_id") == "557a5b7c07e38b44dee4ffa2a5c75c37").row(0, named=True)
    assert (r["status"], r["upstream_status"], r["bytes_sent"], r["duration_s"]) == (200, 200, 18275, 0.982)


def test_cli_log_format_option(lab: Path, tmp_path: Path) -> None:
    log = lab / "crash" / "nginx-access.log"
    res = ingest_files(tmp_path / "a", log, nginx_log_format=LAB_FORMAT)
    row = _file_row(res, "nginx-access.log")
    assert row["lines_parsed"] == 1166
    assert any("the --nginx-log-format option" in a for a in row["assumptions"])
    _check_lab(_attempts(res), "crash")
    # a format that matches nothing is passed over: the inferred layout still reads every line
    res2 = ingest_files(tmp_path / "b", log, nginx_log_format=nf.COMBINED)
    assert _file_row(res2, "nginx-access.log")["lines_parsed"] == 1166
    assert_frame_equal(_attempts(res2), _attempts(res))


@pytest.mark.parametrize("run", list(LAB_ERRORS))
def test_lab_error_kinds(lab: Path, tmp_path: Path, run: str) -> None:
    res = ingest_files(tmp_path, lab / run / "nginx-error.log")
    row = _file_row(res, "nginx-error.log")
    assert row["format"] == "nginx_error"
    assert row["lines_unrecognized"] == 0
    err = res.table("gateway_errors")
    assert err.height == row["lines_total"] == sum(LAB_ERRORS[run].values())
    assert dict(err.group_by("kind").len().iter_rows()) == LAB_ERRORS[run]


def test_lab_error_fields(lab: Path, tmp_path: Path) -> None:
    res = ingest_files(tmp_path, lab / "retry-storm" / "nginx-error.log")
    assert (
        "nginx error.log times have no zone: read as UTC (--tz)"
        in _file_row(res, "nginx-error.log")["assumptions"]
    )
    err = res.table("gateway_errors")
    r = err.filter(pl.col("kind") == "upstream_timeout").sort("line_no").row(0, named=True)
    assert r["level"] == "error" and r["conn_id"] == 752 and r["client"] == "127.0.0.1"
    assert r["ts"] == datetime(2026, 11, 29, 8, 31, 9, tzinfo=UTC)
    assert r["request"] == "POST /v1/completions HTTP/1.1" and r["host"] == "127.0.0.1:8080"
    assert r["upstream"] == "http://127.0.0.1:8001/v1/completions"
    assert r["message"] == (
        "upstream timed out (110: Connection timed out) while reading response header from upstream"
    )


# --- logs written by nginx here (tests/data/nginx) ---
# awk '{print $9}' access.log | sort | uniq -c  ->  200 x6, 501 x2, 502 x4, 504 x1, 499 x1
PRODUCED_STATUSES = {200: 6, 501: 2, 502: 4, 504: 1, 499: 1}
# (line, upstream, upstream_status, flags) of every attempt, read off access-json.log / access-kv.log
PRODUCED_ATTEMPTS = [
    (1, "127.0.0.1:18090", 200, None),
    (2, "127.0.0.1:18090", 501, None),
    (3, "127.0.0.1:18999", 502, None),
    (4, "127.0.0.1:18999", 502, None),
    (4, "127.0.0.1:18998", 502, None),
    (5, "dead_pair", 502, "no_live_upstreams"),
    (6, "127.0.0.1:18999", 502, None),
    (6, "127.0.0.1:18090", 200, None),
    (7, "127.0.0.1:18090", 200, None),
    (8, "127.0.0.1:18090", 501, None),
    (9, "127.0.0.1:18091", 504, None),
    (10, "127.0.0.1:18091", None, None),  # 499: us="-"
    (11, "127.0.0.1:18999", 502, None),  # ua="127.0.0.1:18999 : 127.0.0.1:18090"
    (11, "127.0.0.1:18090", 200, "internal_redirect"),
    (12, None, None, None),  # location = /local: no upstream
    (13, "127.0.0.1:18090", 200, None),
    (14, "127.0.0.1:18998", 502, None),
    (14, "127.0.0.1:18999", 502, None),
]


@pytest.mark.parametrize(
    "name", ["access-json.log", "access-kv.log", "ist-access-json.log", "ist-access-kv.log"]
)
def test_produced_upstream_formats(tmp_path: Path, name: str) -> None:
    for folder, files in (("conf", (NGX / name, NGX / "nginx.conf")), ("alone", (NGX / name,))):
        res = ingest_files(tmp_path / folder, *files)
        row = _file_row(res, name)
        assert row["format"] == "nginx_access" and row["lines_parsed"] == row["lines_total"] == 14
        where = "log_format '" + ("llmjson" if "json" in name else "kv") + "' in nginx.conf"
        assert any(
            (where if folder == "conf" else "inferred from the log's own") in a for a in row["assumptions"]
        )
        att = _attempts(res)
        assert att.select("line_no", "upstream", "upstream_status", "flags").rows() == PRODUCED_ATTEMPTS
        first = att.filter(pl.col("attempt") == 1)
        assert dict(first.group_by("status").len().iter_rows()) == PRODUCED_STATUSES
        local = att.filter(pl.col("line_no") == 12).row(0, named=True)
        assert (local["attempt"], local["attempts_total"], local["path"]) == (1, 0, "/local")
        # the 499 (curl --max-time 0.5): sed -n 10p <file> | grep -o 'urt=[^ ]*'
        assert att.filter(pl.col("line_no") == 10).row(0, named=True)["duration_s"] == (
            0.504 if name.startswith("ist-") else 0.498
        )


def test_produced_json_values(tmp_path: Path) -> None:
    att = _attempts(ingest_files(tmp_path, NGX / "access-json.log"))
    one = att.row(0, named=True)
    assert one["ts_end"] == datetime(2026, 11, 29, 9, 49, 35, 236000, tzinfo=UTC)  # "msec":"1795945775.236"
    assert one["request_id"] == "7030c9f51295ab3495b80df23be95c54" and one["client_request_id"] is None
    assert att.filter(pl.col("line_no") == 2)["client_request_id"].to_list() == ["demo-0001"]
    # escape=json wrote "agent with \"quotes\" and \\ backslash"
    assert att.filter(pl.col("line_no") == 13)["user_agent"].to_list() == [
        'agent with "quotes" and \\ backslash'
    ]
    assert att.filter(pl.col("line_no") == 13)["path"].to_list() == ["/live/index.html?q=a%20b"]


def test_produced_combined(tmp_path: Path) -> None:
    res = ingest_files(tmp_path, NGX / "access.log", NGX / "nginx.conf")
    row = _file_row(res, "access.log")
    assert row["format"] == "nginx_access" and row["lines_parsed"] == 14
    assert any("predefined 'combined'" in a for a in row["assumptions"])
    att = _attempts(res)
    assert (
        att.height == 14 and att["attempts_total"].null_count() == 14 and att["upstream"].null_count() == 14
    )
    assert dict(att.group_by("status").len().iter_rows()) == PRODUCED_STATUSES
    assert att.row(0, named=True)["ts_end"] == datetime(2026, 11, 29, 9, 49, 35, tzinfo=UTC)
    # escape=default: nginx wrote the quotes and backslash as \x22 / \x5C; kept as logged
    assert att.filter(pl.col("line_no") == 13)["user_agent"].to_list() == [
        "agent with \\x22quotes\\x22 and \\x5C backslash"
    ]
    assert att["bytes_sent"].to_list()[:3] == [6, 357, 157]


INGRESS = DATA / "ingress-nginx"


def test_ingress_nginx_default_format(tmp_path: Path) -> None:
    """ingress-nginx's default 'upstreaminfo' access log (tests/data/ingress-nginx/README.md), recognised with no
    nginx.conf beside it, and with the one that wrote it: one row per upstream attempt; the request id is $req_id,
    the X-Request-ID sent upstream (the client's, else nginx's own)."""
    for folder, files in (
        ("alone", (INGRESS / "access.log",)),
        ("conf", (INGRESS / "access.log", INGRESS / "nginx.conf")),
    ):
        res = ingest_files(tmp_path / folder, *files)
        row = _file_row(res, "access.log")
        assert (row["format"], row["lines_parsed"], row["lines_total"]) == ("nginx_access", 28, 28)
        origin = (
            "ingress-nginx's default log-format-upstream 'upstreaminfo'"
            if folder == "alone"
            else "log_format 'upstreaminfo' in nginx.conf"
        )
        assert any(origin in a for a in row["assumptions"])
        att = _attempts(res)
        # awk '{print $9}' access.log | sort | uniq -c; 14 lines hold two attempts (grep -c ', ')
        assert att.height == 28 + 14
        first = att.filter(pl.col("attempt") == 1)
        assert dict(first.group_by("status").len().iter_rows()) == {200: 26, 499: 1, 504: 1}
        assert att.filter(pl.col("upstream") == "127.0.0.1:18399")["upstream_status"].unique().to_list() == [
            502
        ]
        # sed -n 2p access.log: 127.0.0.1:18399, 127.0.0.1:18301 ... 502, 200 client-ok-002
        two = att.filter(pl.col("line_no") == 2)
        assert two.select("request_id", "attempt", "upstream", "upstream_status").rows() == [
            ("client-ok-002", 1, "127.0.0.1:18399", 502),
            ("client-ok-002", 2, "127.0.0.1:18301", 200),
        ]
        # the two curl requests sent no X-Request-Id: $req_id is nginx's $request_id
        assert att.filter(pl.col("line_no") == 27)["request_id"].to_list() == [
            "638c3032e23f3804837aee6e1db21da7"
        ]
        slow = att.filter(pl.col("request_id") == "client-slow-007").row(0, named=True)
        assert (slow["status"], slow["upstream_status"], slow["duration_s"]) == (504, 504, 2.002)


def test_access_and_error_lines_in_one_file(tmp_path: Path) -> None:
    """nginx's access and error logs written into one file (tests/data/ingress-nginx/controller.log: what kubectl
    logs gives of an ingress-nginx controller, stdout and stderr merged): every line is parsed by its own format,
    into the rows the two logs give apart (the file's lines split by their shape)."""
    mixed = INGRESS / "controller.log"
    lines = mixed.read_text().splitlines(keepends=True)
    error = [ln for ln in lines if ln[:4].isdigit() and ln[4] == "/"]  # '2026/11/30 08:40:07 [notice] ...'
    (tmp_path / "apart").mkdir()
    (tmp_path / "apart" / "access.log").write_text("".join(ln for ln in lines if ln not in error))
    (tmp_path / "apart" / "error.log").write_text("".join(error))
    res = ingest_files(tmp_path / "one", mixed)
    row = _file_row(res, "controller.log")
    assert (row["lines_total"], row["lines_parsed"]) == (55, 55)
    assert row["messages"][0].endswith(
        "lines in one file (a container's stdout and stderr merged): each line parsed by its own format"
    )
    apart = ingest_files(
        tmp_path / "two", tmp_path / "apart" / "access.log", tmp_path / "apart" / "error.log"
    )
    for table, n in (("gateway_attempts", 42), ("gateway_errors", 27)):
        a, b = (r.table(table).drop("source", "line_no") for r in (res, apart))
        a, b = (df.sort(df.columns, nulls_last=True) for df in (a, b))
        assert a.height == n and a.equals(b), table


def test_produced_local_zone(tmp_path: Path) -> None:
    """nginx under TZ=Asia/Kolkata: $time_local/$time_iso8601 carry +05:30; error.log is zoneless local time."""
    comb = _attempts(ingest_files(tmp_path / "c", NGX / "ist-access.log"))
    js = _attempts(ingest_files(tmp_path / "j", NGX / "ist-access-json.log"))
    assert comb.row(0, named=True)["ts_end"] == datetime(
        2026, 11, 29, 9, 52, 31, tzinfo=UTC
    )  # 15:22:31 +0530
    # $msec agrees with the zoned local time to the second, on every line
    js_first = js.filter(pl.col("attempt") == 1)
    assert (js_first.get_column("ts_end").dt.truncate("1s") == comb.get_column("ts_end")).all()
    err = ingest_files(tmp_path / "e", NGX / "ist-error.log", tz="Asia/Kolkata").table("gateway_errors")
    timeout = err.filter(pl.col("kind") == "upstream_timeout").row(0, named=True)
    gw504 = js.filter(pl.col("status") == 504).row(0, named=True)
    assert timeout["ts"] == gw504["ts_end"].replace(microsecond=0)


def test_produced_error_log(tmp_path: Path) -> None:
    # grep counts on tests/data/nginx/error.log as for the lab (41 lines)
    res = ingest_files(tmp_path, NGX / "error.log")
    assert _file_row(res, "error.log")["lines_parsed"] == 41
    err = res.table("gateway_errors")
    assert dict(err.group_by("kind").len().iter_rows()) == {
        "notice": 12,
        "shutdown": 1,
        "keepalive_closed": 13,
        "connect_failed": 7,
        "upstream_disabled": 5,
        "no_live_upstreams": 1,
        "client_closed": 1,
        "upstream_timeout": 1,
    }
    nolive = err.filter(pl.col("kind") == "no_live_upstreams").row(0, named=True)
    assert nolive["upstream"] == "http://dead_pair/" and nolive["conn_id"] == 10


def test_two_layouts_in_one_file(tmp_path: Path) -> None:
    """A format change mid-file (real lines of access.log followed by those of access-json.log)."""
    mixed = tmp_path / "src" / "access.log"
    mixed.parent.mkdir()
    mixed.write_text((NGX / "access.log").read_text() + (NGX / "access-json.log").read_text())
    res = ingest_files(tmp_path / "run", mixed)
    row = _file_row(res, "access.log")
    assert row["lines_parsed"] == row["lines_total"] == 28
    assert any("lines that do not match it are tried with" in a for a in row["assumptions"])
    att = _attempts(res)
    assert att.height == 14 + len(PRODUCED_ATTEMPTS)
    assert (
        att.filter(pl.col("line_no") > 14)
        .select((pl.col("line_no") - 14), "upstream", "upstream_status", "flags")
        .rows()
        == PRODUCED_ATTEMPTS
    )


# --- layout compiler, conf reader, chunking ---
def test_conf_reader() -> None:
    text = (NGX / "nginx.conf").read_text()
    found = {name: (esc, fmt) for name, esc, fmt in nf.parse_conf(text)}
    assert set(found) == {"llmjson", "kv"}
    assert found["llmjson"][0] == "json" and found["llmjson"][1].startswith('{"time":"$time_iso8601","msec":')
    assert found["kv"][1].endswith("urt=$upstream_response_time port=$server_port")
    assert nf.conf_access_logs(text) == {
        "access.log": "combined",
        "access-json.log": "llmjson",
        "access-kv.log": "kv",
    }
    lab_conf = need(LAB / "retry-storm" / "nginx.conf").read_text()
    assert nf.parse_conf(lab_conf) == [("lab", "default", LAB_FORMAT)]


def test_chunks_share_state(lab: Path) -> None:
    lines = need(lab / "spike" / "nginx-access.log").read_text().splitlines()
    df = pl.DataFrame(
        {"line_no": range(1, len(lines) + 1), "line": lines}, schema={"line_no": pl.Int64, "line": pl.String}
    )
    ctx = ParseContext(source="nginx-access.log", replica="spike")
    whole = nginx_access.parse_chunk(df, ctx, {}).tables["gateway_attempts"]
    state: dict = {}
    parts = [nginx_access.parse_chunk(df.slice(o, 100), ctx, state) for o in range(0, df.height, 100)]
    assert sum(int(p.recognized.sum()) for p in parts) == len(lines) == 284
    assert_frame_equal(pl.concat([p.tables["gateway_attempts"] for p in parts]), whole)


# --- detection ---
# Lines quoted in /work/shared/docs/gateway-client-formats.md as [doc] / [observed] (not constructed)
OTHER_GATEWAYS = [
    '[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 204 - 154 0 226 100 "10.0.35.28" "nsq2http" '
    '"cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "tcp://10.0.2.1:80"',
    "[05/12/2019T16:14:53+0000 1575562493] method=POST authority=localhost:443 txId=- request=/StudentService/get "
    "alpn=HTTP/2 response_flag=UT ssl_protocol=TLSv1.3 ssl_cipher=TLS_AES_128_GCM_SHA256 status=200 "
    "status_details=upstream_response_timeout request_size=84 response_size=0 "
    "envoy_request_id=52220e61-e045-4dc7-bdc3-c8b5e77dd2ee user-agent=grpc-go/1.24.0 xFor=49.207.48.241 "
    "x-envoy-upstream-service-time=- total_time_ms=15001 upstream=127.0.0.1:7000",
    "haproxy[14389]: 10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - "
    '---- 1/1/1/1/0 0/0 {1wt.eu} {} "GET /index.html HTTP/1.1"',
    '{"ClientAddr":"XXX.XXX.XXX.XXX:63261","ClientHost":"XXX.XXX.XXX.XXX","ClientPort":"63261",'
    '"ClientUsername":"-","DownstreamContentSize":287,"DownstreamStatus":207,"Duration":8184335,'
    '"OriginContentSize":287,"OriginDuration":7349966,"OriginStatus":207,"Overhead":834369,'
    '"RequestAddr":"sub.example.com","RequestContentSize":366,"RequestCount":17348,"RequestHost":"sub.example.com",'
    '"RequestMethod":"REPORT","RequestPath":"/dav.php/calendars/","RequestPort":"-","RequestProtocol":"HTTP/2.0",'
    '"RequestScheme":"https","RetryAttempts":0,"RouterName":"https-bk@docker","ServiceAddr":"172.29.0.2:8111",'
    '"ServiceName":"bk-bk@docker","ServiceURL":"http://172.29.0.2:8111","StartLocal":"2024-12-29T12:42:47.503803974+01:00",'
    '"StartUTC":"2024-12-29T11:42:47.503803974Z","TLSCipher":"TLS_AES_128_GCM_SHA256","TLSVersion":"1.3",'
    '"entryPointName":"https","level":"info","msg":"","time":"2024-12-29T12:42:47+01:00"}',
]


def _head(p: Path) -> list[str]:
    return p.read_text(errors="replace").splitlines()[:200]


def test_detect_scores(lab: Path) -> None:
    assert nginx_access.detect(_head(lab / "spike" / "nginx-access.log")) == pytest.approx(0.95)
    assert nginx_access.detect(_head(NGX / "access-json.log")) == pytest.approx(0.9)
    assert nginx_access.detect(_head(NGX / "access.log")) == pytest.approx(0.7)
    assert nginx_error.detect(_head(lab / "crash" / "nginx-error.log")) == pytest.approx(0.95)
    assert nginx_error.detect(_head(lab / "spike" / "nginx-access.log")) == 0.0
    assert nginx_access.detect(_head(lab / "crash" / "nginx-error.log")) == 0.0
    for line in OTHER_GATEWAYS:
        assert nginx_access.detect([line]) == 0.0 and nginx_error.detect([line]) == 0.0


def test_detect_leaves_other_files_alone(lab: Path) -> None:
    others = [p for p in lab.rglob("*") if p.is_file() and not p.name.startswith("nginx")]
    others += [
        p
        for p in DATA.rglob("*")
        if p.is_file()
        and p.parent.name not in ("nginx", "ingress-nginx", "nginx-limit-req")
        and NGX not in p.parents
        and (DATA / "fixtures") not in p.parents  # the shared fixtures' bundle: the lab runs are read above
        and not p.name.startswith("apisix")  # Apache APISIX's access logs: an nginx (OpenResty) layout
    ]
    assert len(others) > 20
    for p in others:
        head = _head(p)
        assert nginx_access.detect(head) < MIN_CONFIDENCE, p
        assert nginx_error.detect(head) < MIN_CONFIDENCE, p


def test_each_file_of_a_rotated_set_brings_its_layout(tmp_path):
    """A log_format changed between rotations (the lab: the calm run's plain layout, then traced-1r's with
    $http_traceparent, its nginx.conf beside): the rotated file and the current one are one stream, and each is
    read whole by its own layout. Before, the first file's layout was the stream's and traced-1r's 312 lines went
    unrecognized, which turned its cancellation verdict 'propagated' into 'not observed'."""
    src = tmp_path / "in"
    src.mkdir()
    shutil.copy2(need(LAB / "calm" / "nginx-access.log"), src / "nginx-access.log.1")
    for name in ("nginx-access.log", "nginx.conf"):
        shutil.copy2(need(LAB / "traced-1r" / name), src / name)
    from logscope.api import AnalyzeOptions, ingest

    res = ingest(src, tmp_path / "out", AnalyzeOptions())
    files = res.files.filter(pl.col("format") == "nginx_access").sort("path")
    assert files.select("path", "stream", "lines_parsed", "lines_unrecognized").rows() == [
        ("nginx-access.log", "nginx-access.log", 312, 0),
        ("nginx-access.log.1", "nginx-access.log", 186, 0),
    ]
    ga = res.table("gateway_attempts")
    assert ga.group_by("source").len().sort("source").rows() == [
        ("nginx-access.log", 312),
        ("nginx-access.log.1", 186),
    ]
    # the traced layout's traceparent is read on the current file's rows only
    assert ga.filter(pl.col("traceparent").is_not_null())["source"].unique().to_list() == ["nginx-access.log"]
