"""Drive the real openai package against fake_openai_server.py and let its own logging write the log.

Used only to produce the real log files in this folder (see README.md). ``--style openai`` relies on
``OPENAI_LOG=debug`` (the SDK's own basicConfig); ``--style plain`` configures
``%(asctime)s - %(name)s - %(levelname)s - %(message)s`` at DEBUG for every logger (httpx/httpcore too);
``--style threads`` adds the thread name, with ``--threads`` workers; ``--style bare`` is
``logging.basicConfig(level=INFO)`` (``INFO:httpx:...``, no timestamp).
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading

FORMATS = {
    "plain": "%(asctime)s - %(name)s - %(levelname)s - %(message)s",
    "threads": "%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s",
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=["openai", "plain", "threads", "bare"], required=True)
    p.add_argument("--port", type=int, default=18731)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("--max-retries", type=int, default=2)
    p.add_argument("--stream", action="store_true")
    a = p.parse_args()
    if a.style == "bare":  # logging's default format: LEVEL:logger:message, no time
        logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    elif a.style != "openai":
        logging.basicConfig(level=logging.DEBUG, format=FORMATS[a.style], stream=sys.stderr)
        if a.style == "threads":
            logging.getLogger("httpcore").setLevel(logging.WARNING)
    import openai  # after logging is configured (OPENAI_LOG is read at import)

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{a.port}/v1", api_key="test", timeout=a.timeout,
                           max_retries=a.max_retries)
    todo = list(range(a.n))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            try:
                r = client.completions.create(model="tiny", prompt=f"request {i}", max_tokens=8, stream=a.stream)
                if a.stream:
                    for _ in r:
                        pass
            except openai.OpenAIError as e:
                print(f"request {i}: {type(e).__name__}", file=sys.stdout)

    threads = [threading.Thread(target=worker, name=f"w{k:02d}") for k in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


if __name__ == "__main__":
    main()
