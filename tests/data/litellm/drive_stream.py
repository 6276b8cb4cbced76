"""Bounded loopback streaming chat completions to the LiteLLM proxy, one at a time, each with its own X-Request-Id;
prints what each stream delivered (its chunks' text, an error event, whether [DONE] came)."""
import json, sys, time
import httpx

key = open("master.key").read().strip()
port = int(sys.argv[1]) if len(sys.argv) > 1 else 14909
plan = [("cut", True), ("tiny", True), ("overloaded", True), ("tiny", False), ("overloaded-early", True), ("cut", True)]
with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
    for n, (model, stream) in enumerate(plan, 1):
        rid = f"client-{model}-{n:03d}"
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "stream": stream}
        text, error, done = [], None, False
        try:
            with c.stream("POST", "/v1/chat/completions", json=body,
                          headers={"Authorization": f"Bearer {key}", "X-Request-Id": rid}) as r:
                status = r.status_code
                if not stream:  # one JSON answer
                    r.read()
                    text.append(r.json()["choices"][0]["message"]["content"])
                    done = True
                for line in r.iter_lines() if stream else ():
                    if not line.startswith("data: "):
                        continue
                    data = line[6:]
                    if data == "[DONE]":
                        done = True
                        continue
                    obj = json.loads(data)
                    if "error" in obj:
                        error = obj["error"].get("message", "")[:120]
                    for ch in obj.get("choices", []):
                        text.append((ch.get("delta") or ch.get("message") or {}).get("content") or "")
        except httpx.HTTPError as e:
            status, error = "ERR", type(e).__name__
        print(rid, status, repr("".join(text)), ("complete" if done else "no [DONE]"), error, flush=True)
        time.sleep(1.1)
