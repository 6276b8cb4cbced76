"""Files that interleave two formats line by line: nginx's access and error logs in one stream, as ``kubectl logs``
and ``docker logs`` merge a container's stdout and stderr (the nginx and ingress-nginx images send the access log
to stdout and the error log to stderr). Each line goes to the file's format, then what it does not recognise to
the other one: the rows of both, every line accounted.

Sample (tests/data/ingress-nginx/controller.log, both logs of Debian's nginx 1.22.1 written into one file)::

    127.0.0.1 - - [30/Nov/2026:08:40:08 +0000] "POST /v1/completions HTTP/1.1" 200 265 "-" "gwlab-drive/1" 256 0.051 [default-vllm-8000] [] 127.0.0.1:18301 265 0.051 200 client-ok-001
    2026/11/30 08:40:08 [error] 8164#8164: *3 connect() failed (111: Connection refused) while connecting to upstream, ...
"""

from __future__ import annotations

from types import ModuleType

import polars as pl

from .base import ChunkResult, ParseContext

PAIRS = (("nginx_access", "nginx_error"),)
# the other format's detection score on the file's head, at least: ~1 line in 20 of its own
MIN_SCORE = 0.05


def partner(name: str, scores: dict[str, float]) -> str | None:
    """The format interleaved with ``name`` in a file whose head scores ``scores``, if any."""
    for a, b in PAIRS:
        other = b if name == a else a if name == b else None
        if other is not None and scores.get(other, 0.0) >= MIN_SCORE:
            return other
    return None


class Mixed:
    """A format module (parsers/base.py) for a file of two: ``first``'s lines, then the rest with ``second``."""

    MODE = "lines"

    def __init__(self, first: ModuleType, second: ModuleType) -> None:
        self.first, self.second = first, second
        self.NAME, self.KIND = first.NAME, first.KIND
        self.SPEED = min(getattr(first, "SPEED", 100), getattr(second, "SPEED", 100))
        self.INDEPENDENT_CHUNKS = bool(
            getattr(first, "INDEPENDENT_CHUNKS", False) and getattr(second, "INDEPENDENT_CHUNKS", False)
        )

    def parse_chunk(self, lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
        one = self.first.parse_chunk(lines, ctx, state.setdefault("first", {}))
        ok = _recognized(one, lines)
        rest = lines.filter(~ok)
        if rest.height == 0:
            return one
        two = self.second.parse_chunk(rest, ctx, state.setdefault("second", {}))
        ok = ok | lines["line_no"].is_in(rest.filter(_recognized(two, rest))["line_no"].implode())
        return ChunkResult(
            tables=_tables(one, two),
            recognized=ok,
            assumptions=one.assumptions + two.assumptions,
            messages=one.messages + two.messages,
        )

    def finish(self, ctx: ParseContext, state: dict) -> ChunkResult | None:
        done = [
            mod.finish(ctx, state.get(key, {}))
            for mod, key in ((self.first, "first"), (self.second, "second"))
            if hasattr(mod, "finish")
        ]
        done = [d for d in done if d is not None]
        if not done:
            return None
        return ChunkResult(tables=_tables(*done), assumptions=[a for d in done for a in d.assumptions])


def _tables(*results: ChunkResult) -> dict[str, pl.DataFrame]:
    """The results' tables, one frame per name."""
    tables: dict[str, pl.DataFrame] = {}
    for res in results:
        for name, df in res.tables.items():
            tables[name] = pl.concat([tables[name], df], how="diagonal_relaxed") if name in tables else df
    return tables


def _recognized(res: ChunkResult, lines: pl.DataFrame) -> pl.Series:
    if res.recognized is None:
        return pl.Series("ok", [False] * lines.height, dtype=pl.Boolean)
    return res.recognized.fill_null(False)
