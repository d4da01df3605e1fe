#!/usr/bin/env bash
# A write that hits a full disk fails the run cleanly: exit 1, one line
# `headroom: error: cannot write FILE: ...`, no temporary left behind, and the previous
# file intact. Runs in a small tmpfs (a user and mount namespace, so no root needed);
# where the machine allows no namespace, a file-size limit (RLIMIT_FSIZE, EFBIG)
# stands in for the full disk: the same failing write, another errno.
#   full_disk_test.sh HEADROOM plan|train
set -euo pipefail
headroom=$1 mode=$2

if [ "${HEADROOM_IN_SMALL_FS:-}" = "" ] && unshare -rm true 2>/dev/null; then
  exec env HEADROOM_IN_SMALL_FS=1 unshare -rm bash "$0" "$@"
fi
work=$(mktemp -d)
trap 'umount "$work/fs" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir "$work/fs"
limit_writes=()
if [ "${HEADROOM_IN_SMALL_FS:-}" = 1 ] && mount -t tmpfs -o size=4m tmpfs "$work/fs"; then
  echo "full_disk_test: a 4 MiB tmpfs"
else
  echo "full_disk_test: no namespace here; a file-size limit instead"
  limit_writes=(1)
fi

# Fills the tmpfs up to its last few KiB, or sets the file-size limit, then runs.
run_full() {
  if [ ${#limit_writes[@]} -eq 0 ]; then
    dd if=/dev/zero of="$work/fs/filler" bs=4k 2>/dev/null || true
    return_code=0
    "$@" 2>"$work/err" >"$work/out" || return_code=$?
  else
    return_code=0
    (trap '' XFSZ; ulimit -f 1; "$@") 2>"$work/err" >"$work/out" || return_code=$?
  fi
}

check() {  # FILE: what the failed write must have left
  local file=$1 before=$2
  [ "$return_code" -eq 1 ] || { echo "exit $return_code, expected 1"; cat "$work/err"; exit 1; }
  [ "$(wc -l <"$work/err")" -eq 1 ] || { echo "not one line:"; cat "$work/err"; exit 1; }
  grep -q "^headroom: error: .*cannot write $file: " "$work/err" ||
    { echo "unexpected message:"; cat "$work/err"; exit 1; }
  if ls "$file".tmp* >/dev/null 2>&1; then echo "a temporary was left: $(ls "$file".tmp*)"; exit 1; fi
  [ "$(sha256sum <"$file")" = "$before" ] || { echo "$file changed"; exit 1; }
  echo "full_disk_test: $(cat "$work/err")"
}

if [ "$mode" = plan ]; then
  plan=(plan --model tiny-llama --device cpu --micro-batch 1 -o "$work/fs/plan.yaml")
  "$headroom" "${plan[@]}" --seq-len 32 >/dev/null
  before=$(sha256sum <"$work/fs/plan.yaml")
  run_full "$headroom" "${plan[@]}" --seq-len 64
  check "$work/fs/plan.yaml" "$before"
else
  train=(train --model tiny-gpt2 --device cpu --seq-len 32 --precision fp32 --save-every 1
         --state "$work/fs/run.state")
  "$headroom" "${train[@]}" --steps 1 >/dev/null
  before=$(sha256sum <"$work/fs/run.state")
  run_full "$headroom" "${train[@]}" --steps 2 --resume "$work/fs/run.state"
  check "$work/fs/run.state" "$before"
fi
