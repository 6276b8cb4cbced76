"""The event lexicon: the phrases serving engines write when a resource runs out or a process dies, whatever the
line's prefix. vLLM (V0 and V1), SGLang and llama.cpp phrase the same events in their own words, and a user's
wrapper (KServe, Dynamo, journald, a docker compose service, a debug paste) puts anything in front of them: a known
event is found by its words, never lost because its wrapper is new.

Used three ways: the engines' parsers classify their records with ``RULES`` (``vllm_server``, ``sglang_server``);
``Fallback`` reads, in any server log and in a file of no known format, the lines its parser left unrecognised and
makes an event of each one holding a phrase (``scan``); ``fields`` reads what a phrase says beyond its kind.

Each rule: (kind, column, regex, literals). The column is the record's first line ('message') or the whole record
('detail'); the regex is searched anywhere in it (never anchored: the prefix is unknown); one of the literals is in
every match (a chunk without any is not searched with the regex). First match wins, the cause before the death it
caused: an OOM that killed the engine is 'oom', with ``fatal`` true.

Phrases (sources: vllm-project/vllm ``vllm/v1/engine/core.py``, ``core_client.py``, ``async_llm.py``,
``vllm/executor/multiproc_worker_utils.py``, ``vllm/engine/multiprocessing/``, ``vllm/core/scheduler.py``;
sgl-project/sglang ``scheduler.py``, ``schedule_batch.py``; ggml's ``GGML_ABORT`` ``<file>:<line>: fatal error``;
docs/vllm-log-formats.md §3, §6; the real samples in tests/data/vllm-deaths, tests/data/sglang):

* preemption: V0 'Sequence group X is preempted by PreemptionMode.M mode', SGLang 'KV cache pool is full. Retract
  requests. #retracted_reqs: N' and its older 'Decode out of memory happened. #retracted_reqs: N', V1 with a KV
  connector 'Recovered from KV load failure: N request(s) rescheduled' (mode RESCHEDULE);
* oom: torch's 'CUDA out of memory' / 'OutOfMemoryError' in every wording, 'CUDA driver error: out of memory',
  V1's sampler warm-up OOM, SGLang's fatal 'Decode out of memory. Try to lower your batch size';
* kv_insufficient, input_too_long: the startup and request checks of vLLM;
* engine_timeout: V0 'Engine iteration timed out', V1 'RPC call to X timed out', a TimeoutError in the busy loop,
  SGLang's watchdog;
* engine_dead: V1 'EngineCore encountered a fatal error' (0.8.5+), 'EngineCore hit an exception' (0.7-0.8.4),
  'EngineDeadError' (AsyncEngineDeadError, MQEngineDeadError, EngineDeadError), V0 'Worker VllmWorkerProcess pid N
  died, exit code: -15' (the signal is said: ``signal``), 'got fatal signal from worker processes', SGLang
  'Scheduler hit an exception', 'Received sigquit from a child process', a ggml 'fatal error' (llama.cpp),
  multiprocessing's 'Process EngineCore_DP0:' before the traceback of an engine core whose run() raised (0.10 names
  it 'EngineCore_0', others 'EngineCore'; tests/data/unseen).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from logscope.schemas import RESCHEDULE, TS

from ._common import ascii_classes

# (kind, column, regex, literals): first match wins
_RULES: list[tuple[str, str, str, tuple[str, ...]]] = [
    (
        "preemption",
        "message",
        r"Sequence group \S+ is preempted|KV cache pool is full\. Retract requests"
        r"|Decode out of memory happened|Recovered from KV load failure: \d+ request",
        (
            "Sequence group",
            "Retract requests",
            "Decode out of memory happened",
            "Recovered from KV load failure",
        ),
    ),
    (
        "oom",
        "detail",
        r"OutOfMemoryError|CUDA out of memory|CUDA driver error: out of memory|CUDA error: out of memory"
        r"|out of memory occurred when warming up|Decode out of memory\. Try to lower",
        ("OutOfMemoryError", "out of memory"),
    ),
    (
        "kv_insufficient",
        "detail",
        r"No available memory for the cache blocks"
        r"|max seq len \(\d+\) is larger than the maximum number of tokens"
        r"|To serve at least one request with the models?'s? max seq len"
        r"|Not enough memory\. Please try to increase --mem-fraction-static",
        ("No available memory for the cache blocks", "max seq len", "Not enough memory. Please try"),
    ),
    (
        "input_too_long",
        "detail",
        r"maximum context length is \d+|Error in preprocessing prompt inputs"
        r"|decoder prompt \(length \d+\) is longer than|exceeds the max_model_len"
        r"|Input prompt \(\d+ tokens\).* is too long and exceeds",
        (
            "maximum context length is ",
            "Error in preprocessing prompt inputs",
            "decoder prompt (length ",
            "exceeds the max_model_len",
            " is too long and exceeds",
        ),
    ),
    (
        "engine_timeout",
        "detail",
        r"Engine iteration timed out|RPC call to \w+ timed out"
        r"|(?s:run_busy_loop.*TimeoutError|TimeoutError.*run_busy_loop)"
        r"|[Ww]atchdog timeout \(self\.watchdog_timeout",
        ("timed out", "TimeoutError", "atchdog timeout"),
    ),
    (
        "engine_dead",
        "detail",
        r"EngineDeadError|Engine core proc \S+ died unexpectedly"
        r"|EngineCore encountered a fatal error|EngineCore hit an exception|AsyncLLM output_handler failed"
        r"|already dead, terminating server process|EngineCore failed to start"
        r"|Engine background task failed|Engine loop has died|Engine process failed to start"
        r"|RPCServer process died before responding"
        r"|engine core exited unexpectedly|Worker proc \S+ died unexpectedly"
        r"|Worker \S+(?: pid \d+)? died, exit code:? -?\d+|[Gg]ot fatal signal from worker processes"
        r"|Engine core initialization failed|Engine core process \S+ died unexpectedly"
        r"|Scheduler hit an exception|Received sigquit from a child proces|SIGQUIT received"
        r"|\.(?:cu|cpp|c):\d+: fatal error|returned error: signal: |ExitError >> signal: "
        # multiprocessing's own words when a process' run() raised: the engine core process is exiting with it
        r"|Process EngineCore\w*:",
        (
            "EngineDeadError",
            "died unexpectedly",
            "EngineCore encountered a fatal error",
            "EngineCore hit an exception",
            "AsyncLLM output_handler failed",
            "already dead, terminating server process",
            "EngineCore failed to start",
            "Engine background task failed",
            "Engine loop has died",
            "Engine process failed to start",
            "RPCServer process died",
            "engine core exited unexpectedly",
            "died, exit code",
            "fatal signal from worker processes",
            "Engine core initialization failed",
            "hit an exception",
            "sigquit",
            "SIGQUIT",
            ": fatal error",
            "returned error: signal:",
            "ExitError >> signal:",
            "Process EngineCore",
        ),
    ),
]
RULES = [(kind, col, ascii_classes(rx), lits) for kind, col, rx, lits in _RULES]
DEATH_WORDS = ascii_classes(
    r"EngineDeadError|died|fatal error|fatal signal|hit an exception|Engine loop is not running"
    r"|Engine loop has died|terminating server process|sigquit|SIGQUIT"
)
EVENT_KINDS = ("preemption", "oom", "engine_timeout", "engine_dead")  # what ``fields`` reads
KEYWORDS = tuple(dict.fromkeys(lit for *_, lits in RULES for lit in lits))  # every rule's literals
_KEYWORDS_RX = "|".join(re.escape(k) for k in KEYWORDS)
_AFFECTED = ascii_classes(
    r"#retracted_reqs: (\d+)|KV load failure: (\d+) request|Aborted request\(s\) ([\w.,-]+)"
)
_EXIT = ascii_classes(r"exit ?code:? \(?(-?\d+)\)?|died with exit code (-?\d+)")
# what a process's exit code says of the signal that ended it: Python gives -N, a shell 128 + N
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL"}
SIGNALS |= {11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
_SIGNAL_OF = {-n: name for n, name in SIGNALS.items()} | {128 + n: name for n, name in SIGNALS.items()}
# Go's words for the signal that ended a child process (llama-swap: 'signal: aborted (core dumped)')
_GO_SIGNAL = r"signal: (aborted|killed|terminated|segmentation fault|interrupt|bus error|hangup)"
_GO_SIGNALS = {
    "aborted": "SIGABRT",
    "killed": "SIGKILL",
    "terminated": "SIGTERM",
    "segmentation fault": "SIGSEGV",
}
_GO_SIGNALS |= {"interrupt": "SIGINT", "bus error": "SIGBUS", "hangup": "SIGHUP"}


def present(frame: pl.DataFrame) -> list[bool]:
    """Which rules could match some row of ``frame`` (its 'message' and 'detail' columns): their literals."""
    if frame.height == 0:
        return [False] * len(RULES)
    return list(
        frame.select(
            pl.any_horizontal(pl.col(col).str.contains(x, literal=True) for x in lits).any().alias(str(i))
            for i, (_, col, _, lits) in enumerate(RULES)
        ).row(0)
    )


def kind_expr(run: list[bool], otherwise: pl.Expr | None = None) -> pl.Expr:
    """The first rule matching each row's 'message' / 'detail' (only the rules ``run`` says may match)."""
    kind = otherwise if otherwise is not None else pl.lit(None, dtype=pl.String)
    for (name, col, pat, _), go in reversed(list(zip(RULES, run, strict=True))):
        if go:
            kind = pl.when(pl.col(col).str.contains(pat)).then(pl.lit(name)).otherwise(kind)
    return kind


def fields(kind: pl.Expr, detail: pl.Expr) -> list[pl.Expr]:
    """What an event's words say beyond its kind: ``requests_affected`` (retracted, rescheduled or aborted
    requests), ``exit_code`` and the ``signal`` it names, ``fatal`` (the record says the engine died)."""
    aff = detail.str.extract_groups(_AFFECTED)
    ids = aff.struct.field("3")
    n_ids = pl.when(ids.is_not_null()).then(ids.str.strip_chars_end(".").str.count_matches(",") + 1)
    code = pl.coalesce(detail.str.extract(_EXIT, 1), detail.str.extract(_EXIT, 2)).cast(
        pl.Int64, strict=False
    )
    dead_kinds = ("engine_dead", "engine_timeout")
    mine = kind.is_in(
        EVENT_KINDS
    )  # other events say none of these (the same row whatever else its chunk holds)
    return [
        pl.when(mine)
        .then(
            pl.coalesce(
                aff.struct.field("1").cast(pl.Int64, strict=False),
                aff.struct.field("2").cast(pl.Int64, strict=False),
                n_ids.cast(pl.Int64),
            )
        )
        .alias("requests_affected"),
        pl.when(mine).then(code).alias("exit_code"),
        pl.when(mine)
        .then(
            pl.coalesce(
                detail.str.extract(_GO_SIGNAL).replace_strict(
                    _GO_SIGNALS, default=None, return_dtype=pl.String
                ),
                code.replace_strict(_SIGNAL_OF, default=None, return_dtype=pl.String),
            )
        )
        .alias("signal"),
        # an engine timeout (V0's iteration timeout, V1's RPC timeout, SGLang's watchdog) ends the engine loop
        pl.when(mine)
        .then((kind.is_in(dead_kinds) | (kind == "oom") & detail.str.contains(DEATH_WORDS)).fill_null(False))
        .alias("fatal"),
    ]


def preemption_mode(detail: pl.Expr) -> pl.Expr:
    """V0's PreemptionMode, RETRACT for SGLang's retractions, RESCHEDULE for V1's KV-load-failure recovery."""
    return (
        pl.when(detail.str.contains("Retract requests|Decode out of memory happened"))
        .then(pl.lit("RETRACT"))
        .when(detail.str.contains("KV load failure", literal=True))
        .then(pl.lit(RESCHEDULE))
        .otherwise(detail.str.extract(r"PreemptionMode\.([A-Za-z0-9_]+)"))
    )


# ---- lines no parser read ------------------------------------------------------------------------

# a time at the start of a line (after a '[' or a process prefix): ISO 8601, python logging, or vLLM's
# 'MM-DD HH:MM:SS' (no year: the context's)
_ISO = ascii_classes(
    r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)?(?:[\s\]|]|$)"
)
_MD = ascii_classes(r"(?:^|[\s\]])(\d\d-\d\d) (\d\d:\d\d:\d\d)(?:[\s\]]|$)")
_HEAD = 120  # a line's time is in its first characters


def scan(
    lines: pl.DataFrame, source: str, replica: str, year: int, tz: str, timed_only: bool = False
) -> tuple[pl.DataFrame, pl.Series]:
    """``server_events`` of the lines holding a phrase of the lexicon (one event a line, its time the one written
    at its start, else none; ``timed_only``: only lines with such a time), and which lines those were."""
    if lines.height == 0:
        return pl.DataFrame(), pl.Series("ok", [], dtype=pl.Boolean)
    line = pl.col("line").str.strip_chars_end("\r")
    hit = lines.select(line.str.contains(_KEYWORDS_RX).fill_null(False)).to_series()
    if not bool(hit.any()):
        return pl.DataFrame(), hit
    f = lines.filter(hit).with_columns(line.alias("message"), line.alias("detail"))
    f = f.with_columns(kind_expr(present(f)).alias("kind"), _line_time(year, tz).alias("ts"))
    keep = pl.col("kind").is_not_null() & (pl.col("ts").is_not_null() if timed_only else True)
    f = f.filter(keep)
    ok = lines.select(pl.col("line_no").is_in(f["line_no"].implode())).to_series()
    if f.height == 0:
        return pl.DataFrame(), ok
    k, d = pl.col("kind"), pl.col("detail")
    out = f.select(
        "ts",
        pl.lit(False).alias("ts_inferred"),
        pl.lit(source).alias("source"),
        pl.lit(replica).alias("replica"),
        k,
        pl.col("message").str.slice(0, 500),
        d.str.slice(0, 4000),
        "line_no",
        pl.lit(1, dtype=pl.Int64).alias("line_count"),
        pl.when(k == "preemption").then(preemption_mode(d)).alias("preemption_mode"),
        *fields(k, d),
    )
    return out, ok


def _line_time(year: int, tz: str) -> pl.Expr:
    """The time written at the start of a line: ISO 8601 (with its zone, else ``tz``), or vLLM's 'MM-DD HH:MM:SS'
    in ``year``; else null."""
    from ._common import local_to_utc

    head = pl.col("line").str.slice(0, _HEAD)
    iso, md = head.str.extract_groups(_ISO), head.str.extract_groups(_MD)
    frac = iso.struct.field("3").fill_null("0").str.pad_end(6, "0").str.slice(0, 6)
    naive = pl.concat_str(iso.struct.field("1"), pl.lit(" "), iso.struct.field("2"), pl.lit("."), frac)
    naive = naive.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    zone = iso.struct.field("4").str.replace(r"^([+-]\d\d)(\d\d)$", "$1:$2").str.replace("Z", "+00:00")
    zoned = pl.concat_str(naive.dt.strftime("%Y-%m-%dT%H:%M:%S%.f"), zone).str.to_datetime(
        "%Y-%m-%dT%H:%M:%S%.f%:z", strict=False, time_unit="us", time_zone="UTC"
    )
    vllm = pl.concat_str(pl.lit(f"{year}-"), md.struct.field("1"), pl.lit(" "), md.struct.field("2"))
    vllm = vllm.str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False, time_unit="us")
    return pl.coalesce(zoned, local_to_utc(naive, tz), local_to_utc(vllm, tz)).cast(TS)


# files that describe logs rather than hold them (a README beside the logs quotes their errors)
_NOT_LOGS = {
    ".md",
    ".rst",
    ".html",
    ".htm",
    ".json",
    ".yaml",
    ".yml",
    ".toml",
    ".py",
    ".sh",
    ".cfg",
    ".ini",
    ".conf",
}


def may_hold_log(path: Path) -> bool:
    """A file of no known format is read with the lexicon unless its name says it is a document or a config."""
    suffixes = [s.lower() for s in path.suffixes if s.lower() not in (".gz", ".zst", ".bz2", ".xz")]
    return not (suffixes and suffixes[-1] in _NOT_LOGS)


_TAIL_HEADER = r"^==> .+ <==\s*$"


class Fallback:
    """A format module (parsers/base.py) that reads, after ``inner`` (None: a file of no known format), the lines
    it left unrecognised with the lexicon. Nothing is carried between chunks: the inner format's own attributes
    (independent chunks, segment counters, container time) hold as they are."""

    def __init__(self, inner, events: bool = True, name: str = "unknown") -> None:
        self.inner = inner
        self.events = events  # the lexicon's events: in a server's log or a log of no known format only
        # in a file of no known format only a line that starts with a time is taken for a log's line
        self.timed_only = inner is None
        self.NAME = inner.NAME if inner is not None else name
        self.KIND = inner.KIND if inner is not None else "other"
        self.MODE = "lines"

    def __getattr__(self, name: str):
        if self.inner is None:
            raise AttributeError(name)
        return getattr(self.inner, name)

    def parse_chunk(self, lines: pl.DataFrame, ctx, state: dict):
        res = self._inner(lines, ctx, state)
        ok = (
            res.recognized.fill_null(False)
            if res.recognized is not None
            else pl.Series("ok", [False] * lines.height, dtype=pl.Boolean)
        )
        # the header 'tail -F' writes before each file's lines when it follows several ('==> path <==')
        tail = lines["line"].str.contains(_TAIL_HEADER)
        if bool((tail & ~ok).any()):
            ok = ok | tail
            res.recognized = ok
            res.assumptions = [*res.assumptions, "'==> file <==' headers of tail -F read as such (no rows)"]
        if not self.events:
            return res
        return self._events(lines, ctx, res, ok)

    def _inner(self, lines: pl.DataFrame, ctx, state: dict):
        from .base import ChunkResult

        if self.inner is None:
            res = ChunkResult(recognized=pl.Series("ok", [False] * lines.height, dtype=pl.Boolean))
        else:
            res = self.inner.parse_chunk(lines, ctx, state)
        return res

    def _events(self, lines: pl.DataFrame, ctx, res, ok: pl.Series):
        from .base import ChunkResult

        rest = lines.filter(~ok)
        if rest.height == 0:
            return res
        replica = ctx.replica or Path(ctx.source).name.split(".")[0]
        events, hit = scan(rest, ctx.source, replica, ctx.year, ctx.tz, self.timed_only)
        if events.height == 0:
            return res
        ok = ok | lines["line_no"].is_in(rest.filter(hit)["line_no"].implode())
        tables = dict(res.tables)
        old = tables.get("server_events")
        tables["server_events"] = (
            pl.concat([old, events], how="diagonal_relaxed") if old is not None and old.height else events
        )
        note = (
            "lines its parser did not read that hold an engine event's words (parsers/_lexicon.py) were read as "
            "events, each with the time written at its start (else none)"
        )
        return ChunkResult(
            tables=tables,
            recognized=ok,
            lines_parsed=res.lines_parsed,
            assumptions=[*res.assumptions, note],
            messages=res.messages,
            bad_times=res.bad_times,
            bad_time_example=res.bad_time_example,
            bad_values=res.bad_values,
            bad_value_example=res.bad_value_example,
            repairs=res.repairs,
        )
