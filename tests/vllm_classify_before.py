"""The oracle of tests/test_scan_vllm_records.py: vllm_server's record logic (row kinds, continuations, record ids,
the carried state, the shutdown flag) as parsers/_vllm_lines.py and parsers/_vllm_events.py computed it with polars
before it moved into the compiled scanner (issue #42), kept as it was."""

from __future__ import annotations

import polars as pl

from logscope.parsers._vllm_lines import _NOISE, _TB, _TB_STRONG
from logscope.parsers._vllm_records import _STARTING_LEADS, _STOPPING_ANY, _STOPPING_LEADS  # the same words


def _starts_any(e: pl.Expr, leads: tuple[str, ...]) -> pl.Expr:
    return pl.any_horizontal(e.str.starts_with(x) for x in leads)


def stopping(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """``_records``' shutdown flag of each row (the stream is shutting down), carried in ``state``."""
    m = pl.col("msg")
    stop = _starts_any(m, _STOPPING_LEADS) | m.str.contains(_STOPPING_ANY, literal=True)
    life = (
        pl.when(stop)
        .then(True)
        .when(_starts_any(m, _STARTING_LEADS))
        .then(False)
        .forward_fill()
        .fill_null(state.get("stopping", False))
    )
    df = df.with_columns(life.alias("stopping"))
    if df.height:
        state["stopping"] = bool(df["stopping"][-1])
    return df


def _classify(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Row kinds, 'continues the previous record' and record ids (carried across chunks by ``state``)."""
    p = state.get("prev", {})
    has_cr = bool(state.get("has_cr")) or bool(df["cr"].any())
    state["has_cr"] = has_cr
    msg, lvl = pl.col("msg"), pl.col("lvl")
    err = lvl.is_in(["ERROR", "CRITICAL"])
    df = df.with_columns(
        msg.str.contains(_TB).alias("tbm"),
        pl.when(lvl.is_null() & pl.col("uv").is_null())
        .then(
            msg.str.contains(_NOISE)
            | pl.col("pyname").str.contains("opentelemetry", literal=True).fill_null(False)
        )
        .otherwise(False)
        .alias("noise"),
        (lvl.is_null() & pl.col("uv").is_not_null()).alias("uvr"),
    )
    joined = pl.col("joined")
    raw = lvl.is_null() & ~pl.col("uvr") & ~pl.col("noise") & pl.col("pyname").is_null() & ~joined
    # a raw traceback flattened onto one line (its newlines turned into spaces; it may start mid-word)
    # (only raw rows are searched: the others are null here, and a long message is not read three times)
    rm = pl.when(raw & ~pl.col("tbm")).then(msg)
    flat = (
        rm.str.contains("(most recent call last)", literal=True)
        | (rm.str.contains('", line ', literal=True) & rm.str.contains(", in ", literal=True))
    ).fill_null(False)
    df = df.with_columns(
        (raw & (pl.col("tbm") | flat)).alias("tbs"),
        (raw & ~pl.col("tbm") & ~flat).alias("other"),
        (raw & flat).alias("flat"),
    )
    open0 = (lvl.is_in(["WARNING", "ERROR", "CRITICAL"]) | pl.col("noise") | pl.col("tbs")).fill_null(False)
    prev_plen = pl.col("plen").shift(1, fill_value=p.get("plen", 0))
    # a hard-wrapped paste: an unknown line right after a long line of an open record continues it
    wrap1 = pl.col("other") & open0.shift(1, fill_value=p.get("open", False)) & (prev_plen >= 80)
    open1 = open0 | wrap1
    prev_open = open1.shift(1, fill_value=p.get("open", False))
    wrap = pl.col("other") & prev_open & (prev_plen >= 80)
    # the key of the record the previous row belongs to (raw traceback / wrapped rows carry none)
    df = df.with_columns(
        pl.when(pl.col("uvr") | pl.col("noise"))
        .then(pl.lit("~"))
        .otherwise(pl.col("key"))
        .forward_fill()
        .alias("_ffk")
    )
    same_key = pl.col("key").is_not_null() & (
        pl.col("key") == pl.col("_ffk").shift(1).fill_null(pl.lit(p.get("key"), dtype=pl.String))
    )
    same_key = same_key.fill_null(False)
    prev_cr = pl.col("cr").shift(1, fill_value=p.get("cr", False))
    vcont = same_key & (prev_cr if has_cr else (err | pl.col("tbm")))
    df = df.with_columns(
        (vcont | (pl.col("tbs") & prev_open) | wrap | joined).fill_null(False).alias("cont"),
        wrap.fill_null(False).alias("wrap"),
        open1.fill_null(False).alias("_open"),
    )
    df = df.with_columns(
        pl.when(pl.col("tbs"))
        .then(msg.str.contains(_TB_STRONG) | pl.col("flat"))
        .otherwise(False)
        .alias("strong")
    )
    start_ok = lvl.is_not_null() | pl.col("uvr") | pl.col("noise") | pl.col("strong")
    df = df.with_columns(
        ((~pl.col("cont")).cum_sum().cast(pl.Int64) + state.get("rec", 0)).alias("rec"),
        pl.when(~pl.col("cont"))
        .then(start_ok)
        .forward_fill()
        .fill_null(p.get("rec_ok", False))
        .alias("rec_ok"),
    )
    df = df.with_columns(
        (
            lvl.is_not_null()
            | pl.col("uvr")
            | pl.col("noise")
            | pl.when(lvl.is_null() & ~joined).then(msg.str.strip_chars() == "").otherwise(False)
            | ((pl.col("tbs") | pl.col("wrap")) & pl.col("rec_ok"))
        ).alias("ok")
    )
    if df.height:
        last = df.row(-1, named=True)
        state["prev"] = {
            "plen": last["plen"],
            "open": last["_open"],
            "cr": last["cr"],
            "key": last["_ffk"],
            "rec_ok": last["rec_ok"],
        }
        state["rec"] = last["rec"]
    return df
