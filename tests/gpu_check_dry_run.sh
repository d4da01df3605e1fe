#!/usr/bin/env bash
# scripts/gpu_check.sh's dry run, for a machine without a GPU: no build, no CUDA; a
# stand-in nvidia-smi, canned run reports and reference rows (and one real CPU `train`
# where HEADROOM has LibTorch) go through its sampling, row and table code. Checks that
# it prints one table with the expected columns and rows.
#   gpu_check_dry_run.sh HEADROOM
set -euo pipefail
headroom=$(realpath "$1")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "gpu_check_dry_run: $*"; echo "--- output:"; cat "$work/stdout"; exit 1; }

rc=0
OUT="$work" GPU_CHECK_DRY_RUN=1 HEADROOM_BIN="$headroom" \
  timeout 60 bash "$here/../scripts/gpu_check.sh" >"$work/stdout" 2>&1 || rc=$?
cat "$work/stdout"
[ "$rc" = 0 ] || fail "exit $rc"
table="$work/gpu_check/table.txt"
[ -s "$table" ] || fail "no table.txt"

header="kind +configuration +predicted alloc +max_memory_allocated +error +predicted reserved"
header+=" +max_memory_reserved +error +predicted device +nvidia-smi used +error +status$"
[ "$(grep -cE "^$header" "$work/stdout")" = 1 ] || fail "not one table header with every column"
[ "$(grep -cE '^(train|reference) ' "$table")" = 12 ] || fail "not 8 train and 4 reference rows"
grep -q '^12 rows, 2 failed, 1 skipped$' "$table" || fail "no '12 rows, 2 failed, 1 skipped' line"
# train --auto's budget line (the canned report has none; nvidia-smi's stand-in says 500).
grep -q '^budget of train --auto: .*nvidia-smi free before the run: 500 MiB$' "$table" ||
  fail "no train --auto budget line"
grep -qE '^reference .*( +-){9} +skipped \(past the [0-9]+ s budget\)$' "$table" ||
  fail "no skipped reference row"
# A canned CUDA report: allocated, reserved and device (reserved + the plan's CUDA
# context) against the stand-in nvidia-smi's 3,700 MiB less its idle 500.
read -r device smi_error < <("$headroom" plan --model gpt2 --gpu h200 --seq-len 128 \
  --micro-batch 1 --json | python3 -c "import json, sys; p = json.load(sys.stdin)['peak']
d = 3258974208 + p['device_bytes'] - p['reserved_bytes']
print(f'{d / 2**20:,.1f}', f'{100 * (d - 3200 * 2**20) / (3200 * 2**20):+.2f}%')")
row=$(grep -E '^train +gpt2-lora-ckpt ' "$table" | tr -s ' ')
[ "$row" = "train gpt2-lora-ckpt 2,405.6 2,384.2 +0.90% 3,108.0 3,147.1 -1.24% $device 3,200.0 $smi_error ok" ] ||
  fail "the canned CUDA report's row is not as computed (device $device, error $smi_error)"
grep -qE '^train +gpt2-oom-replan( +-){9} +FAILED \(exit 3' "$table" || fail "no failed train row"
grep -qE '^reference +gpt2 fp32 adamw eager mb2 s256 +1\.0 +1\.0 +\+4\.86% .* ok$' "$table" ||
  fail "the canned reference row is not as computed"
grep -qE "^reference .* 2\.0 +- +- .*outside the suite's bound$" "$table" ||
  fail "a reference row without measured reserved bytes is not shown as '-'"
grep -qE '^reference +bert-base .*FAILED \(exit 2, see ref-3\.log\)$' "$table" ||
  fail "no failed reference row"
awk -F'\t' 'NF != 9 { exit 1 }' "$work/gpu_check/table.tsv" || fail "table.tsv rows are not 9 columns"
if "$headroom" train --help >/dev/null 2>&1; then  # a real CPU run report went through
  grep -qE '^train +gpt2-full-bf16 +[0-9.,]+ +[0-9.,]+ +[-+][0-9.]+% +- +- +- +- +- +- +ok$' \
    "$table" || fail "the CPU train run's row is not as expected"
fi
echo "gpu_check_dry_run: ok"
