#!/usr/bin/env bash
# Fuzzes headroom's parsers with libFuzzer (under ASan + UBSan), each for MINUTES
# minutes, as many at once as there are cores, and reports executions and findings.
#   scripts/fuzz.sh [MINUTES] [HARNESS...]      default: 10 minutes, every harness
#   FUZZ_SECONDS=30 scripts/fuzz.sh             a quick look
# Harnesses: model_spec_yaml hf_config plan_file cli_parsers safetensors_header
# training_state price_file (fuzz/*_fuzzer.cc). Each starts from its seed corpus in fuzz/corpus/
# and keeps what it finds in build-asan/fuzz-work/NAME/; a crash, escaped exception,
# timeout, leak or sanitizer report leaves its input there and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=${1:-10}
shift || true
seconds=${FUZZ_SECONDS:-$((minutes * 60))}
harnesses=("$@")
[ ${#harnesses[@]} -eq 0 ] && harnesses=(model_spec_yaml hf_config plan_file cli_parsers
                                         safetensors_header training_state price_file)

bash scripts/setup.sh --torch >/dev/null
CC=clang CXX=clang++ cmake -S . -B build-asan -G Ninja -DHEADROOM_SANITIZE=ON -DHEADROOM_FUZZ=ON \
  -DHEADROOM_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-asan --target "${harnesses[@]/#/fuzz_}"

fuzz_one() {
  local name=$1 work=build-asan/fuzz-work/$1 rc=0
  rm -rf "$work/artifacts" && mkdir -p "$work/corpus" "$work/artifacts"
  build-asan/fuzz/fuzz_"$name" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "fuzz/corpus/$name" >"$work/log" 2>&1 || rc=$?
  echo "$rc" >"$work/rc"
}

echo "fuzz: ${#harnesses[@]} harnesses, $seconds s each, $(nproc) at a time"
running=0
for name in "${harnesses[@]}"; do
  if [ "$running" -ge "$(nproc)" ]; then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$name" &
  running=$((running + 1))
done
wait
status=0
for name in "${harnesses[@]}"; do
  work=build-asan/fuzz-work/$name
  rc=$(cat "$work/rc")
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$work/log" | awk '{print $2}')
  findings=$(find "$work/artifacts" -type f | wc -l)
  printf 'fuzz: %-20s %12s execs  %d findings  exit %d  corpus %d inputs\n' "$name" \
    "${execs:-?}" "$findings" "$rc" "$(find "$work/corpus" -type f | wc -l)"
  if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
    status=1
    grep -m3 -E 'ERROR|runtime error|deadly signal|Timeout|broken promise' "$work/log" || true
  fi
done
exit $status
