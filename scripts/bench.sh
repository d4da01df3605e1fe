#!/usr/bin/env bash
# Builds in Release and runs the benchmarks; results go to bench/results/*.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DHEADROOM_BUILD_TESTS=OFF >/dev/null
cmake --build build-release --target headroom_bench headroom_capacity_bench
mkdir -p bench/results
# One core, as the targets are stated.
taskset -c 0 ./build-release/bench/headroom_bench --benchmark_out=bench/results/benchmarks.json \
  --benchmark_out_format=json "$@"
# The capacity report is timed on both cores, as it runs (two GPU types at a time).
./build-release/bench/headroom_capacity_bench --benchmark_out=bench/results/capacity.json \
  --benchmark_out_format=json
echo "results: bench/results/benchmarks.json, bench/results/capacity.json"
