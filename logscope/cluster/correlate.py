"""The correlation's time slices as tasks on the session's cluster, one slice a task (``slices.one_slice``).

This process finds what every slice takes from the whole input (the clock offsets, the margins, the edges), as
in-process; the workers each read one slice's rows from OUT (widened by the same margin), link them and write
the slice's requests there; their narrow rows come back here in slice order, to be keyed and joined as
in-process (``slices.correlate``). Diagnose and render stay here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ..correlate import narrow
from . import current


def each(fn: Callable[..., narrow.Narrow], args: list[tuple]) -> Iterator[narrow.Narrow]:
    """``fn`` of every slice's arguments as tasks, all at once; their results in slice order."""
    client = current().client
    # the shared arguments (the whole input's answers, the client pick) go to the cluster once
    shared = client.scatter(list(args[0][5:9]), broadcast=True) if args else []
    futs = [
        client.submit(fn, *a[:5], *shared, *a[9:], pure=False, priority=len(args) - k)
        for k, a in enumerate(args)
    ]
    try:
        for fut in futs:
            yield fut.result()  # a task's exception is raised here, with its traceback
            fut.release()
    finally:
        for fut in futs:
            fut.cancel()
