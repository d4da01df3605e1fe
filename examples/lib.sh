# Shared by the examples' run.sh scripts: `expect CODE PATTERN -- command...` runs the
# command and fails the example unless it exits CODE and prints a line matching PATTERN.
set -euo pipefail

expect() {
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

# Runs in a scratch directory, removed on exit; $here is the example's folder.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
headroom=$(realpath "${1:?usage: run.sh path/to/headroom}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
