"""vLLM's event records -> kinds and fields as parsers/_vllm_events.py computed them with polars before issue #42 moved
their regexes into the compiled scanner (scan/src/regexes.rs): every kind rule's and every field's pattern a polars
expression, compiled again by polars for each chunk. The oracle of tests/test_scan_vllm_events.py; verbatim but for the
imports."""

from __future__ import annotations

import polars as pl

from logscope.numbers import to_int
from logscope.parsers import _lexicon as lexicon
from logscope.parsers._common import base_id_expr
from logscope.parsers._vllm_events import _EVENT_KW, _KIND_RULES, _PROMPT_ANY
from logscope.parsers._vllm_pastes import separator
from logscope.parsers.base import ParseContext


def _events(frame: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    m = pl.col("msg")
    start = ~pl.col("cont")
    multi = start & pl.col("cont").shift(-1, fill_value=False)
    reqline = m.str.contains(
        r"^(?:Received request|Added request|Finished request|Aborted request|Request \S+ "
        r"(?:aborted|failed|details))"
    )
    hit = pl.col("lvl").is_in(["ERROR", "CRITICAL"]).fill_null(False) | pl.col("tbs") | multi
    # a record's first line, not a request line (most of a log's lines): an event when it is an error, a
    # traceback, a record of several lines, or holds a keyword (searched on these lines only)
    lead = frame.select("rec", "msg", hit.alias("hit"), (start & ~reqline).alias("lead")).filter(
        pl.col("lead")
    )
    ids = lead.filter(pl.col("hit") | m.str.contains(_EVENT_KW))["rec"]
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
    if cut := state.get("record_cut"):  # the lines of a record too long to carry (``_records``)
        more = pl.col("rec").replace_strict(cut, default=0, return_dtype=pl.Int64)
        g = g.with_columns(pl.col("line_count") + more)
    present = g.select(
        pl.any_horizontal(pl.col(col).str.contains(x, literal=True) for x in lits).any().alias(str(i))
        for i, (_, col, _, lits) in enumerate(_KIND_RULES)
    ).row(0)
    kind = pl.lit(None, dtype=pl.String)
    for (name, col, pat, _), run in reversed(list(zip(_KIND_RULES, present, strict=True))):
        if run:
            kind = pl.when(pl.col(col).str.contains(pat)).then(pl.lit(name)).otherwise(kind)
    kind = (
        pl.when(kind.is_null() & (pl.col("level").is_in(["ERROR", "CRITICAL"]) | pl.col("raw")))
        .then(pl.lit("error"))
        .otherwise(kind)
    )
    g = g.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
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

    def cap(pat: str) -> pl.Expr:
        return pl.when(k == "capacity").then(msg.str.extract(pat).str.replace_all(",", ""))

    def cfg(key: str) -> pl.Expr:  # non-default args dict, or the older argparse Namespace
        return pl.when(k == "config").then(
            pl.coalesce(msg.str.extract(rf"'{key}': ([\d.]+)"), msg.str.extract(rf"\b{key}=([\d.]+)"))
        )

    # only the fields of the kinds present are extracted: each expression costs even on no rows
    kinds = set(g["kind"].unique().to_list())

    def only(needed: set[str], expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
        return expr if kinds & needed else pl.lit(None, dtype=dtype)

    pre, capa, conf = {"preemption"}, {"capacity"}, {"config"}
    g = g.with_columns(
        only(
            pre,
            pl.when(k == "preemption").then(
                msg.str.extract(r"total_num_cumulative_preemption=([0-9]+)").pipe(to_int)
            ),
            pl.Int64,
        ).alias("cumulative_preemptions"),
        only(
            pre,
            pl.when(k == "preemption").then(lexicon.preemption_mode(msg)),
            pl.String,
        ).alias("preemption_mode"),
        only(
            pre,
            pl.when(k == "preemption").then(msg.str.extract(r"Sequence group (\S+) is preempted")),
            pl.String,
        ).alias("request_id"),
        only(capa, cap(r"blocks: ([\d,]+)").pipe(to_int), pl.Int64).alias("gpu_blocks"),
        only(capa, cap(r"# CPU blocks: ([\d,]+)").pipe(to_int), pl.Int64).alias("cpu_blocks"),
        only(capa, cap(r"KV cache size: ([\d,]+) tokens").pipe(to_int), pl.Int64).alias("kv_tokens_v1"),
        only(capa, cap(r"Maximum concurrency for ([\d,]+) tokens").pipe(to_int), pl.Int64).alias(
            "max_concurrency_tokens"
        ),
        only(capa, cap(r"tokens per request: ([\d.]+)x").cast(pl.Float64), pl.Float64).alias(
            "max_concurrency"
        ),
        only(
            capa,
            pl.coalesce(
                cap(r"Available KV cache memory: ([\d.]+) ?GiB"),
                cap(r"kv_cache_size=([\d.]+) ?GiB"),
                cap(r"reserved for KV Cache is ([\d.]+) ?GiB"),
                cap(r"(?:Auto|Explicitly) set \(([\d.]+)/[\d.]+\) GiB"),  # CPU: KVCACHE_SPACE unset / set
            ).cast(pl.Float64),
            pl.Float64,
        ).alias("kv_memory_gib"),
        only(
            capa,
            pl.coalesce(
                cap(r"Loading model weights took ([\d.]+) GB"), cap(r"Model loading took ([\d.]+) ?GiB")
            ).cast(pl.Float64),
            pl.Float64,
        ).alias("weights_gib"),
        only(
            {"config", "kv_insufficient", "input_too_long"},
            pl.coalesce(
                cfg("max_model_len"),
                pl.when(k.is_in(["kv_insufficient", "input_too_long"])).then(
                    pl.coalesce(
                        d.str.extract(r"max seq len \((\d+)\)"),
                        d.str.extract(r"maximum context length is (\d+)"),
                        d.str.extract(r"maximum model length of (\d+)"),
                        d.str.extract(r"max_model_len (\d+)"),
                    )
                ),
            ).pipe(to_int),
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
            pl.when(k == "version").then(d.str.extract(r"(?:server version |█\s+version )v?(\d[\w.+-]*)")),
            pl.String,
        ).alias("version"),
        pl.when(k == "server_start")
        .then(msg.str.extract(r"Started server process \[(\d+)\]").pipe(to_int))
        .otherwise(pl.col("pid"))
        .alias("pid")
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
    return g, notes
