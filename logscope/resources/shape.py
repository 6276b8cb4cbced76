"""What a folder costs by its shape, not only by its bytes: per file read, per replica analysed (issue #44: 800
replica folders of a 150-line vLLM log, 26 MB in all, peaked at 2.62 GB whatever ``--max-memory`` said).

The figures were measured on ``bench/generate.py``'s fleets (one real vLLM log a replica, 100 / 400 / 800 replicas),
each stage in a fresh process (docs/performance.md item 44):

* ingest holds a batch of file heads while it detects their formats (about ``DETECT_FACTOR`` times their bytes: 800
  heads of 28 KB took 180 MB), the parsed rows of every stream until it spills them (each small frame costs about
  ``FRAME_BYTES`` beyond its columns: 1,200 frames of 5.9 MB estimated took 95 MB), and then the server's request
  events of a derive pass (``EVENT_BYTES`` each: 139,200 events of 800 replicas in one pass, +73 MB);
* the later stages cost about ``LATER_FLOOR`` plus ``PER_REPLICA`` a replica besides their records
  (``logscope.resources.budget``): diagnosis of 100 / 400 / 800 replicas peaked at 158 / 188 / 206 MiB;
* per client stream, correlation first picks one view of each client from every client source's rows
  (``PICK_ROW`` each), whether it then correlates in time slices or not; a gateway's rows are among the records.

When the budget is below what ingest would take with its default batches, the batches shrink to fit: heads are
detected a smaller batch at a time and parsed rows are spilled to part files sooner, a stream over the files that
gives the same tables; ``IngestLimits.note`` says so in every output.
"""

from __future__ import annotations

from dataclasses import dataclass

from .memory import gib

MIB = 2**20
IMPORTED = 64 * MIB  # python, polars and logscope imported, before any file is read
DETECT_FACTOR = 8  # bytes held while detecting, per byte of the heads of one batch
FRAME_BYTES = 80 * 1024  # a parsed frame's real cost beyond ``DataFrame.estimated_size()``
PER_FILE = (
    96 * 1024
)  # what every file's state costs until ingest ends (tallies, messages, its parser's state)
STORE_REAL = 2  # the store's real footprint per byte it counts (allocator pages, concat copies at a spill)
# a chunk parsed ahead of its stream's turn holds its lines and their parsed rows: a 4.4 MiB chunk of the lab's real
# nginx access lines gave 3.0 MiB of rows, +6 MiB resident while parsed (``ingest.streams.parsed``)
AHEAD_FACTOR = 2
EVENT_BYTES = 640  # a request event's cost in a pass of logscope.ingest.derive (~520 measured, rounded up)
DETECT_DEFAULT = 16 * MIB  # ``logscope.ingest.DETECT_BYTES``
STORE_DEFAULT = 64 * MIB  # ``IngestOptions.memory_bytes``
# below these, batches cost more in calls than they save
DETECT_MIN, STORE_MIN, PASS_MIN = 256 * 1024, 1 * MIB, 10_000
LATER_FLOOR = 176 * MIB  # the later stages' peak on a folder of a few small logs (rounded up)
PER_REPLICA = 80 * 1024  # ... and what each replica adds (0.07 MiB measured, rounded up)
# a client row's cost while correlation picks one view per client (``correlate.client_sources.kept_client_sources``,
# before any slice: every client source's rows, whatever the budget): 32 / 64-replica fleets of real sizes, 0.45 /
# 1.7 M client rows, 134 / 442 MiB (~250 bytes a row), rounded up
PICK_ROW = 320


@dataclass(frozen=True)
class IngestLimits:
    """The batch sizes ingest uses, and why when they are not the defaults."""

    detect_bytes: int
    store_bytes: int
    note: str | None = None
    pass_rows: int | None = (
        None  # request events a derive pass holds (None: derive's own sizes)  # said in the outputs when the batches were shrunk to hold the budget
    )
    ahead_bytes: int | None = None  # a stream's chunks parsed ahead of its turn (None: a few, by their count)


def ingest_need(
    files: int, head_bytes: int, detect_bytes: int = DETECT_DEFAULT, store_bytes: int = STORE_DEFAULT
) -> int:
    """Estimated peak of ingesting ``files`` files whose heads (up to ``sources.HEAD_BYTES`` each) sum to
    ``head_bytes``, with these batch sizes."""
    return int(
        IMPORTED + PER_FILE * files + DETECT_FACTOR * min(head_bytes, detect_bytes) + STORE_REAL * store_bytes
    )


# the share of the budget the batches are sized for: the estimates are measured means, and the peak moves with
# the allocator and the threads' timing (400 replicas under a 250 MiB budget peaked at 218-259 MiB when sized for
# all of it, 207-222 sized for 85 % on a quiet machine and 259-261 at a load of 8-25; tests/test_replicas.py). That
# peak was the later stages' process, not ingest's (170-198 MiB): diagnosis gathered its ranges 100,000 rows of every
# column at a time, now 4 MiB of the columns read (``diagnose.figures.GATHER_BYTES``; docs/performance.md, item 44)
# On polars 2.1 the ingest's process was the larger again (231-245 MiB) until glibc's heap was tamed (item 46).
HEADROOM = 0.75


def ingest_limits(budget: int | None, files: int, head_bytes: int) -> IngestLimits:
    """The default batches when they fit ``budget``; else batches that share what the files leave of it."""
    whole = ingest_need(files, head_bytes)
    if budget is None or whole <= budget * HEADROOM:
        return IngestLimits(DETECT_DEFAULT, STORE_DEFAULT)
    room = max(0, int(budget * HEADROOM) - IMPORTED - PER_FILE * files)
    # a third of the room each for the heads being detected, the rows held and a derive pass (never at their
    # peak at once, but what one leaves behind is not always handed back before the next starts)
    detect = max(DETECT_MIN, min(DETECT_DEFAULT, room // 3 // DETECT_FACTOR))
    store = max(STORE_MIN, min(STORE_DEFAULT, room // 3 // STORE_REAL))
    pass_rows = max(PASS_MIN, room // 3 // EVENT_BYTES)
    # the chunks parsed ahead take the heads' third: detection is over before the first stream is read
    ahead = room // 3 // AHEAD_FACTOR
    fits = ingest_need(files, head_bytes, detect, store) <= budget
    note = (  # "memory: " starts it: summary.md shows the assumptions' notes that start so
        f"memory: reading the {files:,} files at once would take about {gib(whole)}, more than the "
        f"{gib(budget)} budget (--max-memory): their formats were detected {gib(detect)} of heads at a time, "
        f"parsed rows written to part files past {gib(store)} and server requests built {pass_rows:,} events at "
        "a time, which gives the same tables"
        + ("" if fits else f"; even so about {gib(ingest_need(files, head_bytes, detect, store))} is needed")
    )
    return IngestLimits(detect, store, note, pass_rows, ahead)


def pick_need(client_rows: int) -> int:
    """The later stages' peak while the client views are picked: it is over before the first slice is read, so
    the peak of a run is the larger of this and the slices' (``resources.budget``)."""
    return LATER_FLOOR + PICK_ROW * client_rows


def later_need(replicas: int) -> int:
    """What the later stages take besides their records, for ``replicas`` replicas' server logs."""
    return LATER_FLOOR + PER_REPLICA * replicas
