"""Bounded loopback requests to the LiteLLM proxy (one at a time), each with its own X-Request-Id."""
import sys, time
import httpx

key = open("master.key").read().strip()
plan = [("tiny", 6), ("flaky", 2), ("limited", 2), ("no-such-model", 1), ("tiny", 2)]
n = 0
with httpx.Client(base_url="http://127.0.0.1:14000", timeout=60) as c:
    for model, count in plan:
        for _ in range(count):
            n += 1
            rid = f"client-{model}-{n:03d}"
            r = c.post("/v1/chat/completions", headers={"Authorization": f"Bearer {key}", "X-Request-Id": rid},
                       json={"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})
            print(rid, r.status_code, {k: v for k, v in r.headers.items() if k.startswith("x-litellm")}, flush=True)
            time.sleep(0.3)
