"""Read what the earlier stages left in the output folder, never failing on a missing piece.

Every stage runs separately (``logscope report`` re-renders without re-parsing), so any table or
JSON file may be absent or unreadable: the loader keeps the reason, and the report says it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from .. import schemas
from ..resources import time_range

TABLES = (
    "files",
    "unrecognized",
    "server_stats",
    "server_events",
    "server_requests",
    "gateway_attempts",
    "client_attempts",
    "requests",
    "windows",
    "clock_offsets",
    "episodes",
    "findings",
    "ladder",
)
DOCS = ("ingest", "correlation", "diagnosis")
# Which stage writes what: the reason shown when something is missing.
PRODUCER = {
    "ingest": "logscope ingest",
    "correlation": "the correlation stage",
    "diagnosis": "the diagnosis stage",
    "requests": "the correlation stage",
    "windows": "the correlation stage",
    "clock_offsets": "the correlation stage",
    "episodes": "the diagnosis stage",
    "findings": "the diagnosis stage",
    "ladder": "the diagnosis stage",
}


@dataclass
class Loaded:
    """Tables and documents of one output folder, with a reason for each missing one. A table is read
    when first asked for (at millions of requests the page needs some tables only for a count)."""

    out: Path
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    docs: dict[str, dict] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    rng: time_range.Range = field(default_factory=time_range.Range)  # the time range the analysis looked at

    def table(self, name: str, columns: tuple[str, ...] | None = None) -> pl.DataFrame:
        """The table (only ``columns`` of it when given: at a million requests the page needs a few columns of
        the request tables), or an empty frame with the declared schema when it is missing or unreadable."""
        key = name if columns is None else f"{name}:{','.join(columns)}"
        if key not in self.tables and name not in self.missing:
            p = self.out / f"{name}.parquet"
            try:
                if name in self.tables:  # the whole table is already read
                    self.tables[key] = self.tables[name].select(columns)
                else:
                    lf = time_range.scan(self.out, name, self.rng)
                    self.tables[key] = (lf if columns is None else lf.select(columns)).collect()
            except Exception as e:  # noqa: BLE001 - a damaged table must not stop the report
                self.missing[name] = f"{p.name} could not be read: {type(e).__name__}: {e}"
        if key in self.tables:
            return self.tables[key]
        empty = schemas.empty(name)
        return empty if columns is None else empty.select(columns)

    def scan(self, name: str) -> pl.LazyFrame:
        """The table lazily, cut to the range, not kept (a chart that reads a million rows once for a few
        dozen bars); empty with the declared schema when missing."""
        p = self.out / f"{name}.parquet"
        if name in self.missing or not p.exists():
            return schemas.empty(name).lazy()
        return time_range.scan(self.out, name, self.rng)

    def doc(self, name: str) -> dict:
        return self.docs.get(name, {})

    def why(self, name: str) -> str:
        if name in TABLES:
            self.table(name)  # a table that fails to read says so here too
        return self.missing.get(name, "")


def load(out: Path) -> Loaded:
    res = Loaded(out)
    for name in TABLES:
        p = out / f"{name}.parquet"
        if not p.exists():
            res.missing[name] = f"{p.name} is missing (written by {PRODUCER.get(name, 'logscope ingest')})"
            continue
        try:  # the footer now, so that a damaged table is named even if nothing reads it; the rows when asked
            pl.read_parquet_schema(p)
        except Exception as e:  # noqa: BLE001 - a damaged table must not stop the report
            res.missing[name] = f"{p.name} could not be read: {type(e).__name__}: {e}"
    for name in DOCS:
        p = out / f"{name}.json"
        if not p.exists():
            res.missing[name] = f"{p.name} is missing (written by {PRODUCER[name]})"
            continue
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            res.missing[name] = f"{p.name} could not be read: {e}"
            continue
        if not isinstance(doc, dict):
            res.missing[name] = f"{p.name} is not a JSON object"
            continue
        res.docs[name] = doc
    # the range diagnosis and correlation were run on (logscope report re-renders without options)
    res.rng = time_range.from_doc(res.doc("diagnosis").get("range") or res.doc("correlation").get("range"))
    return res
