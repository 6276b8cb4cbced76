"""A gateway's own retries are said as the gateway's, not folded into the callers'. orphan (nginx :8082 has no
non_idempotent: its 12 retries are failovers from the dead 127.0.0.1:8002 before any upstream had the request) read
"retries at several layers (client and gateway) re-send work the overloaded server has already queued";
traced-2r-kill (3 client retries after 3 × 502; nginx tried :8002, refused 26 times, and sent 23 of them on to :8001
in the same request) read "the gateway answered 3 … with 5xx itself … and the callers retried them" for all 26.
retry-storm (:8080 re-sends POSTs: non_idempotent) keeps both layers re-sending work."""

from __future__ import annotations

import json

from conftest import LAB, need


def _retries(s: dict) -> dict:
    return next(f for f in s["findings"] if f["kind"] == "retries")


def test_failovers_before_any_upstream_had_the_request(analyzed):
    _, s, _ = analyzed(need(LAB / "orphan"))
    truth = json.loads((LAB / "orphan" / "truth.json").read_text())["gateway"]
    assert s["retries"]["gateway_retries"] == truth["lines_with_more_than_one_upstream_entry"] == 12
    f = _retries(s)
    assert f["cause"] == (
        "the client's retries re-send work the overloaded server has already queued, prefilled or preempted; the "
        "gateway's 12 are failovers before any upstream had the request (nginx.conf re-sends no POST that reached one)"
    )


def test_the_gateways_own_retries_are_named(analyzed):
    _, s, _ = analyzed(need(LAB / "traced-2r-kill"))
    t = json.loads((LAB / "traced-2r-kill" / "truth.json").read_text())["purpose"]
    gw = sum(t["nginx_upstream_tries"].values()) - t["nginx_post_lines"]
    assert (
        s["retries"]["gateway_retries"] == gw == 23
        and s["retries"]["client_retries"] == t["client_retries"] == 3
    )
    f = _retries(s)
    assert f["cause"].endswith(
        "; 23 of the retries are the gateway's own, to another upstream within one request"
    )


def test_a_gateway_that_re_sends_posts_keeps_both_layers(analyzed):
    _, s, _ = analyzed(need(LAB / "retry-storm"))
    assert _retries(s)["cause"].startswith("retries at several layers (client and gateway) re-send work")
