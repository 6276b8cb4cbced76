"""vLLM server log (stdout/stderr of ``vllm serve``) -> server_stats, server_events, server_request_events.

Sample (/work/shared/fixtures/lab/spike/vllm-server.log)::

    (APIServer pid=3887) INFO 11-29 08:26:24 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1072.0 tokens/s, Running: 9 reqs, Waiting: 39 reqs, CPU KV cache usage: 91.0%, Prefix cache hit rate: 0.0%

Upstream: ``_FORMAT``/``_DATE_FORMAT`` of ``vllm/logger.py`` and ``NewLineFormatter`` of
``vllm/logging_utils/formatter.py`` (vllm-project/vllm), every era catalogued in
docs/vllm-log-formats.md (V0 0.2 -> V1 0.33: ``LEVEL MM-DD HH:MM:SS file.py:N]``, ``[file.py:N]``,
process prefixes, container timestamps, user ``logging`` configs, the 0.32+ JSON formatter), plus
the lines uvicorn writes into the same stream (``uvicorn/logging.py``, encode/uvicorn).

How a chunk is read: one anchored capture pass over the first characters of every line splits off
the process prefix and the vLLM or uvicorn header (container timestamps, python-logging and JSON
lines get their own pass, only in chunks that have them); records glued on one line by a paste are
split. Lines are grouped into records (vLLM repeats the header on every line of a multi-line record
and ends all but the last with CR; raw tracebacks printed right after an error belong to it) by one
sequential pass of the compiled scanner (``_vllm_records``); the last record of a chunk waits in ``state``
for the next (``_carry``, as SGLang's and TGI's: at most MAX_RECORD_ROWS of it, named by the file it began in).
Each output runs its own regexes only on the rows whose message starts with / holds its keyword; the
header, the request lifecycle lines and uvicorn's access lines are read by the compiled scanner instead
(``_vllm_lines.toml``, ``_vllm_requests.toml``, ``_vllm_events.toml``).
This module holds detection and the entry points; the parts are ``_vllm_lines`` (header, era, prefix, row
fields, time), ``_vllm_records`` (records), ``_vllm_stats``, ``_vllm_requests`` and ``_vllm_events`` (records -> events).

Event kinds: preemption, oom, kv_insufficient, input_too_long, engine_timeout, engine_dead,
shutdown_error (an engine-death traceback logged after a shutdown began: vLLM's graceful SIGTERM
path prints one), server_start (uvicorn 'Started server process [pid]'), server_listen ('Starting
vLLM API server'), server_ready, server_stop, version, capacity, config, http_access, error.
"""

from __future__ import annotations

import polars as pl

from . import _carry
from ._vllm_banner import listen_address as listen_address

# the patterns tests/test_vllm_server.py checks by name (as vllm_server.X) are imported ``as`` themselves
from ._vllm_events import _KIND_RULES as _KIND_RULES
from ._vllm_events import _REC_COLS, _access, _events
from ._vllm_hosts import hosts
from ._vllm_lines import _ANSI, _GLUE_HDR, _LVL, _NOISE, _TB_STRONG, _parse, _times
from ._vllm_lines import _CTS as _CTS
from ._vllm_lines import _DATED as _DATED
from ._vllm_lines import _DATED_PY as _DATED_PY
from ._vllm_lines import _DATED_T as _DATED_T
from ._vllm_lines import _GLUE as _GLUE
from ._vllm_lines import _PYLOG as _PYLOG
from ._vllm_lines import _TB as _TB
from ._vllm_pastes import _MD_LEAD
from ._vllm_prefix import PROCESS, PROCESS_CUT
from ._vllm_records import _classify
from ._vllm_requests import _requests
from ._vllm_spec import _spec
from ._vllm_stats import _STATS_HEAD as _STATS_HEAD
from ._vllm_stats import _STATS_V0 as _STATS_V0
from ._vllm_stats import _STATS_V1 as _STATS_V1
from ._vllm_stats import _stats, invalid_values
from .base import ChunkResult, ParseContext, nonblank, one_head, per_head

NAME = "vllm_server"
KIND = "server"
MODE = "lines"
SPEED = 85  # MB/s on one core (bench/, 1 GB folder): orders the streams
SEGMENT_COUNTERS = (
    "seq",
    "rec",
)  # a large log or rotated set is read in pieces: these number rows, nothing else
CONTAINER_TIME = True  # docker/kubectl stamps in front of lines are read (year, sub-second, zone)
DESCRIPTION = (
    "vLLM server log, V0 0.2 to V1 0.33: stats lines (data-parallel engines kept apart), speculative-"
    "decoding metrics, request lifecycle, errors, KV capacity, uvicorn; pasted excerpts too (hard wraps "
    "joined, flattened lines split, stripped headers and markdown read by their text)"
)
SAMPLES = [
    "(APIServer pid=3887) INFO 11-29 08:26:24 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1072.0 tokens/s, Running: 9 reqs, Waiting: 39 reqs, CPU KV cache usage: 91.0%, Prefix cache hit rate: 0.0%",
    "(APIServer pid=3887) INFO 11-29 08:25:05 [async_llm.py:578] Added request cmpl-04055ac11e0a42e06d65aaf34e7f61ed-0-8cc11aeb.",
    "INFO 10-28 11:16:34 metrics.py:349] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 7220.5 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 98 reqs, GPU KV cache usage: 73.8%, CPU KV cache usage: 0.0%.",
    "WARNING 11-29 09:37:14 [_logger.py:72] Sequence group cmpl-3f332f98cfc3a1617a32cc73a50891dc-0 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1",
    '(APIServer pid=851) INFO:     10.109.20.86:59146 - "GET /metrics HTTP/1.1" 200 OK',
    "(RayWorkerWrapper pid=169, ip=10.20.0.197) INFO 05-08 03:20:28 model_runner.py:173] Loading model weights took 0.1189 GB",
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens",
    # --enable-log-outputs, cut by the reporter's paste (tests/data/unseen/vllm-29208-...generated-response.log)
    "(APIServer pid=1) INFO 11-21 14:14:23 [logger.py:76] Generated response chatcmpl-17080a0f8af349e880656a715f4ebd4a: output: 'Hello! How can I assist you with your smart home today?",
]


def detect_heads(frame: pl.DataFrame, n: int) -> pl.Series:
    s = pl.col("line").str.slice(0, 600).str.replace_all(_ANSI, "")
    s = s.str.replace(_MD_LEAD, "")  # a paste quoted in markdown
    body = s.str.replace(rf"^(?:\S+Z )?(?:{PROCESS_CUT} ?)?", "")
    hdr = s.str.contains(
        rf"^(?:\S+Z )?(?:{PROCESS} ?)?"
        rf"(?:(?:{_LVL}) \d\d-\d\d \d\d:\d\d:\d\d \[?[^\s\]]+:\d+\]"
        rf"|\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)? - vllm[\w.]* - (?:{_LVL}) - )"
    )
    hdr = hdr | s.str.contains(_GLUE_HDR)  # records glued on one line, or a paste starting inside the first
    js = s.str.contains(r'^\{".*"name": "vllm[\w.]*"') & s.str.contains('"levelname"', literal=True)
    prefix = s.str.contains(r"^(?:\S+Z )?\((?:APIServer|EngineCore|Worker|VllmWorker)[\w -]* pid=\d+\)")
    known = body.str.contains(
        r"^\s*Sequence group \S+ is preempted|^#? ?\w+ blocks: \d+|Avg prompt throughput: |^Loading model weights took"
        r"|^Memory profiling results|^Maximum concurrency for|^Received request \S+: |KV cache usage: [\d.]+%"
        r"|max seq len \(\d+\) is larger|To serve at least one request with the model|KV cache is needed, which is larger"
        r"|^SpecDecoding metrics: |^Speculative metrics: |File \"[^\"]*/vllm/"  # a traceback through vLLM's code
    )
    other = body.str.contains(rf"^(?:{_LVL}): +") | body.str.contains(_NOISE) | body.str.contains(_TB_STRONG)
    bench = s.str.contains(r"Serving Benchmark Result|^Namespace\(subparser='bench'")
    g = per_head(
        nonblank(frame, 200),
        n,
        full=(hdr | js).any(),
        part=(prefix | known).any(),
        m=(hdr | js | prefix | known | other).mean(),
        bench=bench.any(),
    )
    m = pl.col("m")
    score = (
        pl.when(pl.col("full"))
        .then(0.2 + 0.8 * m)
        .when(pl.col("part"))
        .then(pl.min_horizontal(pl.lit(0.6), 0.1 + 0.8 * m))  # pastes with the header stripped
        .otherwise(0.0)
    )
    # `vllm bench serve` prints vLLM log lines too; uvicorn lines alone are any FastAPI app (the router)
    return g.select(pl.when(pl.col("bench")).then(score * 0.3).otherwise(score)).to_series()


def detect(head: list[str]) -> float:
    return one_head(detect_heads, head)


# ---- entry points ------------------------------------------------------------------------------


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    return _run(lines, ctx, state, final=False)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    if _carry.held(state) is None:
        return None
    return _run(None, ctx, state, final=True)


def _run(lines: pl.DataFrame | None, ctx: ParseContext, state: dict, final: bool) -> ChunkResult:
    notes: list[str] = []
    tables: dict[str, pl.DataFrame] = {}
    repairs: dict[str, int] = {}
    recognized = None
    if lines is not None:
        df = _parse(lines, repairs)
        seq0 = state.get("seq", 0)
        df = df.with_columns((pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"))
        state["seq"] = seq0 + df.height
        df, n, bad_times = _times(df, ctx, state)
        notes += n
        df = _classify(df, state)
        state["kv_dev_before"] = state.get("kv_dev")
        stats, n = _stats(df, ctx, state)
        notes += n
        bad_values = invalid_values(stats)
        reqs = _requests(df, ctx)
        spec = _spec(df, ctx, stats)
        access = _access(df, ctx)
        host_rows, nccl = hosts(df, ctx, state)  # the host (a pod's name) NCCL's lines name
        tables["server_stats"] = stats
        tables["server_request_events"] = reqs
        tables["server_spec_decode"] = spec
        made = [t.select("seq") for t in (stats, reqs, spec) if t.height]
        if nccl is not None:
            made.append(nccl.to_frame("seq"))
        produced = pl.concat(made) if made else None
        # the last record may go on in the next chunk, or in the next file of a rotated set (logrotate cuts at a
        # line, not at a record), as the record pass decides; it stays named by the file it began in
        rows = df.select(_REC_COLS)  # ``stopping``: the record pass's (_vllm_records)
        records = _carry.hold(_carry.resume(rows, ctx, state), ctx, state, _carry.MAX_RECORD_ROWS)
        events, n = _named_events(records, ctx, state)
    else:
        df, access, produced, host_rows = None, None, None, None
        bad_times, bad_values = (0, None), (0, None)
        carry, named = _carry.finished(ctx, state)  # the stream's last record (``finish``: there is one)
        events, n = _events(carry, named, state) if carry is not None else (pl.DataFrame(), [])
    notes += n
    ev = [e for e in (access, host_rows, events) if e is not None and e.height]
    tables["server_events"] = pl.concat(ev, how="diagonal_relaxed").sort("seq") if ev else pl.DataFrame()
    if df is not None and lines is not None:  # the one is parsed from the other
        ok = pl.col("ok")
        if produced is not None:
            ok = ok | pl.col("seq").is_in(produced["seq"].implode())
        recs = [e["rec"] for e in (events, _preview(ctx, state)) if e.height]
        if recs:
            ok = ok | pl.col("rec").is_in(pl.concat(recs).implode())
        # a joined line is recognised with the record it continues (the row just before it)
        ok = pl.when(pl.col("joined")).then(None).otherwise(ok).forward_fill()
        per_part = df.select("line_no", ok.alias("ok"))
        repairs["joined"] += int(df["wrap"].sum())  # lines of an open record cut at a width, too
        # a record's first line without any header, not a raw traceback (``bare``: the record pass's)
        repairs["bare"] = int(df.select(pl.col("bare") & ok).to_series().sum())
        if per_part.height != lines.height:  # glued parts: a line is recognised if any of its records is
            per_part = per_part.group_by("line_no", maintain_order=True).agg(pl.col("ok").any())
        recognized = per_part["ok"]
    for name in (
        "server_stats",
        "server_events",
        "server_request_events",
        "server_spec_decode",
    ):  # the engine beside SGLang's rows (sglang_server.py)
        if name in tables and tables[name].height:
            tables[name] = tables[name].with_columns(pl.lit("vllm").alias("engine_kind"))
    repairs["untimed"] = sum(
        int(t["ts"].is_null().sum()) for t in tables.values() if t.height and "ts" in t.columns
    )
    return ChunkResult(
        tables=tables,
        recognized=recognized,
        assumptions=list(dict.fromkeys(notes)),
        bad_times=bad_times[0],
        bad_time_example=bad_times[1],
        bad_value_example=bad_values[1],
        bad_values=bad_values[0],
        repairs={k: v for k, v in repairs.items() if v},
    )


def _named_events(r: _carry.Resumed, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    """The events of the records ``r`` completes, the one carried from an earlier file named by that file, and their
    notes."""
    notes: list[str] = []

    def events(frame: pl.DataFrame, named: ParseContext) -> pl.DataFrame:
        got, n = _events(frame, named, state)
        notes.extend(n)
        return got

    return _carry.named_events(events, r, ctx), notes


def _preview(ctx: ParseContext, state: dict) -> pl.DataFrame:
    """Events the still-open last record would give now: its lines are counted in this chunk."""
    carry = _carry.held(state)
    return pl.DataFrame() if carry is None else _events(carry, ctx, dict(state))[0]
