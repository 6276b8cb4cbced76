"""Unrecognised lines grouped by shape (ids, numbers and hex masked), a few examples each.

Like Drain3's masking rules, the masks are data: order matters (longest, most specific first).
"""

from __future__ import annotations

import polars as pl

MASKS: tuple[tuple[str, str], ...] = (
    (r"\x1b\[[0-9;]*m", ""),
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<UUID>"),
    (r"\b[0-9a-fA-F]{16,}\b", "<HEX>"),
    (r"0x[0-9a-fA-F]+", "<HEX>"),
    (r"\d+(\.\d+)?", "<N>"),
)
MAX_SHAPES = 200
SHAPE_CHARS = 160
EXAMPLE_CHARS = 300


def shape_expr(col: str = "line") -> pl.Expr:
    e = pl.col(col).str.slice(0, 2000)
    for pat, rep in MASKS:
        e = e.str.replace_all(pat, rep)
    return e.str.strip_chars().str.slice(0, SHAPE_CHARS)


class ShapeCounter:
    """Accumulates shapes of one file across chunks, bounded to MAX_SHAPES (+ one 'other' bucket)."""

    def __init__(self, limit: int = MAX_SHAPES) -> None:
        self.shapes: dict[str, list] = {}
        self.limit = limit

    def add(self, lines: pl.DataFrame) -> None:
        if lines.height == 0:
            return
        g = (
            lines.with_columns(shape_expr().alias("shape"))
            .group_by("shape", maintain_order=True)
            .agg(
                pl.len().alias("count"),
                pl.col("line_no").min().alias("first"),
                pl.col("line").head(3).str.slice(0, EXAMPLE_CHARS).alias("ex"),
            )
        )
        for shape, count, first, ex in g.iter_rows():
            self._count(shape, count, first, ex)

    def merge(self, later: ShapeCounter) -> None:
        """Add the shapes of the lines after this counter's (a stream read in pieces): the same result as
        adding those lines here while the later counter's ``limit`` was not reached."""
        for shape, (count, first, ex) in later.shapes.items():
            self._count(shape, count, first, ex)

    def _count(self, shape: str, count: int, first: int, ex: list) -> None:
        cur = self.shapes.get(shape)
        if cur is None:
            if len(self.shapes) >= self.limit:
                cur = self.shapes.setdefault("(other shapes)", [0, first, []])
            else:
                cur = self.shapes[shape] = [0, first, []]
        cur[0] += count
        cur[2] = (cur[2] + list(ex))[:3]

    def frame(self, path: str) -> pl.DataFrame:
        rows = [
            {"path": path, "shape": s, "count": c, "first_line_no": first, "examples": ex}
            for s, (c, first, ex) in self.shapes.items()
        ]
        return pl.DataFrame(rows) if rows else pl.DataFrame()
