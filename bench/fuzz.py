"""Fuzz logscope with mutations of the real lab and public recordings (tests/fuzz/).

    python bench/fuzz.py --runs 200 --seed 7            # a longer run than CI's
    python bench/fuzz.py --seed 7 --case 42 --show      # replay one case, print its spec
    python bench/fuzz.py --spec case.json               # replay a spec (printed for every failure)

Each case is analysed by ``python -m logscope analyze`` in a process of its own (a timeout, an address-space
limit) and checked by tests/fuzz/harness.py. Failures whose fix belongs to another branch
(tests/fuzz/known.py) are counted apart; the exit status is 1 when a failure is new.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fuzz"))

from harness import TIMEOUT, Outcome, run_case  # noqa: E402
from known import KNOWN, classify  # noqa: E402
from mutations import Case, corpus, draw_case  # noqa: E402


def run(cases: list[tuple[str, Case]], jobs: int, timeout: float, log=print) -> dict:
    """Run the cases, ``jobs`` at once; the outcome table, the known and the new failures."""
    cache = Path.home() / ".cache"  # the Vega bundle is cached (and checked against its hash) once for all
    t0 = time.monotonic()

    def one(item: tuple[str, Case]) -> tuple[str, Case, Outcome]:
        label, case = item
        return label, case, run_case(case, timeout=timeout, cache=cache)

    exits: Counter = Counter()
    known: Counter = Counter()
    new: list[dict] = []
    with ThreadPoolExecutor(max_workers=jobs) as ex:
        for label, case, o in ex.map(one, cases):
            exits["timeout" if o.exit is None else o.exit] += 1
            for prop, detail in o.failures:
                k = classify(prop, detail)
                if k is not None:
                    known[k.id] += 1
                    log(f"{label}: known ({k.id}, {k.owner}): {prop}: {detail}")
                else:
                    new.append(
                        {
                            "case": label,
                            "property": prop,
                            "detail": detail,
                            "spec": case.to_json(),
                            "stderr": o.stderr_tail,
                        }
                    )
                    log(f"{label}: NEW {prop}: {detail}")
            if o.ok:
                log(f"{label}: ok (exit {o.exit}, {o.seconds:.1f} s)")
    return {
        "runs": len(cases),
        "seconds": round(time.monotonic() - t0, 1),
        "exits": dict(exits),
        "known": dict(known),
        "unseen_known": [k.id for k in KNOWN if k.id not in known],
        "new": new,
    }


def table(res: dict) -> str:
    rows = [f"{res['runs']} runs in {res['seconds']} s", "exit code | runs", "---|---"]
    rows += [f"{k} | {v}" for k, v in sorted(res["exits"].items(), key=lambda kv: str(kv[0]))]
    rows.append(f"known failures (other branches): {res['known'] or 'none'}")
    rows.append(f"new failures: {len(res['new'])}")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--first", type=int, default=0, help="index of the first case")
    ap.add_argument("--case", type=int, help="only this case of the seed")
    ap.add_argument("--spec", type=Path, help="replay the case of this JSON spec")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=TIMEOUT)
    ap.add_argument("--show", action="store_true", help="print each case's spec")
    ap.add_argument("--report", type=Path, help="write the results as JSON here")
    a = ap.parse_args()
    if a.spec:
        cases = [(a.spec.name, Case.from_json(json.loads(a.spec.read_text())))]
    else:
        src = corpus()
        idx = [a.case] if a.case is not None else range(a.first, a.first + a.runs)
        cases = [(f"seed {a.seed} case {i}", draw_case(a.seed, i, src)) for i in idx]
    if a.show:
        for label, c in cases:
            print(label, json.dumps(c.to_json()))
    res = run(cases, a.jobs, a.timeout)
    print(table(res))
    for f in res["new"]:
        print(json.dumps(f, ensure_ascii=True))
    if a.report:
        a.report.write_text(json.dumps(res, indent=1, ensure_ascii=True))
    return 1 if res["new"] else 0


if __name__ == "__main__":
    sys.exit(main())
