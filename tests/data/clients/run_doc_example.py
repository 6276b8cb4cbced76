"""Run the Python example of docs/client-schema.md against fake_openai_server.py.

``python run_doc_example.py OUT.jsonl`` writes the records the documented helper produces for 6 calls
against a local test server that answers 502 to every 3rd request, stalls every 5th past the 1 s timeout
and drops every 7th connection. The test suite imports ``example_namespace`` to run the same block.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[2] / "docs" / "client-schema.md"


def example_namespace(doc: Path = DOC) -> dict:
    """Execute the first ```python block of the doc; return its globals (log_attempt, call)."""
    code = re.search(r"```python\n(.*?)```", doc.read_text(), re.S).group(1)
    ns: dict = {"__name__": "client_schema_example"}
    exec(compile(code, str(doc), "exec"), ns)  # noqa: S102 - the documented example, run as a user would
    return ns


def run(out_path: Path, calls: int = 6) -> None:
    sys.path.insert(0, str(HERE))
    import fake_openai_server as srv

    for k, v in {"fail_every": 3, "slow_every": 5, "slow_s": 1.5, "drop_every": 7, "tokens": 8}.items():
        setattr(srv.ARGS, k, v)
    server = srv.serve(0)
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
    ns = example_namespace()
    try:
        with open(out_path, "w") as out:
            for i in range(calls):
                ns["call"](url, {"model": "tiny", "prompt": f"request {i}", "max_tokens": 8}, out, retries=2,
                           timeout=1.0, concurrency=1)
    finally:
        server.shutdown()


if __name__ == "__main__":
    run(Path(sys.argv[1]))
