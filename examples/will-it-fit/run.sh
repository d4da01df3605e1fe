#!/usr/bin/env bash
# bash examples/will-it-fit/run.sh build/cli/headroom
source "$(dirname "$0")/../lib.sh"
expect 0 "DOES NOT FIT: short by .* \(out of memory at step 1, " -- \
  "$headroom" plan --model "$here/config.json" --gpu rtx-4090 --micro-batch 8 --seq-len 2048 \
  --precision amp-bf16
expect 0 "^FITS: .* of headroom left on rtx-4090" -- \
  "$headroom" plan --model "$here/config.json" --gpu rtx-4090 --micro-batch 2 --grad-accum 4 \
  --seq-len 2048 --precision amp-bf16 --checkpoint all
echo "will-it-fit: as documented"
