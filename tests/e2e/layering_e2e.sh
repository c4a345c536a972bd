#!/usr/bin/env bash
# The layering check (tools/scripts/check_layering.py, sim/modules.txt): it passes on the tree, and it fails,
# naming the file and both modules, when a low module includes a high one: network including the executor's
# header, a public header of the engine including the report's, a folder of sim/ not in the table. Each case
# runs on a copy of sim/ and include/ in a temporary folder.
# usage: layering_e2e.sh SOURCE_DIR
set -u
src="$1"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"
script="$src/tools/scripts/check_layering.py"

check "the tree's layering passes" python3 "$script" --root "$src"
check "docs/architecture.md holds the module table of sim/modules.txt" \
    python3 "$script" --root "$src" --check-doc "$src/docs/architecture.md"

fresh_copy() {
    rm -rf "$tmp/tree"
    mkdir -p "$tmp/tree"
    cp -r "$src/sim" "$src/include" "$tmp/tree/"
}

fresh_copy
echo '#include "trainsim/executor.hpp"' >>"$tmp/tree/sim/network/flow_network.cpp"
python3 "$script" --root "$tmp/tree" 2>"$tmp/up.err"
check "an upward include (network -> executor) fails the check" test $? -ne 0
check "the error names the file, the module and the header" \
    grep -q 'sim/network/flow_network.cpp:[0-9]*: network includes trainsim/executor.hpp of executor, which network does not depend on' "$tmp/up.err"

fresh_copy
sed -i 's|#include "trainsim/units.hpp"|#include "trainsim/units.hpp"\n#include "trainsim/report.hpp"|' "$tmp/tree/include/trainsim/engine.hpp"
python3 "$script" --root "$tmp/tree" 2>"$tmp/hdr.err"
check "an upward include in a public header (engine.hpp -> report.hpp) fails the check" test $? -ne 0
check "the error names the header" grep -q 'include/trainsim/engine.hpp:[0-9]*: engine includes trainsim/report.hpp of report' "$tmp/hdr.err"

fresh_copy
mkdir -p "$tmp/tree/sim/newthing"
echo 'int f() { return 0; }' >"$tmp/tree/sim/newthing/f.cpp"
python3 "$script" --root "$tmp/tree" 2>"$tmp/new.err"
check "a folder of sim/ missing from sim/modules.txt fails the check" test $? -ne 0
check "the error names the folder" grep -q 'sim/newthing/: not a module of sim/modules.txt' "$tmp/new.err"

fresh_copy
sed -i 's/^engine      | base /engine      | base report /' "$tmp/tree/sim/modules.txt"
python3 "$script" --root "$tmp/tree" 2>"$tmp/cycle.err"
check "a cycle in sim/modules.txt fails the check" test $? -ne 0
check "the error shows the cycle" grep -q 'form a cycle' "$tmp/cycle.err"
exit "$fail"
