"""vllm_server's records: which rows continue the record before them, each row's record id and kind, carried across
chunks, in one sequential pass of the compiled scanner (``logscope._scan.Records``, scan/src/records.rs).

A record is a vLLM header's line and the lines that go on with it: the same header repeated on every line of a
multi-line message (ended with CR but for the last, or an error's traceback), a raw traceback printed right after an
error, a line a paste cut at a fixed width. Whether a row goes on depends on the row before it (its record still open,
its length, its CR), so the pass walks the rows in order, starting from the state the previous chunk left
(``state["prev"]``, ``state["rec"]``, ``state["has_cr"]``, ``state["stopping"]``: a piece read in parallel compares
them with the true ones, ``logscope.ingest.pieces``). The patterns it tests rows with are ``_vllm_lines``'.
"""

from __future__ import annotations

import functools

import polars as pl

from logscope import _scan

from ._vllm_events import _EVENT_KW, _REQUEST_LINE
from ._vllm_lines import _NOISE, _TB, _TB_STRONG

# the stream is shutting down (a message starting with one of these, or holding 'trigger received signal=SIGTERM'):
# an engine death after this is the harmless shutdown traceback; starting again ends it
_STOPPING_LEADS, _STOPPING_ANY = ("[shutdown]", "Shutting down"), "trigger received signal=SIGTERM"
_STARTING_LEADS = (
    "Started server process",
    "Starting vLLM",
    "Initializing a LLM engine",
    "Initializing an LLM engine",
    "Initializing a V1 LLM engine",
    "Initializing an V1 LLM engine",
)


@functools.cache
def _pass() -> _scan.Records:
    return _scan.Records(
        _TB,
        _TB_STRONG,
        _NOISE,
        list(_STOPPING_LEADS),
        _STOPPING_ANY,
        list(_STARTING_LEADS),
        _REQUEST_LINE,
        _EVENT_KW,
    )


def _classify(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Row kinds (``tbs`` a raw traceback line, ``strong`` one only a traceback prints, ``other`` unknown, ``noise``
    third-party output, ``uvr`` uvicorn), ``cont`` (continues the previous record), ``wrap`` (a hard-wrapped piece),
    ``rec`` (record id), ``ok`` (recognised) and ``stopping``, carried across chunks by ``state``; ``lead`` (a
    record's first row, not a request line) and ``evt`` (one that makes its record an event: ``_vllm_events``)."""
    p = state.get("prev", {})
    carried = (
        p.get("plen", 0),
        p.get("open", False),
        p.get("cr", False),
        p.get("key"),
        p.get("rec_ok", False),
        state.get("rec", 0),
        bool(state.get("has_cr")),
        state.get("stopping", False),
    )
    cols = [df.get_column(c) for c in ("msg", "lvl", "uv", "pyname", "key", "plen", "cr", "joined")]
    batch, after = _pass().classify(*cols, carried)
    plen, open_, cr, key, rec_ok, rec, has_cr, stopping = after
    state["has_cr"] = has_cr
    if df.height:
        state["prev"] = {"plen": plen, "open": open_, "cr": cr, "key": key, "rec_ok": rec_ok}
        state["rec"] = rec
        state["stopping"] = stopping
    return pl.concat([df, pl.DataFrame(batch)], how="horizontal")
