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
and ends all but the last with CR; raw tracebacks printed right after an error belong to it) with a
cumulative sum over "starts a record"; the last record of a chunk waits in ``state`` for the next.
Each output runs its own regexes only on the rows whose message starts with / holds its keyword.

Event kinds: preemption, oom, kv_insufficient, input_too_long, engine_timeout, engine_dead,
shutdown_error (an engine-death traceback logged after a shutdown began: vLLM's graceful SIGTERM
path prints one), server_start (uvicorn 'Started server process [pid]'), server_listen ('Starting
vLLM API server'), server_ready, server_stop, version, capacity, config, http_access, error.
"""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl

from logscope.schemas import TS

from ._common import ascii_classes, base_id_expr, local_to_utc
from .base import ChunkResult, ParseContext

NAME = "vllm_server"
KIND = "server"
MODE = "lines"
SPEED = 85  # MB/s on one core (bench/, 1 GB folder): orders the streams
SEGMENT_COUNTERS = ("seq", "rec")  # a large log or rotated set is read in pieces: these number rows, nothing else
CONTAINER_TIME = True  # docker/kubectl stamps in front of lines are read (year, sub-second, zone)
DESCRIPTION = "vLLM server log, V0 0.2 to V1 0.33: stats lines, request lifecycle, errors, KV capacity, uvicorn"
SAMPLES = [
    "(APIServer pid=3887) INFO 11-29 08:26:24 [loggers.py:335] Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 1072.0 tokens/s, Running: 9 reqs, Waiting: 39 reqs, CPU KV cache usage: 91.0%, Prefix cache hit rate: 0.0%",
    "(APIServer pid=3887) INFO 11-29 08:25:05 [async_llm.py:578] Added request cmpl-04055ac11e0a42e06d65aaf34e7f61ed-0-8cc11aeb.",
    "INFO 10-28 11:16:34 metrics.py:349] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 7220.5 tokens/s, Running: 2 reqs, Swapped: 0 reqs, Pending: 98 reqs, GPU KV cache usage: 73.8%, CPU KV cache usage: 0.0%.",
    "WARNING 11-29 09:37:14 [_logger.py:72] Sequence group cmpl-3f332f98cfc3a1617a32cc73a50891dc-0 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=1",
    '(APIServer pid=851) INFO:     10.109.20.86:59146 - "GET /metrics HTTP/1.1" 200 OK',
    "(EngineCore_DP0 pid=1133552) INFO 10-03 16:22:17 [kv_cache_utils.py:864] GPU KV cache size: 42,656 tokens",
]

_LVL = "DEBUG|INFO|WARNING|ERROR|CRITICAL"
_HEAD_CHARS = 320  # the capture pass only reads this much of a line: headers are shorter
_ANSI = r"\x1b\[[0-9;]*m"
# one capture pass: [process prefix] then a vLLM or a uvicorn header
_HEADER = ascii_classes(
    r"^(?P<hdr>(?:\((?P<pre>[^)]* pid=\d+)\) ?)?"
    rf"(?:(?P<lvl>{_LVL}) (?P<stamp>\d\d-\d\d \d\d:\d\d:\d\d) \[?[^\s\]]+\] ?|(?P<uv>{_LVL}|TRACE): +)?)"
)
# the same without groups: a search is several times cheaper than a capture pass, which then only
# runs on the distinct headers (a header repeats within its second)
_HEADER_SPAN = re.sub(r"\?P<\w+>", "?:", _HEADER)
# only run when a chunk has such lines: docker/kubectl time, a python-logging config (user or otel)
_DATED = ascii_classes(r"^\d{4}-\d\d-\d\d[ T]\d\d:")  # either of the two, one test for both first
_DATED_T = ascii_classes(r"^\d{4}-\d\d-\d\dT\d\d:")
_DATED_PY = ascii_classes(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)? - ")
_CTS = ascii_classes(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)) ")
_PYLOG = ascii_classes(
    r"^(?P<pyhdr>(?P<pyts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:[,.](?P<pyms>\d{1,6}))? - (?:[\w.-]+\.py - )?"
    rf"(?P<pyname>[\w.]+) - (?P<pylvl>{_LVL}) - )"
)
# a vLLM header in the middle of a line: two records glued together by a paste
_GLUE = ascii_classes(rf"(?:{_LVL}) \d\d-\d\d \d\d:\d\d:\d\d \[?[^\s\]]+:\d+\]")
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
    r"|Triton not installed|No CUDA runtime is found|\S+\.py:\d+: \w*Warning: |\[[WEI]\d{4} \d\d:\d\d:\d\d)"
)
_JSON_FIELD = r'"{}": "((?:[^"\\]|\\.)*)"'

# ---- outputs -----------------------------------------------------------------------------------
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
_ACCESS = ascii_classes(r'^(?P<addr>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+" (?P<status>\d{3})')
_PROMPT_REPR = r"""prompt: ('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|None\b)"""
_PROMPT_SPAN = r"""prompt: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|None\b)"""  # _PROMPT_REPR without its group
_IDS_OPEN = r"prompt(?:_token_ids| token ids): \["  # 19 bytes either way
_PROMPT_ANY = r"""prompt: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|'.*$|".*$)"""
_EVENT_KW = "|".join(
    re.sub(r"([.+*?()|\[\]{}^$\\])", r"\\\1", s)
    for s in (
        "Sequence group", "is preempted", "out of memory", "OutOfMemoryError",
        "No available memory for the cache blocks", "max seq len", "To serve at least one request",
        "timed out", "TimeoutError", "maximum context length", "Error in preprocessing prompt inputs",
        "decoder prompt", "is too long and exceeds", "exceeds the max_model_len", "DeadError",
        "died unexpectedly", "encountered a fatal error", "output_handler failed", "already dead",
        "failed to start", "Engine background task failed", "Engine loop has died", "exited unexpectedly",
        "initialization failed", "Started server process", "Starting vLLM", "Application startup complete",
        "Shutting down", "[shutdown]", "blocks: ", "KV cache size: ", "Maximum concurrency for",
        "Available KV cache memory", "Loading model weights took", "Model loading took",
        "Memory profiling results", "reserved for KV Cache is", "GiB for KV cache", "non-default args",
        "args: Namespace(", "server version", "LLM engine (",
    )
)
# event kinds, first match wins: the cause (OOM, KV, input, timeout) before the death it caused. Each rule
# carries literals one of which every match holds: a rule whose literals a chunk's records lack is not run
# (its regex would be compiled again for every chunk: the parser uses more patterns than polars caches)
_KIND_RULES: list[tuple[str, str, str, tuple[str, ...]]] = [  # (kind, column, regex, literals)
    ("preemption", "message", r"^\s*Sequence group \S+ is preempted", ("Sequence group",)),
    ("oom", "detail", r"OutOfMemoryError|CUDA out of memory|CUDA driver error: out of memory"
                      r"|CUDA error: out of memory|out of memory occurred when warming up",
     ("OutOfMemoryError", "out of memory")),
    ("kv_insufficient", "detail", r"No available memory for the cache blocks"
                                  r"|max seq len \(\d+\) is larger than the maximum number of tokens"
                                  r"|To serve at least one request with the models?'s? max seq len",
     ("No available memory for the cache blocks", "max seq len")),
    ("input_too_long", "detail", r"maximum context length is \d+|Error in preprocessing prompt inputs"
                                 r"|decoder prompt \(length \d+\) is longer than|exceeds the max_model_len"
                                 r"|Input prompt \(\d+ tokens\).* is too long and exceeds",
     ("maximum context length is ", "Error in preprocessing prompt inputs", "decoder prompt (length ",
      "exceeds the max_model_len", " is too long and exceeds")),
    ("engine_timeout", "detail", r"Engine iteration timed out|RPC call to \w+ timed out"
                                 r"|(?s:run_busy_loop.*TimeoutError|TimeoutError.*run_busy_loop)",
     ("timed out", "TimeoutError")),
    ("engine_dead", "detail", r"EngineDeadError|Engine core proc \S+ died unexpectedly"
                              r"|EngineCore encountered a fatal error|AsyncLLM output_handler failed"
                              r"|already dead, terminating server process|EngineCore failed to start"
                              r"|Engine background task failed|Engine loop has died"
                              r"|engine core exited unexpectedly|Worker proc \S+ died unexpectedly"
                              r"|Engine core initialization failed|Engine core process \S+ died unexpectedly",
     ("EngineDeadError", "died unexpectedly", "EngineCore encountered a fatal error", "AsyncLLM output_handler failed",
      "already dead, terminating server process", "EngineCore failed to start", "Engine background task failed",
      "Engine loop has died", "engine core exited unexpectedly", "Engine core initialization failed")),
    ("server_start", "message", r"^Started server process \[\d+\]", ("Started server process [",)),
    ("server_listen", "message", r"^Starting vLLM (?:API )?server", ("Starting vLLM ",)),
    ("server_ready", "message", r"^Application startup complete", ("Application startup complete",)),
    ("server_stop", "message", r"^Shutting down\s*$|^\[shutdown\] API server: shutdown triggered"
                               r"|^Shutting down FastAPI HTTP server", ("Shutting down", "[shutdown] API server")),
    ("version", "detail", r"vLLM (?:API )?server version \S|█\s+version \S", ("version ",)),
    ("capacity", "message", r"blocks: \d+|KV cache size: [\d,]+ tokens|^Maximum concurrency for"
                            r"|^Available KV cache memory|^Loading model weights took|^Model loading took"
                            r"|^Memory profiling results|reserved for KV Cache is|GiB for KV cache",
     ("blocks: ", "KV cache size: ", "Maximum concurrency for", "Available KV cache memory",
      "Loading model weights took", "Model loading took", "Memory profiling results", "reserved for KV Cache is",
      "GiB for KV cache")),
    ("config", "message", r"non-default args: \{|^args: Namespace\(", ("non-default args: {", "args: Namespace(")),    # the engine's effective settings (prefix caching, chunked prefill, parallel sizes): compare reads them from detail
    ("engine_config", "message", r"^Initializing an? (?:V[01] )?LLM engine \(v?[^)]*\) with config:",
     ("LLM engine (",)),
]
_KIND_RULES = [(kind, col, ascii_classes(rx), lits) for kind, col, rx, lits in _KIND_RULES]
# the stream is shutting down: an engine death after this is the harmless shutdown traceback
# as literal tests (no regex to compile per chunk): stopping = starts with '[shutdown]' or 'Shutting down', or
# holds 'trigger received signal=SIGTERM'; starting = '^Started server process|^Starting vLLM|^Initializing
# an? (?:V1 )?LLM engine'
_STOPPING_LEADS, _STOPPING_ANY = ("[shutdown]", "Shutting down"), "trigger received signal=SIGTERM"
_STARTING_LEADS = ("Started server process", "Starting vLLM", "Initializing a LLM engine", "Initializing an LLM engine",
                   "Initializing a V1 LLM engine", "Initializing an V1 LLM engine")


def _starts_any(e: pl.Expr, leads: tuple[str, ...]) -> pl.Expr:
    return pl.any_horizontal(e.str.starts_with(x) for x in leads)


def detect(head: list[str]) -> float:
    lines = [h for h in head if h.strip()][:200]
    if not lines:
        return 0.0
    s = pl.Series(lines, dtype=pl.String).str.slice(0, 600).str.replace_all(_ANSI, "")
    body = s.str.replace(r"^(?:\S+Z )?(?:\([\w -]+ pid=\d+\) ?)?", "")
    hdr = s.str.contains(
        r"^(?:\S+Z )?(?:\([\w -]+ pid=\d+\) ?)?"
        rf"(?:(?:{_LVL}) \d\d-\d\d \d\d:\d\d:\d\d \[?[^\s\]]+:\d+\]"
        rf"|\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d(?:,\d+)? - vllm[\w.]* - (?:{_LVL}) - )"
    )
    js = s.str.contains(r'^\{".*"name": "vllm[\w.]*"') & s.str.contains('"levelname"', literal=True)
    prefix = s.str.contains(r"^(?:\S+Z )?\((?:APIServer|EngineCore|Worker|VllmWorker)[\w -]* pid=\d+\)")
    known = body.str.contains(
        r"^\s*Sequence group \S+ is preempted|^#? ?\w+ blocks: \d+|Avg prompt throughput: |^Loading model weights took"
        r"|^Memory profiling results|^Maximum concurrency for|^Received request \S+: |KV cache usage: [\d.]+%"
        r"|max seq len \(\d+\) is larger"
    )
    other = body.str.contains(rf"^(?:{_LVL}): +") | body.str.contains(_NOISE) | body.str.contains(_TB_STRONG)
    share = float((hdr | js | prefix | known | other).mean())
    score = 0.0
    if bool((hdr | js).any()):
        score = 0.2 + 0.8 * share
    elif bool((prefix | known).any()):
        score = min(0.6, 0.1 + 0.8 * share)  # pastes with the vLLM header stripped
    # `vllm bench serve` prints vLLM log lines too; uvicorn lines alone are any FastAPI app (the router)
    if bool(s.str.contains(r"Serving Benchmark Result|^Namespace\(subparser='bench'").any()):
        score *= 0.3
    return score


# ---- row parsing -------------------------------------------------------------------------------


def _parse(lines: pl.DataFrame) -> pl.DataFrame:
    """Header fields and message of each line; lines holding glued records are split into parts."""
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
        parts = _fields(parts.with_columns(pl.col("line").str.strip_chars_end("\r")))
        df = pl.concat([df.filter(~glued), parts], how="vertical_relaxed").sort(["line_no", "part"])
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
        df = df.with_columns(pl.when(pl.col("cts").is_not_null()).then(b.str.slice(pl.col("cts").str.len_chars() + 1))
                             .otherwise(b).alias("body"))
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias("cts"))
    df = df.with_columns(b.str.slice(0, _HEAD_CHARS).str.extract_all(_HEADER_SPAN).list.first().alias("hdr"))
    heads = df.select(pl.col("hdr").unique()).with_columns(
        pl.col("hdr").str.extract_groups(_HEADER).struct.field("pre", "lvl", "stamp", "uv"))
    df = df.join(heads, on="hdr", how="left", maintain_order="left")
    st = pl.col("stamp")
    df = df.with_columns(
        # the header is a prefix of the body: cut it by its bytes
        b.cast(pl.Binary).bin.slice(pl.col("hdr").str.len_bytes()).cast(pl.String).alias("msg"),
        # str.find counts bytes: cut at it in bytes (str.slice counts characters)
        pl.col("pre").cast(pl.Binary).bin.head(pl.col("pre").str.find(" pid=", literal=True)).cast(pl.String)
        .alias("proc"),
        pl.col("pre").cast(pl.Binary).bin.slice(pl.col("pre").str.find(" pid=", literal=True) + 5).cast(pl.String)
        .cast(pl.Int64, strict=False)
        .alias("pid"),
        st.str.slice(0, 2).alias("mo"), st.str.slice(3, 2).alias("dd"), st.str.slice(6, 8).alias("hms"),
        pl.when(pl.col("lvl").is_not_null()).then(pl.col("hdr").str.strip_chars_end(" ")).alias("key"),
    )
    if dated and bool(df["body"].str.contains(_DATED_PY).any()):
        df = _pylog(df)
    else:
        df = df.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in ("pyts", "pyms", "pyname", "pylvl"))
    if bool(df["body"].str.starts_with('{"').any()):
        df = _json(df)
    return df.drop("body", "stamp", "pre")


def _pylog(df: pl.DataFrame) -> pl.DataFrame:
    """Lines of a python ``logging`` format ('2024-12-20 15:18:19 - vllm.engine.metrics - INFO - ...')."""
    df = df.with_columns(pl.col("body").str.extract_groups(_PYLOG).alias("py")).unnest("py")
    py = pl.col("pyhdr").is_not_null()
    vllm = py & pl.col("pyname").str.starts_with("vllm")
    return df.with_columns(
        pl.when(py).then(pl.col("body").str.slice(pl.col("pyhdr").str.len_chars())).otherwise(pl.col("msg")).alias("msg"),
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
    msg = (msg.str.replace_all(r"\\n", "\n").str.replace_all(r"\\t", "\t").str.replace_all(r'\\"', '"')
           .str.replace_all(r"\\\\", "\\"))
    asct = field("asctime")
    name = field("name")
    vllm = is_js & name.str.starts_with("vllm")
    return df.with_columns(
        pl.when(vllm).then(field("levelname")).otherwise(pl.col("lvl")).alias("lvl"),
        pl.when(is_js).then(name).otherwise(pl.col("pyname")).alias("pyname"),
        pl.when(is_js).then(field("processName")).otherwise(pl.col("proc")).alias("proc"),
        pl.when(is_js).then(b.str.extract(r'"process": (\d+)').cast(pl.Int64)).otherwise(pl.col("pid")).alias("pid"),
        pl.when(is_js).then(msg).otherwise(pl.col("msg")).alias("msg"),
        # asctime is either logging's default 'YYYY-MM-DD HH:MM:SS,mmm' or vLLM's 'MM-DD HH:MM:SS'
        pl.when(is_js).then(asct.str.extract(r"^(\d\d)-\d\d ")).otherwise(pl.col("mo")).alias("mo"),
        pl.when(is_js).then(asct.str.extract(r"^\d\d-(\d\d) ")).otherwise(pl.col("dd")).alias("dd"),
        pl.when(is_js).then(asct.str.extract(r"^\d\d-\d\d (\d\d:\d\d:\d\d)$")).otherwise(pl.col("hms")).alias("hms"),
        pl.when(is_js).then(asct.str.extract(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)")).otherwise(pl.col("pyts"))
        .alias("pyts"),
        pl.when(is_js).then(asct.str.extract(r"^\S+ \S+?[,.](\d{1,6})")).otherwise(pl.col("pyms")).alias("pyms"),
        pl.when(is_js).then(pl.lit(None, dtype=pl.String)).otherwise(pl.col("uv")).alias("uv"),
    )


# ---- time --------------------------------------------------------------------------------------


def _times(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    notes: list[str] = []
    mo = pl.col("mo").cast(pl.Int32)
    prev_mo = mo.forward_fill().shift(1).fill_null(state.get("last_month", 0))
    # a month far below the previous one is the turn of a year (Dec -> Jan)
    roll = (mo < prev_mo - 6).fill_null(False)
    df = df.with_columns(roll.cum_sum().cast(pl.Int32).alias("_roll"))
    year_off = state.get("year_off", 0)
    vllm_naive = (
        pl.concat_str(
            [(pl.col("_roll") + ctx.year + year_off).cast(pl.String), pl.lit("-"), pl.col("mo"), pl.lit("-"),
             pl.col("dd"), pl.lit(" "), pl.col("hms")]
        ).str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
    )
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
    has_mo, has_cts, has_py = (bool(df[c].is_not_null().any()) for c in ("mo", "cts", "pyts"))
    parts = [e for e, has in ((cts, has_cts), (local_to_utc(vllm_naive, ctx.tz), has_mo),
                              (local_to_utc(py_naive, ctx.tz), has_py)) if has]
    own = pl.coalesce(parts).cast(TS) if parts else pl.lit(None, dtype=TS)
    df = df.with_columns(own.alias("ts_own"))
    df = df.with_columns(
        # before the first stamp of the stream, the next one (a paste starting mid-traceback)
        pl.col("ts_own").forward_fill().fill_null(pl.lit(state.get("last_ts"), dtype=TS)).backward_fill().alias("ts"),
        pl.col("ts_own").is_null().alias("ts_inferred"),
    )
    rolls = int(df["_roll"].max() or 0) if df.height else 0
    if rolls:
        notes.append(f"vLLM timestamps have no year: the month went back (Dec -> Jan) {rolls} time(s), "
                     f"the year was advanced each time")
    state["year_off"] = year_off + rolls
    last_mo = df["mo"].drop_nulls()
    if last_mo.len():
        state["last_month"] = int(last_mo[-1])
    last_ts = df["ts"].drop_nulls()
    if last_ts.len():
        state["last_ts"] = last_ts[-1]
    if has_mo:
        notes.append(f"vLLM timestamps have no zone: read as {ctx.tz} (--tz)")
        notes.append(f"vLLM timestamps have no year: {ctx.year_source}")
        notes.append("vLLM timestamps have whole seconds: rows of one second keep file order (seq)")
    if has_cts:
        notes.append("container timestamps (docker/kubectl, RFC 3339 UTC) in front of lines were used as their time")
    if has_py:
        notes.append(f"python-logging timestamps have no zone: read as {ctx.tz} (--tz)")
    if (df["ts_inferred"] & df["uv"].is_not_null()).any():
        notes.append("uvicorn lines carry no time: they take the time of the previous timestamped line (ts_inferred)")
    return df.drop("_roll"), notes


# ---- records -----------------------------------------------------------------------------------


def _classify(df: pl.DataFrame, state: dict) -> pl.DataFrame:
    """Row kinds, 'continues the previous record' and record ids (carried across chunks by ``state``)."""
    p = state.get("prev", {})
    has_cr = bool(state.get("has_cr")) or bool(df["cr"].any())
    state["has_cr"] = has_cr
    msg, lvl = pl.col("msg"), pl.col("lvl")
    err = lvl.is_in(["ERROR", "CRITICAL"])
    df = df.with_columns(
        msg.str.contains(_TB).alias("tbm"),
        pl.when(lvl.is_null() & pl.col("uv").is_null()).then(msg.str.contains(_NOISE) | pl.col("pyname").str.contains(
            "opentelemetry", literal=True).fill_null(False)).otherwise(False).alias("noise"),
        (lvl.is_null() & pl.col("uv").is_not_null()).alias("uvr"),
    )
    raw = lvl.is_null() & ~pl.col("uvr") & ~pl.col("noise") & pl.col("pyname").is_null()
    df = df.with_columns((raw & pl.col("tbm")).alias("tbs"), (raw & ~pl.col("tbm")).alias("other"))
    open0 = (lvl.is_in(["WARNING", "ERROR", "CRITICAL"]) | pl.col("noise") | pl.col("tbs")).fill_null(False)
    prev_plen = pl.col("plen").shift(1, fill_value=p.get("plen", 0))
    # a hard-wrapped paste: an unknown line right after a long line of an open record continues it
    wrap1 = pl.col("other") & open0.shift(1, fill_value=p.get("open", False)) & (prev_plen >= 80)
    open1 = open0 | wrap1
    prev_open = open1.shift(1, fill_value=p.get("open", False))
    wrap = pl.col("other") & prev_open & (prev_plen >= 80)
    # the key of the record the previous row belongs to (raw traceback / wrapped rows carry none)
    df = df.with_columns(pl.when(pl.col("uvr") | pl.col("noise")).then(pl.lit("~")).otherwise(pl.col("key"))
                         .forward_fill().alias("_ffk"))
    same_key = pl.col("key").is_not_null() & (pl.col("key") == pl.col("_ffk").shift(1).fill_null(pl.lit(p.get("key"), dtype=pl.String)))
    same_key = same_key.fill_null(False)
    prev_cr = pl.col("cr").shift(1, fill_value=p.get("cr", False))
    vcont = same_key & (prev_cr if has_cr else (err | pl.col("tbm")))
    df = df.with_columns(
        (vcont | (pl.col("tbs") & prev_open) | wrap).fill_null(False).alias("cont"),
        wrap.fill_null(False).alias("wrap"),
        open1.fill_null(False).alias("_open"),
    )
    df = df.with_columns(pl.when(pl.col("tbs")).then(msg.str.contains(_TB_STRONG)).otherwise(False).alias("strong"))
    start_ok = lvl.is_not_null() | pl.col("uvr") | pl.col("noise") | pl.col("strong")
    df = df.with_columns(
        ((~pl.col("cont")).cum_sum().cast(pl.Int64) + state.get("rec", 0)).alias("rec"),
        pl.when(~pl.col("cont")).then(start_ok).forward_fill().fill_null(p.get("rec_ok", False)).alias("rec_ok"),
    )
    df = df.with_columns(
        (lvl.is_not_null() | pl.col("uvr") | pl.col("noise")
         | pl.when(lvl.is_null()).then(msg.str.strip_chars() == "").otherwise(False)
         | ((pl.col("tbs") | pl.col("wrap")) & pl.col("rec_ok"))).alias("ok")
    )
    if df.height:
        last = df.row(-1, named=True)
        state["prev"] = {"plen": last["plen"], "open": last["_open"], "cr": last["cr"], "key": last["_ffk"],
                         "rec_ok": last["rec_ok"]}
        state["rec"] = last["rec"]
    return df


# ---- stats -------------------------------------------------------------------------------------


def _num(col: str, pat: str) -> pl.Expr:
    return pl.col(col).str.extract(pat).str.replace_all(",", "").cast(pl.Float64, strict=False)


def _ratio(percent: pl.Expr) -> pl.Expr:
    """91.0 (%) -> 0.91 (rounded: the log prints one decimal, the ratio must not depend on the code path)."""
    return (percent / 100).round(6)


def _pct(pat: str) -> pl.Expr:
    return _ratio(_num("msg", pat))


def _stats(df: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    m = pl.col("msg")
    cand = df.filter(m.str.contains("Running: ", literal=True) & ~m.str.starts_with("Received request"))
    cand = cand.with_columns(m.str.extract_groups(_STATS_HEAD).alias("s")).unnest("s").filter(
        pl.col("first").is_not_null())
    devs = _kv_devices(df)
    if devs.height:
        state["kv_dev"] = devs["dev"][-1]
    if cand.height == 0:
        return cand, []
    notes = []
    v0 = m.str.contains("Swapped: ", literal=True) | m.str.contains("Pending: ", literal=True)
    pre01 = pl.col("first") == "Throughput: "
    cand = cand.with_columns(
        pl.when(m.str.starts_with("Engine ")).then(m.str.extract_groups(_STATS_V1)).alias("_c1"),
        pl.when(m.str.starts_with("Avg prompt throughput: ")).then(m.str.extract_groups(_STATS_V0)).alias("_c0"),
    )
    c1, c0 = pl.col("_c1"), pl.col("_c0")
    is1, is0 = c1.struct.field("run").is_not_null(), c0.struct.field("run").is_not_null()  # no match: null fields
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
        pl.lit("log").alias("origin"),
        pl.when(pre01).then(pl.lit("v0-pre0.1")).when(v0).then(pl.lit("v0")).otherwise(pl.lit("v1")).alias("era"),
        pl.when(pl.col("agg").is_not_null()).then(pl.lit("aggregated")).otherwise(pl.col("engine")).alias("engine"),
        pl.col("lvl").alias("level"),
        pl.col("_run").cast(pl.Int64).alias("running"),
        pl.col("_wait").cast(pl.Int64).alias("waiting"),
        pl.col("_swap").cast(pl.Int64).alias("swapped"),
        pl.col("_deferred").cast(pl.Int64).alias("deferred"),
        pl.col("_preempt").cast(pl.Int64).alias("preemptions"),
        pl.when(v0 & v0_cpu).then(cpu).when(v0).then(gpu).otherwise(pl.col("_v1_kv")).alias("kv_usage"),
        pl.when(v0 & v0_cpu).then(pl.lit("CPU")).when(v0).then(pl.lit("GPU")).otherwise(pl.col("_v1_dev"))
        .alias("kv_device"),
        pl.when(v0).then(gpu).alias("gpu_kv_usage"),
        pl.when(v0).then(cpu).alias("cpu_kv_usage"),
        pl.col("_pt").alias("prompt_tps"),
        pl.col("_gt").alias("gen_tps"),
        pl.col("_pfx").alias("prefix_hit"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    ).drop(*_RAW_STATS, "_c1", "_c0")
    if bool(out.select(pre01.any()).item()):
        notes.append("pre-0.1 stats line 'Throughput: N tokens/s' (all tokens) was stored as gen_tps")
    if bool(out.select((pl.col("era") == "v0") & (pl.col("kv_device") == "CPU")).to_series().any()):
        notes.append("V0 on the CPU backend: kv_usage is the 'CPU KV cache usage' column (the KV cache lives there)")
    return out, notes


_RAW_STATS = ("_gpu", "_cpu", "_v1_dev", "_v1_kv", "_run", "_wait", "_swap", "_deferred", "_preempt", "_pt", "_gt",
              "_pfx")


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


def _other_values() -> list[pl.Expr]:
    """The raw values of every other stats shape, field by field."""
    return [
        _pct(r"GPU KV cache usage: ([\d.]+)%").alias("_gpu"),
        _pct(r"CPU KV cache usage: ([\d.]+)%").alias("_cpu"),
        pl.col("msg").str.extract(r"(\w+) KV cache usage: [\d.]+%").alias("_v1_dev"),
        _pct(r"\w+ KV cache usage: ([\d.]+)%").alias("_v1_kv"),
        _num("msg", r"Running: (\d+) reqs").alias("_run"),
        _num("msg", r"(?:Waiting|Pending): (\d+) reqs").alias("_wait"),
        _num("msg", r"Swapped: (\d+) reqs").alias("_swap"),
        _num("msg", r"Deferred: (\d+) reqs").alias("_deferred"),
        _num("msg", r"Preemptions: (\d+)").alias("_preempt"),
        _num("msg", r"Avg prompt throughput: ([\d.]+)").alias("_pt"),
        pl.coalesce(_num("msg", r"Avg generation throughput: ([\d.]+)"), _num("msg", r"^Throughput: ([\d.]+)"))
        .alias("_gt"),
        _pct(r"Prefix cache hit rate: ([\d.]+)%").alias("_pfx"),
    ]


def _kv_devices(df: pl.DataFrame) -> pl.DataFrame:
    """Device of the V0 KV cache from '# <device> blocks: N, # CPU blocks: M', in row order."""
    d = df.filter(pl.col("msg").str.contains(" blocks: ", literal=True))
    if d.height == 0:  # no regex over an empty frame: it would still be compiled
        return pl.DataFrame(schema={"seq": pl.Int64, "dev": pl.String})
    d = d.select("seq", pl.col("msg").str.extract(r"^#? ?(\w+) blocks: \d+").str.to_uppercase().alias("dev")).drop_nulls()
    return d.with_columns(pl.when(pl.col("dev") == "CUDA").then(pl.lit("GPU")).otherwise(pl.col("dev")).alias("dev"))


# ---- request lifecycle ---------------------------------------------------------------------------


# request lifecycle lines: (event, how the message starts, regex of the id(s))
_REQ_KINDS = [
    ("received", "Received request ", None),
    ("added", "Added request ", None),
    ("finished", "Finished request ", None),
    ("aborted", "Aborted request", r"^Aborted request(?:\(s\))? (.+?)\.?\s*$"),
    ("aborted", "Request ", r"^Request (\S+) aborted\."),
    ("failed", "Request ", r"^Request (\S+) failed\b"),
    ("preempted", "Sequence group ", r"^Sequence group (\S+) is preempted"),
    ("preempted", " Sequence group ", r"^ Sequence group (\S+) is preempted"),  # header stripped by a paste
]


def _requests(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    m = pl.col("msg")
    base = df.filter(pl.col("lvl").is_not_null() | pl.col("other") | pl.col("tbs")).select("seq", "line_no", "ts", "msg")
    parts = []
    for event, lead, pat in _REQ_KINDS:
        sub = base.filter(m.str.starts_with(lead))
        if sub.height == 0:
            continue
        sub = sub.with_columns(pl.lit(event).alias("event"), _request_id(lead, pat).alias("request_id"))
        sub = sub.filter(pl.col("request_id").is_not_null())
        if event == "received":
            sub = _received_fields(sub, ctx)
        parts.append(sub.drop("msg"))
    if not parts:
        return base.clear()
    out = pl.concat(parts, how="diagonal_relaxed").sort("seq")
    if bool(out["request_id"].str.contains(", ", literal=True).any()):  # 'Aborted request(s) id1, id2.'
        out = out.with_columns(pl.col("request_id").str.split(", ")).explode("request_id")
    return out.with_columns(
        base_id_expr("request_id").alias("base_request_id"),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    )


def _request_id(lead: str, pat: str | None) -> pl.Expr:
    """The id after ``lead``; the three commonest shapes are cut without a regex (they are most lines)."""
    m = pl.col("msg")
    if pat is not None:
        return m.str.extract(pat)
    if lead == "Received request ":  # 'Received request <id>: ...'; find counts bytes, so cut bytes
        return m.cast(pl.Binary).bin.slice(len(lead), m.str.find(":", literal=True) - len(lead)).cast(pl.String)
    return m.str.strip_prefix(lead).str.strip_chars_end().str.strip_suffix(".")  # 'Added request <id>.'


def _field(col: str, key: str, pat: str = r"^([0-9.]+)") -> pl.Expr:
    """Value after ``key`` (found with a literal search, then a regex on a few characters only).

    ``str.find`` gives a byte offset and ``str.slice`` counts characters: on a line holding non-ASCII
    text before the key (a stop string such as '。'), the offset is turned into characters first."""
    c = pl.col(col)
    at = c.str.find(key, literal=True)
    chars = c.cast(pl.Binary).bin.head(at).cast(pl.String).str.len_chars()
    at = pl.when(c.str.len_bytes() == c.str.len_chars()).then(at).otherwise(chars)
    return c.str.slice(at + len(key), 16).str.extract(pat)


def _received_fields(cand: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    """SamplingParams fields, prompt length (and prompt, when asked) of 'Received request' lines."""
    m = pl.col("msg")
    prompt = pl.lit(None, dtype=pl.String)
    if bool(cand["msg"].str.contains("prompt: ", literal=True).any()):
        # fields are read after the prompt's repr, never from inside the prompt text. The repr is found
        # by one search (no capture groups: they are slow over a long prompt); where it sits is found
        # again as a literal, which is the same place: the repr parses one way only ('None' excepted)
        cand = cand.with_columns(pl.when(m.str.contains("prompt: ", literal=True))
                                 .then(m.str.extract_all(_PROMPT_SPAN).list.first()).alias("_span"))
        span = pl.col("_span")
        cand = cand.with_columns(
            span.str.slice(len("prompt: ")).alias("_repr"),
            pl.when(span == "prompt: None").then(m.str.find(_PROMPT_REPR)).otherwise(m.str.find(span, literal=True))
            .alias("_at"),
        )
        at, raw = pl.col("_at"), m.cast(pl.Binary)
        rest = pl.concat_str(raw.bin.head(at).cast(pl.String), pl.lit("prompt: <p>"),
                             raw.bin.slice(at + span.str.len_bytes()).cast(pl.String))
        cut = pl.when(span.is_null()).then(m.str.contains(r"^Received request \S+?: prompt: ")).otherwise(False)
        cand = cand.with_columns(pl.when(cut).then(None).when(span.is_null()).then(m).otherwise(rest).alias("_rest"))
        if ctx.include_prompts:
            prompt = pl.coalesce("_repr", m.str.extract(r"^Received request \S+?: prompt: (.*?)>?$"))
            prompt = prompt.str.replace(r"^'(.*)'$", "$1").str.replace(r'^"(.*)"$', "$1")
            prompt = pl.when(prompt == "None").then(None).otherwise(prompt)
    else:
        cand = cand.with_columns(m.alias("_rest"))
    # the token ids: after the leftmost 'prompt_token_ids: [' up to the next ']' (a search, not a capture)
    rest = pl.col("_rest")
    cand = cand.with_columns(rest.cast(pl.Binary).bin.slice(rest.str.find(_IDS_OPEN) + 19).cast(pl.String)
                             .alias("_after"))
    after = pl.col("_after")
    cand = cand.with_columns(after.cast(pl.Binary).bin.head(after.str.find("]", literal=True)).cast(pl.String)
                             .alias("_ids"))
    ids = pl.col("_ids")
    return cand.with_columns(
        _field("_rest", " max_tokens=").cast(pl.Int64).alias("max_tokens"),
        _field("_rest", "SamplingParams(n=").cast(pl.Int64).alias("n"),
        _field("_rest", " temperature=", r"^([0-9]+(?:\.[0-9]+)?)").cast(pl.Float64).alias("temperature"),
        (_field("_rest", " ignore_eos=", r"^(True|False)") == "True").alias("ignore_eos"),
        pl.when(ids.str.strip_chars() == "").then(0).otherwise(ids.str.count_matches(",", literal=True) + 1)
        .cast(pl.Int64).alias("prompt_tokens"),
        prompt.alias("prompt"),
    ).drop("_rest", "_ids", "_repr", "_span", "_at", "_after", strict=False)


# ---- events ------------------------------------------------------------------------------------


def _access(df: pl.DataFrame, ctx: ParseContext) -> pl.DataFrame:
    a = df.filter(pl.when(pl.col("uvr")).then(pl.col("msg").str.contains(' - "', literal=True)).otherwise(False))
    groups = (pl.col("msg").str.extract_groups(_ACCESS) if a.height else  # no regex over no rows
              pl.lit(None, dtype=pl.Struct({k: pl.String for k in ("addr", "method", "path", "status")})))
    a = a.with_columns(groups.alias("a")).unnest("a").filter(pl.col("status").is_not_null())
    return a.select(
        "ts", "ts_inferred", pl.lit(ctx.source).alias("source"), pl.lit(ctx.replica).alias("replica"),
        pl.lit("http_access").alias("kind"), pl.col("uv").alias("level"), pl.col("proc").alias("process"), "pid",
        pl.col("msg").str.slice(0, 500).alias("message"), "line_no", pl.lit(1, dtype=pl.Int64).alias("line_count"),
        "seq", pl.col("method").alias("http_method"), pl.col("path").alias("http_path"),
        pl.col("status").cast(pl.Int64).alias("http_status"), pl.col("addr").alias("client_addr"),
    )


_REC_COLS = ["line_no", "part", "seq", "rec", "cont", "msg", "lvl", "uv", "proc", "pid", "ts", "ts_inferred", "tbs",
             "strong", "other", "kw", "stopping"]


def _records(df: pl.DataFrame, state: dict, final: bool) -> pl.DataFrame:
    """Rows of the records complete so far (the last one may go on in the next chunk: kept in state)."""
    m = pl.col("msg")
    stopping = _starts_any(m, _STOPPING_LEADS) | m.str.contains(_STOPPING_ANY, literal=True)
    life = (pl.when(stopping).then(True).when(_starts_any(m, _STARTING_LEADS)).then(False)
            .forward_fill().fill_null(state.get("stopping", False)))
    rows = df.with_columns(m.str.contains(_EVENT_KW).alias("kw"), life.alias("stopping")).select(_REC_COLS)
    if rows.height:
        state["stopping"] = bool(rows["stopping"][-1])
    carry = state.pop("carry", None)
    frame = pl.concat([carry, rows], how="vertical_relaxed") if carry is not None else rows
    if not final and frame.height:
        last = frame["rec"][-1]
        state["carry"] = frame.filter(pl.col("rec") == last)
        frame = frame.filter(pl.col("rec") != last)
    return frame


def _events(frame: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    m = pl.col("msg")
    start = ~pl.col("cont")
    multi = start & pl.col("cont").shift(-1, fill_value=False)
    reqline = m.str.contains(r"^(?:Received request|Added request|Finished request|Aborted request|Request \S+ "
                             r"(?:aborted|failed|details))")
    pick = start & ~reqline & (pl.col("lvl").is_in(["ERROR", "CRITICAL"]).fill_null(False) | pl.col("tbs")
                               | pl.col("kw") | multi)
    ids = frame.filter(pick)["rec"]
    if ids.len() == 0:
        return frame.clear(), []
    sub = frame.filter(pl.col("rec").is_in(ids.implode()))
    g = sub.group_by("rec", maintain_order=True).agg(
        pl.col("line_no").first(),
        pl.col("line_no").n_unique().cast(pl.Int64).alias("line_count"),
        pl.col("seq").first(),
        m.filter(m.str.strip_chars() != "").first().alias("message"),  # the banner starts with a blank line
        m.str.join("\n").alias("detail"),
        pl.coalesce("lvl", "uv").first().alias("level"),
        pl.col("proc").drop_nulls().first().alias("process"),
        pl.col("pid").drop_nulls().first(),
        pl.col("ts").first(),
        pl.col("ts_inferred").first(),
        pl.col("stopping").first(),
        pl.col("strong").first().alias("raw"),  # a raw traceback, not a stray indented line
    )
    present = g.select(
        pl.any_horizontal(pl.col(col).str.contains(x, literal=True) for x in lits).any().alias(str(i))
        for i, (_, col, _, lits) in enumerate(_KIND_RULES)
    ).row(0)
    kind = pl.lit(None, dtype=pl.String)
    for (name, col, pat, _), run in reversed(list(zip(_KIND_RULES, present, strict=True))):
        if run:
            kind = pl.when(pl.col(col).str.contains(pat)).then(pl.lit(name)).otherwise(kind)
    kind = pl.when(kind.is_null() & (pl.col("level").is_in(["ERROR", "CRITICAL"]) | pl.col("raw")))\
        .then(pl.lit("error")).otherwise(kind)
    g = g.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
    # vLLM's graceful shutdown logs an EngineDeadError traceback that means nothing (lab README)
    g = g.with_columns(pl.when((pl.col("kind") == "engine_dead") & pl.col("stopping")).then(pl.lit("shutdown_error"))
                       .otherwise(pl.col("kind")).alias("kind"))
    return _event_fields(g, ctx, state)


def _event_fields(g: pl.DataFrame, ctx: ParseContext, state: dict) -> tuple[pl.DataFrame, list[str]]:
    d, msg, k = pl.col("detail"), pl.col("message"), pl.col("kind")
    notes = []

    def cap(pat: str) -> pl.Expr:
        return pl.when(k == "capacity").then(msg.str.extract(pat).str.replace_all(",", ""))

    def cfg(key: str) -> pl.Expr:  # non-default args dict, or the older argparse Namespace
        return pl.when(k == "config").then(
            pl.coalesce(msg.str.extract(rf"'{key}': ([\d.]+)"), msg.str.extract(rf"\b{key}=([\d.]+)")))

    # only the fields of the kinds present are extracted: each expression costs even on no rows
    kinds = set(g["kind"].unique().to_list())

    def only(needed: set[str], expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
        return expr if kinds & needed else pl.lit(None, dtype=dtype)

    pre, capa, conf = {"preemption"}, {"capacity"}, {"config"}
    g = g.with_columns(
        only(pre, pl.when(k == "preemption").then(
            msg.str.extract(r"total_num_cumulative_preemption=([0-9]+)").cast(pl.Int64)), pl.Int64)
        .alias("cumulative_preemptions"),
        only(pre, pl.when(k == "preemption").then(msg.str.extract(r"PreemptionMode\.([A-Za-z0-9_]+)")), pl.String)
        .alias("preemption_mode"),
        only(pre, pl.when(k == "preemption").then(msg.str.extract(r"Sequence group (\S+) is preempted")), pl.String)
        .alias("request_id"),
        only(capa, cap(r"blocks: ([\d,]+)").cast(pl.Int64), pl.Int64).alias("gpu_blocks"),
        only(capa, cap(r"# CPU blocks: ([\d,]+)").cast(pl.Int64), pl.Int64).alias("cpu_blocks"),
        only(capa, cap(r"KV cache size: ([\d,]+) tokens").cast(pl.Int64), pl.Int64).alias("kv_tokens_v1"),
        only(capa, cap(r"Maximum concurrency for ([\d,]+) tokens").cast(pl.Int64), pl.Int64)
        .alias("max_concurrency_tokens"),
        only(capa, cap(r"tokens per request: ([\d.]+)x").cast(pl.Float64), pl.Float64).alias("max_concurrency"),
        only(capa, pl.coalesce(cap(r"Available KV cache memory: ([\d.]+) ?GiB"), cap(r"kv_cache_size=([\d.]+) ?GiB"),
                               cap(r"reserved for KV Cache is ([\d.]+) ?GiB"),
                               cap(r"Auto set \(([\d.]+)/[\d.]+\) GiB")).cast(pl.Float64), pl.Float64)
        .alias("kv_memory_gib"),
        only(capa, pl.coalesce(cap(r"Loading model weights took ([\d.]+) GB"),
                               cap(r"Model loading took ([\d.]+) ?GiB")).cast(pl.Float64), pl.Float64)
        .alias("weights_gib"),
        only({"config", "kv_insufficient", "input_too_long"}, pl.coalesce(
            cfg("max_model_len"), pl.when(k.is_in(["kv_insufficient", "input_too_long"])).then(
                pl.coalesce(d.str.extract(r"max seq len \((\d+)\)"), d.str.extract(r"maximum context length is (\d+)"),
                            d.str.extract(r"maximum model length of (\d+)"), d.str.extract(r"max_model_len (\d+)")))
        ).cast(pl.Int64), pl.Int64).alias("max_model_len"),
        only(conf, cfg("max_num_seqs").cast(pl.Int64), pl.Int64).alias("max_num_seqs"),
        only(conf, cfg("gpu_memory_utilization").cast(pl.Float64), pl.Float64).alias("gpu_memory_utilization"),
        only(conf, cfg("block_size").cast(pl.Int64), pl.Int64).alias("cfg_block"),
        only(conf, cfg("num_gpu_blocks_override").cast(pl.Int64), pl.Int64).alias("cfg_blocks"),
        only({"version"}, pl.when(k == "version").then(d.str.extract(r"(?:server version |█\s+version )v?(\d[\w.+-]*)")),
             pl.String).alias("version"),
        pl.when(k == "server_start").then(msg.str.extract(r"Started server process \[(\d+)\]").cast(pl.Int64))
        .otherwise(pl.col("pid")).alias("pid") if "server_start" in kinds else pl.col("pid"),
    )
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
        pl.when(v0_blocks).then(pl.col("_bs").fill_null(16)).otherwise(pl.col("cfg_block")).alias("block_size"),
        pl.col("cfg_blocks").alias("num_gpu_blocks_override"),
    )
    # _PROMPT_ANY starts with 'prompt: ': without it there is nothing to scrub
    if not ctx.include_prompts and bool(g.select(d.str.contains("prompt: ", literal=True).any()
                                                 | msg.str.contains("prompt: ", literal=True).any()).item()):
        scrub = [pl.col(c).str.replace_all(_PROMPT_ANY, "prompt: <removed>") for c in ("message", "detail")]
        g = g.with_columns(scrub)
    g = g.with_columns(
        (base_id_expr("request_id") if "preemption" in kinds else pl.lit(None, dtype=pl.String))
        .alias("base_request_id"),
        pl.col("message").str.split("\n").list.first().str.slice(0, 500),  # JSON records hold their traceback
        pl.col("detail").str.slice(0, 4000),
        pl.lit(ctx.source).alias("source"),
        pl.lit(ctx.replica).alias("replica"),
    )
    return g, notes


# ---- entry points ------------------------------------------------------------------------------


def parse_chunk(lines: pl.DataFrame, ctx: ParseContext, state: dict) -> ChunkResult:
    return _run(lines, ctx, state, final=False)


def finish(ctx: ParseContext, state: dict) -> ChunkResult | None:
    if state.get("carry") is None or state["carry"].height == 0:
        return None
    return _run(None, ctx, state, final=True)


def _run(lines: pl.DataFrame | None, ctx: ParseContext, state: dict, final: bool) -> ChunkResult:
    notes: list[str] = []
    tables: dict[str, pl.DataFrame] = {}
    recognized = None
    flushed = None
    if lines is not None and state.get("src") not in (None, ctx.source):
        flushed = _flush_previous_file(ctx, state)  # the next file of a rotated set starts afresh
    state["src"], state["replica"] = ctx.source, ctx.replica
    if lines is not None:
        df = _parse(lines)
        seq0 = state.get("seq", 0)
        df = df.with_columns((pl.int_range(pl.len(), dtype=pl.Int64) + seq0).alias("seq"))
        state["seq"] = seq0 + df.height
        df, n = _times(df, ctx, state)
        notes += n
        df = _classify(df, state)
        state["kv_dev_before"] = state.get("kv_dev")
        stats, n = _stats(df, ctx, state)
        notes += n
        reqs = _requests(df, ctx)
        access = _access(df, ctx)
        tables["server_stats"] = stats
        tables["server_request_events"] = reqs
        produced = pl.concat([stats.select("seq"), reqs.select("seq")]) if stats.height or reqs.height else None
        frame = _records(df, state, final=False)
    else:
        df, access, produced = None, None, None
        frame = _records(_empty_rows(), state, final=True)
    events, n = _events(frame, ctx, state)
    notes += n
    ev = [e for e in (flushed, access, events) if e is not None and e.height]
    tables["server_events"] = pl.concat(ev, how="diagonal_relaxed").sort("seq") if ev else pl.DataFrame()
    if df is not None:
        ok = pl.col("ok")
        if produced is not None:
            ok = ok | pl.col("seq").is_in(produced["seq"].implode())
        recs = [e["rec"] for e in (events, _preview(ctx, state)) if e.height]
        if recs:
            ok = ok | pl.col("rec").is_in(pl.concat(recs).implode())
        per_part = df.select("line_no", ok.alias("ok"))
        if per_part.height != lines.height:  # glued parts: a line is recognised if any of its records is
            per_part = per_part.group_by("line_no", maintain_order=True).agg(pl.col("ok").any())
        recognized = per_part["ok"]
    return ChunkResult(tables=tables, recognized=recognized, assumptions=list(dict.fromkeys(notes)))


def _flush_previous_file(ctx: ParseContext, state: dict) -> pl.DataFrame | None:
    """Events of the record left open at the end of the previous file, in that file's name."""
    state.pop("prev", None)
    carry = state.pop("carry", None)
    if carry is None or carry.height == 0:
        return None
    return _events(carry, replace(ctx, source=state["src"], replica=state["replica"]), state)[0]


def _preview(ctx: ParseContext, state: dict) -> pl.DataFrame:
    """Events the still-open last record would give now: its lines are counted in this chunk."""
    carry = state.get("carry")
    if carry is None or carry.height == 0:
        return pl.DataFrame()
    return _events(carry, ctx, dict(state))[0]


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={c: t for c, t in _ROW_SCHEMA.items()})


_ROW_SCHEMA = {
    "line_no": pl.Int64, "part": pl.Int32, "seq": pl.Int64, "rec": pl.Int64, "cont": pl.Boolean, "msg": pl.String,
    "lvl": pl.String, "uv": pl.String, "proc": pl.String, "pid": pl.Int64, "ts": TS, "ts_inferred": pl.Boolean,
    "tbs": pl.Boolean, "strong": pl.Boolean, "other": pl.Boolean, "kw": pl.Boolean, "stopping": pl.Boolean,
}
