#!/usr/bin/env bash
# For the GPU machine (see docs/runtime.md): builds against that machine's own torch,
# trains a set of configs with `headroom train` on CUDA, runs the reference suite
# (tests/reference: real transformers + PEFT steps) on CUDA case by case, and prints ONE
# table: predicted against measured allocated (max_memory_allocated), reserved
# (max_memory_reserved) and device bytes (the plan's peak device bytes against the most
# nvidia-smi showed in use while the run was alive, less what it showed idle).
# The runtime tests (CPU) build and run in the background meanwhile.
# Meant to take under 8 minutes on a 16-core machine, build included.
# Results under $OUT/gpu_check/ (./gpu_check/ when OUT is unset): table.txt (the table),
# table.tsv (its raw bytes), build.log, tests.log, run-*.{json,log}, summary.tsv,
# ref-*.log, reference.tsv, smi-*.txt (the nvidia-smi samples, MiB).
# The machine has no package registry: the Debian headers and libraries the build needs
# (yaml-cpp, fmt, CLI11, nlohmann-json, GoogleTest, Boost.Graph) must come with the
# working tree under shared/deps, and transformers, peft and their dependencies as wheels
# under shared/wheels (scripts/pack_gpu_deps.sh makes both on a Debian machine).
#
# Dry run, for a machine without a GPU (tests/gpu_check_dry_run.sh, a ctest):
#   GPU_CHECK_DRY_RUN=1 HEADROOM_BUILD_DIR=build-planner bash scripts/gpu_check.sh
# (or HEADROOM_BIN=path/to/headroom)
# skips the build, the wheels, the runtime tests and every CUDA step: a stand-in
# nvidia-smi, canned run reports and reference rows (plus one real CPU `train` where the
# build has LibTorch) go through the same sampling, row and table code, and the real
# `plan --json` of that build gives the CUDA context bytes.
# Exit status: 0 when the table printed (its status column says what failed), 1 when the
# build or the table failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
start_s=$SECONDS
dry="${GPU_CHECK_DRY_RUN:-0}"
build_dir=$(realpath -m "${HEADROOM_BUILD_DIR:-build-gpu}")
out="${OUT:-.}/gpu_check"
mkdir -p "$out"
out=$(cd "$out" && pwd)
gpu_index="${GPU_CHECK_GPU_INDEX:-0}"
jobs=$(nproc)
# Past this many seconds the remaining runs are skipped (rows say so) and every step's
# timeout is cut to what is left: the whole check stays under 8 minutes.
budget_s="${GPU_CHECK_BUDGET_S:-450}"
left() { local l=$((budget_s - (SECONDS - start_s))); [ "$l" -lt "$1" ] && l=0; echo "$l"; }
cap() { local l; l=$(left 0); [ "$l" -lt "$1" ] && echo "$l" || echo "$1"; }  # min(arg, left)
stamp() { printf "[%4ds] %s\n" $((SECONDS - start_s)) "$*"; }

if [ "$dry" = 1 ]; then
  # A stand-in nvidia-smi: the samplers and the baseline read it like the real one.
  mkdir -p "$out/fake-bin"
  cat >"$out/fake-bin/nvidia-smi" <<'SH'
#!/usr/bin/env bash
case "$*" in
  *-lms*) printf "600\n2100\n3700\n2900\n"; exec sleep 30 ;;
  *name*) echo "FAKE GPU (dry run), 143771 MiB, 0.0" ;;
  *) echo 500 ;;
esac
SH
  chmod +x "$out/fake-bin/nvidia-smi"
  export PATH="$out/fake-bin:$PATH"
fi

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt" 2>&1 ||
  echo "no nvidia-smi" >"$out/gpu.txt"
stamp "GPU: $(tail -1 "$out/gpu.txt")"
baseline_mib=$(nvidia-smi -i "$gpu_index" --query-gpu=memory.used --format=csv,noheader,nounits \
                 2>/dev/null | head -1 | tr -dc 0-9)
baseline_mib=${baseline_mib:-0}

# --- Build (the CLI first; the runtime tests build and run in the background). ---------
bin=$(realpath -m "${HEADROOM_BIN:-$build_dir/cli/headroom}")
tests_pid=""
wheels_pid=""
if [ "$dry" = 1 ]; then
  [ -x "$bin" ] || { echo "dry run: no $bin (set HEADROOM_BUILD_DIR to a built tree)"; exit 1; }
  stamp "dry run: no build, no wheels, no runtime tests; $bin"
else
  deps="$root/shared/deps"
  prefix=()
  if [ -d "$deps" ]; then
    prefix=("-DCMAKE_PREFIX_PATH=$deps/usr" "-DCMAKE_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu")
    export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
    export CPATH="$deps/usr/include:${CPATH:-}"
  fi
  generator=()
  command -v ninja >/dev/null && generator=(-G Ninja)
  # The wheels install meanwhile (one pip call; one by one only where that fails, so that
  # a wheel built for another Python does not stop the rest). The machine's own packages
  # are used where they import.
  pydeps="$build_dir/pydeps"
  if ! python3 -c "import transformers, peft" 2>/dev/null && [ -d shared/wheels ]; then
    (
      timeout 180 python3 -m pip install --quiet --no-index --no-deps --target "$pydeps" \
        shared/wheels/*.whl || for w in shared/wheels/*.whl; do
        timeout 60 python3 -m pip install --quiet --no-index --no-deps --target "$pydeps" "$w" ||
          echo "wheel not installed: $w"
      done
    ) >"$out/wheels.log" 2>&1 &
    wheels_pid=$!
  fi
  stamp "building $bin (-j$jobs)"
  if ! { timeout 120 cmake -S . -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
           -DHEADROOM_WITH_TORCH=ON -DHEADROOM_BUILD_BENCHMARKS=OFF "${prefix[@]}" &&
         timeout 360 cmake --build "$build_dir" --target headroom -j "$jobs"; } \
       >"$out/build.log" 2>&1; then
    echo "build failed; see $out/build.log"; tail -30 "$out/build.log"; exit 1
  fi
  stamp "built; the runtime tests build and run in the background"
  # As ctest runs them: oneDNN pinned so the CPU-side bf16 kernels are the modelled ones.
  # One timeout over both (it ends its whole process group), up to the budget's end.
  tests_s=$(left 0); [ "$tests_s" -lt 30 ] && tests_s=30
  # shellcheck disable=SC2016
  timeout "$tests_s" bash -c 'cmake --build "$1" --target headroom_runtime_tests -j "$2" &&
    ONEDNN_MAX_CPU_ISA=AVX512_CORE "$1/tests/runtime/headroom_runtime_tests" --gtest_brief=1' \
    _ "$build_dir" "$jobs" >"$out/tests.log" 2>&1 &
  tests_pid=$!
  export PYTHONPATH="$pydeps:${PYTHONPATH:-}"
fi

# The CUDA context: plan --json's peak device bytes less its reserved bytes.
context_bytes=$("$bin" plan --model gpt2 --gpu h200 --seq-len 128 --micro-batch 1 --json |
  python3 -c "import json,sys; p=json.load(sys.stdin)['peak']; print(p['device_bytes']-p['reserved_bytes'])") ||
  { echo "plan --json gave no peak.device_bytes / peak.reserved_bytes"; exit 1; }

# --- Rows and the table. ----------------------------------------------------------------
# table.tsv columns: kind config status predicted_alloc measured_alloc predicted_reserved
# measured_reserved predicted_device smi_used (bytes; empty where not known).
table_py=$(cat <<'PY'
import json, sys

def smi_used(path, baseline_mib):
    """The most nvidia-smi showed in use (MiB samples, one a line) less the idle baseline."""
    try:
        vals = [int(v) for v in (line.strip() for line in open(path)) if v.isdigit()]
    except OSError:
        return ""
    return (max(vals) - int(baseline_mib)) * 2**20 if vals else ""

def add(rows, *fields):
    with open(rows, "a") as f:
        f.write("\t".join("" if v is None else str(v) for v in fields) + "\n")

def row_train(rows, name, rc, report, log, smi, baseline, context):
    """A `headroom train` run report (runtime/run_report.cc)."""
    try:
        r = json.load(open(report))
        p, m = r["predicted"], r["measured"]
    except (OSError, ValueError, KeyError):
        return add(rows, "train", name, f"FAILED (exit {rc}, see {log})", *[""] * 6)
    pr = p.get("peak_reserved_bytes")
    status = "ok" if rc == "0" else f"FAILED (exit {rc}, see {log})"
    add(rows, "train", name, status, p["peak_allocated_bytes"], m["peak_allocated_bytes"],
        pr, m.get("peak_reserved_bytes"), "" if pr is None else int(pr) + int(context),
        smi_used(smi, baseline) if r.get("device") == "cuda" else "")

def row_reference(rows, name, rc, tsv, log, smi, baseline, context):
    """One case's row of run_reference_suite.py --tsv: name, predicted, measured, error,
    predicted reserved, measured reserved (further columns are ignored)."""
    lines = [l.rstrip("\n").split("\t") for l in open(tsv) if l.strip()]
    lines = [l for l in lines if l[0] == name]
    if len(lines) != 1 or len(lines[0]) < 6:
        return add(rows, "reference", name, f"FAILED (exit {rc}, see {log})", *[""] * 6)
    _, pa, ma, _, pr, mr = lines[0][:6]
    status = {"0": "ok", "1": "outside the suite's bound"}.get(rc, f"FAILED (exit {rc}, see {log})")
    mr = "" if mr in ("None", "") else mr
    add(rows, "reference", name, status, pa, ma, pr, mr,
        int(pr) + int(context) if pr.isdigit() else "", smi_used(smi, baseline))

def fmt_mib(v):
    return f"{int(v) / 2**20:,.1f}" if v != "" else "-"

def fmt_err(p, m):
    if p == "" or m == "" or int(m) == 0:
        return "-"
    return f"{100.0 * (int(p) - int(m)) / int(m):+.2f}%"

COLUMNS = ["kind", "configuration", "predicted alloc", "max_memory_allocated", "error",
           "predicted reserved", "max_memory_reserved", "error", "predicted device",
           "nvidia-smi used", "error", "status"]

def print_table(rows, title):
    body = []
    for line in open(rows):
        f = line.rstrip("\n").split("\t")
        kind, name, status, pa, ma, pr, mr, pd, su = f
        body.append([kind, name, fmt_mib(pa), fmt_mib(ma), fmt_err(pa, ma), fmt_mib(pr),
                     fmt_mib(mr), fmt_err(pr, mr), fmt_mib(pd), fmt_mib(su), fmt_err(pd, su),
                     status])
    widths = [max(len(r[i]) for r in [COLUMNS] + body) for i in range(len(COLUMNS))]
    left = {0, 1, 11}
    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    print(title)
    print("MiB; error = (predicted - measured) / measured; nvidia-smi used = most in use"
          " while the run was alive, less the idle device")
    print(line(COLUMNS))
    print(line(["-" * w for w in widths]))
    for r in body:
        print(line(r))
    failed = sum(1 for r in body if r[11].startswith("FAILED"))
    skipped = sum(1 for r in body if r[11].startswith("skipped"))
    print(f"{len(body)} rows, {failed} failed, {skipped} skipped")

if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"row-train": row_train, "row-reference": row_reference, "print": print_table}[cmd](*args)
PY
)
rows="$out/table.tsv"
: >"$rows"
smi_pid=""
smi_file=""
smi_start() {  # sample file
  smi_file=$1
  nvidia-smi -i "$gpu_index" --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 \
    >"$1" 2>/dev/null &
  smi_pid=$!
}
smi_stop() {  # at least one sample (waits up to 2 s for it), then the sampler ends
  [ -n "$smi_pid" ] || return 0
  for _ in $(seq 20); do [ -s "$smi_file" ] && break; sleep 0.1; done
  kill "$smi_pid" 2>/dev/null
  wait "$smi_pid" 2>/dev/null
  smi_pid=""
}
trap 'smi_stop; if [ -n "$tests_pid" ]; then kill "$tests_pid" 2>/dev/null; fi' EXIT

# A stand-in for `headroom train` on CUDA in the dry run: a real CPU run for the first
# config where the build has LibTorch, a canned CUDA report for the others, and the last
# one fails.
skip_row() {  # kind name
  printf "%s\t%s\tskipped (past the %s s budget)\t\t\t\t\t\t\n" "$1" "$2" "$budget_s" >>"$rows"
  stamp "$1 $2: skipped, past the budget"
}
has_train=0
"$bin" train --help >/dev/null 2>&1 && has_train=1
dry_train() {  # name report
  case "$1" in
    gpt2-full-bf16)
      if [ "$has_train" = 1 ]; then
        timeout 60 "$bin" train --model tiny-llama --device cpu --steps 1 --seq-len 32 \
          --micro-batch 2 --precision fp32 --report "$2"; return
      fi ;;
    gpt2-oom-replan) echo "dry run: a failed run"; return 3 ;;
  esac
  cat >"$2" <<'JSON'
{"device": "cuda", "predicted": {"peak_allocated_bytes": 2522426368, "peak_reserved_bytes": 3258974208},
 "measured": {"peak_allocated_bytes": 2500000000, "peak_reserved_bytes": 3300000000}, "error_pct": -0.9}
JSON
}

printf "config\tpredicted_alloc\tmeasured_alloc\tpredicted_reserved\tmeasured_reserved\n" \
  >"$out/summary.tsv"
run() {  # name, then train flags
  local name="$1" rc; shift
  rm -f "$out/run-$name.json"
  if [ "$(left 15)" = 0 ]; then skip_row train "$name"; return; fi
  smi_start "$out/smi-train-$name.txt"
  if [ "$dry" = 1 ]; then
    dry_train "$name" "$out/run-$name.json" >"$out/run-$name.log" 2>&1
  else
    timeout "$(cap 120)" "$bin" train --gpu h200 --steps 3 --report "$out/run-$name.json" "$@" \
      >"$out/run-$name.log" 2>&1
  fi
  rc=$?
  smi_stop
  python3 -c "$table_py" row-train "$rows" "$name" "$rc" "$out/run-$name.json" \
    "run-$name.log" "$out/smi-train-$name.txt" "$baseline_mib" "$context_bytes"
  tail -1 "$rows" | cut -f2,4-7 >>"$out/summary.tsv"
  stamp "train $name: exit $rc"
}
run gpt2-full-bf16      --model gpt2 --seq-len 1024 --micro-batch 8 --precision amp-bf16
run gpt2-lora-ckpt      --model gpt2 --seq-len 1024 --micro-batch 16 --lora-rank 16 --checkpoint all
run gpt2-fp16-scaler    --model gpt2 --seq-len 512 --micro-batch 8 --precision amp-fp16 --grad-accum 2
run llama-tiny-fp32     --model tiny-llama --seq-len 128 --micro-batch 4 --precision fp32
run bert-base-bf16      --model bert-base --seq-len 512 --micro-batch 16 --precision bf16 --optimizer sgd-momentum
run gpt2-mixed-bf16     --model gpt2 --seq-len 1024 --micro-batch 8 --precision mixed-bf16
run gpt2-oom-replan     --model gpt2 --seq-len 1024 --micro-batch 32 --memory-limit 12GiB
# train --auto: the plan solved against the free memory the driver reports; the budget it
# read (the run report's budget.bytes) goes next to nvidia-smi's free memory just before.
smi_free_mib=$(nvidia-smi --id="$gpu_index" --query-gpu=memory.free --format=csv,noheader,nounits \
  2>/dev/null | head -1)
run gpt2-auto           --model gpt2 --seq-len 1024 --global-batch 32 --auto \
                        --plan-out "$out/plan-gpt2-auto.yaml"
python3 - "$out/run-gpt2-auto.json" "${smi_free_mib:-?}" >"$out/auto_budget.txt" <<'PY'
import json, sys
try:
    budget = json.load(open(sys.argv[1]))["budget"]
    line = (f"budget of train --auto: {budget['bytes']:,} bytes ({budget['bytes'] / 2**20:.0f} MiB) "
            f"from {budget['source']}, device {budget.get('device_name', '?')}")
except (OSError, ValueError, KeyError):
    line = "budget of train --auto: no run report with a budget"
print(f"{line}; nvidia-smi free before the run: {sys.argv[2]} MiB")
PY

# --- The reference suite on CUDA, one case at a time (so that nvidia-smi's device-wide
# figure is that case's). --------------------------------------------------------------
if [ -n "$wheels_pid" ]; then wait "$wheels_pid"; stamp "wheels: $(grep -c 'not installed' "$out/wheels.log") not installed"; fi
mapfile -t cases < <(python3 -c "import sys; sys.path.insert(0, 'tests/reference')
from cases import CASES
print('\n'.join(c.name for c in CASES))")
[ "$dry" = 1 ] && cases=("${cases[@]:0:4}")
printf "config\tpredicted_alloc\tmeasured_alloc\terror_pct\tpredicted_reserved\tmeasured_reserved\n" \
  >"$out/reference.tsv"
i=0
for name in "${cases[@]}"; do
  i=$((i + 1))
  tsv="$out/ref-$i.tsv"
  : >"$tsv"
  # (The dry run's fourth case stands for one past the budget.)
  if [ "$(left 15)" = 0 ] || { [ "$dry" = 1 ] && [ "$i" = 4 ]; }; then
    skip_row reference "$name"; continue
  fi
  smi_start "$out/smi-ref-$i.txt"
  if [ "$dry" = 1 ]; then  # canned rows in the suite's --tsv format: ok, out of bound, failed
    case $i in
      1) printf "%s\t1048576\t1000000\t+4.858\t2097152\t2097152\n" "$name" >>"$tsv"; rc=0 ;;
      2) printf "%s\t1048576\t900000\t+16.508\t2097152\tNone\n" "$name" >>"$tsv"; rc=1 ;;
      *) echo "dry run: a failed case" >"$out/ref-$i.log"; rc=2 ;;
    esac
  else
    timeout "$(cap 150)" python3 tests/reference/run_reference_suite.py "$bin" --gpu h200 \
      --only "$name" --tsv "$tsv" >"$out/ref-$i.log" 2>&1
    rc=$?
  fi
  smi_stop
  cat "$tsv" >>"$out/reference.tsv"
  python3 -c "$table_py" row-reference "$rows" "$name" "$rc" "$tsv" "ref-$i.log" \
    "$out/smi-ref-$i.txt" "$baseline_mib" "$context_bytes"
  stamp "reference $i/${#cases[@]} $name: exit $rc"
done

if [ -n "$tests_pid" ]; then
  wait "$tests_pid"; tests_rc=$?; tests_pid=""
  [ "$tests_rc" = 124 ] && echo "runtime tests: stopped at the end of the budget" >>"$out/tests.log"
  stamp "runtime tests: exit $tests_rc ($(grep -E '^\[  (PASSED|FAILED)' "$out/tests.log" | tr '\n' ' '))"
fi
echo
title="GPU check $(tail -1 "$out/gpu.txt" | cut -d, -f1) ($((SECONDS - start_s)) s)"
[ "$dry" = 1 ] && title="GPU check DRY RUN, canned inputs ($((SECONDS - start_s)) s)"
python3 -c "$table_py" print "$rows" "$title" | tee "$out/table.txt"
[ "${PIPESTATUS[0]}" = 0 ] || { echo "the table failed"; exit 1; }
tee -a "$out/table.txt" <"$out/auto_budget.txt"
