"""The meter itself: a known allocation inside the region must raise the measured peak
by exactly its size, and tensors live before the region must be counted once."""

import sys

import torch

from peak_meter import PeakMeter


def main():
    before = torch.ones(1000)  # 4000 bytes, live before the region
    meter = PeakMeter()
    with meter:
        with meter.phase("known allocation"):
            t = torch.empty(2**30, dtype=torch.uint8)
            del t
    failures = []
    if meter.peak_bytes - meter.live_before_bytes != 2**30:
        failures.append(f"a 1 GiB tensor raised the peak by {meter.peak_bytes - meter.live_before_bytes}")
    if meter.live_before_bytes < before.nbytes:
        failures.append(f"live-before {meter.live_before_bytes} misses the 4000-byte tensor")
    if meter.peak_phase != "known allocation":
        failures.append(f"peak placed in '{meter.peak_phase}'")
    print(f"peak {meter.peak_bytes:,} = live before {meter.live_before_bytes:,} + 2^30")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
