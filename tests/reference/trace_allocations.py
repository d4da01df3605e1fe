"""Debugging aid: the allocations of one reference case in order, with the ATen op that
made each one (the innermost op running at that moment), for comparing with
`headroom simulate --csv`.

    python3 trace_allocations.py 'case name substring' [min_bytes]
"""

import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cases import CASES  # noqa: E402
import hf_training_run  # noqa: E402
import peak_meter  # noqa: E402


def main():
    case = next(c for c in CASES if sys.argv[1] in c.name)
    min_bytes = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    config_dir = tempfile.mkdtemp()
    with open(os.path.join(config_dir, "config.json"), "w") as f:
        json.dump(case.hf_config(), f)
    payload = dict(vars(case), config_dir=config_dir, threads=1)
    payload["lora_targets"] = list(case.lora_targets)
    meter = peak_meter.PeakMeter(keep_trace=True)
    hf_training_run.run(payload, meter)
    events = meter.last_trace
    ops = sorted(((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), e["name"])
                  for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")),
                 key=lambda o: o[0])
    mem = sorted((float(e["ts"]), int(e["args"]["Bytes"]), int(e["args"]["Total Allocated"]))
                 for e in events if e.get("name") == "[memory]")
    base = mem[0][2] - mem[0][1] if mem else 0
    for ts, nbytes, total in mem:
        if abs(nbytes) < min_bytes:
            continue
        names = [name for b, e, name in ops if b <= ts <= e]
        print(f"{nbytes:>+14,} {total - base:>14,}  {' > '.join(names[-3:])}")


if __name__ == "__main__":
    main()
