"""Where a pattern first occurs in a string column, counted in bytes or in characters, on any polars.

``str.find`` counts bytes in polars 2.1 and characters in 2.2; the oracles cut lines at such offsets, so
they turn its answer into the unit they cut in, whichever version runs."""

from __future__ import annotations

import polars as pl

# "é" is two bytes and one character: the offset of ":" after it says which unit this polars counts
# (str.find answers UInt32 in both)
FIND_COUNTS_BYTES = pl.Series(["é:"]).str.find(":", literal=True).item() == 2


def byte_find(col: pl.Expr, pattern: str | pl.Expr, literal: bool = False) -> pl.Expr:
    """Byte offset of the leftmost match, null where none."""
    at = col.str.find(pattern, literal=literal)
    if FIND_COUNTS_BYTES:
        return at
    return pl.when(at.is_not_null()).then(col.str.slice(0, at).str.len_bytes().cast(pl.UInt32))


def char_find(col: pl.Expr, pattern: str | pl.Expr, literal: bool = False) -> pl.Expr:
    """Character offset of the leftmost match, null where none."""
    at = col.str.find(pattern, literal=literal)
    if not FIND_COUNTS_BYTES:
        return at
    head = col.cast(pl.Binary).bin.head(at).cast(pl.String)
    return pl.when(at.is_not_null()).then(head.str.len_chars().cast(pl.UInt32))
