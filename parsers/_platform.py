"""Helpers shared by the platform formats (``kernel_log``, ``k8s_kubectl``): kubectl's ages and quantities, and
the ``platform_events`` / ``platform_pods`` rows they write.

kubectl prints an age as the two largest units of a duration (``translateTimestampSince`` → ``duration.HumanDuration``
in k8s.io/apimachinery: ``45s``, ``5m``, ``3m21s``, ``2d1h``, ``12h``, ``118s``, ``2y``); a quantity as the
resource's canonical string (``4Gi``, ``512Mi``, ``1G``, ``500M``, ``1048576k``, plain bytes).
"""

from __future__ import annotations

import polars as pl

from logscope.schemas import TS, conform

from ._common import ascii_classes

# a kubectl age: up to three unit groups (HumanDuration prints two; 'x1101 over 12h' too)
AGE = ascii_classes(r"(?:\d+[ydhms])+")
_UNIT_S = {"y": 365.0 * 86400, "d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_QTY = ascii_classes(r"^([0-9]+(?:\.[0-9]+)?)([KMGTPE]i?|[kmu]|e[0-9]+)?$")
_QTY_MULT: dict[str, float] = {
    "k": 1e3,
    "K": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
    "m": 1e-3,
}


# a kubelet probe's event message, in any kubectl output form: which probe, and what it got
PROBE = r"^(Liveness|Readiness|Startup) probe (?:failed|errored)"
KILL_PROBE = r"failed (liveness|startup|readiness) probe"


def probe_kind(msg: pl.Expr) -> pl.Expr:
    """'liveness' / 'readiness' / 'startup' of a probe failure or of the kill it caused, else null."""
    return pl.coalesce(msg.str.extract(PROBE, 1), msg.str.extract(KILL_PROBE, 1)).str.to_lowercase()


def probe_result(msg: pl.Expr) -> pl.Expr:
    """What a failed probe got: 'HTTP 503', 'timeout', 'connection refused', or its message less the prefix."""
    return (
        pl.when(msg.str.contains(r"statuscode: \d+"))
        .then(pl.lit("HTTP ") + msg.str.extract(r"statuscode: (\d+)", 1))
        .when(msg.str.contains(r"(?i)deadline exceeded|Client\.Timeout|timed out|timeout"))
        .then(pl.lit("timeout"))
        .when(msg.str.contains("connection refused"))
        .then(pl.lit("connection refused"))
        .when(msg.str.contains(PROBE))
        .then(msg.str.replace(PROBE + r":?\s*", "").str.slice(0, 120))
    )


def age_seconds(age: pl.Expr) -> pl.Expr:
    """'3m21s' -> 201.0, '2d1h' -> 176400.0; null when it is no age ('<unknown>', '<invalid>')."""
    parts = age.str.extract_all(ascii_classes(r"\d+[ydhms]"))
    total = parts.list.eval(
        pl.element().str.head(-1).cast(pl.Float64)
        * pl.element().str.tail(1).replace_strict(_UNIT_S, default=None, return_dtype=pl.Float64)
    ).list.sum()
    return pl.when(age.str.contains(f"^{AGE}$")).then(total)


def quantity_bytes(q: pl.Expr) -> pl.Expr:
    """A resource quantity ('4Gi', '512Mi', '1G', '1048576') in bytes (Int64); null when it is none."""
    g = q.str.strip_chars().str.extract_groups(_QTY)
    mult = g.struct.field("2").replace_strict(_QTY_MULT, default=None, return_dtype=pl.Float64)
    return (g.struct.field("1").cast(pl.Float64) * pl.coalesce(mult, pl.lit(1.0))).round(0).cast(pl.Int64)


def kb_bytes(kb: pl.Expr) -> pl.Expr:
    """The kernel's '153,700,88kB' counts (digits, sometimes grouped by commas) in bytes."""
    return kb.str.replace_all(",", "").cast(pl.Int64, strict=False) * 1024


def events(df: pl.DataFrame) -> pl.DataFrame:
    return conform(df, "platform_events")


def pods(df: pl.DataFrame) -> pl.DataFrame:
    return conform(df, "platform_pods")


NULL_TS = pl.lit(None, dtype=TS)
