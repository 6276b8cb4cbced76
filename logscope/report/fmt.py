"""Value formatting shared by summary.json, summary.md and report.html.

JSON values are made deterministic here (ISO 8601 UTC strings, rounded floats, no NaN), so the
same inputs always give byte-identical files.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime
from typing import Any

from .. import clock

FLOAT_DIGITS = 4  # decimals kept in summary.json: enough for seconds and shares, stable across runs

_PROMPT = re.compile(
    r"""(?P<key>prompt(?:_token_ids)?\s*[:=]\s*|"(?:prompt|content|messages|input)"\s*:\s*)(?P<val>.*)""",
    re.IGNORECASE,
)


def iso(ts: Any) -> str | None:
    """UTC ISO 8601 with milliseconds and a Z: '2026-11-29T08:26:26.314Z'."""
    if ts is None:
        return None
    if isinstance(ts, str):
        return ts
    if isinstance(ts, datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=UTC)
        ts = ts.astimezone(UTC)
        return ts.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"
    if isinstance(ts, date):
        return ts.isoformat()
    return str(ts)


def num(x: Any, digits: int = FLOAT_DIGITS) -> float | int | None:
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, int):
        return x
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    if math.isnan(f) or math.isinf(f):
        return None
    r = round(f, digits)
    return 0.0 if r == 0 else r  # no "-0.0"


def clean(obj: Any) -> Any:
    """Recursively JSON-safe and deterministic (datetimes to ISO, floats rounded, NaN to null)."""
    if isinstance(obj, dict):
        return {str(k): clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    if isinstance(obj, float):
        return num(obj)
    if isinstance(obj, datetime | date):
        return iso(obj)
    if obj is None or isinstance(obj, str | int | bool):
        return obj
    return str(obj)


def _utc(ts: Any) -> datetime | str:
    """A datetime (or ISO text) in UTC; text that is not ISO comes back unchanged."""
    if isinstance(ts, str):
        try:
            ts = datetime.fromisoformat(ts.replace("Z", "+00:00"))
        except ValueError:
            return ts
    return ts.astimezone(UTC)


def hms(ts: Any) -> str:
    """'08:26:26' (UTC) for tables, the date given once in the header; '11-30 08:26:26' when the logs
    cover several days (logscope.clock)."""
    if ts is None:
        return "–"
    t = _utc(ts)
    return t if isinstance(t, str) else clock.hms(t)


def hms_span(start: Any, end: Any) -> str:
    """'01:40:17 → 01:41:08', or one time for an instant (no end, or an end that reads the same: public-2 n19's
    KV-load failure headed '01:40:17 → 01:40:17')."""
    a, b = hms(start), hms(end)
    return a if end is None or a == b else f"{a} → {b}"


def when(ts: Any) -> str:
    """'2026-11-29 08:26:26 UTC'."""
    if ts is None:
        return "–"
    t = _utc(ts)
    return t if isinstance(t, str) else t.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(s: Any) -> str:
    if s is None:
        return "–"
    s = float(s)
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 120:
        return f"{s:.1f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def seconds(s: Any) -> str:
    """A per-request latency in three significant figures: '31 µs', '44.7 ms', '9.65 s', '56.2 s'."""
    if s is None:
        return "–"
    s = float(s)
    if math.isnan(s):
        return "–"
    if abs(s) < 0.001:
        return f"{s * 1e6:.3g} µs"
    if abs(s) < 1:
        return f"{s * 1000:.3g} ms"
    return f"{s:.3g} s" if abs(s) < 1000 else f"{s:,.0f} s"


def fnum(x: Any, digits: int = 2) -> str:
    """Human number: thousands separators, trailing zeros dropped, '–' for missing."""
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    try:
        f = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(f):
        return "–"
    if f == int(f) and abs(f) < 1e15:
        return f"{int(f):,}"
    s = f"{f:,.{digits}f}".rstrip("0").rstrip(".")
    return s


_ISO_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")


def is_iso(x: str) -> bool:
    return bool(_ISO_TS.match(x))


def fval(x: Any) -> str:
    """Any scalar of a JSON document, for a table cell: numbers grouped, ISO times as HH:MM:SS."""
    if isinstance(x, str):
        return hms(x) if _ISO_TS.match(x) else x
    return fnum(x, 3)


def label(key: Any) -> str:
    """'max_tokens_mean' -> 'max tokens mean' (table headers)."""
    return str(key).replace("_", " ")


def pct(x: Any, digits: int = 1) -> str:
    if x is None:
        return "–"
    return f"{float(x) * 100:.{digits}f} %"


# keys of diagnosis figures that hold a fraction of a whole (shown as percentages) and process ids (no
# thousands separator); the generic tables of the page know a figure only by its key
_FRACTION_KEYS = {"kv_full", "kv_max", "kv_mean", "kv_observed_max", "kv_usage"}


def keyed(x: Any, key: Any) -> str | None:
    """A figure the page shows by its key: a share or KV usage as a percentage, a pid as written; None for the
    others (formatted as any value)."""
    if not isinstance(key, str) or isinstance(x, bool) or not isinstance(x, int | float):
        return None
    if "share" in key or key in _FRACTION_KEYS:
        return pct(x)
    if key == "pid" or key.endswith("_pid"):
        return str(x)
    return None


_PERCENT_SIGNALS = {"kv_pressure"}  # a share of the KV cache
_SECONDS_SIGNALS = {"ttft", "e2e"}  # a p95 latency
# the unit of the other signals' peaks (diagnose.stretches): preemptions per stats line, requests waiting in
# one stats line, counts per window of the request signals; a stall or a crash is a 0/1 flag, no figure
_UNITS = {
    "preemptions": "per stats line",
    "queue": "waiting",
    "errors": "per window",
    "retries": "per window",
    "orphans": "per window",
}
_FLAGS = {"stall", "crash"}


def signal_value(x: Any, signal: Any) -> str:
    """An episode's peak or baseline in its signal's unit: KV usage as a percentage, latencies in seconds,
    counts with what they count ('25 per stats line', '371 waiting')."""
    if x is None or signal in _FLAGS:
        return "–"
    if signal in _PERCENT_SIGNALS:
        return pct(x)
    if signal in _SECONDS_SIGNALS:
        return f"{fnum(x)} s"
    unit = _UNITS.get(signal)
    return f"{fnum(x)} {unit}" if unit else fnum(x)


def redact_prompt(line: str | None, include_prompts: bool) -> str | None:
    """Cut prompt text out of a raw log line (unrecognised-line examples) unless prompts are allowed."""
    if line is None or include_prompts:
        return line
    return _PROMPT.sub(
        lambda m: m.group("key") + "<prompt omitted: --include-prompts shows it>", line, count=1
    )
