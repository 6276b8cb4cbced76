"""``vllm bench serve --save-result --save-detailed`` JSON (and its stdout) -> ``client_requests``,
``client_attempts``, ``client_phases``.

Sample (/work/shared/fixtures/lab/ladder/bench/ladder-c16.json, one JSON object)::

    {"date": "20261129-082125", "endpoint_type": "vllm", "backend": "vllm", ..., "max_concurrency": 16, "duration": 16.11101067499999, "completed": 80, ..., "start_times": [1575.544401024, ...], "ttfts": [...], "latencies": [...], "errors": ["", ...]}

Source: ``vllm/benchmarks/serve.py`` (vllm-project/vllm). ``start_times`` are ``time.perf_counter()``
values, not wall-clock time. ``date`` is ``datetime.now().strftime("%Y%m%d-%H%M%S")`` taken in
``main`` *after* ``benchmark()`` returned (local time, whole seconds), and ``duration`` is
``perf_counter()`` at the end minus ``benchmark_start_time`` taken just before the first request. So
the first request left at about ``date + 0.5 s - duration``; every start time is placed relative to
it. The JSON has no request ids; they were sent as ``<--request-id-prefix><index>``, a prefix only the
stdout's ``Namespace(...)`` line shows: it is read from a sibling text file whose Namespace line names
this file as ``result_filename``. The stdout (``bench-cN.log``) is recognised too, without rows
(its aggregates have no table; its per-request data is in the JSON).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from logscope.numbers import number, to_int

from ._bench_blocks import blocks
from ._siblings import plain_name, read_small
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "vllm_bench"
KIND = "client"
DESCRIPTION = (
    "vllm bench serve result JSON (--save-result --save-detailed) and the stdout of vLLM's and SGLang's serving "
    "benchmarks (each result block a load_tests row)"
)
MODE = "document"
SAMPLES = [
    '{"date": "20261129-082125", "endpoint_type": "vllm", "backend": "vllm", "label": null, "model_id": "tiny", '
    '"tokenizer_id": "/models/tiny-llama", "num_prompts": 80, "scenario": "ladder", "concurrency": "16", '
    '"request_rate": "inf", "burstiness": 1.0, "max_concurrency": 16, "duration": 16.11101067499999, '
    '"completed": 80, "failed": 0,',
    "============ Serving Benchmark Result ============",
    "Starting main benchmark run...",
]

CLIENT = "vllm bench serve"
_DATE_FMT = "%Y%m%d-%H%M%S"
_JSON_HEAD = r'^\s*\{\s*"date":\s*"\d{8}-\d{6}",.*"(?:endpoint_type|backend)":'
_NAMESPACE = r"^Namespace\(subparser='bench', bench_type='serve'"
_LOG_LINES = [
    _NAMESPACE,
    r"^=+ Serving Benchmark Result =+\s*$",
    r"^[=-]{3,}[^=-].*[=-]{3,}\s*$",
    r"^={20,}\s*$",
    r"^[A-Z][A-Za-z0-9 ()/.%,_-]*:\s+-?[\d.]+(?:e[+-]?\d+)?\s*$",
    r"^(?:\(\w+ pid=\d+\) )?(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[",
    r"^(?:Starting initial single prompt test run|Skipping endpoint ready check|Initial test run completed|"
    r"Starting main benchmark run|Warmup run completed|Starting profiler|Profiler started|Stopping profiler)",
    r"^(?:Traffic request rate|Burstiness factor|Maximum request concurrency|Warming up with|Probe request rate|"
    r"Traffic ramp-up strategy|Will increase RPS from|tip: install termplotlib)",
    r"^WARNING: (?:vllm bench serve|/tokenize unavailable|tokenizer mismatch)",
    r"^Self timing is set",
    r"^Triton is installed, but doesn't include CPU backend",
    r"^\s*\d+%\|.*\| *\d+/\d+ \[",  # the progress bar
    r"^(?:nanobind: |See https://nanobind\.readthedocs\.io| - leaked (?:instance|type|function) | - \.\.\. skipped remainder)",
    r"^(?:Backend|Traffic request rate|Max request concurrency):\s+(?:not set|\S+)\s*$",  # SGLang's bench_serving
]
_PREFIX_RE = re.compile(r"request_id_prefix='([^']*)'")
_MAX_SIBLING_BYTES = 8 * 1024 * 1024


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line")
    result = s.str.contains(_NAMESPACE) | s.str.contains(r"^=+ Serving Benchmark Result =+\s*$")
    g = per_head(nonblank(frame), n, js=s.str.contains(_JSON_HEAD).first(), result=result.any())
    return g.select(
        pl.when(pl.col("js")).then(0.95).when(pl.col("result")).then(0.9).otherwise(0.0)
    ).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


def parse_document(text: str, ctx: ParseContext) -> ChunkResult:
    if text.lstrip().startswith("{"):
        return _parse_json(text, ctx)
    return _parse_log(text, ctx)


def _parse_log(text: str, ctx: ParseContext) -> ChunkResult:
    s = pl.Series("line", text.split("\n"), dtype=pl.String)
    if text.endswith("\n"):
        s = s.head(s.len() - 1)
    ok = pl.lit(False)
    for rx in _LOG_LINES:
        ok = ok | pl.col("line").str.contains(rx)
    n = int(pl.DataFrame({"line": s}).select(ok.sum()).item())
    rows = blocks(s, ctx.source)
    return ChunkResult(
        tables={"load_tests": rows} if rows.height else {},
        lines_parsed=n,
        assumptions=[
            "stdout of a serving benchmark: each result block is a load_tests row (the tool's own aggregates, "
            "client clock); per-request rows come from the --save-result JSON named by result_filename in its "
            "Namespace line"
        ],
    )


def _results(text: str) -> tuple[list[dict], list[str]]:
    """One result object, or several (--append-result writes one per line)."""
    try:
        doc = json.loads(text)
        return ([doc] if isinstance(doc, dict) else []), []
    except json.JSONDecodeError:
        pass
    out, msgs = [], []
    for i, part in enumerate(p for p in text.split("\n") if p.strip()):
        try:
            obj = json.loads(part)
        except json.JSONDecodeError as e:
            msgs.append(f"result {i + 1} is not valid JSON ({e.msg}): skipped")
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out, msgs


def _parse_json(text: str, ctx: ParseContext) -> ChunkResult:
    results, msgs = _results(text)
    stem = plain_name(Path(ctx.source).name)  # ladder-c8.json.gz is ladder-c8
    stem = stem[: -len(".json")] if stem.endswith(".json") else stem
    prefix, where = _sibling_prefix(ctx)
    tabs: dict[str, list[pl.DataFrame]] = {"client_requests": [], "client_attempts": [], "client_phases": []}
    assumptions = [
        "vllm bench start_times are perf_counter seconds: anchored to the file's date field (local time of the "
        f"run's end, read as {ctx.tz}, whole seconds) + 0.5 s - duration for the first request, ±1 s; the "
        "correlation stage refines against matched server requests",
    ]
    if prefix is not None:
        assumptions.append(
            f"request ids = request_id_prefix '{prefix}' + index, from the Namespace line of {where}"
        )
    else:
        assumptions.append(
            "request_id_prefix unknown (no stdout with a Namespace line beside the JSON): "
            "synthetic ids bench:<file>:<index>, no X-Request-Id"
        )
    for k, res in enumerate(results):
        label = stem if len(results) == 1 else f"{stem}#{k + 1}"
        one = _one_result(res, label, prefix, ctx)
        if one is None:
            msgs.append(
                f"result {label} has no per-request lists (run without --save-detailed): phase row only"
            )
            one = _one_result(res, label, prefix, ctx, phase_only=True)
        for name, df in (one or {}).items():
            tabs[name].append(df)
    tables = {k: pl.concat(v, how="diagonal_relaxed") for k, v in tabs.items() if v}
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    return ChunkResult(
        tables=tables, lines_parsed=n_lines if results else 0, assumptions=assumptions, messages=msgs
    )


def _anchor(res: dict, ctx: ParseContext) -> datetime | None:
    """Wall-clock (UTC) time of the end of the benchmark run, from ``date``."""
    try:
        local = datetime.strptime(str(res["date"]), _DATE_FMT)
    except (KeyError, ValueError):
        return None
    try:
        zone = ZoneInfo(ctx.tz)
    except Exception:  # noqa: BLE001 - an unknown zone name falls back to UTC
        zone = ZoneInfo("UTC")
    return (local.replace(tzinfo=zone) + timedelta(seconds=0.5)).astimezone(ZoneInfo("UTC"))


def _mode_value(res: dict) -> tuple[str | None, float | None]:
    conc = res.get("max_concurrency")
    if conc is None:
        conc = res.get("concurrency")  # --metadata concurrency=N (a string)
    if conc is not None and number(conc) is not None:
        return "concurrency", number(conc)
    rate = res.get("request_rate")
    if not isinstance(rate, str | int | float):
        return None, None
    try:
        r = float(rate)
    except ValueError:
        return None, None
    return "rate", (r if r != float("inf") else None)


def _one_result(
    res: dict, label: str, prefix: str | None, ctx: ParseContext, phase_only: bool = False
) -> dict[str, pl.DataFrame] | None:
    end = _anchor(res, ctx)
    duration = number(res.get("duration") or 0.0)
    try:  # a duration that is no number, or longer than a datetime reaches back: the start is unknown
        start = end - timedelta(seconds=duration) if end is not None and duration is not None else None
    except OverflowError:
        start = None
    mode, value = _mode_value(res)
    phase = pl.DataFrame(
        {
            "source": [ctx.source],
            "client": [CLIENT],
            "phase": [label],
            "ts_start": [start],
            "ts_end": [end],
            "mode": [mode],
            "value": [value],
            "anchoring": ["anchored: date field (end of run, whole seconds) + 0.5 s - duration, ±1 s"],
        },
        schema_overrides={"ts_start": pl.Datetime("us", "UTC"), "ts_end": pl.Datetime("us", "UTC")},
    )
    cols = ["start_times", "ttfts", "latencies", "input_lens", "output_lens", "errors"]
    if phase_only:
        return {"client_phases": phase}
    if not all(isinstance(res.get(c), list) for c in cols):
        return None
    n = min(len(res[c]) for c in cols)
    df = pl.DataFrame({c: res[c][:n] for c in cols}, strict=False).with_row_index("i")
    conc = int(value) if mode == "concurrency" and value is not None else None
    t0 = df["start_times"].min()
    ts = pl.lit(start, dtype=pl.Datetime("us", "UTC")) + pl.duration(
        microseconds=((pl.col("start_times") - t0) * 1e6).round(0).pipe(to_int)
    )
    failed = pl.col("errors").fill_null("") != ""
    lid = (
        (pl.lit(prefix) + pl.col("i").cast(pl.String))
        if prefix is not None
        else (pl.lit(f"bench:{label}:") + pl.col("i").cast(pl.String))
    )
    req = df.select(
        lid.alias("logical_request_id"),
        (
            pl.lit(prefix) + pl.col("i").cast(pl.String)
            if prefix is not None
            else pl.lit(None, dtype=pl.String)
        ).alias("request_id"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(CLIENT).alias("client"),
        ts.alias("ts_start"),
        (
            ts + pl.duration(microseconds=(pl.col("latencies").cast(pl.Float64) * 1e6).round(0).pipe(to_int))
        ).alias("ts_end"),
        pl.when(failed).then(None).otherwise(pl.lit(200)).alias("status"),
        pl.when(failed).then(pl.col("errors").str.slice(0, 300)).alias("error"),
        (failed & pl.col("errors").str.contains("(?i)timeout")).alias("timed_out"),
        pl.lit(1).alias("attempts"),
        pl.lit(1).alias("attempt"),
        pl.when(~failed).then(pl.col("ttfts").cast(pl.Float64)).alias("ttft_s"),
        pl.col("latencies").cast(pl.Float64).alias("e2e_s"),
        pl.col("input_lens").pipe(to_int).alias("prompt_tokens"),
        pl.col("output_lens").pipe(to_int).alias("output_tokens"),
        pl.lit(conc, dtype=pl.Int64).alias("concurrency"),
        pl.lit(label).alias("phase"),
        pl.lit("exact").alias("grouping"),
        pl.lit(1.0).alias("grouping_confidence"),
        pl.lit(res.get("endpoint") or res.get("endpoint_type")).cast(pl.String).alias("url"),
    )
    return {"client_requests": req, "client_attempts": req, "client_phases": phase}


def _sibling_prefix(ctx: ParseContext) -> tuple[str | None, str | None]:
    """request_id_prefix from the stdout of the run that wrote this file (a sibling text file)."""
    path = ctx.options.get("path") if ctx.options else None
    if not path:
        return None, None
    p = Path(path)
    # the result and its stdout as they were written, whether or not a collection compressed them since
    namespace = re.compile(rf"^Namespace\(.*result_filename='{re.escape(plain_name(p.name))}'.*$", re.M)
    try:
        siblings = sorted(
            q
            for q in p.parent.iterdir()
            if q.is_file() and q != p and Path(plain_name(q.name)).suffix in (".log", ".txt", ".out")
        )
    except OSError:
        return None, None
    for q in siblings:
        head = read_small(q, _MAX_SIBLING_BYTES)
        if head is None:
            continue
        line = namespace.search(head)
        m = _PREFIX_RE.search(line.group(0)) if line else None
        if m:
            return m.group(1), q.name
    return None, None
