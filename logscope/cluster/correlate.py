"""The correlation's time slices as tasks on the session's cluster, one slice a task (``slices.one_slice``).

This process finds what every slice takes from the whole input (the clock offsets, the margins, the edges), as
in-process; the workers each read one slice's rows from OUT (widened by the same margin), link them and write
the slice's requests there; their narrow rows come back here in slice order, to be keyed and joined as
in-process (``slices.correlate``). Diagnose and render stay here.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..correlate import run_columns
from ..correlate.slices import SliceContext, SliceFn, SliceTask
from . import current


def each(fn: SliceFn, tasks: list[SliceTask], shared: SliceContext) -> Iterator[run_columns.RunColumns]:
    """``fn`` of every slice's task as cluster tasks, all at once; their results in slice order."""
    if not tasks:
        return
    client = current().client
    # the context every slice shares (the whole input's answers, the client pick) goes to the cluster once
    context = client.scatter(shared, broadcast=True)
    futs = [client.submit(fn, t, context, pure=False, priority=len(tasks) - k) for k, t in enumerate(tasks)]
    try:
        for fut in futs:
            yield fut.result()  # a task's exception is raised here, with its traceback
            fut.release()
    finally:
        for fut in futs:
            fut.cancel()
