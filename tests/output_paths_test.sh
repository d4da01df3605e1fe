#!/usr/bin/env bash
# Where headroom's outputs go, and what a hostile name can do to them (issue 38):
#   output_paths_test.sh HEADROOM CASE
# CASE is one of the functions below, each a ctest. No root and no real /dev needed: a
# symlink to /proc/self/fd/1 in a temporary directory stands in for /dev/stdout.
set -euo pipefail
headroom=$(realpath "$1")
case_name=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "output_paths_test $case_name: $*"; exit 1; }
flags=(--model tiny-gpt2 --gpu a100-80gb --micro-batch 1 --seq-len 128)
# The plan file this request writes, as a regular file: what every output must hold.
"$headroom" plan "${flags[@]}" -o expected.yaml >/dev/null
no_temporaries() { [ -z "$(find . -name '*.tmp*')" ] || fail "a temporary was left: $(find . -name '*.tmp*')"; }

symlink_written_through() {
  echo old >target.yaml
  ln -s target.yaml link.yaml
  "$headroom" plan "${flags[@]}" -o link.yaml >/dev/null
  [ -L link.yaml ] || fail "the link was replaced by a file"
  cmp target.yaml expected.yaml || fail "the link's target does not hold the plan"
  # A dangling link: its target is created.
  ln -s new.yaml dangling.yaml
  "$headroom" plan "${flags[@]}" -o dangling.yaml >/dev/null
  [ -L dangling.yaml ] && cmp new.yaml expected.yaml || fail "a dangling link's target was not created"
  # A replaced file keeps its mode.
  chmod 640 target.yaml
  "$headroom" plan "${flags[@]}" -o link.yaml >/dev/null
  [ "$(stat -c %a target.yaml)" = 640 ] || fail "the mode changed to $(stat -c %a target.yaml)"
  no_temporaries
}

descriptor_written_directly() {
  # /dev/stdout is a link to /proc/self/fd/1: written through the descriptor, appended
  # after what was already there and after the report, and the link is left as it is.
  ln -s /proc/self/fd/1 stdout-link
  echo "earlier line" >captured.txt
  "$headroom" plan "${flags[@]}" -o stdout-link >>captured.txt
  [ -L stdout-link ] && [ "$(readlink stdout-link)" = /proc/self/fd/1 ] || fail "the link was replaced"
  [ "$(head -1 captured.txt)" = "earlier line" ] || fail "what stdout held was overwritten"
  grep -q "^FITS: " captured.txt || fail "the report is missing"
  python3 -c "import sys; a, b = (open(f).read() for f in sys.argv[1:]); assert b in a" \
    captured.txt expected.yaml || fail "the plan is not in what stdout got"
  # `-o -` is stdout.
  "$headroom" plan "${flags[@]}" --json -o - >both.txt
  tail -c "$(stat -c %s expected.yaml)" both.txt | cmp - expected.yaml || fail "-o - did not print the plan"
  [ ! -e ./- ] || fail "-o - wrote a file named -"
  # A FIFO: written into, never replaced.
  mkfifo pipe
  cat pipe >from-pipe.yaml &
  "$headroom" plan "${flags[@]}" -o pipe >/dev/null
  wait
  [ -p pipe ] || fail "the FIFO was replaced"
  cmp from-pipe.yaml expected.yaml || fail "the FIFO's reader did not get the plan"
  no_temporaries
}

empty_path_refused() {
  local rc=0
  "$headroom" plan "${flags[@]}" -o "" >out.txt 2>err.txt || rc=$?
  [ "$rc" = 2 ] || fail "-o '': exit $rc, wanted 2"
  grep -q "^headroom: error: -o: the path is empty" err.txt || fail "-o '': $(cat err.txt)"
  [ ! -s out.txt ] || fail "-o '' did the work first"
  rc=0
  "$headroom" simulate "${flags[@]}" --svg "" >out.txt 2>err.txt || rc=$?
  [ "$rc" = 2 ] && grep -q "^headroom: error: --svg: the path is empty" err.txt || fail "--svg '': $(cat err.txt)"
}

planted_temporary_ignored() {
  # headroom used to write TARGET.tmp.<pid>; exec keeps the shell's pid, so this plants
  # a link at the name it would have used.
  echo victim >victim
  bash -c 'ln -s victim "plan.yaml.tmp.$$"; exec "$@"' _ "$headroom" plan "${flags[@]}" \
    -o plan.yaml >/dev/null
  [ "$(cat victim)" = victim ] || fail "the planted link's target was overwritten"
  cmp plan.yaml expected.yaml || fail "the plan was not written"
  rm plan.yaml.tmp.*
  no_temporaries
}

file_size_limit_cleans_up() {
  # Past RLIMIT_FSIZE the write fails (SIGXFSZ ignored by headroom itself): exit 1, one
  # line, no temporary, the previous file intact.
  echo previous >plan.yaml
  local rc=0
  (ulimit -f 1; exec "$headroom" plan "${flags[@]}" -o plan.yaml) >/dev/null 2>err.txt || rc=$?
  [ "$rc" = 1 ] || fail "exit $rc, wanted 1: $(cat err.txt)"
  grep -q "^headroom: error: cannot write plan.yaml: File too large$" err.txt || fail "$(cat err.txt)"
  [ "$(cat plan.yaml)" = previous ] || fail "the previous file changed"
  no_temporaries
}

# hostile_spec NAME FILE: tests/data/tiny-llama-config.json named NAME (a Python string
# literal): markup, an escape sequence, a newline.
hostile_spec() {
  python3 - "$here/data/tiny-llama-config.json" "$1" "$2" <<'PY'
import ast, json, sys
config = json.load(open(sys.argv[1]))
config["_name_or_path"] = ast.literal_eval(sys.argv[2])
json.dump(config, open(sys.argv[3], "w"))
PY
}

svg_escapes_names() {
  hostile_spec "'R&D <script>alert(1)</script> \"q\" \\'s'" script.json
  "$headroom" simulate --model script.json --gpu a100-80gb --micro-batch 1 --seq-len 64 \
    --csv t.csv --svg t.svg >/dev/null
  python3 - t.svg <<'PY' || fail "the SVG is not well-formed or runs script"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
assert not [e for e in root.iter() if e.tag.endswith("script")], "a script element"
texts = ["".join(e.itertext()) for e in root.iter() if e.tag.endswith("text")]
want = "R&D <script>alert(1)</script> \"q\" 's on a100-80gb"
assert any(t.startswith(want) for t in texts), texts[:3]
PY
  # Bytes XML cannot hold (a control character) still leave a well-formed SVG.
  hostile_spec "'bell\\x07 and \\x1b[31m \\xff'" control.json
  "$headroom" simulate --model control.json --gpu a100-80gb --micro-batch 1 --seq-len 64 \
    --csv c.csv --svg c.svg >/dev/null
  python3 -c "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])" c.svg ||
    fail "a control character made the SVG invalid"
}

terminal_escapes_names() {
  # An escape sequence that would erase the line and print a fake verdict.
  hostile_spec "'x\\x1b[2K\\rFITS: fake\\x1b[A'" esc.json
  "$headroom" plan --model esc.json --gpu a100-80gb --micro-batch 1 --seq-len 64 >out.txt
  ! grep -q $'\x1b' out.txt || fail "an ESC byte reached the terminal"
  ! grep -q $'\r' out.txt || fail "a carriage return reached the terminal"
  grep -qF 'headroom plan: x\x1b[2K\x0dFITS: fake\x1b[A on a100-80gb' out.txt ||
    fail "the name is not printed escaped: $(head -1 out.txt)"
  [ "$(grep -c '^FITS: ' out.txt)" = 1 ] || fail "more than one verdict line"
  # A newline in a name does not cut an error short: the reason after it is printed.
  hostile_spec "'first\\nFITS: second'" newline.json
  local rc=0
  "$headroom" plan --model newline.json --gpu a100-80gb --micro-batch 1 --seq-len 64 \
    --moe-routing balanced >/dev/null 2>err.txt || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l <err.txt)" = 1 ] || fail "exit $rc, $(wc -l <err.txt) lines"
  grep -qF 'headroom: error: --moe-routing: first\x0aFITS: second is not a mixture of experts' err.txt ||
    fail "$(cat err.txt)"
  # The same in a plan's header line.
  "$headroom" plan --model newline.json --gpu a100-80gb --micro-batch 1 --seq-len 64 >out.txt
  grep -qF 'headroom plan: first\x0aFITS: second on a100-80gb' out.txt || fail "$(head -1 out.txt)"
  [ "$(grep -c '^FITS: ' out.txt)" = 1 ] || fail "the name printed a verdict line"
}

json_survives_invalid_utf8() {
  # A YAML name that is not UTF-8: --json prints U+FFFD for the bad byte, not an internal
  # error (nlohmann::json throws on it by default).
  { printf 'name: "bad\xff name"\n'; grep -v '^name:' "$here/../models/catalog/tiny-llama.yaml"; } >bad.yaml
  "$headroom" plan --model bad.yaml --gpu a100-80gb --micro-batch 1 --seq-len 64 --json >out.json ||
    fail "plan --json exit $?"
  python3 -c "import json, sys; assert json.load(open(sys.argv[1]))['model'] == 'bad\ufffd name'" \
    out.json || fail "the model's name in the JSON: $(grep '"model"' out.json)"
}

"$case_name"
echo "output_paths_test $case_name: ok"
