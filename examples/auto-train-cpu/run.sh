#!/usr/bin/env bash
# bash examples/auto-train-cpu/run.sh build/cli/headroom   (a LibTorch build)
source "$(dirname "$0")/../lib.sh"
expect 0 "measured peak .* vs predicted" -- \
  "$headroom" train --auto --model tiny-llama --device cpu --memory-limit 6MiB \
  --seq-len 64 --global-batch 8 --steps 3 --report run.json
python3 - <<'PY'
import json
r = json.load(open("run.json"))
plan, budget = r["plan"], r["budget"]
assert plan["global_batch"] == 8 and r["steps"] == 3, r
assert budget == {"bytes": 6 << 20, "source": "--memory-limit"}, budget
assert abs(r["error_pct"]) < 1.0, f"measured vs predicted: {r['error_pct']:+.3f}%"
assert r["measured"]["peak_allocated_bytes"] < 6 << 20, r["measured"]
print(f"ok: micro-batch {plan['micro_batch']} x {plan['grad_accum_steps']}, {plan['precision']}, "
      f"checkpoint {plan['checkpoint']}; {r['error_pct']:+.4f}% measured vs predicted")
PY
[ -s plan.yaml ] || { echo "no plan.yaml beside run.json"; exit 1; }
expect 2 "What would make it fit" -- \
  "$headroom" train --auto --model tiny-llama --device cpu --memory-limit 1MiB \
  --seq-len 64 --global-batch 8 --steps 3
echo "auto-train-cpu: as documented"
