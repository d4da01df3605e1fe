"""The meter itself, on a replayed pattern whose true peak is known.

An interleaved sequence of allocations and frees (sizes in MiB) inside the region, with
a tensor (and a view of it) live before the region:

    phase "fill":  + a 4, + b 3                   live  7
    phase "swap":  - a,   + c 6                   live  9   <- the running peak
                   - b                            live  6
    phase "drain": - c,   + d 8 (the largest one) live  8
                   - d,   + e 2 (kept)            live  2   (the final value)

The peak (9 MiB above what was live before) is neither the sum of the allocations
(23 MiB), nor the final live value (2 MiB), nor the largest single allocation (8 MiB),
and it lies in phase "swap". A meter that summed allocations, reported the final live
value, or counted the pre-region tensor twice (once per view) fails here.

    python3 test_peak_meter.py                  # the real meter: exit 0
    python3 test_peak_meter.py --broken sum     # reports the sum of allocations: exit 1
    python3 test_peak_meter.py --broken final   # reports the final live value: exit 1
"""

import argparse
import sys

import torch

from peak_meter import PeakMeter, live_storage_bytes

MIB = 2**20
BEFORE_BYTES = 1000 * 4  # one fp32 tensor of 1000 elements, live before the region
PEAK_ABOVE_BEFORE = 9 * MIB
PEAK_PHASE = "swap"
SUM_OF_ALLOCATIONS = (4 + 3 + 6 + 8 + 2) * MIB
FINAL_LIVE = 2 * MIB
LARGEST_ALLOCATION = 8 * MIB


def _alloc(mib):
    return torch.empty(mib * MIB, dtype=torch.uint8)


def replay(meter):
    """Runs the pattern inside `meter`; returns the tensor kept at the end."""
    with meter:
        with meter.phase("fill"):
            a = _alloc(4)
            b = _alloc(3)
        with meter.phase("swap"):
            del a
            c = _alloc(6)
            del b
        with meter.phase("drain"):
            del c
            d = _alloc(8)
            del d
            e = _alloc(2)
    return e


def check_meter(meter_cls):
    """Runs the pattern with a meter of class `meter_cls`; returns the list of failures."""
    baseline = live_storage_bytes()
    before = torch.ones(1000)  # 4000 bytes
    before_view = before[10:20]  # same storage: counted once  # noqa: F841
    meter = meter_cls()
    kept = replay(meter)
    failures = []
    counted_before = meter.live_before_bytes - baseline
    if counted_before != BEFORE_BYTES:
        failures.append(f"live-before counted {counted_before:,} bytes of pre-region tensors, "
                        f"expected {BEFORE_BYTES:,} (one storage, two views, counted once)")
    rise = meter.peak_bytes - meter.live_before_bytes
    if rise != PEAK_ABOVE_BEFORE:
        hint = {SUM_OF_ALLOCATIONS: " = the sum of all allocations",
                FINAL_LIVE: " = the final live value",
                LARGEST_ALLOCATION: " = the largest single allocation"}.get(rise, "")
        failures.append(f"peak rose {rise:,} bytes above live-before{hint}; "
                        f"the true running peak is {PEAK_ABOVE_BEFORE:,}")
    if meter.peak_phase != PEAK_PHASE:
        failures.append(f"peak placed in phase '{meter.peak_phase}', expected '{PEAK_PHASE}'")
    print(f"{meter_cls.__name__}: peak {meter.peak_bytes:,} = live before "
          f"{meter.live_before_bytes:,} + {rise:,} (expected + {PEAK_ABOVE_BEFORE:,}), "
          f"phase '{meter.peak_phase}'")
    del kept
    return failures


class _TracingMeter(PeakMeter):
    """A PeakMeter that keeps its trace, for the broken meters below."""

    def __init__(self):
        super().__init__(keep_trace=True)

    def _cpu_memory_events(self):
        events = [e for e in self.last_trace if e.get("name") == "[memory]"
                  and e.get("args", {}).get("Device Type", 0) == 0]
        return sorted((float(e["ts"]), int(e["args"]["Bytes"]), int(e["args"]["Total Allocated"]))
                      for e in events)


class SumOfAllocationsMeter(_TracingMeter):
    """Broken on purpose: the sum of every allocation, frees ignored."""

    def _read_trace(self):
        super()._read_trace()
        self.peak_bytes = self.live_before_bytes + sum(
            b for _, b, _ in self._cpu_memory_events() if b > 0)


class FinalLiveMeter(_TracingMeter):
    """Broken on purpose: the live bytes when the region ends, not the running peak."""

    def _read_trace(self):
        super()._read_trace()
        memory = self._cpu_memory_events()
        if memory:
            start = memory[0][2] - memory[0][1]
            self.peak_bytes = self.live_before_bytes + memory[-1][2] - start


BROKEN = {"sum": SumOfAllocationsMeter, "final": FinalLiveMeter}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broken", choices=sorted(BROKEN),
                        help="check a deliberately broken meter instead (must fail: exit 1)")
    args = parser.parse_args()
    meter_cls = BROKEN[args.broken] if args.broken else PeakMeter
    failures = check_meter(meter_cls)
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
