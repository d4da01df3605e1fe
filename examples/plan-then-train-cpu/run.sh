#!/usr/bin/env bash
# bash examples/plan-then-train-cpu/run.sh build/cli/headroom   (a LibTorch build)
source "$(dirname "$0")/../lib.sh"
expect 0 "plan written to plan.yaml" -- \
  "$headroom" plan --model tiny-llama --device cpu --seq-len 64 --global-batch 4 \
  --precision fp32 --stack headroom -o plan.yaml
expect 0 "measured peak .* vs predicted" -- \
  "$headroom" train --plan plan.yaml --steps 3 --report run.json
python3 - <<'PY'
import json
r = json.load(open("run.json"))
assert r["steps"] == 3, r
assert abs(r["error_pct"]) < 1.0, f"measured vs predicted: {r['error_pct']:+.3f}%"
assert r["loss_last"] < r["loss_first"], r
print(f"ok: run.json: {r['error_pct']:+.4f}% measured vs predicted, "
      f"loss {r['loss_first']:.3f} -> {r['loss_last']:.3f}")
PY
echo "plan-then-train-cpu: as documented"
