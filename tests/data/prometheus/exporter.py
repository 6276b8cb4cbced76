"""A small real Prometheus exporter (prometheus_client) exposing a few vLLM-named metrics.

Metric names and labels are copied from the lab's `promtool tsdb dump` of vLLM 0.32
(/work/shared/fixtures/lab/ladder/prometheus/tsdb-dump.txt). The values follow a fixed
script (one step a second) so the output is reproducible in shape; the text itself is
what prometheus_client's HTTP server really prints. Run: python exporter.py PORT SECONDS
"""

import sys
import time

import prometheus_client as pc

pc.disable_created_metrics()  # vLLM does the same: no *_created series
for c in (pc.GC_COLLECTOR, pc.PLATFORM_COLLECTOR, pc.PROCESS_COLLECTOR):
    pc.REGISTRY.unregister(c)

L = ["engine", "model_name"]
running = pc.Gauge("vllm:num_requests_running", "Number of requests in model execution batches.", L)
waiting = pc.Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", L)
kv = pc.Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", L)
preempt = pc.Counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", L)
prompt = pc.Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", L)
gen = pc.Counter("vllm:generation_tokens", "Number of generation tokens processed.", L)
ttft = pc.Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", L,
                    buckets=(0.1, 0.5, 1.0, 5.0))

port, seconds = int(sys.argv[1]), float(sys.argv[2])
pc.start_http_server(port, addr="127.0.0.1")
lab = {"engine": "0", "model_name": "tiny"}
for m in (running, waiting, kv, preempt, prompt, gen, ttft):
    m.labels(**lab)  # series exist from the start, as in vLLM
t_end = time.time() + seconds
k = 0
while time.time() < t_end:
    r, w = min(k, 8), max(0, k - 8)
    running.labels(**lab).set(r)
    waiting.labels(**lab).set(w)
    kv.labels(**lab).set(min(1.0, r / 8))
    if w:
        preempt.labels(**lab).inc(w)
    prompt.labels(**lab).inc(128 * (1 if k < 8 else 0))
    gen.labels(**lab).inc(16 * r)
    ttft.labels(**lab).observe(0.05 * (1 + w))
    k += 1
    time.sleep(1)
