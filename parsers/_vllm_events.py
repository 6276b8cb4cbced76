"""vllm_server's records -> server_events: event kinds (errors, tracebacks, startup facts), uvicorn access."""

from __future__ import annotations

import functools
import re

import polars as pl

from logscope import _scan
from logscope.numbers import to_int

from . import _carry, _kinds
from . import _lexicon as lexicon
from ._common import ascii_classes, base_id_expr
from ._vllm_pastes import separator
from .base import ParseContext

# a request's lifecycle line: most of a log's records, never an event
_REQUEST_LINE = (
    r"^(?:Received request|Added request|Finished request|Aborted request"
    r"|Request \S+ (?:aborted|failed|details))"
)
_PROMPT_ANY = r"""prompt: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|'.*$|".*$)"""
_EVENT_KW = "|".join(
    re.sub(r"([.+*?()|\[\]{}^$\\])", r"\\\1", s)
    for s in (
        "Sequence group",
        "is preempted",
        "out of memory",
        "OutOfMemoryError",
        "No available memory for the cache blocks",
        "max seq len",
        "To serve at least one request",
        "timed out",
        "TimeoutError",
        "maximum context length",
        "Error in preprocessing prompt inputs",
        "decoder prompt",
        "is too long and exceeds",
        "exceeds the max_model_len",
        "DeadError",
        "died unexpectedly",
        "encountered a fatal error",
        "output_handler failed",
        "already dead",
        "failed to start",
        "Engine background task failed",
        "Engine loop has died",
        "exited unexpectedly",
        "initialization failed",
        "Started server process",
        "Starting vLLM",
        "Application startup complete",
        "Shutting down",
        "[shutdown]",
        "blocks: ",
        "KV cache size: ",
        "Maximum concurrency for",
        "Available KV cache memory",
        "Loading model weights took",
        "Model loading took",
        "Memory profiling results",
        "reserved for KV Cache is",
        "GiB for KV cache",
        "non-default args",
        "args: Namespace(",
        "server version",
        "LLM engine (",
        *lexicon.KEYWORDS,
    )
)
# event kinds, first match wins: the lexicon's (the cause, OOM, KV, input, timeout, before the death it caused;
# parsers/_lexicon.py), then vLLM's lifecycle and startup facts. Each rule carries literals one of which every
# match holds: a rule whose literals a chunk's records lack is not run (its regex would be compiled again for every
# chunk: the parser uses more patterns than polars caches)
_KIND_RULES: list[tuple[str, str, str, tuple[str, ...]]] = [  # (kind, column, regex, literals)
    ("server_start", "message", r"^Started server process \[\d+\]", ("Started server process [",)),
    ("server_listen", "message", r"^Starting vLLM (?:API )?server", ("Starting vLLM ",)),
    ("server_ready", "message", r"^Application startup complete", ("Application startup complete",)),
    (
        "server_stop",
        "message",
        r"^Shutting down\s*$|^\[shutdown\] API server: shutdown triggered"
        r"|^Shutting down FastAPI HTTP server",
        ("Shutting down", "[shutdown] API server"),
    ),
    ("version", "detail", r"vLLM (?:API )?server version \S|█\s+version \S", ("version ",)),
    (
        "capacity",
        "message",
        r"blocks: \d+|KV cache size: [\d,]+ tokens|^Maximum concurrency for"
        r"|^Available KV cache memory|^Loading model weights took|^Model loading took"
        r"|^Memory profiling results|reserved for KV Cache is|GiB for KV cache",
        (
            "blocks: ",
            "KV cache size: ",
            "Maximum concurrency for",
            "Available KV cache memory",
            "Loading model weights took",
            "Model loading took",
            "Memory profiling results",
            "reserved for KV Cache is",
            "GiB for KV cache",
        ),
    ),
    (
        "config",
        "message",
        r"non-default args: \{|^args: Namespace\(",
        ("non-default args: {", "args: Namespace("),
    ),
    # the engine's effective settings (prefix caching, chunked prefill, parallel sizes): compare reads them
    (
        "engine_config",
        "message",
        r"^Initializing an? (?:V[01] )?LLM engine \(v?[^)]*\) with config:",
        ("LLM engine (",),
    ),
]
_KIND_RULES = lexicon.RULES + [(kind, col, ascii_classes(rx), lits) for kind, col, rx, lits in _KIND_RULES]
_KIND_NAMES = pl.Series("kind", [kind for kind, *_ in _KIND_RULES], dtype=pl.String)

# the fields read off an event's first line (``message``) or its whole text (``detail``) by a pattern's group 1, each in
# the records of the kinds named: (name, column, kinds, pattern)
_CONFIG = ("config",)
_TOO_LONG = ("kv_insufficient", "input_too_long")
_FIELDS: list[tuple[str, str, tuple[str, ...], str]] = [
    ("cumulative", "message", ("preemption",), r"total_num_cumulative_preemption=([0-9]+)"),
    ("preempted", "message", ("preemption",), r"Sequence group (\S+) is preempted"),
    ("gpu_blocks", "message", ("capacity",), r"blocks: ([\d,]+)"),
    ("cpu_blocks", "message", ("capacity",), r"# CPU blocks: ([\d,]+)"),
    ("kv_tokens", "message", ("capacity",), r"KV cache size: ([\d,]+) tokens"),
    ("conc_tokens", "message", ("capacity",), r"Maximum concurrency for ([\d,]+) tokens"),
    ("conc", "message", ("capacity",), r"tokens per request: ([\d.]+)x"),
    ("kv_gib", "message", ("capacity",), r"Available KV cache memory: ([\d.]+) ?GiB"),
    ("kv_gib2", "message", ("capacity",), r"kv_cache_size=([\d.]+) ?GiB"),
    ("kv_gib3", "message", ("capacity",), r"reserved for KV Cache is ([\d.]+) ?GiB"),
    # CPU: VLLM_CPU_KVCACHE_SPACE unset / set
    ("kv_gib4", "message", ("capacity",), r"(?:Auto|Explicitly) set \(([\d.]+)/[\d.]+\) GiB"),
    ("weights", "message", ("capacity",), r"Loading model weights took ([\d.]+) GB"),
    ("weights2", "message", ("capacity",), r"Model loading took ([\d.]+) ?GiB"),
    # the non-default args dict, or the older argparse Namespace
    *(
        (f"{key}{i}", "message", _CONFIG, pat)
        for key in (
            "max_model_len",
            "max_num_seqs",
            "gpu_memory_utilization",
            "block_size",
            "num_gpu_blocks_override",
        )
        for i, pat in enumerate((rf"'{key}': ([\d.]+)", rf"\b{key}=([\d.]+)"))
    ),
    ("len1", "detail", _TOO_LONG, r"max seq len \((\d+)\)"),
    ("len2", "detail", _TOO_LONG, r"maximum context length is (\d+)"),
    ("len3", "detail", _TOO_LONG, r"maximum model length of (\d+)"),
    ("len4", "detail", _TOO_LONG, r"max_model_len (\d+)"),
    ("version", "detail", ("version",), r"(?:server version |█\s+version )v?(\d[\w.+-]*)"),
    ("started", "message", ("server_start",), r"Started server process \[(\d+)\]"),
]
_TEXT_COLS = ("message", "detail")


@functools.cache
def _kind_rules() -> _scan.Rules:
    """The kind rules compiled once by the compiled scanner (polars compiled each again for every chunk)."""
    return _scan.Rules([(_TEXT_COLS.index(col), rx, list(lits)) for _, col, rx, lits in _KIND_RULES])


@functools.cache
def _field_patterns() -> _scan.Fields:
    return _scan.Fields([(f"_f_{name}", _TEXT_COLS.index(col), list(k), rx) for name, col, k, rx in _FIELDS])


def _access(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    a = df.filter(
        pl.when(pl.col("uvr")).then(pl.col("msg").str.contains(' - "', literal=True)).otherwise(False)
    )
    # uvicorn's access line: its fields read by the compiled scanner (_vllm_events.toml)
    fields = _kinds.scan(__file__, a.select(pl.col("msg").alias("line"))).select(
        "addr", "method", "path", "status"
    )
    a = pl.concat([a, fields], how="horizontal").filter(pl.col("status").is_not_null())
    return a.select(
        "ts",
        "ts_inferred",
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
        pl.lit("http_access").alias("kind"),
        pl.col("uv").alias("level"),
        pl.col("proc").alias("process"),
        "pid",
        pl.col("msg").str.slice(0, 500).alias("message"),
        "line_no",
        pl.lit(1, dtype=pl.Int64).alias("line_count"),
        "seq",
        pl.col("method").alias("http_method"),
        pl.col("path").alias("http_path"),
        pl.col("status").alias("http_status"),
        pl.col("addr").alias("client_addr"),
    )


_REC_COLS = [
    "line_no",
    "part",
    "seq",
    "rec",
    "cont",
    "msg",
    "lvl",
    "uv",
    "proc",
    "pid",
    "ts",
    "ts_inferred",
    "tbs",
    "strong",
    "other",
    "stopping",
    "wrap",
    "joined",
    "lead",
    "evt",
]


def _events(frame: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    m = pl.col("msg")
    # a record's first row not a request line (`lead`) is an event when it is an error, a traceback or holds a keyword
    # (`evt`: both from the record pass, _vllm_records), or when its record has several rows
    multi = pl.col("lead") & pl.col("cont").shift(-1, fill_value=False)
    ids = frame.filter(pl.col("evt") | multi)["rec"]
    if ids.len() == 0:
        return frame.clear(), []
    sub = frame.filter(pl.col("rec").is_in(ids.implode()))
    # a hard-wrapped line goes on its record's line (a space where the wrap took one out); a joined one is
    # already in its record's first row
    piece = (
        pl.when(pl.col("joined"))
        .then(pl.lit(""))
        .when(pl.col("wrap"))
        .then(separator(m.shift(1).over("rec"), m) + m)
        .otherwise(pl.lit("\n") + m)
    )
    g = (
        sub.with_columns(piece.alias("_piece"))
        .group_by("rec", maintain_order=True)
        .agg(
            pl.col("line_no").first(),
            pl.col("line_no").n_unique().cast(pl.Int64).alias("line_count"),
            pl.col("seq").first(),
            m.filter(m.str.strip_chars() != "")
            .first()
            .alias("message"),  # the banner starts with a blank line
            pl.col("_piece").str.join("").str.strip_prefix("\n").alias("detail"),
            pl.coalesce("lvl", "uv").first().alias("level"),
            pl.col("proc").drop_nulls().first().alias("process"),
            pl.col("pid").drop_nulls().first(),
            pl.col("ts").first(),
            pl.col("ts_inferred").first(),
            pl.col("stopping").first(),
            pl.col("strong").first().alias("raw"),  # a raw traceback, not a stray indented line
        )
    )
    if cut := _carry.uncarried(state):  # the lines of a record too long to carry
        more = pl.col("rec").replace_strict(cut, default=0, return_dtype=pl.Int64)
        g = g.with_columns(pl.col("line_count") + more)
    # the first kind rule that matches (each tried only where one of its literals is), in the compiled scanner
    rule = pl.DataFrame(_kind_rules().first([g.get_column(c) for c in _TEXT_COLS])).get_column("rule")
    kind = pl.col("kind")
    kind = (
        pl.when(kind.is_null() & (pl.col("level").is_in(["ERROR", "CRITICAL"]) | pl.col("raw")))
        .then(pl.lit("error"))
        .otherwise(kind)
    )
    g = g.with_columns(_KIND_NAMES.gather(rule)).with_columns(kind.alias("kind"))
    g = g.filter(pl.col("kind").is_not_null())
    if g.height == 0:  # records that are no event (a chunk's open record, often): no fields to read
        return g, []
    # vLLM's graceful shutdown logs an EngineDeadError traceback that means nothing (lab README)
    g = g.with_columns(
        pl.when((pl.col("kind") == "engine_dead") & pl.col("stopping"))
        .then(pl.lit("shutdown_error"))
        .otherwise(pl.col("kind"))
        .alias("kind")
    )
    return _event_fields(g, ctx, state)


def _event_fields(g: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    d, msg, k = pl.col("detail"), pl.col("message"), pl.col("kind")
    notes = []
    # every field's text in the records of its kinds (null in the others), read in the compiled scanner (_FIELDS)
    texts = pl.DataFrame(
        _field_patterns().extract([g.get_column(c) for c in _TEXT_COLS], g.get_column("kind"))
    )
    g = pl.concat([g, texts], how="horizontal")

    def f(name: str) -> pl.Expr:
        return pl.col(f"_f_{name}")

    def cap(name: str) -> pl.Expr:
        return f(name).str.replace_all(",", "")

    def cfg(key: str) -> pl.Expr:
        return pl.coalesce(f(f"{key}0"), f(f"{key}1"))

    # only the fields of the kinds present are extracted: each expression costs even on no rows
    kinds = set(g["kind"].unique().to_list())

    def only(needed: set[str], expr: pl.Expr, dtype: type[pl.DataType]) -> pl.Expr:
        return expr if kinds & needed else pl.lit(None, dtype=dtype)

    pre, capa, conf = {"preemption"}, {"capacity"}, {"config"}
    g = g.with_columns(
        only(
            pre,
            f("cumulative").pipe(to_int),
            pl.Int64,
        ).alias("cumulative_preemptions"),
        only(
            pre,
            pl.when(k == "preemption").then(lexicon.preemption_mode(msg)),
            pl.String,
        ).alias("preemption_mode"),
        only(
            pre,
            f("preempted"),
            pl.String,
        ).alias("request_id"),
        only(capa, cap("gpu_blocks").pipe(to_int), pl.Int64).alias("gpu_blocks"),
        only(capa, cap("cpu_blocks").pipe(to_int), pl.Int64).alias("cpu_blocks"),
        only(capa, cap("kv_tokens").pipe(to_int), pl.Int64).alias("kv_tokens_v1"),
        only(capa, cap("conc_tokens").pipe(to_int), pl.Int64).alias("max_concurrency_tokens"),
        only(capa, cap("conc").cast(pl.Float64), pl.Float64).alias("max_concurrency"),
        only(
            capa,
            pl.coalesce(cap(x) for x in ("kv_gib", "kv_gib2", "kv_gib3", "kv_gib4")).cast(pl.Float64),
            pl.Float64,
        ).alias("kv_memory_gib"),
        only(capa, pl.coalesce(cap("weights"), cap("weights2")).cast(pl.Float64), pl.Float64).alias(
            "weights_gib"
        ),
        only(
            {"config", *_TOO_LONG},
            pl.coalesce(cfg("max_model_len"), *(f(f"len{i}") for i in range(1, 5))).pipe(to_int),
            pl.Int64,
        ).alias("max_model_len"),
        only(conf, cfg("max_num_seqs").pipe(to_int), pl.Int64).alias("max_num_seqs"),
        only(conf, cfg("gpu_memory_utilization").cast(pl.Float64), pl.Float64).alias(
            "gpu_memory_utilization"
        ),
        only(conf, cfg("block_size").pipe(to_int), pl.Int64).alias("cfg_block"),
        only(conf, cfg("num_gpu_blocks_override").pipe(to_int), pl.Int64).alias("cfg_blocks"),
        only(
            {"version"},
            f("version"),
            pl.String,
        ).alias("version"),
        pl.when(k == "server_start").then(f("started").pipe(to_int)).otherwise(pl.col("pid")).alias("pid")
        if "server_start" in kinds
        else pl.col("pid"),
    )
    if kinds & {"preemption", "oom", "engine_timeout", "engine_dead"}:  # what the lexicon's words say
        g = g.with_columns(lexicon.fields(k, d))
    # block size for V0 '# GPU blocks: N': the configured one seen before, else vLLM's default 16
    bs = pl.col("cfg_block").forward_fill().fill_null(pl.lit(state.get("block_size"), dtype=pl.Int64))
    g = g.with_columns(bs.alias("_bs"))
    if g["cfg_block"].drop_nulls().len():
        state["block_size"] = int(g["cfg_block"].drop_nulls()[-1])
    v0_blocks = pl.col("gpu_blocks").is_not_null()
    if bool(g.select((v0_blocks & pl.col("_bs").is_null()).any()).item()):
        notes.append("'# GPU blocks' without a known block size: KV tokens use vLLM's default block size 16")
    g = g.with_columns(
        pl.coalesce("kv_tokens_v1", pl.col("gpu_blocks") * pl.col("_bs").fill_null(16)).alias("kv_tokens"),
        pl.when(v0_blocks)
        .then(pl.col("_bs").fill_null(16))
        .otherwise(pl.col("cfg_block"))
        .alias("block_size"),
        pl.col("cfg_blocks").alias("num_gpu_blocks_override"),
    )
    # _PROMPT_ANY starts with 'prompt: ': without it there is nothing to scrub
    if not ctx.include_prompts and bool(
        g.select(
            d.str.contains("prompt: ", literal=True).any() | msg.str.contains("prompt: ", literal=True).any()
        ).item()
    ):
        scrub = [pl.col(c).str.replace_all(_PROMPT_ANY, "prompt: <removed>") for c in ("message", "detail")]
        g = g.with_columns(scrub)
    g = g.with_columns(
        (base_id_expr("request_id") if "preemption" in kinds else pl.lit(None, dtype=pl.String)).alias(
            "base_request_id"
        ),
        pl.col("message").str.split("\n").list.first().str.slice(0, 500),  # JSON records hold their traceback
        pl.col("detail").str.slice(0, 4000),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    )
    return g.drop(texts.columns), notes
