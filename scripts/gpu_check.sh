#!/usr/bin/env bash
# For the GPU machine (see docs/runtime.md): builds against that machine's own torch,
# runs the runtime tests, then trains a set of configs on CUDA and records measured
# against predicted peaks (allocated and reserved) from each run report.
# Results: $OUT/gpu_check/ (or ./gpu_check/ when OUT is unset): build.log, tests.log,
# one run-*.json per config, and summary.tsv.
# Then the reference suite (tests/reference) on CUDA: real transformers + PEFT training
# steps, torch.cuda.max_memory_allocated / max_memory_reserved against `plan --gpu h200
# --stack pytorch`, in reference.tsv and reference.log.
# The machine has no package registry: the Debian headers and libraries the build needs
# (yaml-cpp, fmt, CLI11, nlohmann-json, GoogleTest, Boost.Graph) must come with the
# working tree under shared/deps, and transformers, peft and their dependencies as wheels
# under shared/wheels (scripts/pack_gpu_deps.sh makes both on a Debian machine).
# On a machine without a GPU every step up to the first CUDA call runs (a dry run).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-.}/gpu_check"
mkdir -p "$out"
deps="$PWD/shared/deps"
prefix=""
if [ -d "$deps" ]; then
  prefix="-DCMAKE_PREFIX_PATH=$deps/usr -DCMAKE_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export CPATH="$deps/usr/include:${CPATH:-}"
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt" ||
  echo "no nvidia-smi: a dry run on this machine" | tee "$out/gpu.txt"
# shellcheck disable=SC2086
if ! { cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADROOM_WITH_TORCH=ON \
         -DHEADROOM_BUILD_BENCHMARKS=OFF $prefix &&
       cmake --build build-gpu --target headroom headroom_runtime_tests; } >"$out/build.log" 2>&1; then
  echo "build failed; see $out/build.log"; tail -30 "$out/build.log"; exit 1
fi
# As ctest runs them: oneDNN pinned so the CPU-side bf16 kernels are the modelled ones.
ONEDNN_MAX_CPU_ISA=AVX512_CORE ./build-gpu/tests/runtime/headroom_runtime_tests >"$out/tests.log" 2>&1
echo "runtime tests: exit $? (log: $out/tests.log)"

printf "config\tpredicted_alloc\tmeasured_alloc\terror_pct\tpredicted_reserved\tmeasured_reserved\n" \
  >"$out/summary.tsv"
run() {  # name, then train flags
  local name="$1"; shift
  if ./build-gpu/cli/headroom train --gpu h200 --steps 3 --report "$out/run-$name.json" "$@" \
       >"$out/run-$name.log" 2>&1; then
    python3 - "$name" "$out/run-$name.json" >>"$out/summary.tsv" <<'PY'
import json, sys
r = json.load(open(sys.argv[2]))
p, m = r["predicted"], r["measured"]
print("\t".join(map(str, [sys.argv[1], p["peak_allocated_bytes"], m["peak_allocated_bytes"],
      round(r["error_pct"], 3), p.get("peak_reserved_bytes", ""), m.get("peak_reserved_bytes", "")])))
PY
  else
    printf "%s\tFAILED (see run-%s.log)\n" "$name" "$name" >>"$out/summary.tsv"
  fi
}
run gpt2-full-bf16      --model gpt2 --seq-len 1024 --micro-batch 8 --precision amp-bf16
run gpt2-lora-ckpt      --model gpt2 --seq-len 1024 --micro-batch 16 --lora-rank 16 --checkpoint all
run gpt2-fp16-scaler    --model gpt2 --seq-len 512 --micro-batch 8 --precision amp-fp16 --grad-accum 2
run llama-tiny-fp32     --model tiny-llama --seq-len 128 --micro-batch 4 --precision fp32
run bert-base-bf16      --model bert-base --seq-len 512 --micro-batch 16 --precision bf16 --optimizer sgd-momentum
run gpt2-mixed-bf16     --model gpt2 --seq-len 1024 --micro-batch 8 --precision mixed-bf16
run gpt2-oom-replan     --model gpt2 --seq-len 1024 --micro-batch 32 --memory-limit 12GiB
column -t -s $'\t' "$out/summary.tsv"

# The reference suite on CUDA. Wheels install one by one into a private folder, so that
# one built for another Python version does not stop the rest (the machine's own
# packages are used where they import).
pydeps="$PWD/build-gpu/pydeps"
if ! python3 -c "import transformers, peft" 2>/dev/null && [ -d shared/wheels ]; then
  for w in shared/wheels/*.whl; do
    python3 -m pip install --quiet --no-index --no-deps --target "$pydeps" "$w" \
      >>"$out/wheels.log" 2>&1 || echo "wheel not installed: $w" >>"$out/wheels.log"
  done
fi
export PYTHONPATH="$pydeps:${PYTHONPATH:-}"
printf "config\tpredicted_alloc\tmeasured_alloc\terror_pct\tpredicted_reserved\tmeasured_reserved\n" \
  >"$out/reference.tsv"
python3 tests/reference/run_reference_suite.py ./build-gpu/cli/headroom --gpu h200 \
  --tsv "$out/reference.tsv" >"$out/reference.log" 2>&1
echo "reference suite on CUDA: exit $? (log: $out/reference.log)"
column -t -s $'\t' "$out/reference.tsv"
