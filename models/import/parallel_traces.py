"""The traces of one import, run on the machine's cores at once.

Each traced (micro-batch, sequence) point is independent: the import forks one worker
per core from the process that has imported transformers and built the configs, each
worker traces its points on fake tensors and sends back what the lifter reads of its
recording (a trace holds no real memory; the recordings are small). Fake tensor dispatch
is pure Python, so two cores trace two points in the time of one.
"""

import multiprocessing
import os
import types

# What a recording keeps only while it traces: the live tensors and storages, the
# module stack, the hooks' bookkeeping. The lifter reads the rest.
_TRACING_ONLY = {"by_object", "live_storage", "module_names", "module_stack", "_named",
                 "_pending_saves", "_backward_returned", "_backward_node"}

_job = None  # the function the forked workers run: point index -> (recording, extra)


class Edge:
    """An autograd node the lifter reads only the sequence number of (graph_lift._grads):
    the node itself lives in the worker."""

    __slots__ = ("seq",)

    def __init__(self, seq):
        self.seq = seq

    def _sequence_nr(self):
        return self.seq


def portable(recording):
    """The recording without what only tracing needs, ready to be pickled."""
    kept = {k: v for k, v in vars(recording).items() if k not in _TRACING_ONLY}
    for storage in kept["storages"].values():
        storage.ref = None  # a weak reference to a fake storage of the worker
    for op in kept["ops"]:
        if op.grads is not None:
            flows, edges = op.grads
            op.grads = (flows, [None if n is None else Edge(n._sequence_nr()) for n in edges])
    return types.SimpleNamespace(**kept)


class _WorkerExit(RuntimeError):
    """A worker's SystemExit (a one-line refusal), carried back to the parent: a pool's
    worker that raised SystemExit itself would die without answering."""


def _run(index):
    try:
        recording, extra = _job(index)
    except SystemExit as e:
        raise _WorkerExit(str(e)) from None
    return portable(recording), extra


def workers():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_all(job, count):
    """[job(0), ..., job(count - 1)], each (recording, extra), on up to workers() forked
    processes; in this process when there is one core, one job or no fork."""
    global _job
    processes = min(workers(), count)
    if processes <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [job(i) for i in range(count)]
    _job = job
    try:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            return pool.map(_run, range(count), chunksize=1)
    except _WorkerExit as e:
        raise SystemExit(str(e)) from None
    finally:
        _job = None
