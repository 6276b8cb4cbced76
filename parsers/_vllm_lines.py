"""vllm_server's rows: header, era and process-prefix patterns, each line's fields, its time, its record."""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.scalars import int_value
from logscope.schemas import TS

from . import _kinds
from ._common import ascii_classes, local_to_utc
from ._vllm_pastes import join_wraps, strip_markdown
from ._vllm_prefix import PID, PROCESS
from .base import ParseContext

_LVL = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
_HEAD_CHARS = 320  # the header is read in this much of a line: headers are shorter
_ANSI = r"\x1b\[[0-9;]*m"
# the header (process prefix, then a vLLM or a uvicorn header) is read by the compiled scanner: its kind is
# _vllm_lines.toml (a paste that starts inside the process prefix loses its '(': 'cut' is that prefix, read as 'pre')

# only run when a chunk has such lines: docker/kubectl time, a python-logging config (user or otel)
_DATED = ascii_classes(r"^\d{4}-\d\d-\d\d[ T]\d\d:")  # either of the two, one test for both first
_DATED_T = ascii_classes(r"^\d{4}-\d\d-\d\dT\d\d:")
_DATED_PY = ascii_classes(
    r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? (?:- |(?:\d+ )?(?:kserve|uvicorn)[\w.]* )"
)
# KServe's huggingfaceserver logging: '%(asctime)s.%(msecs)03d %(process)s %(name)s %(message)s', and for uvicorn's
# access logger '... %(name)s %(levelprefix)s %(client_addr)s %(process)s - "%(request_line)s" %(status_code)s'
# (kserve/kserve#4470: vLLM's request lines go through it)
_KSERVE = ascii_classes(
    r"^(?P<kshdr>(?P<ksts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[,.](?P<ksms>\d{1,6}) (?:\d+ )?"
    rf"(?P<ksname>(?:kserve|uvicorn)[\w.]*) (?:(?P<ksuv>{_LVL}): +)?)"
)
_CTS = ascii_classes(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ")
# a wrapper's '[<name>]' before such a stamp, a stream name after it: 'kubectl logs --prefix --timestamps'
# ('[pod/<pod>/<container>] <stamp> '), a sidecar's '[VllmSidecar <id>]: <stamp> 1 stdout: ' (vllm#9818). Its stamp
# has a year and a zone where vLLM's own has neither (that sidecar's vLLM wrote local time, UTC-8): it is the time
_WRAP_CTS = ascii_classes(
    r"^\[[^\]]{1,120}\]:? (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) "
    r"(?:(?:\d+ )?(?:stdout|stderr):? )?"
)
_PYLOG = ascii_classes(
    r"^(?P<pyhdr>(?P<pyts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[,.](?P<pyms>\d{1,6}))? - (?:[\w.-]+\.py - )?"
    rf"(?P<pyname>[\w.]+) - (?P<pylvl>{_LVL}) - )"
)
# a vLLM header (with its process prefix) or a uvicorn access line in the middle of a line: records glued
# together by a paste, or a whole paste flattened onto one line (newlines turned into spaces)
_GLUE_HDR = rf"(?:{PROCESS} ?)?(?:{_LVL}) \d\d-\d\d \d\d:\d\d:\d\d \[?[^\s\]]+:\d+\]"
_GLUE = ascii_classes(
    rf"(?:{PROCESS} ?)?(?:(?:{_LVL}) \d\d-\d\d \d\d:\d\d:\d\d \[?[^\s\]]+:\d+\]"
    r"|(?:INFO|WARNING|ERROR): +\d{1,3}(?:\.\d{1,3}){3}:\d+ - \")"
)
_GLUE_HDR = ascii_classes(_GLUE_HDR)  # vLLM's header alone (detection: uvicorn lines are any FastAPI app's)
# traceback-shaped lines (indented, exception lines, markers, blank) continue an open record
_TB = ascii_classes(
    r"^(?:\s|Traceback \(most recent call last\)|During handling of the above exception"
    r"|The above exception was the direct cause|File \"|[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b"
    r"|\^+$|Process [\w-]+:$|$)"
)
_TB_STRONG = ascii_classes(
    r"^(?:\s*Traceback \(most recent call last\)|During handling of the above exception"
    r"|The above exception was the direct cause|\s*File \"|[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b"
    r"|Process [\w-]+:$)"
)
# third-party output known to appear in vLLM server logs (classified, produces no rows)
_NOISE = ascii_classes(
    r"^(?:\s*(?:Loading safetensors checkpoint shards|Loading pt checkpoint shards|Processed prompts"
    r"|Capturing CUDA graphs?)\b|nanobind: |See https://nanobind\.readthedocs|Triton is installed"
    r"|Triton not installed|No CUDA runtime is found|\S+\.py:\d+: \w*Warning: |\[[WEI]\d{4} \d\d:\d\d:\d\d"
    # a Rust ``tracing`` line after its RFC 3339 stamp (NVIDIA Dynamo's KV block manager, dynamo#4087)
    r"|\s*(?:TRACE|DEBUG|INFO|WARN|ERROR) [A-Za-z_][\w]*(?:::[\w]+)+: )"
)
_JSON_FIELD = r'"{}": "((?:[^"\\]|\\.)*)"'


# ---- row parsing -------------------------------------------------------------------------------


def _parse(lines: pl.DataFrame, repairs: dict[str, int]) -> pl.DataFrame:
    """Header fields and message of each line; lines holding glued records are split into parts, hard-wrapped
    continuations joined to their record (``_vllm_pastes``); ``repairs`` counts what was mended."""
    lines, repairs["markdown"] = strip_markdown(lines)
    df = lines.select(
        "line_no",
        pl.lit(0, dtype=pl.Int32).alias("part"),
        pl.col("line").str.len_bytes().cast(pl.Int64).alias("plen"),
        pl.col("line"),
    )
    if df.height and bool(df["line"].str.contains("\x1b", literal=True).any()):
        df = df.with_columns(pl.col("line").str.replace_all(_ANSI, ""))
    df = _fields(df)
    glued = df["msg"].str.contains(_GLUE)
    if bool(glued.any()):
        parts = (
            df.filter(glued)
            .select(
                "line_no",
                "plen",
                (pl.col("hdr") + pl.col("msg").str.replace_all(_GLUE, "\n$0")).str.split("\n").alias("line"),
            )
            .explode("line")
            .with_columns(pl.int_range(pl.len()).over("line_no").cast(pl.Int32).alias("part"))
            .select("line_no", "part", "plen", pl.col("line"))
        )
        parts = _fields(parts.with_columns(pl.col("line").str.strip_chars_end()))
        repairs["split"] = int((parts["part"] > 0).sum())
        df = pl.concat([df.filter(~glued), parts], how="vertical_relaxed").sort(["line_no", "part"])
    df, repairs["joined"] = join_wraps(df, _TB_STRONG, _NOISE)
    return df


def _fields(df: pl.DataFrame) -> pl.DataFrame:
    line = pl.col("line")
    df = df.with_columns(line.str.ends_with("\r").alias("cr"))
    body = line.str.strip_chars_end("\r") if bool(df["cr"].any()) else line
    df = df.with_columns(body.alias("body")).drop("line")
    b = pl.col("body")
    # one test for the two rare line starts (container time, python logging) before their own tests
    dated = bool(df["body"].str.contains(_DATED).any())
    if dated and bool(df["body"].str.contains(_DATED_T).any()):
        df = df.with_columns(b.str.extract(_CTS).alias("cts"))
        df = df.with_columns(
            pl.when(pl.col("cts").is_not_null())
            .then(b.str.slice(pl.col("cts").str.len_chars() + 1))
            .otherwise(b)
            .alias("body")
        )
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("cts"))
    if bool(df["body"].str.starts_with("[").any()) and bool(df["body"].str.contains(_WRAP_CTS).any()):
        wrap = b.str.extract(_WRAP_CTS, 0)
        df = df.with_columns(
            pl.coalesce(pl.col("cts"), b.str.extract(_WRAP_CTS, 1)).alias("cts"),
            pl.when(wrap.is_not_null()).then(b.str.slice(wrap.str.len_chars())).otherwise(b).alias("body"),
            wrap.is_not_null().alias("wrapped"),
        )
    else:
        df = df.with_columns(pl.lit(False).alias("wrapped"))
    heads = _kinds.scan(__file__, df.select(b.str.slice(0, _HEAD_CHARS).alias("line")))
    heads = heads.select("hdr", pl.coalesce("pre", "cut").alias("pre"), "lvl", "stamp", "uv")
    df = pl.concat([df, heads], how="horizontal")
    st = pl.col("stamp")
    df = _processes(df).with_columns(
        # the header is a prefix of the body (of its first characters the scan read): the rest is the message
        b.str.strip_prefix(pl.col("hdr")).alias("msg"),
        st.str.slice(0, 2).alias("mo"),
        st.str.slice(3, 2).alias("dd"),
        st.str.slice(6, 8).alias("hms"),
        pl.when(pl.col("lvl").is_not_null()).then(pl.col("hdr").str.strip_chars_end(" ")).alias("key"),
    )
    if dated and bool(df["body"].str.contains(_DATED_PY).any()):
        df = _pylog(df)
    else:
        df = df.with_columns(
            pl.lit(None, dtype=pl.String).alias(c) for c in ("pyts", "pyms", "pyname", "pylvl")
        )
    if bool(df["body"].str.starts_with('{"').any()):
        df = _json(df)
    return df.drop("body", "stamp", "pre")


def _processes(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with each line's process name and id (``proc``, ``pid``) read from its process prefix (``pre``). A large
    chunk holds a few prefixes on thousands of lines: each is read once and joined back (17,000 lines: 4.0 -> 1.9 ms);
    below ~2,000 lines the join costs more than it saves (63 lines: 0.14 -> 0.40 ms)."""
    pre = pl.col("pre")
    columns = (
        # by pattern, not by str.find's offset: polars 2.1 counted it in bytes, 2.2 in characters (a byte cut at a
        # character offset split a multi-byte character: 'invalid utf8' on a fresh install)
        pre.str.extract(r"(?s)^(.*?) pid=", 1).alias("proc"),  # Ray's '(pid=N, ip=A)' names none
        pre.str.extract(PID, 1).pipe(to_int).alias("pid"),
    )
    if df.height < _JOIN_ROWS:
        return df.with_columns(columns)
    each = df.select(pre.unique()).drop_nulls().with_columns(columns)
    return df.join(each, on="pre", how="left", maintain_order="left")


_JOIN_ROWS = 2_000


def _pylog(df: pl.DataFrame) -> pl.DataFrame:
    """Lines of a python ``logging`` format ('2024-12-20 15:18:19 - vllm.engine.metrics - INFO - ...'), and of
    KServe's (its loggers' and uvicorn's, a process id in front of the client in an access line)."""
    df = df.with_columns(pl.col("body").str.extract_groups(_PYLOG).alias("py")).unnest("py")
    if bool(df["body"].str.contains(_KSERVE).any()):
        ks = pl.col("body").str.extract_groups(_KSERVE)
        df = df.with_columns(ks.alias("ks")).unnest("ks")
        k = pl.col("kshdr").is_not_null()
        df = df.with_columns(
            pl.when(k)
            .then(pl.col("body").str.slice(pl.col("kshdr").str.len_chars()))
            .otherwise(pl.col("msg"))
            .alias("msg"),
            pl.coalesce("pyts", "ksts").alias("pyts"),
            pl.coalesce("pyms", "ksms").alias("pyms"),
            pl.coalesce("pyname", "ksname").alias("pyname"),
            pl.coalesce("uv", "ksuv").alias("uv"),
        ).drop("kshdr", "ksts", "ksms", "ksname", "ksuv")
    py = pl.col("pyhdr").is_not_null()
    vllm = py & pl.col("pyname").str.starts_with("vllm")
    return df.with_columns(
        pl.when(py)
        .then(pl.col("body").str.slice(pl.col("pyhdr").str.len_chars()))
        .otherwise(pl.col("msg"))
        .alias("msg"),
        pl.when(vllm).then(pl.col("pylvl")).otherwise(pl.col("lvl")).alias("lvl"),
        pl.when(vllm).then(pl.col("pyhdr")).otherwise(pl.col("key")).alias("key"),
    ).drop("pyhdr")


def _json(df: pl.DataFrame) -> pl.DataFrame:
    """vLLM 0.32+ ``--logging-config.formatter json`` (pythonjsonlogger) lines."""
    b = pl.col("body")
    is_js = b.str.starts_with('{"') & b.str.contains('"levelname"', literal=True)

    def field(name: str) -> pl.Expr:
        return b.str.extract(_JSON_FIELD.format(name))

    msg = field("message")
    exc = field("exc_info")
    msg = pl.when(exc.is_not_null()).then(msg + pl.lit("\\n") + exc).otherwise(msg)
    msg = (
        msg.str.replace_all(r"\\n", "\n")
        .str.replace_all(r"\\t", "\t")
        .str.replace_all(r'\\"', '"')
        .str.replace_all(r"\\\\", "\\")
    )
    asct = field("asctime")
    name = field("name")
    vllm = is_js & name.str.starts_with("vllm")
    return df.with_columns(
        pl.when(vllm).then(field("levelname")).otherwise(pl.col("lvl")).alias("lvl"),
        pl.when(is_js).then(name).otherwise(pl.col("pyname")).alias("pyname"),
        pl.when(is_js).then(field("processName")).otherwise(pl.col("proc")).alias("proc"),
        pl.when(is_js)
        .then(b.str.extract(r'"process": (\d+)').pipe(to_int))
        .otherwise(pl.col("pid"))
        .alias("pid"),
        pl.when(is_js).then(msg).otherwise(pl.col("msg")).alias("msg"),
        # asctime is either logging's default 'YYYY-MM-DD HH:MM:SS,mmm' or vLLM's 'MM-DD HH:MM:SS'
        pl.when(is_js).then(asct.str.extract(r"^(\d\d)-\d\d ")).otherwise(pl.col("mo")).alias("mo"),
        pl.when(is_js).then(asct.str.extract(r"^\d\d-(\d\d) ")).otherwise(pl.col("dd")).alias("dd"),
        pl.when(is_js)
        .then(asct.str.extract(r"^\d\d-\d\d (\d\d:\d\d:\d\d)$"))
        .otherwise(pl.col("hms"))
        .alias("hms"),
        pl.when(is_js)
        .then(asct.str.extract(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)"))
        .otherwise(pl.col("pyts"))
        .alias("pyts"),
        pl.when(is_js)
        .then(asct.str.extract(r"^\S+ \S+?[,.](\d{1,6})"))
        .otherwise(pl.col("pyms"))
        .alias("pyms"),
        pl.when(is_js).then(pl.lit(None, dtype=pl.String)).otherwise(pl.col("uv")).alias("uv"),
    )


# ---- time --------------------------------------------------------------------------------------


def _times(
    df: pl.DataFrame, ctx: ParseContext, state: dict
) -> tuple[pl.DataFrame, list[str], tuple[int, str | None]]:
    """Each row's time; also how many stamps were no time (02-29 of a common year, a local time in a DST gap:
    the row then takes the previous line's time, ts_inferred) and the first of them."""
    notes: list[str] = []
    mo = pl.col("mo").cast(pl.Int32)
    prev_mo = mo.forward_fill().shift(1).fill_null(state.get("last_month", 0))
    # a month far below the previous one is the turn of a year (Dec -> Jan), when the next stamp stays there:
    # one bad stamp (02-29 among 11-29 lines) must not move the rest of the file a year on
    next_mo = mo.backward_fill().shift(-1)
    roll = ((mo < prev_mo - 6) & (next_mo.is_null() | (next_mo <= mo + 6))).fill_null(False)
    df = df.with_columns(roll.cum_sum().cast(pl.Int32).alias("_roll"))
    year_off = state.get("year_off", 0)
    vllm_naive = pl.concat_str(
        [
            (pl.col("_roll") + ctx.year + year_off).cast(pl.String),
            pl.lit("-"),
            pl.col("mo"),
            pl.lit("-"),
            pl.col("dd"),
            pl.lit(" "),
            pl.col("hms"),
        ]
    ).str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
    py_naive = pl.concat_str(
        [pl.col("pyts").str.replace("T", " "), pl.lit("."), pl.col("pyms").fill_null("0").str.pad_end(6, "0")]
    ).str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    c = pl.col("cts")
    frac = c.str.extract(r"\.(\d+)").fill_null("0").str.pad_end(6, "0").str.slice(0, 6)
    zone = c.str.extract(r"(Z|[+-]\d\d:\d\d)$").str.replace("Z", "+00:00")
    cts = pl.concat_str([c.str.slice(0, 19), pl.lit("."), frac, zone]).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC"
    )
    # each kind of stamp only when the chunk has it: an expression over an all-null column still
    # compiles its regexes (polars keeps 32 compiled patterns; past that every chunk recompiles them)
    has_mo, has_cts, has_py = df.select(pl.col(c).is_not_null().any() for c in ("mo", "cts", "pyts")).row(0)
    parts = [
        e
        for e, has in (
            (cts, has_cts),
            (local_to_utc(vllm_naive, ctx.tz), has_mo),
            (local_to_utc(py_naive, ctx.tz), has_py),
        )
        if has
    ]
    own = pl.coalesce(parts).cast(TS) if parts else pl.lit(None, dtype=TS)
    df = df.with_columns(own.alias("ts_own"))
    stamped = pl.any_horizontal(
        [pl.col(k).is_not_null() for k, has in (("mo", has_mo), ("cts", has_cts), ("pyts", has_py)) if has]
        or [pl.lit(False)]
    )
    no_time = df.filter(stamped & pl.col("ts_own").is_null())
    bad = (
        no_time.height,
        None
        if no_time.height == 0
        else "line {}: {}".format(
            *no_time.select(
                "line_no",
                pl.coalesce(
                    pl.col("cts"),
                    pl.col("pyts"),
                    pl.concat_str([pl.col("mo"), pl.lit("-"), pl.col("dd"), pl.lit(" "), pl.col("hms")]),
                ),
            ).row(0)
        ),
    )
    df = df.with_columns(
        # a line without a time takes the previous line's (ts_inferred); before the stream's first stamp (a paste
        # starting mid-traceback) there is none: null, never a later line's time
        pl.col("ts_own").forward_fill().fill_null(pl.lit(state.get("last_ts"), dtype=TS)).alias("ts"),
        pl.col("ts_own").is_null().alias("ts_inferred"),
        stamped.alias(
            "stamped"
        ),  # a time was written on the line (rows of stats and requests keep only theirs)
    )
    # what the chunk leaves for the next and says, in one query
    facts = df.select(
        rolls=pl.col("_roll").max(),
        last_mo=pl.col("mo").drop_nulls().last(),
        last_ts=pl.col("ts").drop_nulls().last(),
        cts=(pl.col("cts").is_not_null() & ~pl.col("wrapped")).any(),
        wrapped=pl.col("wrapped").any(),
        uv=(pl.col("ts_inferred") & pl.col("uv").is_not_null()).any(),
    ).row(0, named=True)
    rolls = int_value(facts["rolls"] or 0)
    if rolls:
        notes.append(
            f"vLLM timestamps have no year: the month went back (Dec -> Jan) {rolls} time(s), "
            f"the year was advanced each time"
        )
    state["year_off"] = year_off + rolls
    if facts["last_mo"] is not None:
        state["last_month"] = int(facts["last_mo"])
    if facts["last_ts"] is not None:
        state["last_ts"] = facts["last_ts"]
    if has_mo:
        notes.append(f"vLLM timestamps have no zone: read as {ctx.tz} (--tz)")
        notes.append(f"vLLM timestamps have no year: {ctx.year_source}")
        notes.append("vLLM timestamps have whole seconds: rows of one second keep file order (seq)")
    if facts["cts"]:
        notes.append(
            "container timestamps (docker/kubectl, RFC 3339 UTC) in front of lines were used as their time"
        )
    if facts["wrapped"]:
        notes.append(
            "a wrapper's RFC 3339 stamp (with a year and a zone, where vLLM's own has neither) in front of "
            "lines was used as their time"
        )
    if has_py:
        notes.append(f"python-logging timestamps have no zone: read as {ctx.tz} (--tz)")
    if facts["uv"]:
        notes.append(
            "uvicorn lines carry no time: they take the time of the previous timestamped line (ts_inferred)"
        )
    return df.drop("_roll", "wrapped"), notes, bad
