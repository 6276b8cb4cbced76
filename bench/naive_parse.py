"""A naive Python *parser*: the per-line loop people write when they need fields, not just counts.

bench/naive.py only counts five kinds of line. This loop extracts, for the same files, roughly
what logscope's tables hold: the vLLM header (process, pid, level, time) of every line and the
fields of stats and request lines, every nginx access field (with the upstream lists split into
attempts), the nginx error header, the client log prefix and message, and every JSONL record,
with timestamps parsed to datetimes and numbers to int/float. Rows are built as dicts and
counted, not written: a lower bound for such a parser. It prints the same counts as naive.py.

    python bench/naive_parse.py DIR   -> prints a JSON dict of counts
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

YEAR = 2026
VLLM = re.compile(
    r"^(?:\((?P<proc>[^)]*?) pid=(?P<pid>\d+)\) )?(?P<lvl>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d) \[(?P<src>[^\]]+)\] (?P<msg>.*)$"
)
STATS = re.compile(
    r"(?:Engine (?P<engine>\d+): )?Avg prompt throughput: (?P<ptps>[\d.]+) tokens/s, "
    r"Avg generation throughput: (?P<gtps>[\d.]+) tokens/s, Running: (?P<run>\d+) reqs, "
    r"(?:Swapped: (?P<swap>\d+) reqs, )?(?:Waiting|Pending): (?P<wait>\d+) reqs"
    r"(?:, (?P<dev>\w+) KV cache usage: (?P<kv>[\d.]+)%)?"
)
RECEIVED = re.compile(r"^Received request (\S+?): .*?max_tokens=(\d+)")
ADDED = re.compile(r"^Added request (\S+?)\.?$")
ABORTED = re.compile(r"^Aborted request(?:\(s\))? (.+?)\.?\s*$")
ACCESS = re.compile(
    r"^(?P<time>\S+) msec=(?P<msec>\d+\.\d+) rid=(?P<rid>\w+) port=(?P<port>\d+) "
    r"client_rid=\"(?P<crid>[^\"]*)\" \"(?P<req>[^\"]*)\" status=(?P<status>\d+) rt=(?P<rt>[\d.]+) "
    r"ua=\"(?P<ua>[^\"]*)\" us=\"(?P<us>[^\"]*)\" urt=\"(?P<urt>[^\"]*)\" uct=\"(?P<uct>[^\"]*)\" "
    r"uht=\"(?P<uht>[^\"]*)\" req_len=(?P<len>\d+) sent=(?P<sent>\d+)"
)
ERROR = re.compile(
    r"^(?P<ts>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(?P<lvl>\w+)\] (?P<pid>\d+)#(?P<tid>\d+): "
    r"(?:\*(?P<conn>\d+) )?(?P<msg>.*)$"
)
CLIENT = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) (?P<lvl>\w+) (?P<logger>\S+) "
    r"\[(?P<thread>[^\]]+)\] (?P<msg>.*)$"
)
STATUS = re.compile(r"HTTP/[\d.]+ (\d{3})|HTTP Response: \S+ (?:\S+ \")?(\d{3})")


def _num(v: str | None, kind=float):
    return None if v in (None, "-", "") else kind(v)


def vllm(line: str, c: Counter) -> None:
    m = VLLM.match(line)
    if not m:
        return
    row = m.groupdict()
    row["ts"] = datetime.strptime(f"{YEAR}-{row['ts']}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    msg = row["msg"]
    s = STATS.search(msg)
    if s:
        row |= {k: _num(v) for k, v in s.groupdict().items() if k != "dev"}
        c["stats_lines"] += 1
    elif (r := RECEIVED.match(msg)) is not None:
        row |= {"id": r.group(1), "max_tokens": int(r.group(2))}
        c["received"] += 1
    elif (a := ADDED.match(msg)) is not None:
        row["id"] = a.group(1)
    elif (a := ABORTED.match(msg)) is not None:
        ids = a.group(1).split(", ")
        c["aborted_ids"] += len(ids)
    c["rows"] += 1


def access(line: str, c: Counter) -> None:
    m = ACCESS.match(line)
    if not m:
        return
    row = m.groupdict()
    end = datetime.fromtimestamp(float(row["msec"]), UTC)
    lists = [row[k].replace(" : ", ", ").split(", ") for k in ("ua", "us", "urt", "uct", "uht")]
    for k in range(max(len(x) for x in lists)):
        attempt = {
            "ts_end": end,
            "attempt": k + 1,
            "status": int(row["status"]),
            "rt": float(row["rt"]),
            "upstream": lists[0][k] if k < len(lists[0]) else None,
            "upstream_status": _num(lists[1][k] if k < len(lists[1]) else None, int),
            "duration": _num(lists[2][k] if k < len(lists[2]) else None),
        }
        c["rows"] += bool(attempt)
    c["gateway_requests"] += 1


def error(line: str, c: Counter) -> None:
    m = ERROR.match(line)
    if m:
        row = m.groupdict()
        row["ts"] = datetime.strptime(row["ts"], "%Y/%m/%d %H:%M:%S").replace(tzinfo=UTC)
        c["rows"] += 1


def client(line: str, c: Counter) -> None:
    m = CLIENT.match(line)
    if m:
        row = m.groupdict()
        row["ts"] = datetime.fromisoformat(row["ts"]).replace(tzinfo=UTC)
        s = STATUS.search(row["msg"])
        row["status"] = int(s.group(1) or s.group(2)) if s else None
        c["rows"] += 1


def jsonl(line: str, c: Counter) -> None:
    rec = json.loads(line)
    for k in ("t", "send", "end"):
        if isinstance(rec.get(k), float):
            rec[k] = datetime.fromtimestamp(rec[k], UTC)
    if rec.get("kind") == "attempt_send":
        c["client_attempts"] += 1
    c["rows"] += 1


def parse(root: Path) -> dict:
    c: Counter[str] = Counter()
    for p in sorted(root.rglob("*")):
        if not p.is_file():
            continue
        name = p.name
        fn = (
            vllm
            if name.startswith("vllm")
            else access
            if name.startswith("nginx-access")
            else error
            if name.startswith("nginx-error")
            else jsonl
            if p.suffix == ".jsonl"
            else client
            if name.startswith("client")
            else None
        )
        with open(p, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                c["lines"] += 1
                if fn is not None:
                    fn(line.rstrip("\n"), c)
    return dict(sorted(c.items()))


if __name__ == "__main__":
    print(json.dumps(parse(Path(sys.argv[1]))))
