#!/usr/bin/env bash
# `--model ORG/NAME` (models/hub_config.h) against tests/hub_server.py, a stand-in for the
# Hugging Face Hub on a free local port; never the real Hub, and nothing from this
# machine's own Hugging Face set-up (token, cache, offline mode).
#   hub_model_id_test.sh HEADROOM fetch    download, cache, token, redirect; the server
#                                          stopped: from the cache; failures: one line, exit 2
#   hub_model_id_test.sh HEADROOM catalog  a catalog entry's source id: no network, no cache
#   hub_model_id_test.sh HEADROOM interop  huggingface_hub's cache, both ways (exit 77,
#                                          skipped, without the huggingface_hub package)
#   hub_model_id_test.sh HEADROOM not_a_model|header_too_large|timed_out|endpoint_password|
#                        token_file_too_large|planted_cache_links   hostile answers and settings
set -euo pipefail
headroom=$(realpath "$1")
mode=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "hub_model_id_test $mode: $*"; exit 1; }

unset HF_TOKEN HF_TOKEN_PATH HF_HUB_OFFLINE TRANSFORMERS_OFFLINE HUGGINGFACE_HUB_CACHE XDG_CACHE_HOME
export HF_HOME="$work/hf-home" HF_HUB_CACHE="$work/cache"
export HF_ENDPOINT=http://127.0.0.1:9  # until a server starts: a port nothing listens on
config="$here/reference/configs/llama-3-8b.json"
commit=0123456789abcdef0123456789abcdef01234567  # what hub_server.py sends
etag=$(python3 -c "import hashlib, sys; d = open(sys.argv[1], 'rb').read()
print(hashlib.sha1(b'blob %d\0' % len(d) + d).hexdigest())" "$config")
flags=(--gpu a100-80gb --micro-batch 1 --seq-len 512 --lora-rank 16)

start_server() {
  rm -f "$work/port"
  python3 "$here/hub_server.py" --config "$config" --port-file "$work/port" \
    --log "$work/requests.log" &
  server_pid=$!
  for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
  [ -s "$work/port" ] || fail "the test server did not start"
  export HF_ENDPOINT="http://127.0.0.1:$(cat "$work/port")"
}
stop_server() {
  kill "$server_pid"
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
}
gets() { grep -c "^GET /$1/resolve/main/config.json " "$work/requests.log" || true; }

# plan_ok NAME ID: `plan --model ID` exits 0; its report is $work/NAME.txt.
plan_ok() {
  local rc=0
  timeout 60 "$headroom" plan --model "$2" "${flags[@]}" >"$work/$1.txt" 2>"$work/$1.err" || rc=$?
  [ "$rc" = 0 ] || fail "plan --model $2: exit $rc: $(cat "$work/$1.err")"
}
# plan_fails ID REGEX: exit 2 and one line, `headroom: error: ` then REGEX, ending with
# how to pass a local config.json instead; no report.
plan_fails() {
  local rc=0
  timeout 60 "$headroom" plan --model "$1" "${flags[@]}" >"$work/out" 2>"$work/err" || rc=$?
  echo "plan --model $1: $(cat "$work/err")"
  [ "$rc" = 2 ] || fail "plan --model $1: exit $rc, wanted 2"
  [ "$(wc -l <"$work/err")" = 1 ] || fail "plan --model $1: not one line"
  grep -qE "^headroom: error: .*$2" "$work/err" || fail "plan --model $1: no /$2/"
  grep -qE -- "--model path/to/config.json$" "$work/err" || fail "no local config.json hint"
  [ ! -s "$work/out" ] || fail "plan --model $1 printed a report"
}
# expect NAME ID: $work/NAME.txt is the report of $config passed as a file, named ID.
expect() {
  "$headroom" plan --model "$config" "${flags[@]}" | sed "s#$config#$2#g" >"$work/expected.txt"
  grep -q "^headroom plan: $2 on a100-80gb" "$work/expected.txt" || fail "no report header"
  diff "$work/expected.txt" "$work/$1.txt" || fail "$2 does not plan as its config.json file does"
}

fetch() {
  start_server
  plan_ok first test-org/llama-like-8b
  expect first test-org/llama-like-8b
  [ "$(gets test-org/llama-like-8b)" = 1 ] || fail "not one download"
  grep -q "auth=none" "$work/requests.log" || fail "a token was sent with none set"
  # huggingface_hub's layout: refs/main -> snapshots/<commit>/config.json -> blobs/<etag>.
  local repo="$HF_HUB_CACHE/models--test-org--llama-like-8b"
  [ "$(cat "$repo/refs/main")" = "$commit" ] || fail "refs/main is not the commit"
  [ "$(readlink "$repo/snapshots/$commit/config.json")" = "../../blobs/$etag" ] ||
    fail "the snapshot's config.json is not a link to its blob"
  cmp "$repo/blobs/$etag" "$config" || fail "the blob is not the served file"
  plan_ok again test-org/llama-like-8b
  [ "$(gets test-org/llama-like-8b)" = 1 ] || fail "the second run downloaded again"

  plan_fails test-org/gated-llama "'test-org/gated-llama' is a gated model \(HTTP 401 from $HF_ENDPOINT\) and HF_TOKEN is not set"
  HF_TOKEN=hf_wrong plan_fails test-org/gated-llama "the Hub refused HF_TOKEN for 'test-org/gated-llama' \(HTTP 403"
  HF_TOKEN=hf_test_token plan_ok gated test-org/gated-llama
  expect gated test-org/gated-llama
  grep -q "^GET /test-org/gated-llama/.* auth=Bearer hf_test_token$" "$work/requests.log" ||
    fail "HF_TOKEN was not sent as a bearer token"
  # The token file `hf auth login` writes, when HF_TOKEN is not set.
  rm -rf "$HF_HUB_CACHE/models--test-org--gated-llama"
  mkdir -p "$HF_HOME" && echo hf_test_token >"$HF_HOME/token"
  plan_ok gated-file test-org/gated-llama
  rm "$HF_HOME/token"
  plan_fails test-org/no-such-model "no model 'test-org/no-such-model' on $HF_ENDPOINT \(HTTP 404\)"
  plan_fails test-org/huge "larger than 4194304 bytes"
  plan_ok renamed test-org/renamed-llama  # a 307 to test-org/llama-like-8b
  expect renamed test-org/renamed-llama
  plan_ok unversioned test-org/unversioned  # no commit, no ETag: snapshots/main, no ref
  local plain="$HF_HUB_CACHE/models--test-org--unversioned"
  [ -f "$plain/snapshots/main/config.json" ] && [ ! -L "$plain/snapshots/main/config.json" ] &&
    [ ! -e "$plain/refs/main" ] || fail "no plain snapshots/main/config.json"
  for failed in no-such-model huge; do
    [ ! -e "$HF_HUB_CACHE/models--test-org--$failed" ] || fail "a failed download was cached"
  done

  stop_server
  plan_ok cached test-org/llama-like-8b
  cmp "$work/first.txt" "$work/cached.txt" || fail "the cached config plans differently"
  HF_HUB_OFFLINE=1 plan_ok offline test-org/llama-like-8b
  plan_ok cached-unversioned test-org/unversioned
  plan_fails test-org/never-fetched "no connection to $HF_ENDPOINT \(.*\), and it is not in the Hugging Face cache $HF_HUB_CACHE;"
  HF_HUB_OFFLINE=1 plan_fails test-org/never-fetched "HF_HUB_OFFLINE is set and the config.json of 'test-org/never-fetched' is not in the Hugging Face cache"
  # A cache laid out by hand as huggingface_hub lays it out.
  local hand="$HF_HUB_CACHE/models--test-org--by-hand"
  mkdir -p "$hand/refs" "$hand/blobs" "$hand/snapshots/$commit"
  cp "$config" "$hand/blobs/$etag"
  ln -s "../../blobs/$etag" "$hand/snapshots/$commit/config.json"
  printf %s "$commit" >"$hand/refs/main"
  plan_ok by-hand test-org/by-hand
  expect by-hand test-org/by-hand
}

# Answers no Hub gives, and a cache and settings set against headroom (issue 38): one
# mode each.
not_a_model() {
  # Valid JSON that is not a model: refused, not cached, asked for again next time.
  start_server
  local rc=0
  "$headroom" plan --model test-org/not-a-model "${flags[@]}" >/dev/null 2>"$work/err" || rc=$?
  [ "$rc" = 2 ] && grep -q "^headroom: error: .*model_type" "$work/err" ||
    fail "JSON that is not a model: exit $rc: $(cat "$work/err")"
  [ ! -e "$HF_HUB_CACHE/models--test-org--not-a-model/snapshots" ] || fail "a non-model was cached"
  "$headroom" plan --model test-org/not-a-model "${flags[@]}" >/dev/null 2>&1 || true
  [ "$(gets test-org/not-a-model)" = 2 ] || fail "a non-model was served from the cache"
}
header_too_large() {
  start_server
  plan_fails test-org/big-header "the answer from $HF_ENDPOINT is not a Hub's \(a header line is over 102400 bytes\)"
}
timed_out() {
  start_server
  HF_HUB_DOWNLOAD_TIMEOUT=1 plan_fails test-org/slow "$HF_ENDPOINT did not answer in time \(.*; the limits are 10 s to connect and 1 s in all"
}
endpoint_password() {
  # A user and password in HF_ENDPOINT are never printed.
  start_server
  local endpoint=$HF_ENDPOINT
  HF_ENDPOINT="http://someone:s3cret@${endpoint#http://}" plan_fails test-org/no-such-model \
    "no model 'test-org/no-such-model' on http://\*\*\*@127.0.0.1"
  ! grep -q s3cret "$work/err" || fail "the password in HF_ENDPOINT was printed"
}
token_file_too_large() {
  # A token file too large to be a token is an error, not an anonymous request.
  start_server
  head -c 5000 /dev/zero | tr '\0' t >"$work/big-token"
  HF_TOKEN_PATH="$work/big-token" plan_fails test-org/gated-llama "token file: cannot read $work/big-token: it is 5000 bytes, more than the 4096 allowed"
}
planted_cache_links() {
  # Links planted where the cache writes its temporaries (the names headroom used to use:
  # TARGET.tmp.<pid>; exec keeps the pid) must not redirect a write.
  start_server
  local planted="$HF_HUB_CACHE/models--test-org--planted"
  mkdir -p "$planted/blobs" "$planted/refs"
  echo victim >"$work/victim"
  bash -c 'ln -s "$1" "$2/blobs/$3.tmp.$$"; ln -s "$1" "$2/refs/main.tmp.$$"
    exec "$4" plan --model test-org/planted "${@:5}"' _ "$work/victim" "$planted" "$etag" \
    "$headroom" "${flags[@]}" >/dev/null || fail "plan --model test-org/planted failed"
  [ "$(cat "$work/victim")" = victim ] || fail "a link planted in the cache was written through"
  cmp "$planted/blobs/$etag" "$config" || fail "the planted repository's blob is not the file"
  [ "$(cat "$planted/refs/main")" = "$commit" ] || fail "the planted repository's ref is wrong"
  [ -z "$(find "$planted" -name '.*.tmp-*')" ] || fail "a temporary was left in the cache"
}

catalog() {
  # Every catalog entry whose first line names its source "(ORG/NAME)": the id plans as
  # the name does, in any case, with no server and offline.
  export HF_HUB_OFFLINE=1
  local count=0
  while read -r name id; do
    "$headroom" plan --model "$name" "${flags[@]}" >"$work/name.txt" 2>&1 || echo "exit $?" >>"$work/name.txt"
    # Every id as written; the first also upper-cased (one lookup path, case-insensitive).
    spellings=("$id")
    [ "$count" != 0 ] || spellings+=("$(tr '[:lower:]' '[:upper:]' <<<"$id")")
    for spelling in "${spellings[@]}"; do
      "$headroom" plan --model "$spelling" "${flags[@]}" >"$work/id.txt" 2>&1 || echo "exit $?" >>"$work/id.txt"
      cmp -s "$work/name.txt" "$work/id.txt" || fail "--model $spelling differs from --model $name"
    done
    count=$((count + 1))
  done < <("$headroom" models | sed -nE 's#^([^ ]+) .*\(([A-Za-z0-9._-]+/[A-Za-z0-9._-]+)\)$#\1 \2#p')
  [ "$count" -ge 15 ] || fail "only $count catalog entries name a source id"
  grep -q "^headroom plan: llama-3.2-1b on" <("$headroom" plan --model meta-llama/Llama-3.2-1B "${flags[@]}") ||
    fail "meta-llama/Llama-3.2-1B is not the catalog's llama-3.2-1b"
  [ ! -e "$HF_HUB_CACHE" ] || fail "a catalog id touched the cache"
  echo "$count catalog ids plan as their names"
}

interop() {
  python3 -c "import huggingface_hub" 2>/dev/null || { echo "no huggingface_hub: skipped"; exit 77; }
  start_server
  # huggingface_hub downloads; headroom reads its cache with the server stopped.
  HF_HUB_CACHE="$work/hf-cache" python3 -c "import huggingface_hub as h
h.hf_hub_download('test-org/llama-like-8b', 'config.json')"
  # headroom downloads; huggingface_hub finds the file offline and scans the cache clean.
  plan_ok ours test-org/llama-like-8b
  stop_server
  HF_HUB_CACHE="$work/hf-cache" plan_ok theirs test-org/llama-like-8b
  expect theirs test-org/llama-like-8b
  HF_HUB_OFFLINE=1 python3 - "$config" <<'PY' || fail "huggingface_hub does not read headroom's cache"
import filecmp, sys
import huggingface_hub as h
path = h.hf_hub_download("test-org/llama-like-8b", "config.json")
assert path.endswith("/snapshots/0123456789abcdef0123456789abcdef01234567/config.json"), path
assert path == h.try_to_load_from_cache("test-org/llama-like-8b", "config.json"), path
assert filecmp.cmp(path, sys.argv[1], shallow=False)
info = h.scan_cache_dir()
assert not info.warnings, info.warnings
assert [r.repo_id for r in info.repos] == ["test-org/llama-like-8b"], info.repos
print("huggingface_hub reads", path)
PY
}

"$mode"
echo "hub_model_id_test $mode: ok"
