#!/usr/bin/env bash
# `headroom capacity --html` opens in a real browser: headless Chromium (Debian's
# `chromium`, installed by scripts/setup.sh --torch) loads the report; the DOM it built
# must hold the answer, the table with every configuration and the chart with its points
# and Pareto front, and the page may log no console message (it has no script, so any
# message is an error: a bad resource, a parse failure). Leaves a screenshot for
# docs/capacity.md when CAPACITY_SCREENSHOT names a file.
#
#   bash tests/capacity_html_test.sh path/to/headroom
set -uo pipefail
cli=$1
browser=$(command -v chromium || command -v chromium-browser) ||
  { echo "FAIL: chromium is not installed (scripts/setup.sh --torch installs it)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cli" capacity --model llama-3-70b --lora-rank 16 --seq-len 4096 --global-batch 64 --tokens 1e9 \
  --html "$dir/r.html" --json > "$dir/r.json" || { echo "FAIL: capacity exited $?"; exit 1; }
flags=(--headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/profile"
       --enable-logging=stderr --v=0 --window-size=1200,1700)
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$dir/r.html" > "$dir/dom.html" 2> "$dir/log" ||
  { echo "FAIL: chromium exited $?"; tail -5 "$dir/log"; exit 1; }
timeout 120 "$browser" "${flags[@]}" --screenshot="$dir/shot.png" "file://$dir/r.html" 2>> "$dir/log" ||
  { echo "FAIL: chromium's screenshot exited $?"; exit 1; }
failures=0
fail() { echo "FAIL: $1"; failures=$((failures + 1)); }
rows=$(python3 -c "import json; print(len(json.load(open('$dir/r.json'))['configurations']))")
pareto=$(python3 -c "import json; print(len(json.load(open('$dir/r.json'))['pareto']))")
dom_rows=$(grep -o '<tr class="\(fit\|nofit\)' "$dir/dom.html" | wc -l)
points=$(grep -o '<circle cx=' "$dir/dom.html" | wc -l)
grep -q 'id="answer">cheapest: ' "$dir/dom.html" || fail "the answer sentence is missing"
[ "$dom_rows" -eq "$rows" ] || fail "the table shows $dom_rows rows, the JSON has $rows configurations"
grep -q '<svg id="scatter"' "$dir/dom.html" || fail "the chart is missing"
[ "$points" -gt "$pareto" ] || fail "the chart has $points points for a Pareto front of $pareto"
grep -q '<polyline points="[0-9]' "$dir/dom.html" || fail "the Pareto front is not drawn"
grep -q 'as of 20[0-9][0-9]-' "$dir/dom.html" || fail "the price date is missing"
if grep -q 'CONSOLE' "$dir/log"; then fail "console messages:"; grep 'CONSOLE' "$dir/log"; fi
shot_bytes=$(stat -c %s "$dir/shot.png" 2>/dev/null || echo 0)
[ "$shot_bytes" -gt 50000 ] || fail "the screenshot is $shot_bytes bytes: nothing rendered"
[ -n "${CAPACITY_SCREENSHOT:-}" ] && cp "$dir/shot.png" "$CAPACITY_SCREENSHOT"
echo "rendered: $dom_rows table rows, $points chart points, Pareto front of $pareto, screenshot $shot_bytes bytes"
[ "$failures" -eq 0 ] && echo "the report renders" || exit 1
