#!/usr/bin/env bash
# bash examples/solver-to-hf-trainer/run.sh build/cli/headroom
source "$(dirname "$0")/../lib.sh"
request=(--model llama-3-8b --gpu a100-80gb --lora-rank 16 --seq-len 4096 --global-batch 64
         --stack hf-trainer)
expect 0 "checkpoints all blocks or none; planned (all|none)" -- \
  "$headroom" plan "${request[@]}" --emit hf
"$headroom" plan "${request[@]}" --emit hf 2>/dev/null > training_args.json
# The same request solved freely: per-block checkpointing allowed.
"$headroom" plan "${request[@]}" --json > plan.json
python3 - <<'PY'
import json
args = json.load(open("training_args.json"))
plan = json.load(open("plan.json"))["plan"]
mb, accum = args["per_device_train_batch_size"], args["gradient_accumulation_steps"]
assert mb * accum == 64, (mb, accum)
assert args["bf16"] and not args["fp16"], args
assert isinstance(args["gradient_checkpointing"], bool), args
print(f"ok: TrainingArguments micro-batch {mb} x {accum} (solver without the export: "
      f"{plan['micro_batch']} x {plan['grad_accum_steps']}, "
      f"{len(plan['checkpointed_layers'])} blocks checkpointed)")
PY
echo "solver-to-hf-trainer: as documented"
