"""Bounded loopback load for a gateway: a fixed list of requests, each with its own X-Request-Id.

usage: drive.py URL PLAN   where PLAN is a comma list of kind:count
kinds: ok (fast), slow (X-Delay 3 s: beyond a 2 s server timeout), abort (client gives up at 0.5 s, upstream 2 s),
       burst (8 parallel fast requests)
"""
import http.client, json, sys, threading, time, urllib.parse

url = urllib.parse.urlparse(sys.argv[1])
plan = [(k, int(n)) for k, n in (p.split(":") for p in sys.argv[2].split(","))]
path = sys.argv[3] if len(sys.argv) > 3 else "/v1/completions"
seq = [0]


def one(delay, timeout, rid):
    c = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
    body = json.dumps({"model": "tiny", "prompt": "hi", "max_tokens": 4})
    try:
        c.request("POST", path, body, {"Content-Type": "application/json", "X-Request-Id": rid, "X-Delay": str(delay),
                                          "User-Agent": "gwlab-drive/1"})
        r = c.getresponse(); r.read(); print(rid, r.status, flush=True)
    except Exception as e:
        print(rid, "ERR", type(e).__name__, flush=True)
    finally:
        c.close()


for kind, n in plan:
    for _ in range(n):
        seq[0] += 1
        rid = f"client-{kind}-{seq[0]:03d}"
        if kind == "ok":
            one(0.05, 10, rid)
        elif kind == "slow":
            one(3.0, 10, rid)
        elif kind == "abort":
            one(2.0, 0.5, rid)
        elif kind == "burst":
            ts = [threading.Thread(target=one, args=(0.4, 10, f"{rid}-{i}")) for i in range(8)]
            [t.start() for t in ts]; [t.join() for t in ts]
        time.sleep(0.1)
