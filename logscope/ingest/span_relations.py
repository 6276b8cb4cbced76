"""Each span's layer and role by its relations over the whole ``spans`` table, after parsing.

A span's role comes partly from other spans (a client attempt's parent is the caller's request; an engine span
under an engine request is one of its phases; SGLang's queue is its request's ``prefill_waiting`` stages).
A parser sees one chunk of a file at a time, and an exporter writes a parent after its children (it ends last),
often in a later batch: read in 16 KiB chunks, traced-ladder's 106 client requests became 'other' (whole: one
4 MiB chunk held the file). So ``parsers._spans.layers`` is run once more here on every span of the folder
(trace and span ids are the folder's, whatever file holds them), and its answer replaces the chunks'.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from logscope.parsers import _spans

from .store import ROW_GROUP

# what ``_spans.layers`` reads (and ``_sglang_queue`` rewrites: queue_s, prefill_s) besides the dummies below
_READ = [
    "trace_id",
    "span_id",
    "parent_span_id",
    "name",
    "service",
    "scope",
    "kind",
    "request_id",
    "http_method",
    "http_status",
    "url",
    "model",
    "openinference_kind",
    "queue_s",
    "e2e_s",
    "prefill_s",
    "decode_s",
    "inference_s",
    "duration_s",
]
_SET = ["layer", "role", "queue_s", "prefill_s"]


def relate(out: Path) -> None:
    """Rewrite ``spans.parquet``'s layer, role, queue_s and prefill_s from all its spans (not rewritten when the
    chunks' answer was already the whole table's)."""
    path = out / "spans.parquet"
    if not path.exists():
        return
    have = pl.read_parquet(path, columns=[*_READ, "layer", "role"]).with_row_index("_row")
    if have.height == 0:
        return
    # the parse-time columns ``layers`` drops at its end, here as nulls (the values it reads are the table's)
    got = _spans.layers(
        have.drop("layer", "role").with_columns(
            pl.lit(None).alias(c) for c in ("ft", "ev", "start_ns", "end_ns")
        )
    ).sort("_row")
    if all(got[c].equals(have[c]) for c in _SET):
        return
    tmp = path.with_suffix(".relating.parquet")
    # streamed: only the columns set here are held whole (a fleet's spans with their attributes need not fit)
    pl.scan_parquet(path).with_columns(got[c] for c in _SET).sink_parquet(tmp, row_group_size=ROW_GROUP)
    tmp.replace(path)
