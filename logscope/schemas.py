"""Declared schemas of every Parquet table logscope writes.

These are the contract between the parsers, the correlation and diagnosis stages, and
users reading the Parquet files from a notebook. Every table is written with exactly these
columns in this order (``conform`` adds missing columns as nulls and casts), so a table is
never missing a column just because one input lacked a field. Optional fields are null
when absent, never 0. Timestamps are UTC, microsecond precision.

docs/tables.md is generated from the ``DOC`` strings here (``python -m logscope.schemas``).
"""

from __future__ import annotations

import polars as pl

TS = pl.Datetime("us", "UTC")
# server_events.preemption_mode of V1's 'Recovered from KV load failure' (parsers/_lexicon.preemption_mode): a
# recomputation after a KV connector failed to load, which no preemption count may take
RESCHEDULE = "RESCHEDULE"
S, I, F, B = pl.String, pl.Int64, pl.Float64, pl.Boolean  # noqa: E741 - short names keep the tables readable

# a column's dtype: a class (pl.String) or an instance (pl.Datetime("us", "UTC"), pl.List(pl.String)), and its text
Column = tuple[pl.DataType | type[pl.DataType], str]
# Each table: ordered {column: (dtype, description)}
TABLES: dict[str, dict[str, Column]] = {
    "files": {
        "path": (S, "input file path, relative to the analysed folder"),
        "stream": (S, "logical stream (rotated/compressed sets of one server share one stream)"),
        "format": (
            S,
            "parser name chosen by detection, or 'unknown' / 'unreadable' / 'empty' / 'binary' / 'skipped' (a link out of the input folder, not read)",
        ),
        "kind": (S, "server | gateway | client | traces | metrics | config | platform | other"),
        "confidence": (F, "detection score 0..1 of the chosen parser"),
        "replica": (S, "replica / instance name used for the rows of this file"),
        "lines_total": (I, "physical lines in the (decompressed) file"),
        "lines_parsed": (
            I,
            "lines recognised by the parser (including continuation lines of multi-line records)",
        ),
        "lines_unrecognized": (I, "lines not recognised; lines_parsed + lines_unrecognized = lines_total"),
        "bytes": (I, "bytes on disk"),
        "first_ts": (TS, "earliest timestamp found in the file (UTC)"),
        "last_ts": (TS, "latest timestamp found in the file (UTC)"),
        "assumptions": (pl.List(S), "assumptions made for this file (zone, year, anchoring, ...)"),
        "messages": (pl.List(S), "problems met reading it (truncated gzip, invalid UTF-8, ...)"),
    },
    "unrecognized": {
        "path": (S, "input file"),
        "shape": (S, "the line with digits/hex/ids masked: lines of one shape group together"),
        "count": (I, "number of unrecognised lines of this shape in the file"),
        "first_line_no": (I, "1-based line number of the first example"),
        "examples": (pl.List(S), "up to 3 example lines, each cut to 300 characters"),
    },
    "server_stats": {
        "ts": (TS, "time of the stats line (UTC), or of the metrics interval end"),
        "source": (S, "input file"),
        "replica": (S, "server replica"),
        "origin": (S, "'log' (periodic stats line) or 'prometheus' (derived from server_metrics)"),
        "era": (
            S,
            "'v0', 'v1', 'v0-pre0.1' for vLLM log lines, 'sglang' for SGLang's; 'prometheus' for derived rows",
        ),
        "engine": (
            S,
            "engine index ('000'), 'aggregated' for DP aggregated lines, null when absent; SGLang: the "
            "scheduler's rank prefix ('TP0', 'DP1 TP0')",
        ),
        "engine_kind": (
            S,
            "serving engine that wrote the line: 'vllm' or 'sglang' (null for metrics-derived rows)",
        ),
        "level": (S, "log level of the stats line (DEBUG when vLLM demoted an idle interval)"),
        "running": (I, "running requests"),
        "waiting": (I, "waiting requests (V0 'Pending')"),
        "swapped": (I, "swapped requests (V0 only)"),
        "deferred": (I, "deferred requests (V1 0.20+), null when not printed"),
        "preemptions": (
            I,
            "preemptions during the interval (V1 'Preemptions: N' or counter delta), null when not known",
        ),
        "kv_usage": (F, "KV-cache usage 0..1 of the device holding the KV cache"),
        "kv_device": (S, "device named in the KV field (GPU, CPU, XPU, ...)"),
        "gpu_kv_usage": (F, "V0 'GPU KV cache usage' 0..1"),
        "cpu_kv_usage": (F, "V0 'CPU KV cache usage' 0..1"),
        "prompt_tps": (F, "average prompt throughput tokens/s over the interval"),
        "gen_tps": (F, "average generation throughput tokens/s over the interval"),
        "prefix_hit": (F, "prefix-cache hit rate 0..1, null when not printed"),
        "interval_s": (
            F,
            "seconds since the previous row of the same replica, origin and engine (gaps stay visible)",
        ),
        "line_no": (I, "1-based line number in the source (null for derived rows)"),
        "seq": (I, "order of the row within its source, keeps lines that share a second in file order"),
    },
    "server_spec_decode": {
        "ts": (
            TS,
            "time of the speculative-decoding metrics line (UTC); null when the line was pasted without its "
            "header",
        ),
        "source": (S, "input file"),
        "replica": (S, "server replica"),
        "era": (
            S,
            "'v0' ('Speculative metrics:' with a System efficiency, vllm/engine/metrics.py) or 'v1' "
            "('SpecDecoding metrics:', or V1 0.8.0-0.8.2's 'Speculative metrics:' without one)",
        ),
        "engine": (
            S,
            "engine index of the stats line logged just before it by the same process in the same second "
            "('000', '001' with data parallelism); null for V0 or when none precedes it",
        ),
        "engine_kind": (S, "serving engine that wrote the line: 'vllm'"),
        "level": (S, "log level of the line (DEBUG when vLLM demoted an idle interval)"),
        "draft_acceptance_rate": (
            F,
            "accepted / drafted tokens 0..1 ('Draft acceptance rate' 0.642 or 88.8%, "
            "'Avg Draft acceptance rate' 9.1%); null when vLLM wrote nan",
        ),
        "mean_acceptance_length": (F, "tokens emitted per verification step, the bonus token included (V1)"),
        "accepted_tps": (F, "accepted draft tokens per second over the interval (V1 'Accepted throughput')"),
        "drafted_tps": (F, "drafted tokens per second over the interval (V1 'Drafted throughput')"),
        "accepted_tokens": (I, "accepted draft tokens (V1: in the interval; V0: since start)"),
        "drafted_tokens": (I, "drafted tokens (V1: in the interval; V0: since start)"),
        "emitted_tokens": (I, "V0 'Number of emitted tokens'"),
        "num_spec_tokens": (
            I,
            "speculative tokens per step (V0 'Number of speculative tokens'; V1: the number of "
            "per-position rates)",
        ),
        "system_efficiency": (F, "V0 'System efficiency' 0..1; null when vLLM wrote nan"),
        "per_position_acceptance": (
            pl.List(F),
            "V1 'Per-position acceptance rate': acceptance 0..1 of draft position 1, 2, ...",
        ),
        "line_no": (I, "1-based line number in the source"),
        "seq": (I, "order of the row within its source"),
    },
    "server_events": {
        "ts": (TS, "time (UTC); for lines without a timestamp, the previous timestamped line's time"),
        "ts_inferred": (B, "true when ts was taken from a neighbouring line (uvicorn access lines)"),
        "source": (S, "input file"),
        "replica": (S, "server replica"),
        "kind": (
            S,
            "preemption | oom | oom_batch (a batch's OOM the server survives: TGI) | kv_insufficient | engine_dead | engine_timeout | input_too_long | error | "
            "http_access | server_start (uvicorn 'Started server process') | server_listen ('Starting vLLM server on') | "
            "server_ready | server_stop | shutdown_error (engine-death traceback after a shutdown began: harmless) | "
            "version | config | engine_config ('Initializing a V1 LLM engine ... with config:') | capacity | "
            "host (the first NCCL line naming the host it ran on, 'host:pid:tid [dev] NCCL INFO': a pod's name)",
        ),
        "level": (S, "log level"),
        "process": (S, "process prefix name (APIServer, EngineCore_DP0, Worker_TP0, VllmWorkerProcess, ...)"),
        "pid": (I, "process id from the prefix"),
        "request_id": (S, "request id named by the event"),
        "base_request_id": (S, "id as sent in X-Request-Id (prefixes and engine suffixes stripped)"),
        "message": (S, "first line of the record (prompt text removed), cut to 500 characters"),
        "detail": (S, "the whole multi-line record (traceback), cut to 4000 characters"),
        "line_no": (I, "1-based first line of the record"),
        "line_count": (I, "physical lines making up the record"),
        "seq": (I, "order within the source"),
        "cumulative_preemptions": (I, "V0 total_num_cumulative_preemption=N"),
        "preemption_mode": (
            S,
            "RECOMPUTE or SWAP (vLLM V0); RETRACT for an SGLang retraction ('KV cache pool is full'); RESCHEDULE for "
            "V1's recovery from a KV connector's failed load (no preemption: 'Recovered from KV load failure')",
        ),
        "kv_tokens": (I, "KV cache size in tokens (V1) or blocks x block size (V0)"),
        "gpu_blocks": (I, "# GPU/cuda/cpu blocks"),
        "num_gpu_blocks_override": (I, "--num-gpu-blocks-override from the non-default args"),
        "cpu_blocks": (I, "# CPU (swap) blocks"),
        "block_size": (I, "KV block size in tokens"),
        "max_concurrency": (F, "'Maximum concurrency for N tokens per request: X' -> X"),
        "max_concurrency_tokens": (I, "the N of that line"),
        "max_model_len": (I, "max model length (non-default args, errors)"),
        "max_num_seqs": (I, "max_num_seqs from the non-default args"),
        "gpu_memory_utilization": (F, "from the non-default args"),
        "kv_memory_gib": (F, "available KV cache memory GiB"),
        "weights_gib": (F, "model weights memory GiB"),
        "version": (S, "vLLM version from the banner"),
        "http_method": (S, "uvicorn access line method"),
        "http_path": (S, "uvicorn access line path"),
        "http_status": (I, "uvicorn access line status"),
        "client_addr": (S, "uvicorn access line client address"),
        "engine_kind": (S, "serving engine that wrote the line: 'vllm', 'sglang' or 'tgi'"),
        "requests_affected": (
            I,
            "requests the event names by number: SGLang '#retracted_reqs: N', vLLM 'Recovered from KV load "
            "failure: N request(s) rescheduled'",
        ),
        "exit_code": (I, "a dead process's exit code ('died, exit code: -15')"),
        "signal": (
            S,
            "the signal that exit code says ended the process: SIGTERM (-15), SIGKILL (-9, 137), ...",
        ),
        "fatal": (
            B,
            "the record says the engine died: every engine_dead and engine_timeout, and an oom whose record names "
            "the death (MQEngineDeadError around an OOM); false for one the server survived",
        ),
    },
    "server_request_events": {
        "ts": (TS, "time (UTC)"),
        "source": (S, "input file"),
        "replica": (S, "server replica"),
        "event": (
            S,
            "received | added | finished | aborted | preempted | failed; TGI: each Success line's finished (its "
            "stamp), received (less total_time) and added (received plus validation_time: queued), all on the "
            "router's clock",
        ),
        "request_id": (S, "raw request id as logged; TGI logs none: '<route>@<the stamp of its end>'"),
        "base_request_id": (S, "id as sent in X-Request-Id"),
        "max_tokens": (I, "SamplingParams max_tokens (received)"),
        "prompt_tokens": (I, "len(prompt_token_ids) when logged"),
        "n": (I, "SamplingParams n"),
        "temperature": (F, "SamplingParams temperature"),
        "ignore_eos": (B, "SamplingParams ignore_eos"),
        "prompt": (S, "prompt text, only with --include-prompts"),
        "line_no": (I, "1-based line number"),
        "seq": (I, "order within the source"),
        "engine_kind": (S, "serving engine that wrote the line: 'vllm', 'sglang' or 'tgi'"),
    },
    "server_requests": {
        "request_id": (S, "request id as first logged (Received, else Added)"),
        "base_request_id": (
            S,
            "id as sent in X-Request-Id: chatcmpl-/cmpl-/chat- prefix, -<index> and -<8hex> suffix stripped",
        ),
        "source": (S, "input file"),
        "replica": (S, "server replica"),
        "received_ts": (TS, "Received request"),
        "added_ts": (TS, "Added request"),
        "finished_ts": (TS, "Finished request (V0 AsyncLLMEngine only)"),
        "aborted_ts": (TS, "Aborted request(s)"),
        "failed_ts": (TS, "Request ... failed: the server failed it (V1: 'failed (engine dead)')"),
        "max_tokens": (I, "requested max_tokens"),
        "prompt_tokens": (I, "prompt length in tokens when logged"),
        "preempted": (B, "named by a V0 preemption warning (V1 never names requests: null)"),
        "endpoint": (
            S,
            "completion | chat | tokenize | embedding | other, from the id prefix (vLLM) or the route (TGI); "
            "null for SGLang, whose ids carry none",
        ),
        "prompt": (S, "prompt text, only with --include-prompts"),
        "engine_kind": (S, "serving engine that logged the request: 'vllm', 'sglang' or 'tgi'"),
    },
    "server_metrics": {
        "ts": (TS, "sample time (UTC)"),
        "source": (S, "input file"),
        "replica": (S, "instance label, else the file's replica"),
        "name": (S, "metric name, vllm: prefix kept (old names kept as logged)"),
        "labels": (S, "other labels, sorted, as k=v joined by ','"),
        "value": (F, "sample value"),
    },
    "gateway_attempts": {
        "ts_start": (
            TS,
            "when this attempt started (attempt 1: when the gateway received the request; later attempts approximated from the earlier attempts' upstream times)",
        ),
        "ts_end": (TS, "when the gateway logged it (UTC)"),
        "source": (S, "input file"),
        "gateway": (
            S,
            "nginx | envoy | haproxy | traefik | aws_alb | litellm | vllm_router | llama-swap | generic (access records of a "
            "proxy named by no field, read by access_generic)",
        ),
        "request_id": (S, "the gateway's request id (forwarded upstream as X-Request-Id when configured)"),
        "client_request_id": (S, "X-Request-Id the client sent, when logged"),
        "attempt": (I, "1-based upstream attempt number"),
        "attempts_total": (I, "upstream attempts of this gateway request"),
        "upstream": (S, "upstream address (or group name when none could be selected)"),
        "status": (I, "status the gateway returned downstream (same on every attempt row)"),
        "upstream_status": (I, "status of this attempt from the upstream, null when none"),
        "duration_s": (F, "this attempt's upstream response time"),
        "request_time_s": (F, "whole gateway request time"),
        "connect_s": (F, "upstream connect time of this attempt"),
        "header_s": (F, "upstream header time (≈ time to first byte) of this attempt"),
        "flags": (
            S,
            "response flags (Envoy UT/URX/DC..., HAProxy termination state, nginx 'no_live_upstreams' / 'internal_redirect'); a proxy's lines apart from its access lines: LiteLLM 'attempt', 'attempt,exception', 'fallback', 'retry', 'failed', 'failed,stream' (a streamed answer that failed after its headers, so after its access line's 200), vLLM router 'routed' (no downstream status: not requests of their own, schemas.gateway_apart)",
        ),
        "error": (S, "error text for this attempt, when known"),
        "method": (S, "HTTP method"),
        "path": (S, "request path"),
        "bytes_sent": (I, "bytes sent to the client"),
        "client_retry": (I, "client retry counter header (x-stainless-retry-count), null when absent"),
        "user_agent": (S, "client user agent"),
        "trace_id": (
            S,
            "trace id the access record carries (trace_id, x-b3-traceid, traceparent), when logged",
        ),
        "port": (I, "gateway listener port"),
        "line_no": (I, "1-based line number"),
        "traceparent": (S, "the W3C traceparent the caller sent ($http_traceparent), when logged"),
    },
    "gateway_errors": {
        "ts": (TS, "time (UTC)"),
        "source": (S, "input file"),
        "gateway": (S, "nginx | vllm_router | ..."),
        "level": (S, "error log level"),
        "kind": (
            S,
            "upstream_timeout | connect_failed | no_live_upstreams | upstream_closed | upstream_disabled | upstream_reset | client_closed | keepalive_closed | broken_pipe | limit_req_delayed | limit_req_rejected | shutdown (the gateway stopping: nginx SIGQUIT or SIGTERM, uvicorn Shutting down) | start (uvicorn Started server process) | notice | other",
        ),
        "conn_id": (I, "nginx *N connection number"),
        "client": (S, "client address"),
        "request": (S, "request line"),
        "upstream": (S, "upstream URL"),
        "host": (S, "Host header"),
        "message": (S, "the message, cut to 500 characters"),
        "logger": (
            S,
            "logger that wrote it when the format names one (vllm_router: vllm_router.httpx_client, ...; uvicorn)",
        ),
        "line_no": (I, "1-based line number"),
    },
    "client_attempts": {
        "ts_start": (TS, "attempt sent (UTC)"),
        "ts_end": (TS, "attempt ended: response, error or timeout (UTC)"),
        "source": (S, "input file"),
        "client": (S, "client name"),
        "logical_request_id": (S, "the logical request this attempt belongs to"),
        "request_id": (S, "X-Request-Id sent with this attempt, when known"),
        "attempt": (I, "1-based attempt number within the logical request"),
        "status": (I, "HTTP status, null when none"),
        "error": (S, "error kind (APITimeoutError, ReadTimeout, ConnectError, ...)"),
        "timed_out": (B, "attempt ended by a client timeout"),
        "ttft_s": (F, "time to first token"),
        "e2e_s": (F, "end-to-end latency of the attempt"),
        "prompt_tokens": (I, "prompt tokens"),
        "max_tokens": (I, "requested max_tokens"),
        "output_tokens": (I, "generated tokens"),
        "concurrency": (I, "client concurrency level when known"),
        "phase": (S, "load phase / benchmark step label when known"),
        "thread": (
            S,
            "thread name the attempt was logged from (openai-python logs), to audit inferred groupings",
        ),
        "retry_delay_s": (
            F,
            "backoff the client announced before this retry ('Retrying request in X seconds')",
        ),
        "grouping": (
            S,
            "'exact' (ids in the log) or 'inferred' (rebuilt from thread names and retry counters)",
        ),
        "grouping_confidence": (F, "0..1 confidence of the attempt->logical grouping"),
        "url": (S, "URL or path"),
        "line_no": (I, "1-based line number of the attempt's first line"),
        "trace_id": (
            S,
            "trace id of the attempt when the client traced it (the traced lab client's records)",
        ),
        "span_id": (
            S,
            "span id of the attempt's HTTP CLIENT span (the parent id in the traceparent it sent)",
        ),
    },
    "client_requests": {
        "logical_request_id": (S, "logical request id"),
        "source": (S, "input file"),
        "client": (S, "client name"),
        "ts_start": (TS, "first send (UTC)"),
        "ts_end": (TS, "final outcome (UTC)"),
        "status": (I, "final HTTP status, null when none"),
        "error": (S, "final error"),
        "timed_out": (B, "gave up on a timeout"),
        "attempts": (I, "attempts made"),
        "ttft_s": (F, "time to first token"),
        "e2e_s": (F, "latency as the caller saw it"),
        "prompt_tokens": (I, "prompt tokens"),
        "max_tokens": (I, "requested max_tokens"),
        "output_tokens": (I, "generated tokens"),
        "timeout_s": (F, "client timeout setting"),
        "max_retries": (I, "client retry setting"),
        "stream": (B, "streaming request"),
        "concurrency": (I, "client concurrency level when known"),
        "phase": (S, "load phase / benchmark step label when known"),
        "unfinished": (
            B,
            "in flight when its client's log ended (sent, no outcome logged: a killed client); null when the "
            "format cannot tell",
        ),
    },
    "client_phases": {
        "source": (S, "input file"),
        "client": (S, "client name"),
        "phase": (S, "phase or step label"),
        "ts_start": (TS, "phase start (UTC)"),
        "ts_end": (TS, "phase end (UTC)"),
        "mode": (S, "concurrency | rate"),
        "value": (F, "concurrency level or request rate"),
        "anchoring": (S, "how wall-clock times were obtained (exact, anchored: ..., unverified)"),
    },
    # ---- traces (parsers/_spans.py: OTLP JSON, Jaeger, Zipkin, ConsoleSpanExporter, Collector debug) ----
    "spans": {
        "trace_id": (
            S,
            "trace id, 32 lowercase hex (a 64-bit Zipkin/Jaeger id padded with zeros, as traceparent has it)",
        ),
        "span_id": (S, "span id, 16 lowercase hex"),
        "parent_span_id": (S, "parent span id; null for a root span (or an all-zero parent)"),
        "name": (S, "span name (vLLM 'llm_request', SGLang 'Req <rid>', httpx 'POST', ...)"),
        "service": (S, "service.name of the resource (Zipkin localEndpoint, Jaeger process)"),
        "kind": (S, "client | server | internal | producer | consumer | unspecified"),
        "layer": (
            S,
            "client | gateway | engine | other: engine when it carries vLLM's/SGLang's request attributes or is "
            "an engine service's; gateway by its service (nginx, envoy, litellm, ...); client for CLIENT spans "
            "and their caller's request span",
        ),
        "role": (
            S,
            "request (a client's logical request, a gateway's server span, the engine's request span) | attempt "
            "(an HTTP CLIENT span: one try) | phase (an engine span under its request span: queue, prefill, "
            "decode) | startup (engine spans in traces holding no request: model loading, the cold start) | other",
        ),
        "start": (TS, "span start (UTC)"),
        "end": (TS, "span end (UTC)"),
        "duration_s": (F, "end - start"),
        "status": (S, "ok | error | unset"),
        "status_message": (S, "status description when written"),
        "request_id": (
            S,
            "the request it names: gen_ai.request.id (else gen_ai.response.id; SGLang: the rid of 'Req <rid>')",
        ),
        "base_request_id": (
            S,
            "request_id as sent in X-Request-Id (cmpl-/chatcmpl- prefix and -0-<8hex> suffix stripped)",
        ),
        "http_method": (S, "http.request.method (http.method)"),
        "http_status": (I, "http.response.status_code (http.status_code)"),
        "resend_count": (I, "http.request.resend_count: the retry this attempt is (null on a first try)"),
        "url": (S, "url.full (http.url, http.target, url.path)"),
        "server_address": (S, "server.address (net.peer.name, http.host)"),
        "model": (S, "gen_ai.response.model (gen_ai.request.model, OpenInference llm.model_name)"),
        "max_tokens": (I, "gen_ai.request.max_tokens"),
        "prompt_tokens": (
            I,
            "gen_ai.usage.prompt_tokens (input_tokens; OpenInference llm.token_count.prompt)",
        ),
        "output_tokens": (
            I,
            "gen_ai.usage.completion_tokens (output_tokens; OpenInference llm.token_count.completion)",
        ),
        "queue_s": (F, "gen_ai.latency.time_in_queue: seconds waiting in the engine's queue (clock engine)"),
        "ttft_s": (
            F,
            "gen_ai.latency.time_to_first_token (else the first-token event's time - start; clock engine)",
        ),
        "e2e_s": (F, "gen_ai.latency.e2e: seconds from arrival to the last token (clock engine)"),
        "prefill_s": (F, "gen_ai.latency.time_in_model_prefill"),
        "decode_s": (F, "gen_ai.latency.time_in_model_decode"),
        "inference_s": (F, "gen_ai.latency.time_in_model_inference"),
        "openinference_kind": (S, "openinference.span.kind (LLM, CHAIN, ...)"),
        "first_token_ts": (TS, "time of a first-token event on the span"),
        "events": (S, "the span's event names, comma-separated"),
        "attributes": (
            pl.List(pl.Struct({"key": S, "value": S, "type": S})),
            "the other attributes: key, value as text (lists and maps as JSON), and the value's type as written "
            "(string | int | double | bool | bytes | array | kvlist; null when the format does not say)",
        ),
        "scope": (S, "instrumentation scope name"),
        "source": (S, "input file"),
        "replica": (S, "the file's replica"),
        "line_no": (I, "1-based line of the span's record (of the export holding it, for JSON lines)"),
    },
    # ---- the platform around the engine (parsers/kernel_log.py, parsers/k8s_kubectl.py) ----
    "platform_events": {
        "ts": (
            TS,
            "when it happened (UTC): the line's own time, or an age anchored to a time in the folder "
            "(ts_basis); null when only a relative age or the seconds since boot are known",
        ),
        "ts_basis": (
            S,
            "how ts was had: 'written' (the line's time), 'boot-anchored' (seconds since boot + the boot time "
            "its syslog lines give), 'age-anchored: <anchor>' (a kubectl age before a capture time), "
            "'relative' (an age or uptime only: ts null)",
        ),
        "age_s": (
            F,
            "kubectl's relative age of the event ('5m', '3m21s'), in seconds, when that is what was written",
        ),
        "uptime_s": (F, "the kernel's seconds since boot ('[12345.678901]'), when written"),
        "source": (S, "input file"),
        "replica": (
            S,
            "the file's replica (host or pod named by its folder); the join to servers is made later",
        ),
        "layer": (S, "kernel | kubernetes"),
        "kind": (
            S,
            "kernel: oom_kill (a process killed), oom_constraint ('oom-kill:constraint=...'), oom_invoked, "
            "oom_select (an old kernel's 'Kill process ... or sacrifice child'), memcg_usage ('memory: usage "
            "..., limit ...'), oom_reaped, xid (NVRM: Xid), gpu_lost (fallen off the bus); kubernetes: event "
            "(an Events row), terminated (a container's State / Last State: Terminated)",
        ),
        "reason": (
            S,
            "Kubernetes reason (OOMKilled, Killing, Unhealthy, BackOff, Evicted, FailedScheduling, Preempting, "
            "Pulled, Started, Error, ...); kernel: the kind",
        ),
        "event_type": (S, "Normal | Warning (Kubernetes events)"),
        "object": (S, "the object an event is about ('pod/vllm-0', as kubectl names it)"),
        "namespace": (S, "Kubernetes namespace, when written"),
        "pod": (S, "pod name, when written (the event's object, the describe's Name)"),
        "container": (S, "container name (describe's container section, an event's message)"),
        "host": (S, "kernel: the syslog host; Kubernetes: the node"),
        "pid": (I, "kernel: the process id killed / faulting"),
        "process": (S, "kernel: the process name ('python3', 'vllm', 'pt_main_thread')"),
        "count": (I, "Kubernetes: times the event was seen ('x44'); null when once"),
        "first_age_s": (F, "'(x44 over 2d1h)': seconds since it was first seen"),
        "first_ts": (TS, "first seen (JSON/YAML firstTimestamp, or anchored 'over' age)"),
        "exit_code": (I, "a terminated container's Exit Code (137: SIGKILL, 143: SIGTERM)"),
        "started": (TS, "a terminated container's Started"),
        "finished": (TS, "a terminated container's Finished"),
        "probe": (S, "liveness | readiness | startup (an Unhealthy event or a Killing for a failed probe)"),
        "probe_result": (
            S,
            "what the probe got: 'HTTP <status>', 'timeout', 'connection refused', or the message's cause",
        ),
        "memory_limit_bytes": (I, "kernel: the memory cgroup limit ('memory: usage ..., limit NkB')"),
        "memory_usage_bytes": (I, "kernel: the memory cgroup usage at the kill"),
        "rss_bytes": (I, "kernel: anon + file + shmem RSS of the killed process"),
        "constraint": (
            S,
            "kernel: CONSTRAINT_MEMCG (a cgroup limit) | CONSTRAINT_NONE (the host ran out) | ...",
        ),
        "memcg": (S, "kernel: the memory cgroup that hit its limit (oom_memcg, else task_memcg)"),
        "xid": (I, "NVIDIA Xid error code"),
        "gpu": (S, "the GPU named (PCI address)"),
        "message": (S, "the line's message, cut to 500 characters"),
        "line_no": (I, "1-based line number"),
    },
    "platform_pods": {
        "source": (S, "input file"),
        "pod": (S, "pod name"),
        "namespace": (S, "namespace, when written"),
        "container": (S, "container name (describe); null for a get-pods row"),
        "status": (
            S,
            "get pods STATUS (Running, OOMKilled, CrashLoopBackOff, Error, ...), or describe's Status",
        ),
        "ready": (S, "READY ('0/1')"),
        "restarts": (I, "RESTARTS, or describe's Restart Count"),
        "last_restart_age_s": (F, "'6 (118s ago)': seconds since the last restart"),
        "age_s": (F, "AGE in seconds"),
        "node": (S, "the node (describe's Node, -o wide)"),
        "state": (S, "describe: the container's State (Running, Waiting, Terminated)"),
        "state_reason": (S, "describe: the State's Reason (CrashLoopBackOff, OOMKilled, ...)"),
        "memory_limit_bytes": (I, "describe: Limits memory"),
        "memory_request_bytes": (I, "describe: Requests memory"),
        "gpu_limit": (I, "describe: Limits nvidia.com/gpu"),
        "line_no": (I, "1-based line number of the row (describe: of the container's or pod's first line)"),
    },
    "load_tests": {
        "source": (S, "input file: a load-test tool's printed summary"),
        "tool": (S, "vllm bench serve | sglang bench_serving | aiperf | lm-eval-harness"),
        "run": (I, "1-based result of the file (a file may print several)"),
        "requests": (
            I,
            "requests sent (the summary's count, its progress bar's total, else successful + failed)",
        ),
        "successful": (I, "requests that succeeded, as the tool counted them; null when it printed none"),
        "failed": (I, "requests that failed, as the tool counted them; null when it printed none"),
        "duration_s": (F, "the run's duration"),
        "request_rate": (
            F,
            "configured request rate (req/s); null when all were sent at once ('inf') or unsaid",
        ),
        "concurrency": (F, "configured maximum concurrency"),
        "concurrency_mean": (F, "measured mean requests in flight (SGLang's 'Concurrency')"),
        "throughput_rps": (F, "measured request throughput (req/s)"),
        "output_tps": (F, "measured output token throughput (tok/s)"),
        "ttft_mean_s": (F, "TTFT mean (s), client clock"),
        "ttft_median_s": (F, "TTFT median (s), client clock"),
        "ttft_p99_s": (F, "TTFT p99 (s), client clock"),
        "tpot_mean_s": (F, "time per output token mean (s)"),
        "tpot_median_s": (F, "time per output token median (s)"),
        "tpot_p99_s": (F, "time per output token p99 (s)"),
        "itl_mean_s": (F, "inter-token latency mean (s)"),
        "itl_median_s": (F, "inter-token latency median (s)"),
        "itl_p99_s": (F, "inter-token latency p99 (s)"),
        "e2e_mean_s": (F, "end-to-end latency mean (s), client clock"),
        "e2e_median_s": (F, "end-to-end latency median (s), client clock"),
        "e2e_p99_s": (F, "end-to-end latency p99 (s), client clock"),
        "clock": (S, "the clock of its latencies: 'client' (the tool measured them)"),
        "latency_source": (S, "'load_test': a tool's summary, not per-request records"),
        "line_no": (I, "1-based line of the summary's first line (its header)"),
    },
    # ---- correlation stage (logscope/correlate) ----
    "requests": {
        "logical_request_id": (
            S,
            "client's logical request (or the gateway/server request when no client log)",
        ),
        "client": (S, "client name, null when no client log covers it"),
        "origin": (S, "which layer defined this row: client | gateway | server"),
        "ts_start": (TS, "first send (UTC, clock-corrected)"),
        "ts_end": (TS, "final outcome (UTC, clock-corrected)"),
        "status": (I, "final status seen by the caller"),
        "error": (S, "final error"),
        "outcome": (
            S,
            "ok | error | timeout | truncated (logged 2xx, then its answer broke off: mid_stream) | unfinished (its "
            "client's log ended with it in flight) | unknown",
        ),
        "mid_stream": (
            S,
            "what a log states of its answer after the gateway's 2xx: cut (nginx: the upstream closed mid-response) "
            "| read_timeout (nginx cut it: 'upstream timed out ... while reading upstream', its proxy_read_timeout) "
            "| failed (the proxy's stream-error line, tied to its access line: LiteLLM's) | may have failed (a "
            "stream-error line no evidence ties to one access line may be this one's: outcome stays ok, not "
            "certain); null: none stated",
        ),
        "upstream_status": (I, "the upstream's status a failed stream's error names (null: it names none)"),
        "mid_stream_evidence": (
            S,
            "the error line that states mid_stream's cut (file:line; null: none, or a proxy's)",
        ),
        "client_attempts": (I, "client attempts"),
        "gateway_requests": (I, "gateway requests matched"),
        "gateway_attempts": (I, "upstream attempts made by the gateway"),
        "server_requests": (I, "engine requests matched (vLLM's, SGLang's or TGI's)"),
        "server_aborted": (I, "engine requests of it that were aborted"),
        "server_gen_s": (F, "total seconds the server spent on it (all executions)"),
        "preempted": (B, "named by a V0 preemption warning; null when the log cannot say (V1)"),
        "ttft_s": (F, "time to first token as the client saw it"),
        "e2e_s": (F, "end-to-end latency as the client saw it"),
        "latency_clock": (
            S,
            "the clock ttft_s and e2e_s are on: client (what the caller measured) | gateway (its access log: the "
            "request's span, the upstream's header time) | engine (the engine's own lines: vLLM, SGLang, TGI); null when "
            "the row has neither",
        ),
        "latency_source": (
            S,
            "where ttft_s and e2e_s come from: client_records (the client's own log or records) | load_test (a "
            "load-test tool's per-request results) | spans | gateway_log | engine_log",
        ),
        "gateway_e2e_s": (
            F,
            "the gateway's span of the request (its first receipt to its last answer, on the gateway's clock), "
            "beside the caller's e2e_s: their gap is time outside the gateway; null without a gateway line giving a span",
        ),
        "prompt_tokens": (I, "prompt tokens"),
        "max_tokens": (I, "requested max_tokens"),
        "output_tokens": (I, "generated tokens"),
        "match": (S, "exact (ids) | inferred (time window) | none"),
        "match_score": (F, "0..1 confidence of the cross-layer match"),
        "duplicate_concurrent": (
            B,
            "a retry was sent while an earlier attempt was still running on the server",
        ),
        "orphaned_executions": (I, "server executions still running after their caller gave up"),
        "orphan_s": (F, "seconds of server work done after the caller gave up"),
        "concurrency": (I, "client concurrency level when known"),
        "phase": (S, "client phase / bench step"),
    },
    "request_spans": {
        "logical_request_id": (S, "the logical request (requests.parquet) the spans belong to"),
        "trace_id": (S, "its trace"),
        "joined_by": (
            S,
            "what joined the trace to the request: trace_id (client) | trace_id (gateway) (the traceparent it "
            "logged) | request_id (engine span) (gen_ai.request.id against the X-Request-Id), and 'parent span' "
            "when the engine span is a child of the client's attempt span",
        ),
        "attempt_spans": (I, "client attempt spans (HTTP CLIENT spans) of the request"),
        "attempt_statuses": (S, "their HTTP statuses in order, '-' for none (clock client, source spans)"),
        "resend_count_max": (I, "the highest http.request.resend_count: the retries the client's spans name"),
        "attempts_without_engine": (I, "client attempts with no engine span under them"),
        "no_engine_reason": (
            S,
            "for the first of those: why, with the evidence named (logscope/correlate/span_gaps.py): the engine "
            "log's abort, the replica's log and spans stopping, the gateway's errors for its upstream, the "
            "caller's connection error",
        ),
        "no_engine_class": (
            S,
            "aborted (the engine logged its abort: vLLM writes no span for it) | cut by death (in flight when "
            "its replica died) | spans lost (finished, the caller answered, less than one export batch before its "
            "replica died and after the last request that replica's exported spans cover) | never reached (the "
            "gateway answered without an engine) | not exported (its replica's other requests have spans) | "
            "unknown (the reason names what is missing)",
        ),
        "last_http_status": (I, "the HTTP status of the last attempt span that has one (clock client)"),
        "client_start": (TS, "first client attempt span start"),
        "client_end": (
            TS,
            "last client attempt span end (for a stream: when its headers came, httpx's span)",
        ),
        "request_start": (TS, "the caller's own request span's start (over its attempts), when it has one"),
        "request_end": (TS, "its end: the whole answer read, or the caller gave up"),
        "request_span_status": (S, "its status: ok | error | unset"),
        "request_span_error": (S, "its status message (the caller's error, e.g. 'APITimeoutError: ...')"),
        "gateway_spans": (I, "gateway spans in its trace"),
        "engine_spans": (I, "engine request spans in its trace (one per execution)"),
        "engine_service": (S, "service of the last engine span (the replica)"),
        "engine_request_id": (S, "its gen_ai.request.id"),
        "span_queue_s": (F, "the last engine span's time in queue (clock engine, source spans)"),
        "span_ttft_s": (F, "its time to first token (clock engine, source spans)"),
        "span_e2e_s": (F, "its e2e (clock engine, source spans)"),
        "span_prefill_s": (F, "its prefill time (clock engine, source spans)"),
        "span_decode_s": (F, "its decode time (clock engine, source spans)"),
        "span_prompt_tokens": (I, "the last engine span's prompt tokens"),
        "span_output_tokens": (I, "its generated tokens"),
        "engine_start": (TS, "the last engine span's start"),
        "engine_end": (TS, "its end"),
        "engine_attempt_start": (TS, "the start of the client attempt span the engine span is a child of"),
        "before_engine_s": (
            F,
            "engine span start - its parent client attempt's start: gateway + API server + network (two hosts' "
            "clocks: less clock_offset_s where the spans showed one; null where the offset is unknown, see "
            "correlation.json traces.clock_skew)",
        ),
        "before_attempt_s": (
            F,
            "that attempt's start - the caller's request span start: earlier attempts, backoff and the caller's own "
            "work (clock client)",
        ),
        "after_engine_s": (
            F,
            "the caller's request span end - the engine span's end: the answer's way back (a stream's delivery); "
            "two hosts' clocks, plus clock_offset_s where the spans showed one (null where it is unknown)",
        ),
        "clock_offset_s": (
            F,
            "the engine's clock minus the callers' that the spans' nesting showed (correlation.json "
            "traces.clock_skew), removed from before_engine_s and after_engine_s; null where none was removed",
        ),
        "engine_clock": (S, "'engine': the clock of span_* figures"),
        "attempt_clock": (S, "'client': the clock of the attempt figures"),
        "latency_source": (S, "'spans'"),
        "ts_start": (TS, "the request's start (requests.parquet)"),
        "ts_end": (TS, "its end"),
        "status": (I, "its final status"),
        "outcome": (S, "its outcome"),
        "caller_ttft_s": (
            F,
            "the caller's own time to first token (requests.parquet ttft_s where its clock is client); null on any "
            "other clock: beside span_ttft_s, their gap is the time before the engine and the first token's way back",
        ),
        "caller_ttft_source": (S, "where caller_ttft_s comes from (requests.parquet latency_source)"),
    },
    "windows": {
        "ts": (TS, "window start (UTC)"),
        "window_s": (F, "window width in seconds"),
        "arrivals": (I, "logical requests started"),
        "completions": (I, "logical requests ended ok"),
        "errors": (I, "logical requests ended in error"),
        "timeouts": (I, "attempts ended by a client timeout"),
        "gateway_5xx": (I, "gateway responses 5xx"),
        "gateway_499": (I, "gateway 499 (client closed)"),
        "gateway_cuts": (
            I,
            "streams the gateway cut after its 2xx, by its own read timeout (requests.mid_stream)",
        ),
        "client_attempts": (I, "client attempts sent"),
        "client_retries": (I, "client retries sent"),
        "gateway_retries": (I, "extra upstream attempts made by the gateway"),
        "server_requests": (I, "engine requests received (vLLM's, SGLang's or TGI's)"),
        "server_aborts": (I, "engine aborts"),
        "amplification": (
            F,
            "server executions of the logical requests started in the window / those requests",
        ),
        "inflight_client": (F, "mean client attempts in flight"),
        "inflight_gateway": (F, "mean gateway requests in flight"),
        "inflight_server": (F, "mean engine requests in flight"),
        "running_max": (F, "max running"),
        "running_mean": (F, "mean running"),
        "waiting_max": (F, "max waiting"),
        "waiting_mean": (F, "mean waiting"),
        "kv_max": (F, "max KV usage 0..1"),
        "kv_mean": (F, "mean KV usage 0..1"),
        "preemptions": (I, "preemptions (metrics or stats lines; V0 warnings give lower bounds)"),
        "oom_events": (I, "OOM events"),
        "engine_deaths": (I, "engine death events"),
        "server_restarts": (I, "server starts"),
        "ttft_p50": (F, "TTFT p50 (s) of the logical requests started in the window that ended ok"),
        "ttft_p95": (F, "TTFT p95 (s), same requests"),
        "ttft_p99": (F, "TTFT p99 (s), same requests"),
        "e2e_p50": (F, "e2e p50 (s), same requests"),
        "e2e_p95": (F, "e2e p95 (s), same requests"),
        "e2e_p99": (F, "e2e p99 (s), same requests"),
        "latency_clock": (
            S,
            "the one clock of the run's ttft/e2e percentiles (requests.latency_clock: client, else gateway, else "
            "engine; requests on another clock are left out of them); null when no request has a latency",
        ),
        "prompt_tokens_mean": (F, "mean prompt tokens of arrivals"),
        "output_tokens_mean": (F, "mean output tokens of completions"),
        "max_tokens_mean": (F, "mean requested max_tokens of arrivals"),
        "orphaned": (I, "server executions running for a caller that had already left"),
    },
    "clock_offsets": {
        "source": (S, "input file whose clock was estimated"),
        "reference": (S, "source it was aligned to"),
        "offset_s": (F, "seconds added to the source's timestamps"),
        "spread_s": (F, "robust spread (MAD) of the per-request offsets"),
        "n_matches": (I, "requests matched by id used for the estimate"),
        "method": (S, "how it was estimated"),
        "verified": (B, "false when no ids matched: the alignment is unverified"),
    },
    # ---- diagnosis stage (logscope/diagnose) ----
    "episodes": {
        "episode_id": (S, "stable id, e.g. E1"),
        "signal": (
            S,
            "preemptions | kv_pressure | queue | stall | errors | crash | retries | ttft | e2e | orphans "
            "(the incident's most telling signal; the others are its companions in diagnosis.json)",
        ),
        "class": (
            S,
            "spike | sustained | recurring | crash | context (a one-sample blip back at baseline after it: no "
            "finding, never matched by --fail-on)",
        ),
        "replica": (S, "replica, null for cross-layer signals"),
        "start": (TS, "start (UTC)"),
        "end": (TS, "end (UTC)"),
        "duration_s": (F, "duration"),
        "share_of_span": (
            F,
            "duration / observed span (descriptive: it changes with the span, so it decides nothing)",
        ),
        "recovered": (B, "the signal returned to baseline before the logs end"),
        "open_end": (
            B,
            "still abnormal when the logs (or the range analysed) end, or a death with no restart before they do: "
            "its end is where the observation stops, so duration_s is a lower bound ('≥' in the report)",
        ),
        "peak": (F, "peak value of the signal"),
        "baseline": (F, "baseline value of the signal before the episode"),
        "count": (I, "events in the episode (preemptions, errors, ...)"),
        "running_max": (F, "max running"),
        "running_mean": (F, "mean running"),
        "waiting_max": (F, "max waiting"),
        "waiting_mean": (F, "mean waiting"),
        "kv_max": (F, "max KV usage"),
        "kv_mean": (F, "mean KV usage"),
        "arrival_rate_before": (F, "arrivals/s in the baseline before"),
        "arrival_rate_during": (F, "arrivals/s during"),
        "arrival_rate_after": (F, "arrivals/s in the recovery window after the episode (recovery_window_s)"),
        "prompt_tokens_mean": (F, "mean prompt tokens during"),
        "output_tokens_mean": (F, "mean output tokens during"),
        "ttft_p95": (F, "TTFT p95 during (s)"),
        "e2e_p95": (F, "e2e p95 during (s)"),
        "ttft_source": (
            S,
            "where ttft_p95 comes from: client | gateway | server log | metrics histogram (several "
            "joined by ' + ')",
        ),
        "ttft_p95_bucket": (
            S,
            "the histogram bucket ttft_p95 lies in ('1–2.5 s') when it comes from the histogram",
        ),
        "e2e_source": (S, "where e2e_p95 comes from (as ttft_source)"),
        "e2e_p95_bucket": (S, "the histogram bucket e2e_p95 lies in, when it comes from the histogram"),
        "ttft_clock": (
            S,
            "the clock ttft_p95 was measured on: client | gateway | engine | spans (' + ' when several)",
        ),
        "e2e_clock": (S, "the clock e2e_p95 was measured on (as ttft_clock)"),
        "success_share": (F, "share of logical requests ending ok during"),
        "reason": (S, "why this class: the evidence that decided it"),
        "claim_id": (S, "the claim of its class in diagnosis.json's claims ('episode.E1')"),
    },
    "findings": {
        "finding_id": (S, "stable id, e.g. F1"),
        "rank": (I, "1 = most severe"),
        "severity": (S, "critical | high | medium | low | info"),
        "title": (S, "one line"),
        "kind": (
            S,
            "crash | platform (the kernel's, Kubernetes' or the GPUs' records) | startup | stall | orphans | retries | "
            "pressure | capacity | errors | latency | ladder | other",
        ),
        "symptom": (S, "what was observed"),
        "evidence": (S, "numbers, times, episode"),
        "cause": (S, "likely cause"),
        "next_test": (S, "the one change to measure next"),
        "episode_id": (S, "episode it points to"),
        "start": (TS, "time range start"),
        "end": (TS, "time range end"),
        "failed_requests": (
            I,
            "logical requests in flight during it that ended in an error or a timeout; null "
            "when no request table (the ranking's first key after severity)",
        ),
        "slowed_requests": (
            I,
            "logical requests in flight during it that ended ok above the TTFT or e2e SLO; null when unknown",
        ),
        "claim_id": (
            S,
            "the claim its title states, in diagnosis.json's claims (its facts, state, what was missing)",
        ),
    },
    "ladder": {
        "step": (I, "1-based step"),
        "concurrency": (F, "concurrency (or request rate) of the step"),
        "mode": (
            S,
            "concurrency | rate (from the client's phases) | inflight (detected from in-flight counts: the client's, else the gateway's, else the server's requests, else its running + waiting)",
        ),
        "ts_start": (TS, "step start"),
        "ts_end": (TS, "step end"),
        "cold": (B, "step overlaps the cold start after a server start"),
        "requests": (I, "logical requests"),
        "active_mean": (F, "mean in-flight requests at the server"),
        "arrival_rate": (F, "arrivals/s"),
        "ttft_p50": (F, "TTFT p50 (s)"),
        "ttft_p95": (F, "TTFT p95 (s)"),
        "e2e_p50": (F, "e2e p50 (s)"),
        "e2e_p95": (F, "e2e p95 (s)"),
        "success_share": (F, "share ok"),
        "kv_max": (F, "max KV usage"),
        "kv_mean": (F, "mean KV usage"),
        "waiting_max": (F, "max waiting"),
        "preemptions": (I, "preemptions"),
        "throughput_tps": (F, "output tokens/s"),
        "max_tokens_mean": (F, "requested max_tokens (mean)"),
        "output_tokens_mean": (F, "generated tokens (mean)"),
        "lengths_source": (
            S,
            "'metrics histogram' when max_tokens_mean / output_tokens_mean are the histograms' "
            "means (_sum / _count), null when from the requests",
        ),
        "ttft_source": (
            S,
            "where ttft_p50 / ttft_p95 come from: client | gateway | server log | metrics histogram "
            "(vllm:time_to_first_token_seconds; several joined by ' + ')",
        ),
        "ttft_p95_bucket": (
            S,
            "the histogram bucket ttft_p95 lies in ('1–2.5 s': the value is interpolated in it, "
            "as histogram_quantile does), when from the histogram",
        ),
        "ttft_p50_bucket": (S, "the histogram bucket ttft_p50 lies in, when from the histogram"),
        "ttft_p95_gateway": (
            F,
            "the gateway's upstream header time p95 (s), kept when the histogram's TTFT "
            "replaced it (vLLM sends headers before the first token when streaming)",
        ),
        "e2e_source": (
            S,
            "where e2e_p50 / e2e_p95 come from (as ttft_source; "
            "vllm:e2e_request_latency_seconds for the histogram)",
        ),
        "e2e_p95_bucket": (S, "the histogram bucket e2e_p95 lies in, when from the histogram"),
        "e2e_p50_bucket": (S, "the histogram bucket e2e_p50 lies in, when from the histogram"),
        "queue_p95": (F, "time in vLLM's waiting queue, p95 (s), from vllm:request_queue_time_seconds"),
        "queue_p95_bucket": (S, "the histogram bucket queue_p95 lies in"),
        "prefill_p95": (F, "prefill time p95 (s), from vllm:request_prefill_time_seconds"),
        "prefill_p95_bucket": (S, "the histogram bucket prefill_p95 lies in"),
        "decode_p95": (F, "decode time p95 (s), from vllm:request_decode_time_seconds"),
        "decode_p95_bucket": (S, "the histogram bucket decode_p95 lies in"),
        "slo_undecided": (
            S,
            "the SLO figures a histogram cannot judge: the SLO lies inside the p95's bucket, given as "
            "'ttft_p95 between 1 and 2.5 s' (the step is then 'undecided' unless another figure missed)",
        ),
        "meets_slo": (
            B,
            "every SLO figure measured and met (null: unknown or undecided, a figure could not be measured or judged)",
        ),
        "slo_status": (
            S,
            "met | missed | undecided (a histogram bucket holds the SLO: between its bounds) | unknown (a figure "
            "missing and none failed) | censored (not judged: at least 5 % of its callers gave up, its p95s are "
            "floors below the SLO, or a server died in it and nothing before the death missed; slo_not_judged)",
        ),
        "slo_missing": (
            S,
            "the SLO figures the step had no value for, comma-separated (ttft_p95, e2e_p95, ...)",
        ),
        "broke": (S, "every SLO condition that failed, in the order it first happened in the step"),
        "pressure": (
            S,
            "preemptions, queue, KV near full in the step, in the order they began (beside the SLO)",
        ),
        "ttft_clock": (
            S,
            "the clock ttft_p95 was measured on: client | gateway | engine | spans (' + ' when several)",
        ),
        "e2e_clock": (S, "the clock e2e_p95 was measured on (as ttft_clock)"),
        "ttft_p95_engine": (
            F,
            "vLLM's own TTFT p95 (its histogram: the engine's clock) beside a ttft_p95 on the callers' clock",
        ),
        "ttft_p95_engine_bucket": (S, "the histogram bucket ttft_p95_engine lies in"),
        "e2e_p95_engine": (F, "vLLM's own e2e p95 (its histogram) beside an e2e_p95 on the callers' clock"),
        "e2e_p95_engine_bucket": (S, "the histogram bucket e2e_p95_engine lies in"),
        "cold_set_aside": (I, "requests of the step in a cold-start window, left out of its figures"),
        "cold_why": (S, "why they were set aside (which server start, cold_start_s)"),
        "callers": (I, "the callers of the step's figures (its requests, the server's own records left out)"),
        "gave_up": (
            I,
            "callers that left before their answer (timed out, in flight when their client stopped, nginx 499): "
            "failures in success_share",
        ),
        "gave_up_before_first_token": (I, "those of gave_up that left before a first token"),
        "gave_up_share": (F, "gave_up / callers"),
        "gave_up_timeout_s": (F, "the client timeout the callers' records state (one value), else null"),
        "gave_up_wait_min_s": (
            F,
            "the shortest wait of a caller that gave up (s), on gave_up_wait_source's clock",
        ),
        "gave_up_wait_max_s": (F, "the longest wait of a caller that gave up (s)"),
        "gave_up_wait_source": (S, "the records that timed those waits (client_records, gateway_log)"),
        "slo_not_judged": (
            S,
            "why a 'censored' step is not judged (or a missed one's p95s are floors): at least 5 % of its callers "
            "gave up, so its TTFT / e2e p95 over those who stayed are floors of the true ones; or a server died in "
            "it (died) and the requests that ended before the death missed nothing",
        ),
        # a server died in the step (ladder_death): it is judged on the requests that ended before the death
        "died": (S, "a server's death in the step: who, when, how far into it, its kind and cause"),
        "died_at": (TS, "the death's time (the server log's: its last line, or the platform's kill)"),
        "died_kinds": (S, "the death's kinds (silent, oom, kernel_oom, oom_killed, engine_dead, ...)"),
        "died_replica": (S, "the replica that died"),
        "died_into_s": (F, "seconds from the step's start to the death"),
        "died_load_driven": (
            B,
            "the kind says the load killed it (out of memory, the engine dead or timed out): the step's failure",
        ),
        "before_death_requests": (I, "the step's requests that ended before the death, judged"),
        "before_death_ttft_p95": (F, "their TTFT p95 (s), on ttft_clock"),
        "before_death_e2e_p95": (F, "their e2e p95 (s), on e2e_clock"),
        "before_death_success_share": (F, "their success share"),
        "cut_by_death": (I, "the step's requests started before the death and not ended before it"),
        "sent_after_death": (I, "the step's requests started at or after the death"),
        "claim_id": (S, "the step's SLO claim in diagnosis.json's claims ('ladder.step.3')"),
    },
}


def schema(table: str) -> pl.Schema:
    return pl.Schema({c: t for c, (t, _) in TABLES[table].items()})


def time_columns(table: str) -> list[str]:
    """The timestamp columns of a table's declared schema."""
    return [c for c, t in schema(table).items() if t == TS]


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=schema(table))


def conform(df: pl.DataFrame | pl.LazyFrame, table: str):
    """Select/cast to the declared schema, adding absent columns as nulls. Extra columns are dropped."""
    sch = schema(table)
    have = set(df.collect_schema().names())
    exprs = [
        (pl.col(c).cast(t, strict=False) if c in have else pl.lit(None, dtype=t)).alias(c)
        for c, t in sch.items()
    ]
    return df.select(exprs)


# a rotated or compressed file's suffixes (logscope/ingest/inputs.py: '.N', kubelet's '.YYYYMMDD-HHMMSS', then .gz ...)
_ROTATED_SUFFIX = r"(?:\.\d{1,3}|\.\d{8}-\d{6})?(?i:\.(?:gz|zst|zstd|bz2|xz))?$"


def log_of(source: pl.Expr) -> pl.Expr:
    """The log a source file is part of: its path without rotation and compression suffixes (a rotated set's files,
    ``access.log.1`` and ``access.log``, are one log, as ingest reads them as one stream)."""
    return source.str.replace(_ROTATED_SUFFIX, "")


def gateway_apart() -> pl.Expr:
    """``gateway_attempts`` rows that are no request of their own: a proxy's line on an attempt, fallback or failure
    apart from its access line (LiteLLM, vLLM router), no downstream status and no HTTP request named, in a log with
    access lines (no id pairs them; a rotated set is one log). An access line without a status is a request all the
    same: Envoy's ``0 DC``, a caller that left before the answer (tests/data/envoy, line 8 of each log)."""
    return (
        pl.col("status").is_null()
        & pl.col("method").is_null()
        & pl.col("flags").is_not_null()
        & pl.col("status").is_not_null().any().over(log_of(pl.col("source")))
    )


def gateway_request_row() -> pl.Expr:
    """The one ``gateway_attempts`` row each gateway request is counted by (its status, its ``attempts_total``):
    its first attempt where the log writes a row per upstream try (nginx: attempts 1..n of one access line), its
    line where the log writes one line per request with the attempts it took (HAProxy's %rc, Envoy's attempt count,
    Traefik's RetryAttempts: that line's only row is its last attempt, ``attempt`` = ``attempts_total``)."""
    one_line = (pl.col("attempt") == pl.col("attempts_total")) & (pl.len().over("source", "line_no") == 1)
    return (pl.col("attempt").fill_null(1) == 1) | one_line


def markdown() -> str:
    out = ["# Output tables", "", "Generated from `logscope/schemas.py` (`python -m logscope.schemas`).", ""]
    for name, cols in TABLES.items():
        out += [f"## `{name}.parquet`", "", "| column | type | meaning |", "|---|---|---|"]
        for c, (t, d) in cols.items():
            out.append(f"| `{c}` | {t} | {d} |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    print(markdown())
