"""The naive baseline: a plain Python loop over every line with `re`, counting what logscope's
ingest counts (vLLM stats lines, Received/Aborted requests, nginx requests by status, client
attempts). This is the parser people write first; the benchmark measures logscope against it.

    python bench/naive.py DIR   -> prints a JSON dict of counts
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

STATS = re.compile(r"(?:Engine \d+: |Avg prompt throughput: |Throughput: ).*Running: (\d+) reqs")
RECEIVED = re.compile(r"Received request (\S+?):")
ABORTED = re.compile(r"Aborted request(?:\(s\))? (.+?)\.?\s*$")
NGINX = re.compile(r"^(\S+) msec=(\d+\.\d+) rid=(\w+) .*? status=(\d+) rt=([\d.]+)")


def count(root: Path) -> dict:
    c: Counter[str] = Counter()
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        with open(p, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                c["lines"] += 1
                if p.name.startswith("vllm"):
                    if STATS.search(line):
                        c["stats_lines"] += 1
                    elif RECEIVED.search(line):
                        c["received"] += 1
                    else:
                        m = ABORTED.search(line)
                        if m:
                            c["aborted_ids"] += len(m.group(1).split(","))
                elif p.name.startswith("nginx-access"):
                    m = NGINX.match(line)
                    if m:
                        c["gateway_requests"] += 1
                        c[f"status_{m.group(4)}"] += 1
                elif p.suffix == ".jsonl":
                    rec = json.loads(line)
                    if rec.get("kind") == "attempt_send":
                        c["client_attempts"] += 1
    return dict(sorted(c.items()))


if __name__ == "__main__":
    print(json.dumps(count(Path(sys.argv[1]))))
