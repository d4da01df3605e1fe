#!/usr/bin/env bash
# train --auto: the plan solved against the budget of the device it runs on, printed,
# written and trained; a budget nothing fits in exits 2 before anything is loaded.
#   train_auto_test.sh HEADROOM
set -euo pipefail
headroom="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
# The issue's request. GPT-2's fp32 weights, gradients and AdamW states take 1.85 GiB, more
# than 2 GiB less the 5% margin holds, so the plan is bf16. Where this CPU's bf16 matmuls
# run in ATen's own kernels (no AVX-512, so oneDNN is not called) GPT-2 trains at about 3
# tokens/s (measured under ONEDNN_MAX_CPU_ISA=AVX2: 11 minutes a step), so there the same
# 2 GiB trains 4 sequences of 64 tokens a step instead of 8 of 256.
seq_len=256 global_batch=8
if "$headroom" plan --device cpu --model gpt2 --precision bf16 | grep -q "CPU bf16 aten"; then
  echo "this CPU's bf16 matmuls run in ATen's kernels: a shorter request (sequence 64, batch 4)"
  seq_len=64 global_batch=4
fi
export global_batch
request=(--device cpu --model gpt2 --seq-len "$seq_len" --global-batch "$global_batch" --steps 2
         --report run.json)

# 200 MiB: no plan fits; exit 2 with what would make it fit, and no step, report or plan.
code=0
"$headroom" train --auto --memory-limit 200MiB "${request[@]}" > out.txt 2> err.txt || code=$?
[ "$code" -eq 2 ] || { echo "200MiB: exit $code, expected 2"; cat out.txt err.txt; exit 1; }
grep -q "What would make it fit" out.txt || { echo "200MiB: no suggestions"; exit 1; }
grep -q "no plan fits in 200.00 MiB (--memory-limit)" err.txt || { cat err.txt; exit 1; }
if grep -q "step 1/" out.txt || [ -e run.json ] || [ -e plan.yaml ]; then
  echo "200MiB: trained or wrote something"; exit 1
fi

# 2 GiB: a plan that fits, written beside the report, trained, and measured within 1% of
# its prediction and under the limit, which the allocator enforces.
"$headroom" train --auto --memory-limit 2GiB "${request[@]}" | tee out.txt
grep -q "^budget: 2.00 GiB (--memory-limit)" out.txt
python3 - <<'PY'
import json, os, re
global_batch = int(os.environ["global_batch"])
report = json.load(open("run.json"))
plan = report["plan"]
text = open("plan.yaml").read()
micro = int(re.search(r"micro_batch: (\d+)", text).group(1))
accum = int(re.search(r"grad_accum_steps: (\d+)", text).group(1))
assert micro * accum == global_batch == plan["global_batch"], (micro, accum, plan)
assert (plan["micro_batch"], plan["grad_accum_steps"]) == (micro, accum), plan
assert report["budget"] == {"bytes": 2 << 30, "source": "--memory-limit"}, report["budget"]
measured = report["measured"]["peak_allocated_bytes"]
assert abs(report["error_pct"]) <= 1.0, report["error_pct"]
assert measured < 2 << 30, measured
assert report["steps"] == 2 and report["oom_retries"] == 0, report
print(f"plan micro-batch {micro} x {accum}, {plan['precision']}, checkpoint "
      f"{plan['checkpoint']}; measured {measured:,} bytes, {report['error_pct']:+.3f}%")
PY
