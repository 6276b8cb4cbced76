"""SGLang's own request tracing, run here, for the trace parsers' tests (tests/data/traces/INDEX.md).

    pip download sglang==0.5.23 --no-deps && unzip the wheel's sglang/ into SGLANG_DIR
    pip install opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
    python make_sglang_samples.py OUTDIR SGLANG_DIR --otlp-receiver ../../../../shared/lab/otlp_receiver.py

SGLang 0.5.23's tracing (`sglang/srt/observability/trace.py`) and its per-stage time stats
(`req_time_stats.py`: `APIServerReqTimeStats`, `SchedulerReqTimeStats`), imported from the PyPI wheel unchanged,
make the spans and send them with SGLang's own OTLP/HTTP exporter set-up (`process_tracing_init`) to the lab's
receiver (Collector file-exporter lines) and, added beside it, the SDK's ConsoleSpanExporter. The server is not
run (it needs torch and a model): the modules the tracing does not use (torch-bound enums, metrics collectors,
env helpers) are stood in by the few names they are imported for, and the stats methods are called in the order
SGLang's tokenizer manager and scheduler call them for a unified (not disaggregated) request: created, tokenized,
dispatched; on the scheduler (its own thread, the stats pickled across as between SGLang's processes): received,
waiting, forward, prefill done, decode steps, completion; back on the API server: first token, finished.
Span names, tree, links and attributes are SGLang's; the times are this script's (short sleeps).
"""

import argparse
import enum
import os
import pickle
import subprocess
import sys
import threading
import time
import types

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("sglang_dir")
p.add_argument("--otlp-receiver", required=True)
p.add_argument("--port", type=int, default=18941)
a = p.parse_args()
os.makedirs(a.out, exist_ok=True)


def stub(name, **attrs):
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


class _Env:
    def __init__(self, v):
        self.v = v

    def get(self):
        return self.v


class DisaggregationMode(enum.Enum):  # sglang/srt/disaggregation/utils.py
    NULL = "null"
    PREFILL = "prefill"
    DECODE = "decode"


class ForwardMode(enum.IntEnum):  # sglang/srt/model_executor/forward_batch_info.py (the two used here)
    EXTEND = 1
    DECODE = 2

    def is_decode(self):
        return self == ForwardMode.DECODE


class _Resources:
    trace_level = None


_res = _Resources()
stub("sglang.srt.environ", envs=types.SimpleNamespace(
    SGLANG_OTLP_EXPORTER_SCHEDULE_DELAY_MILLIS=_Env(500),
    SGLANG_OTLP_EXPORTER_MAX_EXPORT_BATCH_SIZE=_Env(64),
    SGLANG_TRACE_ASYNC=_Env(False),
))
stub("sglang.srt.runtime_context", get_resources=lambda: _res)
stub("sglang.srt.utils", get_int_env_var=lambda n, d=0: int(os.environ.get(n, d)),
     get_bool_env_var=lambda n, d="false": os.environ.get(n, d).lower() in ("true", "1"))
stub("sglang.srt.utils.poll_timer", PollTimer=object)
stub("sglang.srt.disaggregation.utils", DisaggregationMode=DisaggregationMode)
stub("sglang.srt.model_executor.forward_batch_info", ForwardMode=ForwardMode)
stub("sglang.srt.observability.metrics_collector", EncoderMetricsCollector=object,
     SchedulerMetricsCollector=object, TokenizerMetricsCollector=object)
stub("sglang.srt.observability.trace_async", TraceReqContextAsync=object, is_async_tracing_available=lambda: False)
for pkg in ("sglang", "sglang.srt", "sglang.srt.observability"):
    m = types.ModuleType(pkg)
    m.__path__ = [os.path.join(a.sglang_dir, *pkg.split("."))]
    sys.modules[pkg] = m

os.environ["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "http/protobuf"
rec = subprocess.Popen([sys.executable, a.otlp_receiver, a.out, "--port", str(a.port)], stdout=subprocess.PIPE)
try:
    rec.stdout.readline()
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    from sglang.srt.observability import req_time_stats as rts
    from sglang.srt.observability import trace as sgt

    sgt.process_tracing_init(f"http://127.0.0.1:{a.port}/v1/traces", "sglang")
    console = open(os.path.join(a.out, "console.txt"), "w")
    trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=console)))
    sgt.trace_set_thread_info("Tokenizer")

    def scheduler(blob, decode_steps):
        sgt.trace_set_thread_info("Scheduler", 0, None, 0)  # scheduler.py: (label, tp_rank, dp_rank, pp_rank)
        st = rts.SchedulerReqTimeStats.new_from_obj(pickle.loads(blob))
        st.set_scheduler_recv_time()
        time.sleep(0.002)
        st.set_wait_queue_entry_time()
        time.sleep(0.03)  # waiting for a batch
        st.set_forward_entry_time()
        time.sleep(0.02)
        st.set_prefill_finished_time()
        st.set_last_scheduled_time(ForwardMode.DECODE)
        for _ in range(decode_steps):
            time.sleep(0.005)
            st.set_last_decode_finish_time()
        st.set_completion_time()

    def request(rid, decode_steps):
        api = rts.APIServerReqTimeStats(disagg_mode=DisaggregationMode.NULL)
        api.init_trace_ctx(rid, None)
        api.set_created_time()
        time.sleep(0.004)
        api.set_tokenize_finish_time()
        api.set_api_server_dispatch_time()
        time.sleep(0.001)
        blob = pickle.dumps(api)  # the request's time stats go to the scheduler with it (schedule_batch.Req)
        api.set_api_server_dispatch_finish_time()
        th = threading.Thread(target=scheduler, args=(blob, decode_steps))
        th.start()
        time.sleep(0.055)
        api.set_first_token_time()
        th.join()
        api.set_finished_time()

    request("9f0c2d4be1a84c5f8a7e3b6d2c1f0e9a", 3)
    request("1b7e4a2c9d3f4e5a8b6c7d8e9f0a1b2c", 5)
    trace.get_tracer_provider().shutdown()
    console.close()
finally:
    rec.terminate()
    rec.wait()
