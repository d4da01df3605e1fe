#!/usr/bin/env bash
# Runs every command in examples/README.md that needs no GPU and no download, and fails
# on the first that does not do what the README says. ctest runs it (Examples.*).
#
#   bash examples/run_examples.sh build/cli/headroom
set -euo pipefail
headroom=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

expect() {  # expect EXIT_CODE PATTERN -- command...
  local code=$1 pattern=$2
  shift 3
  set +e
  out=$("$@" 2>&1)
  got=$?
  set -e
  if [ "$got" != "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAILED: $* (exit $got, wanted $code and /$pattern/)"
    echo "$out" | tail -20
    exit 1
  fi
  echo "ok: $*"
}

# 1. A custom model spec, LoRA on a 24 GB card: the solver picks micro-batch and checkpoints.
expect 0 "^  plan: micro-batch" -- \
  "$headroom" plan --model "$here/smollm2-360m.yaml" --gpu rtx-4090 --lora-rank 16 \
  --seq-len 4096 --global-batch 32
# 2. A fixed plan that does not fit: the verdict, by how much, and the breakdown.
expect 0 "DOES NOT FIT: short by" -- \
  "$headroom" plan --model llama-3-8b --gpu rtx-4090 --precision amp-bf16 --micro-batch 4 \
  --seq-len 4096
# 3. The same request for HF Trainer, exported as TrainingArguments.
expect 0 "gradient_accumulation_steps" -- \
  "$headroom" plan --model llama-3-8b --gpu a100-80gb --lora-rank 16 --seq-len 4096 \
  --global-batch 64 --stack hf-trainer --emit hf
# 4. A plan file, then the memory timeline as CSV and SVG.
expect 0 "plan written" -- \
  "$headroom" plan --model "$here/smollm2-360m.yaml" --gpu l4 --lora-rank 16 --seq-len 2048 \
  --global-batch 16 -o plan.yaml
expect 0 "timeline" -- \
  "$headroom" simulate --model "$here/smollm2-360m.yaml" --gpu l4 --lora-rank 16 \
  --seq-len 2048 --micro-batch 2 --csv timeline.csv --svg timeline.svg
test -s plan.yaml && test -s timeline.csv && test -s timeline.svg
echo "all examples ran as documented"
