#!/usr/bin/env bash
# `trainsim run|sweep|memory --html` rendered in headless Chromium (Debian's chromium, tools/scripts/setup.sh):
# each page is written by trainsim (small inputs, a few seconds), loaded from file:// with a screenshot of
# 1200 x 2000 pixels and Chromium's log on stderr, then checked with tests/e2e/html_page_check.py:
#   - the screenshot is not blank: at least 6 distinct colours of >= 100 pixels, among them the fills of the
#     page's charts (compute blue #4e79a7 of the breakdown and timeline, the Pareto front's #e15759, the memory
#     chart's parameters #4e79a7 and optimizer state #e15759);
#   - the page's console is empty: with --enable-logging=stderr --v=0 Chromium logs every console message of
#     the page (console.*, an uncaught error, a refused or failed load) as a line holding ":CONSOLE"; the pages
#     have no script and load nothing, so any such line is a failure.
# A control page with a script error and nothing drawn must fail both checks (so a Chromium whose log format
# changed, or a screenshot that came back blank, cannot pass silently), and the PNG check's self-test runs
# first. Four Chromium runs in all. Exit 77 (ctest SKIP_RETURN_CODE) when chromium is not installed.
#   usage: html_e2e.sh TRAINSIM_BINARY SOURCE_DIR
set -u
if [ $# -lt 2 ]; then
    echo "usage: $0 TRAINSIM_BINARY SOURCE_DIR" >&2
    exit 2
fi
bin="$1"
src="$2"
chromium="${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}"
if [ -z "$chromium" ]; then
    echo "SKIP: chromium not found (Debian: apt-get install chromium; tools/scripts/setup.sh installs it)"
    exit 77
fi
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"
checker="$src/tests/e2e/html_page_check.py"
cd "$src" || exit 1
small=(--topology topologies/dgx-a100.json --workload tests/e2e/data/small.json --set topology.nodes=2)

# render NAME: screenshot $tmp/NAME.png and Chromium's log $tmp/NAME.log of $tmp/NAME.html.
render() {
    timeout 120 "$chromium" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --user-data-dir="$tmp/profile-$1" --enable-logging=stderr --v=0 --window-size=1200,2000 \
        --screenshot="$tmp/$1.png" "file://$tmp/$1.html" >"$tmp/$1.stdout" 2>"$tmp/$1.log"
}

check "png check self-test" python3 "$checker" selftest

quiet() { "$@" >/dev/null; }
check "run --html exits 0" quiet "$bin" run "${small[@]}" --html "$tmp/run.html"
check "memory --html exits 0" quiet "$bin" memory "${small[@]}" --html "$tmp/memory.html"
check "sweep --html exits 0" quiet "$bin" sweep --topology topologies/dgx-a100.json \
    --workload tests/e2e/data/small.json --gpus 16 --global-batch 32 --vary micro_batch=1,2 \
    --vary recompute=none,full --vary tp=1,2,4 --jobs 2 --html "$tmp/sweep.html"
# Deterministic bytes: the same run writes the same page.
"$bin" run "${small[@]}" --html "$tmp/run2.html" >/dev/null
check "run --html is deterministic" cmp -s "$tmp/run.html" "$tmp/run2.html"
for page in run memory sweep; do
    check "$page.html loads nothing" bash -c "! grep -Eq '<script|<link|<img|src=|href=|url\\(|https://' '$tmp/$page.html'"
done

render run
check "run.html: screenshot is not blank, has the compute and PP colours" \
    python3 "$checker" png "$tmp/run.png" 4e79a7 e15759 9c9c9c
check "run.html: console free of messages" python3 "$checker" console "$tmp/run.log"
render memory
check "memory.html: screenshot is not blank, has the chart fills" python3 "$checker" png "$tmp/memory.png" 4e79a7 f28e2b e15759
check "memory.html: console free of messages" python3 "$checker" console "$tmp/memory.log"
render sweep
check "sweep.html: screenshot is not blank, has the points and the Pareto front" \
    python3 "$checker" png "$tmp/sweep.png" 4e79a7 e15759
check "sweep.html: console free of messages" python3 "$checker" console "$tmp/sweep.log"

# The control: a script that fails and nothing drawn. Both checks must fail on it.
printf '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>control</title></head><body><script>console.error("control"); no_such_function();</script></body></html>\n' >"$tmp/control.html"
render control
check "control: the console check catches a script error" bash -c "! python3 '$checker' console '$tmp/control.log' >/dev/null"
check "control: the screenshot check catches a blank page" bash -c "! python3 '$checker' png '$tmp/control.png' >/dev/null"
exit "$fail"
