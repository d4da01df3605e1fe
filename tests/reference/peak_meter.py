"""Exact peak of live CPU tensor bytes over a region of Python code.

torch.profiler(profile_memory=True) makes the CPU allocator report every allocation and
free as a `[memory]` event carrying a running "Total Allocated". That counter only sees
allocations made while profiling is on (c10's ProfiledCPUMemoryReporter frees only
what it recorded), so tensors already live when the region starts are added from a
`gc` scan of their storages. Peak = live-before + max(Total Allocated - counter at start).

    meter = PeakMeter()
    with meter:
        with meter.phase("forward"):
            ...
    meter.peak_bytes, meter.peak_phase
"""

import contextlib
import gc
import json
import os
import tempfile
import warnings

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def live_storage_bytes():
    """Bytes of every distinct tensor storage reachable from Python objects."""
    gc.collect()
    seen = {}
    with warnings.catch_warnings():  # isinstance() on deprecated torch attributes warns
        warnings.simplefilter("ignore")
        objects = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
    for obj in objects:
        try:
            if obj.device.type != "cpu":
                continue
            storage = obj.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
        except Exception:  # noqa: BLE001 - objects that refuse inspection hold no storage
            continue  # (a DTensor wrapper: its local shard is scanned on its own)
        if nbytes > 0:
            seen[ptr] = nbytes
    return sum(seen.values())


class PeakMeter:
    PHASE_PREFIX = "phase:"

    def __init__(self, keep_trace=False, unmeasured_phase=None, collective_frees=False):
        self.keep_trace = keep_trace  # keep the profiler's events in last_trace
        # gloo's worker threads drop the last reference to a collective's buffers (the
        # clone reduce-scatter all-reduces, all-gather's scratch), where the profiler
        # records no free: unseen, such a block would count to the end of the run. With
        # this set, a block allocated inside a c10d collective and never seen freed is
        # freed when the collective returns (the worker finishes with it before the
        # caller's wait() does).
        self.collective_frees = collective_frees
        # A phase whose allocations count toward the total but not toward the peak:
        # building a model inside the region, so that the profiler sees (and later
        # frees) memory that exists before training starts.
        self.unmeasured_phase = unmeasured_phase
        self.last_trace = []
        self.live_before_bytes = 0
        self.peak_bytes = 0
        self.peak_phase = "setup"
        self._profiler = None

    def __enter__(self):
        self.live_before_bytes = live_storage_bytes()
        self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
        self._profiler.__enter__()
        return self

    def __exit__(self, *exc):
        self._profiler.__exit__(*exc)
        if exc[0] is None:
            self._read_trace()
        return False

    @contextlib.contextmanager
    def phase(self, name):
        with record_function(self.PHASE_PREFIX + name):
            yield

    @staticmethod
    def _free_collective_buffers(memory, collectives):
        """`memory` with a free added at the end of the collective for each block
        allocated inside one and never seen freed (its address allocated again, or the
        trace ending, before any free), and the running totals recomputed."""
        live = {}  # addr -> (bytes, ts) of the block last allocated there, not yet freed
        unseen = []
        for ts, nbytes, _, addr in memory:
            if nbytes > 0:
                if addr in live:
                    unseen.append(live[addr])
                live[addr] = (nbytes, ts)
            elif addr in live:
                del live[addr]
        unseen += live.values()
        extra = []
        for nbytes, ts in unseen:
            end = next((e for b, e in collectives if b <= ts <= e), None)
            if end is not None:
                extra.append((end, -nbytes, None, None))
        if not extra:
            return memory
        merged = sorted(memory + extra, key=lambda m: m[0])
        total = memory[0][2] - memory[0][1]
        out = []
        for ts, nbytes, _, addr in merged:
            total += nbytes
            out.append((ts, nbytes, total, addr))
        return out

    def _read_trace(self):
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            self._profiler.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.unlink(path)
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        if self.keep_trace:
            self.last_trace = events
        phases = []
        memory = []
        collectives = []
        for e in events:
            name = e.get("name", "")
            if name.startswith(self.PHASE_PREFIX) and e.get("ph") == "X":
                phases.append((float(e["ts"]), float(e["ts"]) + float(e["dur"]),
                               name[len(self.PHASE_PREFIX):]))
            elif name.startswith("c10d::") and e.get("ph") == "X":
                collectives.append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
            elif name == "[memory]":
                args = e.get("args", {})
                if args.get("Device Type", 0) != 0:  # 0 = CPU
                    continue
                memory.append((float(e["ts"]), int(args["Bytes"]), int(args["Total Allocated"]),
                               args.get("Addr")))
        memory.sort(key=lambda m: m[0])
        if self.collective_frees:
            memory = self._free_collective_buffers(memory, collectives)
        if not memory:
            self.peak_bytes = self.live_before_bytes
            return
        # The counter is cumulative over the process: start from its value before the
        # region's first event.
        _, bytes0, total0, _ = memory[0]
        start = total0 - bytes0
        skipped = [(b, e) for b, e, name in phases if name == self.unmeasured_phase]
        measured = [(ts, total) for ts, _, total, _ in memory
                    if not any(b <= ts <= e for b, e in skipped)]
        peak_total, peak_ts = max(((total, -ts) for ts, total in measured))
        peak_ts = -peak_ts  # the first event that reaches the peak
        self.peak_bytes = self.live_before_bytes + peak_total - start
        # The innermost phase holding the peak event.
        best = None
        for begin, end, name in phases:
            if begin <= peak_ts <= end and (best is None or end - begin < best[1] - best[0]):
                best = (begin, end, name)
        self.peak_phase = best[2] if best else "outside phases"
