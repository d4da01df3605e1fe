#!/usr/bin/env bash
# bash examples/custom-yaml-model/run.sh build/cli/headroom
source "$(dirname "$0")/../lib.sh"
expect 0 "^  plan: micro-batch [0-9]+ x [0-9]+ accumulation = global batch 32" -- \
  "$headroom" plan --model "$here/smollm2-360m.yaml" --gpu rtx-4090 --lora-rank 16 \
  --seq-len 4096 --global-batch 32
expect 0 "timeline: timeline.csv \([0-9]+ events\), chart: timeline.svg" -- \
  "$headroom" simulate --model "$here/smollm2-360m.yaml" --gpu l4 --lora-rank 16 \
  --seq-len 2048 --micro-batch 2 --csv timeline.csv --svg timeline.svg
grep -q "peak at:" timeline.svg
test "$(head -1 timeline.csv | cut -d, -f1)" = "event"
echo "custom-yaml-model: as documented"
