"""Second real samples of gateway formats whose tests rested on one recording (tests/data/unseen/README.md names each
thread; docs/formats.md's audit lists them): HAProxy's httplog lines as its reporters pasted them, without the syslog
prefix of the Debian recording (tests/data/haproxy), each a 504 HAProxy made itself when its server sent no headers;
and a Traefik 2 JSON access line among Traefik's own debug lines (the recording, tests/data/traefik, is 3.7's alone)."""

from __future__ import annotations

from datetime import UTC, datetime

from unseen_helpers import ingest_one
from unseen_helpers import table as _table

from conftest import DATA

U = DATA / "unseen"
COLS = (
    "ts_start",
    "ts_end",
    "upstream",
    "status",
    "upstream_status",
    "request_time_s",
    "connect_s",
    "flags",
    "error",
    "method",
    "path",
    "bytes_sent",
)
SERVER_TIMEOUT = "server timeout while waiting for response headers"


def _rows(tmp_path, name: str) -> list[tuple]:
    out, f = ingest_one(tmp_path, U / name)
    assert (f["format"], f["lines_total"], f["lines_unrecognized"]) == ("haproxy", 1, 0)
    return _table(out, "gateway_attempts").select(COLS).rows()


def test_haproxy_h2_post_504_after_server_timeout(tmp_path):
    """haproxy#1681 (Apr 2022): one HTTP/2 POST accepted at 11:48:13.024, connected to backend/s1 in 2 ms, no response
    (Tr -1), HAProxy's own 504 (198 bytes) after 10.006 s: 'sH--', the server timeout (10 s in its config)."""
    assert _rows(tmp_path, "haproxy-1681-h2-post-504-sH-server-timeout-10s.log") == [
        (
            datetime(2022, 4, 29, 11, 48, 13, 24000, tzinfo=UTC),
            datetime(2022, 4, 29, 11, 48, 23, 30000, tzinfo=UTC),
            "backend/s1",
            504,
            None,  # the server never answered: the 504 is HAProxy's
            10.006,
            0.002,
            "sH--",
            SERVER_TIMEOUT,
            "POST",
            "http://127.0.0.1:40888/",  # HTTP/2's absolute form, as HAProxy logs it
            198,
        )
    ]


def test_haproxy_2_6_get_504_after_ten_minutes(tmp_path):
    """haproxy#2071 (2.6.12, Mar 2023; the client address masked 'xxx.xxx.xxx.xxx' by its reporter): a GET through
    frontend 'ssl~' (TLS) to http/10.81.15.120 connected in 3 ms, no response, 504 after 600.004 s ('sH--': the 10 min
    server timeout), with a captured request header ({Go-http-client/2.0}) before the request line."""
    assert _rows(tmp_path, "haproxy-2071-v2.6.12-get-504-sH-600s-masked-client.log") == [
        (
            datetime(2023, 3, 7, 11, 33, 48, 83000, tzinfo=UTC),
            datetime(2023, 3, 7, 11, 43, 48, 87000, tzinfo=UTC),
            "http/10.81.15.120",
            504,
            None,
            600.004,
            0.003,
            "sH--",
            SERVER_TIMEOUT,
            "GET",
            "https://api.domain.com/xyz",
            198,
        )
    ]


def test_traefik_2_json_ping_among_its_debug_lines(tmp_path):
    """traefik/traefik-helm-chart#197 (Jun 2020, Traefik 2): one GET /ping answered 200 (2 bytes) by Traefik's own
    ping@internal router (no service, so no upstream) at 19:06:19.045338 UTC, in 165.654 us (the origin's part 106.401
    us); then two of Traefik's own debug lines (logfmt, its Kubernetes providers): no request, counted unrecognised,
    not dropped."""
    out, f = ingest_one(tmp_path, U / "traefik-helm-197-v2-json-ping-200-internal-with-debug-lines.log")
    assert (f["format"], f["lines_total"], f["lines_parsed"], f["lines_unrecognized"]) == ("traefik", 3, 1, 2)
    cols = ("ts_start", "ts_end", "upstream", "status", "upstream_status", "duration_s", "request_time_s")
    assert _table(out, "gateway_attempts").select(*cols, "method", "path", "bytes_sent", "port").rows() == [
        (
            datetime(2020, 6, 11, 19, 6, 19, 45338, tzinfo=UTC),
            datetime(2020, 6, 11, 19, 6, 19, 45503, tzinfo=UTC),
            None,
            200,
            200,
            0.000106401,
            0.000165654,
            "GET",
            "/ping",
            2,
            9000,
        )
    ]
