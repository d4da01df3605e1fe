#!/usr/bin/env bash
# Installs what headroom needs to build and test on Debian. Idempotent: when every
# package is already present it only checks and returns.
#   scripts/setup.sh          the planner's dependencies (apt)
#   scripts/setup.sh --torch  also LibTorch for the runtime, from the PyPI torch wheel,
#                             transformers + peft for the reference tests, accelerate +
#                             deepspeed for the export checks, lizard for
#                             the function-length check, clang for the sanitizer
#                             build and the fuzzers (scripts/fuzz.sh), and chromium
#                             for the capacity report's browser test
set -euo pipefail

with_torch=0
[ "${1:-}" = "--torch" ] && with_torch=1

packages=(
  build-essential cmake ninja-build pkg-config
  libyaml-cpp-dev libboost-graph-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcurl4-openssl-dev
)
# The test suite's sanitizer build and the fuzzers: clang with its ASan, UBSan and
# libFuzzer runtimes.
[ "${1:-}" = "--torch" ] && packages+=(clang libclang-rt-14-dev)
# The capacity report's HTML is checked in a real browser (tests/capacity_html_test.sh).
[ "${1:-}" = "--torch" ] && packages+=(chromium)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# The versions the tests measure: a machine with other versions gets these.
if [ $with_torch -eq 1 ] && ! python3 -c "import torch; assert torch.__version__.split('+')[0] == '2.15.0'" 2>/dev/null; then
  echo "setup: installing torch from PyPI (LibTorch for the runtime; about 3 GB)"
  python3 -m pip install --quiet "torch==2.15.0"
fi
if [ $with_torch -eq 1 ] && ! python3 -c "import transformers, peft; assert (transformers.__version__, peft.__version__) == ('5.24.0', '0.21.2')" 2>/dev/null; then
  # The reference the runtime's saved weights and adapters are checked against.
  echo "setup: installing transformers and peft from PyPI (for the Hugging Face reference test)"
  python3 -m pip install --quiet "transformers==5.24.0" "peft==0.21.2"
fi
if [ $with_torch -eq 1 ] && ! python3 -c "import accelerate, deepspeed; assert (accelerate.__version__, deepspeed.__version__) == ('1.15.0', '0.19.8')" 2>/dev/null; then
  # The engines the many-GPU exports are checked against (tests/reference/check_exports.py).
  echo "setup: installing accelerate and deepspeed from PyPI (for the export checks)"
  python3 -m pip install --quiet "accelerate==1.15.0" "deepspeed==0.19.8"
fi
if [ $with_torch -eq 1 ] && ! python3 -c "import bitsandbytes; assert bitsandbytes.__version__ == '0.50.2'" 2>/dev/null; then
  # QLoRA's reference: bitsandbytes' NF4 on its CPU backend (tests/reference, mode qlora).
  echo "setup: installing bitsandbytes from PyPI (for the QLoRA reference)"
  python3 -m pip install --quiet "bitsandbytes==0.50.2"
fi
if [ $with_torch -eq 1 ] && ! python3 -c "import trl, datasets; assert (trl.__version__, datasets.__version__) == ('1.16.0', '5.2.0')" 2>/dev/null; then
  # TRL's fused LM head, the reference for --loss chunked (tests/reference, loss chunked:N);
  # datasets is its dependency, pinned so a later release cannot move what it pulls in.
  echo "setup: installing trl from PyPI (for the chunked-loss reference)"
  python3 -m pip install --quiet "trl==1.16.0" "datasets==5.2.0"
fi
# flash-linear-attention for plans with --kernels fla (models/import/kernel_paths.py), in a
# folder of its own: installed beside transformers it would replace the reference code
# that every other trace of Qwen3-Next and Qwen3.5 records.
kernels_dir="${HEADROOM_KERNELS_PATH:-${XDG_DATA_HOME:-$HOME/.local/share}/headroom/kernel-packages}"
if [ $with_torch -eq 1 ] && ! PYTHONPATH="$kernels_dir" python3 -c "import importlib.metadata as m; assert (m.version('fla-core'), m.version('flash-linear-attention')) == ('0.6.0', '0.6.0')" 2>/dev/null; then
  echo "setup: installing flash-linear-attention into $kernels_dir (for --kernels fla)"
  python3 -m pip install --quiet --no-deps --upgrade --target "$kernels_dir" \
    "fla-core==0.6.0" "flash-linear-attention==0.6.0"
fi
if [ $with_torch -eq 1 ] && ! python3 -c "import lizard" 2>/dev/null; then
  # The test suite's function-length check (Style.NoFunctionOver60Lines).
  echo "setup: installing lizard from PyPI (for the function-length check)"
  python3 -m pip install --quiet "lizard==1.24.3"
fi
echo "setup: all build dependencies present"
