"""vllm_server's stats lines (every era's 'Avg prompt throughput ... KV cache usage') -> server_stats."""

from __future__ import annotations

import re

import polars as pl

from logscope import schemas

from ._common import ascii_classes
from .base import ParseContext

_STATS_HEAD = ascii_classes(
    r"^(?:Engine (?P<engine>\d+): |(?P<agg>\d+) Engines Aggregated: )?"
    r"(?P<first>Avg prompt throughput|Throughput: |Running: )"
)
# the two stats lines almost every log holds (V1 'Engine 000: ...', V0 metrics.py), read by one pass each;
# every other shape takes the per-field regexes of _stats (on those lines only)
_STATS_V1 = ascii_classes(
    r"^Engine \d+: Avg prompt throughput: (?P<pt>[\d.]+) tokens/s, Avg generation throughput: "
    r"(?P<gt>[\d.]+) tokens/s, Running: (?P<run>\d+) reqs, Waiting: (?P<wait>\d+) reqs, "
    r"(?P<dev>\w+) KV cache usage: (?P<kv>[\d.]+)%, Prefix cache hit rate: (?P<pfx>[\d.]+)%$"
)
_STATS_V0 = ascii_classes(
    r"^Avg prompt throughput: (?P<pt>[\d.]+) tokens/s, Avg generation throughput: (?P<gt>[\d.]+) tokens/s, "
    r"Running: (?P<run>\d+) reqs, Swapped: (?P<swap>\d+) reqs, Pending: (?P<wait>\d+) reqs, "
    r"GPU KV cache usage: (?P<gpu>[\d.]+)%, CPU KV cache usage: (?P<cpu>[\d.]+)%\.?$"
)


def _num(col: str, pat: str) -> pl.Expr:
    return pl.col(col).str.extract(pat).str.replace_all(",", "").cast(pl.Float64, strict=False)


def _ratio(percent: pl.Expr) -> pl.Expr:
    """91.0 (%) -> 0.91 (rounded: the log prints one decimal, the ratio must not depend on the code path);
    a share outside [0, 1] (95000 %) is no share: null, counted by ``_stats``."""
    r = (percent / 100).round(6)
    return pl.when(r.is_between(0, 1)).then(r)


# a count past 2**53 is no count a server reached (and past 2**63 it does not fit a row): null, counted
_MAX_COUNT = float(2**53)


def _count(raw: str) -> pl.Expr:
    return pl.when(pl.col(raw).is_between(0, _MAX_COUNT)).then(pl.col(raw)).cast(pl.Int64)


# (output column, the text its value follows) of the values ``_stats`` counts when they were written but null
_CHECKED = (
    ("running", "Running: "),
    ("waiting", "Waiting: "),
    ("waiting", "Pending: "),
    ("swapped", "Swapped: "),
    ("deferred", "Deferred: "),
    ("preemptions", "Preemptions: "),
    ("kv_usage", "KV cache usage: "),
    ("prefix_hit", "Prefix cache hit rate: "),
)


def invalid_values(out: pl.DataFrame) -> tuple[int, str | None]:
    """Stats values written on a line but not kept (a count past 2**53, a share outside [0, 1]): how many,
    and the first ('line 113: Running: 9223372036854775807')."""
    if out.height == 0:
        return 0, None
    m = pl.col("msg")
    bad = [(pl.col(c).is_null() & m.str.contains(t, literal=True)).alias(f"{c}|{t}") for c, t in _CHECKED]
    flags = out.select("line_no", "msg", *bad)
    counts = flags.select(pl.sum_horizontal(pl.exclude("line_no", "msg")).sum()).item()
    if not counts:
        return 0, None
    first = flags.filter(pl.any_horizontal(pl.exclude("line_no", "msg"))).row(0, named=True)
    col = next(k for k, v in first.items() if k not in ("line_no", "msg") and v)
    text = col.split("|", 1)[1]
    msg = first["msg"]
    value = msg[msg.index(text) :].split(",")[0].split(" reqs")[0]
    return int(counts), f"line {first['line_no']}: {value}"


def _pct(pat: str) -> pl.Expr:
    return _ratio(_num("msg", pat))


def _stats(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    m = pl.col("msg")
    cand = df.filter(m.str.contains("Running: ", literal=True) & ~m.str.starts_with("Received request"))
    cand = (
        cand.with_columns(m.str.extract_groups(_STATS_HEAD).alias("s"))
        .unnest("s")
        .filter(pl.col("first").is_not_null())
    )
    devs = _kv_devices(df)
    if devs.height:
        state["kv_dev"] = devs["dev"][-1]
    pfx = df.filter(m.str.starts_with(_V0_PREFIX))
    if cand.height == 0:
        return (_v0_prefix(pl.DataFrame(), pfx, ctx), []) if pfx.height else (cand, [])
    notes = []
    v0 = m.str.contains("Swapped: ", literal=True) | m.str.contains("Pending: ", literal=True)
    pre01 = pl.col("first") == "Throughput: "
    cand = cand.with_columns(
        pl.when(m.str.starts_with("Engine ")).then(m.str.extract_groups(_STATS_V1)).alias("_c1"),
        pl.when(m.str.starts_with("Avg prompt throughput: "))
        .then(m.str.extract_groups(_STATS_V0))
        .alias("_c0"),
    )
    c1, c0 = pl.col("_c1"), pl.col("_c0")
    is1, is0 = (
        c1.struct.field("run").is_not_null(),
        c0.struct.field("run").is_not_null(),
    )  # no match: null fields
    # the raw values: from the two common shapes' groups, and, only on the rows neither matched, from the
    # per-field regexes (each is compiled per chunk, as the parser uses more patterns than polars caches)
    known, other = cand.filter(is1 | is0), cand.filter(~(is1 | is0))
    parts = [known.with_columns(_common_values(c1, c0, is1))]
    if other.height:
        parts.append(other.with_columns(_other_values()))
    cand = pl.concat(parts, how="vertical_relaxed").sort("seq") if len(parts) > 1 else parts[0]
    gpu, cpu = pl.col("_gpu"), pl.col("_cpu")
    if devs.height:
        cand = cand.join_asof(devs, on="seq", strategy="backward")
    else:
        cand = cand.with_columns(pl.lit(None, dtype=pl.String).alias("dev"))
    dev = pl.col("dev").fill_null(pl.lit(state.get("kv_dev_before"), dtype=pl.String))
    # V0 on the CPU backend keeps the KV cache in the 'CPU' column (the 'GPU' one stays 0.0)
    v0_cpu = pl.when(dev.is_not_null()).then(dev == "CPU").otherwise((gpu == 0) & (cpu > 0))
    out = cand.with_columns(
        pl.when(pl.col("stamped")).then(pl.col("ts")).alias("ts"),  # a line without its header has no time
        pl.lit("log").alias("origin"),
        pl.when(pre01)
        .then(pl.lit("v0-pre0.1"))
        .when(v0)
        .then(pl.lit("v0"))
        .otherwise(pl.lit("v1"))
        .alias("era"),
        pl.when(pl.col("agg").is_not_null())
        .then(pl.lit("aggregated"))
        .otherwise(pl.col("engine"))
        .alias("engine"),
        pl.col("lvl").alias("level"),
        _count("_run").alias("running"),
        _count("_wait").alias("waiting"),
        _count("_swap").alias("swapped"),
        _count("_deferred").alias("deferred"),
        _count("_preempt").alias("preemptions"),
        pl.when(v0 & v0_cpu).then(cpu).when(v0).then(gpu).otherwise(pl.col("_v1_kv")).alias("kv_usage"),
        pl.when(v0 & v0_cpu)
        .then(pl.lit("CPU"))
        .when(v0)
        .then(pl.lit("GPU"))
        .otherwise(pl.col("_v1_dev"))
        .alias("kv_device"),
        pl.when(v0).then(gpu).alias("gpu_kv_usage"),
        pl.when(v0).then(cpu).alias("cpu_kv_usage"),
        pl.col("_pt").alias("prompt_tps"),
        pl.col("_gt").alias("gen_tps"),
        pl.col("_pfx").alias("prefix_hit"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    ).drop(*_RAW_STATS, "_c1", "_c0")
    if pfx.height:
        out = _v0_prefix(out, pfx, ctx)
    if bool(out.select(pre01.any()).item()):
        notes.append("pre-0.1 stats line 'Throughput: N tokens/s' (all tokens) was stored as gen_tps")
    if bool(out.select((pl.col("era") == "v0") & (pl.col("kv_device") == "CPU")).to_series().any()):
        notes.append(
            "V0 on the CPU backend: kv_usage is the 'CPU KV cache usage' column (the KV cache lives there)"
        )
    return out, notes


# V0 0.6-0.10 logs the prefix cache's hit rate on a line of its own, right after its stats line (the same call)
_V0_PREFIX = "Prefix cache hit rate: GPU: "


def _v0_prefix(out: pl.DataFrame, pfx: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """V0's 'Prefix cache hit rate: GPU: 94.35%, CPU: 0.00%' into the stats row its process logged just before it
    in the same second; alone (its stats line cut from a paste, or in the chunk before) it is a row of its own."""
    hit = pfx.with_columns(
        pl.when(pl.col("stamped")).then(pl.col("ts")).alias("ts"),
        _ratio(_num("msg", r"GPU: ([\d.]+)%")).alias("_hit"),
    )
    if out.height:
        prev = out.select(pl.col("seq").alias("_into"), pl.col("ts").alias("_stats_ts"), "seq")
        hit = hit.sort("seq").join_asof(prev.sort("seq"), on="seq", strategy="backward")
        hit = hit.with_columns(
            pl.when(pl.col("_stats_ts") == pl.col("ts")).then(pl.col("_into")).alias("_into")
        )
        into = hit.filter(pl.col("_into").is_not_null()).select(pl.col("_into").alias("seq"), "_hit")
        out = out.join(into, on="seq", how="left", maintain_order="left")
        out = out.with_columns(pl.coalesce("prefix_hit", "_hit").alias("prefix_hit")).drop("_hit")
        hit = hit.filter(pl.col("_into").is_null()).drop("_into", "_stats_ts")
    alone = hit.with_columns(
        pl.lit("log").alias("origin"),
        pl.lit("v0").alias("era"),
        pl.col("lvl").alias("level"),
        pl.col("_hit").alias("prefix_hit"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    ).drop("_hit")
    # the columns of a stats row, null but its prefix hit
    alone = alone.with_columns(
        pl.lit(None, dtype=t).alias(c)
        for c, t in schemas.schema("server_stats").items()
        if c not in alone.columns
    )
    if out.height == 0 or alone.height == 0:
        return out if alone.height == 0 else alone
    return pl.concat([out, alone], how="diagonal_relaxed").sort("seq")


_RAW_STATS = (
    "_gpu",
    "_cpu",
    "_v1_dev",
    "_v1_kv",
    "_run",
    "_wait",
    "_swap",
    "_deferred",
    "_preempt",
    "_pt",
    "_gt",
    "_pfx",
)


def _common_values(c1: pl.Expr, c0: pl.Expr, is1: pl.Expr) -> list[pl.Expr]:
    """The raw values of the rows _STATS_V1 (``c1``) or _STATS_V0 (``c0``) matched."""

    def num(e: pl.Expr) -> pl.Expr:  # _num without its comma removal: these groups hold none
        return e.cast(pl.Float64, strict=False)

    def pct(e: pl.Expr) -> pl.Expr:
        return _ratio(num(e))

    def pick(v1: pl.Expr | None, v0: pl.Expr | None) -> pl.Expr:
        none = pl.lit(None, dtype=pl.Float64)
        return pl.when(is1).then(none if v1 is None else v1).otherwise(none if v0 is None else v0)

    dev1, kv1 = c1.struct.field("dev"), pct(c1.struct.field("kv"))
    return [
        pick(pl.when(dev1.str.ends_with("GPU")).then(kv1), pct(c0.struct.field("gpu"))).alias("_gpu"),
        pick(pl.when(dev1.str.ends_with("CPU")).then(kv1), pct(c0.struct.field("cpu"))).alias("_cpu"),
        pl.when(is1).then(dev1).otherwise(pl.lit("GPU")).alias("_v1_dev"),
        pick(kv1, pct(c0.struct.field("gpu"))).alias("_v1_kv"),
        pick(num(c1.struct.field("run")), num(c0.struct.field("run"))).alias("_run"),
        pick(num(c1.struct.field("wait")), num(c0.struct.field("wait"))).alias("_wait"),
        pick(None, num(c0.struct.field("swap"))).alias("_swap"),
        pl.lit(None, dtype=pl.Float64).alias("_deferred"),
        pl.lit(None, dtype=pl.Float64).alias("_preempt"),
        pick(num(c1.struct.field("pt")), num(c0.struct.field("pt"))).alias("_pt"),
        pick(num(c1.struct.field("gt")), num(c0.struct.field("gt"))).alias("_gt"),
        pick(pct(c1.struct.field("pfx")), None).alias("_pfx"),
    ]


def _loose(key: str) -> str:
    """``key`` (plain text) as a regex that also matches it with one space inside a word: a paste that turned a
    terminal's wrap into a space ('Avg generation throughpu t: 0.0 tokens/s', vllm-project/vllm#24655)."""
    out = []
    for a, b in zip(key, key[1:] + " ", strict=True):
        out.append(re.escape(a) + (" ?" if a.isalnum() and b.isalnum() else ""))
    return "".join(out)


def _other_values() -> list[pl.Expr]:
    """The raw values of every other stats shape, field by field (only these rows pay for the loose keys)."""
    return [
        _pct(_loose("GPU KV cache usage: ") + r"([\d.]+)%").alias("_gpu"),
        _pct(_loose("CPU KV cache usage: ") + r"([\d.]+)%").alias("_cpu"),
        # 'usag' + ': 22.9%': a wrap that lost the key's last letter (vllm#40350)
        pl.col("msg").str.extract(r"(\w+) " + _loose("KV cache usag") + r"e?: [\d.]+%").alias("_v1_dev"),
        _pct(r"\w+ " + _loose("KV cache usag") + r"e?: ([\d.]+)%").alias("_v1_kv"),
        _num("msg", _loose("Running: ") + r"(\d+) reqs").alias("_run"),
        _num("msg", "(?:" + _loose("Waiting") + "|" + _loose("Pending") + r"): (\d+) reqs").alias("_wait"),
        _num("msg", _loose("Swapped: ") + r"(\d+) reqs").alias("_swap"),
        _num("msg", _loose("Deferred: ") + r"(\d+) reqs").alias("_deferred"),
        _num("msg", _loose("Preemptions: ") + r"(\d+)").alias("_preempt"),
        _num("msg", _loose("Avg prompt throughput: ") + r"([\d.]+)").alias("_pt"),
        pl.coalesce(
            _num("msg", _loose("Avg generation throughput: ") + r"([\d.]+)"),
            _num("msg", r"^Throughput: ([\d.]+)"),
        ).alias("_gt"),
        _pct(_loose("Prefix cache hit rate: ") + r"([\d.]+)%").alias("_pfx"),
    ]


def _kv_devices(df: pl.DataFrame) -> pl.DataFrame:
    """Device of the V0 KV cache from '# <device> blocks: N, # CPU blocks: M', in row order."""
    d = df.filter(pl.col("msg").str.contains(" blocks: ", literal=True))
    if d.height == 0:  # no regex over an empty frame: it would still be compiled
        return pl.DataFrame(schema={"seq": pl.Int64, "dev": pl.String})
    d = d.select(
        "seq", pl.col("msg").str.extract(r"^#? ?(\w+) blocks: \d+").str.to_uppercase().alias("dev")
    ).drop_nulls()
    return d.with_columns(
        pl.when(pl.col("dev") == "CUDA").then(pl.lit("GPU")).otherwise(pl.col("dev")).alias("dev")
    )
