#!/usr/bin/env bash
# End-to-end tests of the trainsim CLI: help, the embedded default run, determinism, the trace, bad input, --set,
# validate with a malformed row.
#   usage: bash tests/e2e/run_e2e.sh <path-to-trainsim> <repo-root>
# Plain bash + grep/cmp/wc (no python, no jq). Prints one PASS/FAIL line per check; exits 1 if any check fails.
# Most checks use a 16-GPU configuration (tests/e2e/data/small.json on 2 DGX A100 nodes, well under a second);
# the 1024-GPU embedded default runs three times (text once, --json twice for determinism), concurrently.
set -u

if [ $# -ne 2 ]; then
    echo "usage: $0 <path-to-trainsim> <repo-root>" >&2
    exit 2
fi
BIN=$1
ROOT=$2
DATA=$ROOT/tests/e2e/data
TOPO=$ROOT/topologies/dgx-a100.json
if [ ! -x "$BIN" ]; then
    echo "FAIL: $BIN is not an executable" >&2
    exit 1
fi

TMP=$(mktemp -d "${TMPDIR:-/tmp}/trainsim-e2e.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
START=$SECONDS

# The small configuration: 8 layers, hidden 1024, TP 2 x PP 2 x DP 4 on 16 A100.
SMALL=(--topology "$TOPO" --workload "$DATA/small.json" --set topology.nodes=2)

# shellcheck source=pass_fail_lib.sh
source "$(dirname "$0")/pass_fail_lib.sh"  # pass, fail, run, rc_of, check_rc, check_has, check_bad

# The text report's predicted step time: "step time   <predicted> s   [<measured> s   <error>]".
step_line() { grep -E '^step time ' "$1"; }

# ---- start the three 1024-GPU default runs in the background; the small checks run meanwhile ----
"$BIN" run >"$TMP/default.out" 2>"$TMP/default.err" &
pid_text=$!
"$BIN" run --json >"$TMP/default1.out" 2>"$TMP/default1.err" &
pid_json1=$!

# ---- 1. help ----
run help --help
check_rc "1a trainsim --help" help 0
check_has "1a trainsim --help lists the commands, the per-command help and the exit codes" "$TMP/help.out" \
    "usage: trainsim <command>" "run " "validate " "trainsim <command> --help" "exit codes" "0 success" \
    "1 internal error" "2 bad input"
run runhelp run --help
check_rc "1b trainsim run --help" runhelp 0
check_has "1b run --help names every option" "$TMP/runhelp.out" \
    "--topology" "--workload" "--set" "--json" "--trace " "--trace-ranks" "--from-runs" "--id" "--help"
check_has "1b run --help states the units" "$TMP/runhelp.out" \
    "step time (s)" "(GiB)" "microseconds" "Gbps" "quantities carry units"
run runhelp_short run -h
check_rc "1c trainsim run -h" runhelp_short 0
if cmp -s "$TMP/runhelp.out" "$TMP/runhelp_short.out"; then pass "1c run -h equals run --help"; else fail "1c run -h differs from run --help"; fi
run noargs
check_rc "1d trainsim without a command" noargs 2

# ---- 4. trace (small configuration) ----
run trace run "${SMALL[@]}" --trace "$TMP/trace.json"
check_rc "4a run --trace" trace 0
if [ -s "$TMP/trace.json" ]; then
    pass "4a trace file written"
    check_has "4a trace is Chrome trace JSON with complete (X) events" "$TMP/trace.json" \
        '"traceEvents"' '"ph":"X"' '"ts":' '"dur":' '"process_name"' '"compute"' '"TP stream"' '"DP stream"' '"waits"'
    if [ "$(head -c 1 "$TMP/trace.json")" = "{" ] && [ "$(tail -c 2 "$TMP/trace.json" | head -c 1)" = "}" ]; then
        pass "4a trace is one JSON object"
    else
        fail "4a trace does not start with { and end with }"
    fi
    # first-replica: the GPUs of DP rank 0, i.e. TP 2 x PP 2 = 4 processes.
    n=$(grep -o '"name":"process_name"' "$TMP/trace.json" | wc -l)
    if [ "$n" -eq 4 ]; then pass "4a trace holds the 4 GPUs of DP replica 0"; else fail "4a trace holds $n GPUs, expected 4"; fi
else
    fail "4a trace file missing or empty"
fi
check_has "4a the report is still printed with --trace" "$TMP/trace.out" "step time"
if ls "$TMP"/*.tmp >/dev/null 2>&1; then fail "4a a temporary trace file was left behind"; else pass "4a no temporary file left"; fi
run trace_all run "${SMALL[@]}" --trace "$TMP/trace_all.json" --trace-ranks all
check_rc "4b run --trace --trace-ranks all" trace_all 0
n=$(grep -o '"name":"process_name"' "$TMP/trace_all.json" 2>/dev/null | wc -l)
if [ "$n" -eq 16 ]; then pass "4b trace holds all 16 GPUs"; else fail "4b trace holds $n GPUs, expected 16"; fi
check_bad "4c trace into a missing folder" trace_bad "$TMP/no-such-dir/t.json" "cannot write" \
    -- run "${SMALL[@]}" --trace "$TMP/no-such-dir/t.json"
check_bad "4d --trace with an empty file name" trace_empty "--trace" "empty" -- run "${SMALL[@]}" --trace ""
check_bad "4e --trace-window not START,END" trace_win_bad "--trace-window" '"5"' \
    -- run "${SMALL[@]}" --trace "$TMP/w.json" --trace-window 5
check_bad "4e --trace-window with END <= START" trace_win_order "--trace-window" '"2,1"' \
    -- run "${SMALL[@]}" --trace "$TMP/w.json" --trace-window 2,1
check_bad "4e --trace-window without --trace" trace_win_alone "--trace-window" "--trace FILE" \
    -- run "${SMALL[@]}" --trace-window 0,1
# A window writes fewer slices than the whole iteration; stages: one GPU per pipeline stage (2).
run trace_win run "${SMALL[@]}" --trace "$TMP/trace_win.json" --trace-window 0.004,0.008
check_rc "4f run --trace-window 0.004,0.008" trace_win 0
n_all=$(grep -o '"ph":"X"' "$TMP/trace.json" 2>/dev/null | wc -l)
n_win=$(grep -o '"ph":"X"' "$TMP/trace_win.json" 2>/dev/null | wc -l)
if [ "$n_win" -gt 0 ] && [ "$n_win" -lt "$n_all" ]; then pass "4f the window holds $n_win of $n_all slices"; else fail "4f the window holds $n_win of $n_all slices"; fi
run trace_stages run "${SMALL[@]}" --trace "$TMP/trace_stages.json" --trace-ranks stages
n=$(grep -o '"name":"process_name"' "$TMP/trace_stages.json" 2>/dev/null | wc -l)
if [ "$n" -eq 2 ]; then pass "4g --trace-ranks stages holds one GPU per stage"; else fail "4g --trace-ranks stages holds $n GPUs, expected 2"; fi

# ---- 6. --set changes the result (small configuration) ----
run small run "${SMALL[@]}"
run small_mb2 run "${SMALL[@]}" --set layout.micro_batch=2
check_rc "6a small configuration" small 0
check_rc "6a small configuration with --set layout.micro_batch=2" small_mb2 0
check_has "6a the override reaches the layout" "$TMP/small_mb2.out" "micro-batch 2" "(4 micro-batches per pipeline)"
check_has "6a the small run reports its layout" "$TMP/small.out" "TP 2 x PP 2 x DP 4" "micro-batch 1" "16 x A100-SXM4-80GB"
a=$(step_line "$TMP/small.out")
b=$(step_line "$TMP/small_mb2.out")
if [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ]; then
    pass "6a micro_batch=2 changes the step time line ('$a' -> '$b')"
else
    fail "6a the step time line did not change" "micro_batch 1: '$a'" "micro_batch 2: '$b'"
fi
run small_nic run "${SMALL[@]}" --set topology.scale_out.nic_rate=100Gbps --json
run small_json run "${SMALL[@]}" --json
t1=$(grep -E '^  "step_time_s":' "$TMP/small_json.out")
t2=$(grep -E '^  "step_time_s":' "$TMP/small_nic.out")
if [ -n "$t1" ] && [ -n "$t2" ] && [ "$t1" != "$t2" ]; then
    pass "6b topology.scale_out.nic_rate=100Gbps changes step_time_s"
else
    fail "6b topology override did not change step_time_s" "200Gbps: $t1" "100Gbps: $t2"
fi
run small_json2 run "${SMALL[@]}" --json
if cmp -s "$TMP/small_json.out" "$TMP/small_json2.out"; then
    pass "6c small --json is byte-identical across runs"
else
    fail "6c small --json differs between two runs"
fi
if grep -qF '"measured"' "$TMP/small_json.out"; then fail "6d small run reports measured figures"; else pass "6d no measured figures without a measurement"; fi
run small_topo run --topology "$DATA/topo-small.json" --workload "$DATA/small.json"
check_rc "6e a 2-node topology file" small_topo 0
check_has "6e the report names the topology file's cluster" "$TMP/small_topo.out" "small-ok (16 x A100-SXM4-80GB)"

# ---- 5. bad input ----
W=$DATA/small.json
check_bad "5a missing field (layout.tp)" missing "missing-tp.json" "layout.tp" "missing" \
    -- run --topology "$TOPO" --workload "$DATA/missing-tp.json" --set topology.nodes=2
check_bad "5b unknown key (layout.tpp)" unknown "unknown-key.json" "layout.tpp" "not a known field" \
    -- run --topology "$TOPO" --workload "$DATA/unknown-key.json" --set topology.nodes=2
check_bad "5b misspelled key (tpp instead of tp)" misspelled "misspelled-key.json" "layout.tp" \
    -- run --topology "$TOPO" --workload "$DATA/misspelled-key.json" --set topology.nodes=2
check_bad "5b unknown key via --set (the --set blamed, not the file)" unknown_set "--set \"layout.tpp=2\"" "layout.tpp" "not a known field" \
    -- run "${SMALL[@]}" --set layout.tpp=2
check_bad "5c quantity without a unit" nounit "topo-no-unit.json" "topology.scale_up.bandwidth_per_gpu" '"300"' "no unit" \
    -- run --topology "$DATA/topo-no-unit.json" --workload "$W"
check_bad "5c quantity without a unit via --set (a bare number)" nounit_set "topology.scale_out.nic_rate" "unit" \
    -- run "${SMALL[@]}" --set topology.scale_out.nic_rate=200
check_bad "5c quantity with the wrong unit" wrongunit "topology.scale_up.latency" '"1GBps"' \
    -- run "${SMALL[@]}" --set topology.scale_up.latency=1GBps
check_bad "5d negative bandwidth" negative "topo-negative-bandwidth.json" "topology.scale_up.bandwidth_per_gpu" \
    '"-300GBps"' "negative" -- run --topology "$DATA/topo-negative-bandwidth.json" --workload "$W"
check_bad "5e tp does not divide heads (default run; the --set blamed)" tp7 '--set "layout.tp=7"' \
    "layout.tp = 7 does not divide model.heads = 96" -- run --set layout.tp=7
check_bad "5f GPUs do not match the layout (default run)" gpus "gpt3-175b" "layout.tp * layout.pp * layout.dp" \
    "1024" "cluster's GPUs = 16" -- run --set topology.nodes=2
check_bad "5g missing file" nofile "$TMP/no-such-file.json" "cannot open" \
    -- run --topology "$TOPO" --workload "$TMP/no-such-file.json"
check_bad "5h invalid JSON" invalid "invalid.json" "not valid JSON" "line 3" \
    -- run --topology "$TOPO" --workload "$DATA/invalid.json"
check_bad "5i unknown command" badcmd '"frobnicate"' -- frobnicate
check_bad "5j unknown option" badopt "--frobnicate" -- run --frobnicate
check_bad "5j option without its value" noval "--workload" -- run --workload
check_bad "5j stray argument" stray '"gpt3.json"' -- run gpt3.json
check_bad "5k --set without =" badset '--set "layout.tp"' "key=value" -- run --set layout.tp
check_bad "5k --set through a non-object" badpath '"model.layers.x"' -- run --set model.layers.x=3
check_bad "5k --set integer out of range" bigint "topology.nodes" "4294967298" "above the limit of 131072" \
    -- run "${SMALL[@]}" --set topology.nodes=4294967298
check_bad "5k --set number out of range" bignum "topology.scale_up.bandwidth_per_gpu" "1e400GBps" \
    -- run "${SMALL[@]}" --set topology.scale_up.bandwidth_per_gpu=1e400GBps
check_bad "5l unknown --trace-ranks" badranks "--trace-ranks" '"bogus"' -- run --trace-ranks bogus
check_bad "5l --from-runs without --id" fromruns "--from-runs" "--id" -- run --from-runs "$DATA/small.json"
check_bad "5m unknown GPU" badgpu "topology.gpu" '"Z100"' -- run "${SMALL[@]}" --set topology.gpu=Z100
check_bad "5n unknown spine routing" badrouting "topology.scale_out.routing" '"random"' \
    -- run "${SMALL[@]}" --set topology.scale_out.routing=random

# ---- 7. validate: one malformed row among valid ones is that row's error, not the file's exit 2; oom ----
run badrow validate "$DATA/runs-one-bad-row.json" --tolerance 1000
check_rc "7a validate with one bad row: exit 4 (not 2)" badrow 4
check_has "7b the bad row's reason names the file, run, field and value" "$TMP/badrow.out" \
    'bad_row ' 'error: ' 'runs-one-bad-row.json: run "bad_row".training.tp = "two" must be an integer'
check_has "7c the other rows: ok, not scored (null step time), unsupported (uneven split), ignored extension" \
    "$TMP/badrow.out" 'not scored (step time not reported)' 'unsupported: uneven pipeline split of 7 layers' \
    'note: graphs_row: ignored: extensions.cuda_graphs = "local"' \
    'top-level key "collected_by" is not defined by trainsim-measured-runs/1; ignored' \
    'summary: 6 runs, 4 simulated (2 scored, 1 not scored, 1 oom), 1 unsupported, 1 errors' \
    'peak memory: 3 runs, MAPE'
n=$(grep -cE '^oom_row .* oom: stage 0 runs out of memory' "$TMP/badrow.out")
if [ "$n" -eq 1 ]; then pass "7g a run predicted out of memory has status oom"; else fail "7g oom_row is not oom"; fi
run badrow_json validate "$DATA/runs-one-bad-row.json" --tolerance 1000 --json
check_has "7h --json: statuses, reasons, ignored extensions, notes, oom counted apart" "$TMP/badrow_json.out" \
    '"status": "error"' '"status": "unsupported"' '"status": "oom"' '"scored": false' \
    'extensions.cuda_graphs = \"local\"' '"notes": [' '"oom": 1' '"errors": 1'
run badrow_jobs1 validate "$DATA/runs-one-bad-row.json" --tolerance 1000 --json --jobs 1
run badrow_jobs3 validate "$DATA/runs-one-bad-row.json" --tolerance 1000 --json --jobs 3
if cmp -s "$TMP/badrow_jobs1.out" "$TMP/badrow_json.out" && cmp -s "$TMP/badrow_jobs3.out" "$TMP/badrow_json.out"; then
    pass "7i validate --jobs 1, 3 and the default: byte-identical"
else
    fail "7i validate output depends on --jobs"
fi
# No row simulated (--only picks the malformed one): its line and reason are printed all the same (the table
# was streamed by the simulations alone, and showed the header and the summary with "1 errors" but no row).
run badonly validate "$DATA/runs-one-bad-row.json" --only bad_row
check_rc "7j validate --only the malformed row: exit 4" badonly 4
check_has "7k ... and its line names the file, run, field and value" "$TMP/badonly.out" \
    'runs-one-bad-row.json: run "bad_row".training.tp = "two" must be an integer' '1 runs, 0 simulated'
# Over no scored run the MAPE is no number: "MAPE 0.0%" read as a perfect match (round 14).
check_has "7k ... and no MAPE over no scored run" "$TMP/badonly.out" 'step time MAPE -, max |error| -, 0 of 0 within'
n=$(grep -cE '^good_row .* ok$' "$TMP/badrow.out")
if [ "$n" -eq 1 ]; then pass "7d the valid row is simulated and ok"; else fail "7d good_row is not ok"; fi
if [ -s "$TMP/badrow.err" ]; then fail "7e validate wrote to stderr" "$(head -c 400 "$TMP/badrow.err")"; else pass "7e validate: stderr empty"; fi
check_bad "7f a file that is not a measured-runs file still exits 2" notruns "small.json" "format" \
    -- validate "$DATA/small.json"

# ---- 2./3. the embedded default (1024 GPUs) ----
"$BIN" run --json >"$TMP/default2.out" 2>"$TMP/default2.err" &
pid_json2=$!
# The README's published run: a row of the measured-runs file (no preset carries a measured block).
"$BIN" run --from-runs "$ROOT/tests/validation/public_runs.json" --id megatron_readme_gpt3_175b_1024gpu \
    >"$TMP/readme_run.out" 2>"$TMP/readme_run.err" &
pid_readme=$!
wait $pid_text
echo $? >"$TMP/default.rc"
wait $pid_json1
echo $? >"$TMP/default1.rc"
wait $pid_json2
echo $? >"$TMP/default2.rc"
wait $pid_readme
echo $? >"$TMP/readme_run.rc"

D=$TMP/default.out
check_rc "2 default run (text)" default 0
check_has "2 default report names the cluster and the layout" "$D" "1024 x A100-SXM4-80GB" "gpt3-175b" \
    "TP 8 x PP 16 x DP 8"
if grep -qE '^ +predicted$' "$D"; then pass "2 the default (a preset) has no measured column"; else fail "2 the default run prints a measured column"; fi
R=$TMP/readme_run.out
check_rc "2 run --from-runs the README's GPT-3 175B row" readme_run 0
if grep -qE '^ +predicted +measured +error$' "$R"; then pass "2 --from-runs header has predicted, measured and error columns"; else fail "2 --from-runs: no 'predicted measured error' header"; fi
if grep -qE '^step time +[0-9]+\.[0-9]{3} s +32\.000 s +[-+][0-9]+\.[0-9]%$' "$R"; then
    pass "2 --from-runs step time row: predicted, measured 32.000 s, error ($(step_line "$R" | tr -s ' '))"
else
    fail "2 --from-runs step time row lacks predicted / measured 32.000 s / error" "got: $(step_line "$R")"
fi
if grep -qE '^MFU +[0-9]+\.[0-9]%$' "$D" && grep -qE '^HFU +[0-9]+\.[0-9]%$' "$D"; then
    pass "2 MFU and HFU rows"
else
    fail "2 MFU / HFU rows missing or malformed"
fi
check_has "2 breakdown rows" "$D" "pipeline bubble" "exposed TP communication" "exposed PP communication" \
    "exposed DP communication" "bubble ratio"
check_has "2 per-stage memory table header" "$D" "per pipeline stage" "params" "grads" "optim." "activ." \
    "buffers" "framew." "peak" "busiest stage"
n=$(grep -cE '^ +[0-9]+ +[0-9]+\.[0-9]{2} s .* \|( +[0-9]+\.[0-9]){7} +(load|forward|backward|optimizer|checkpoint) +[0-9]+\.[0-9]$' "$D")
if [ "$n" -eq 16 ]; then pass "2 per-stage table has 16 rows with GiB columns and the peak phase"; else fail "2 per-stage table has $n rows, expected 16"; fi
if [ -s "$TMP/default.err" ]; then fail "2 default run wrote to stderr" "$(head -c 400 "$TMP/default.err")"; else pass "2 default run: stderr empty"; fi

J=$TMP/default1.out
check_rc "3 default run --json (1st)" default1 0
check_rc "3 default run --json (2nd)" default2 0
if [ -s "$J" ] && cmp -s "$J" "$TMP/default2.out"; then
    pass "3 two default --json runs are byte-identical"
else
    fail "3 two default --json runs differ" "$(cmp "$J" "$TMP/default2.out" 2>&1 | head -n 1)"
fi
check_has "3 JSON has the report keys" "$J" '"step_time_s":' '"mfu":' '"hfu":' '"bubble_fraction":' '"stages": [' \
    '"memory": {' '"phases": {' '"activations":' '"tokens_per_s":' '"fits": true'
n=$(grep -c '"ranks": 64' "$J")
if [ "$n" -eq 16 ]; then pass "3 JSON has the memory of 16 stages"; else fail "3 JSON has $n memory stages, expected 16"; fi
if [ "$(head -c 1 "$J")" = "{" ] && [ "$(tail -n 1 "$J")" = "}" ]; then pass "3 JSON is one object"; else fail "3 JSON does not start with { and end with }"; fi
# The text and the JSON report agree: the JSON step time printed with 3 decimals is the text's predicted step time.
json_step=$(grep -E '^  "step_time_s":' "$J" | sed -E 's/.*: *([-0-9.eE+]+),?$/\1/')
text_step=$(step_line "$D" | awk '{print $3}')
if [ -n "$json_step" ] && [ "$(LC_ALL=C printf '%.3f' "$json_step")" = "$text_step" ]; then
    pass "3 JSON step_time_s ($json_step) matches the text report ($text_step s)"
else
    fail "3 JSON step_time_s '$json_step' does not match the text report '$text_step'"
fi

# ---- 9. hardware profiles (--profile, trainsim profile import) ----
PROFILE=$ROOT/topologies/profiles/h100-sxm5-80gb.json
check_bad "9a a profile of another GPU type is refused naming both" profile_gpu "h100-sxm5-80gb.json" \
    "H100-SXM5-80GB" "A100-SXM4-80GB" -- run "${SMALL[@]}" --profile "$PROFILE"
check_bad "9b profile import: a malformed measurement is refused naming the field" profile_import \
    "bad-measurements.json" "gemm[0].tflops" -- profile import "$DATA/bad-measurements.json"
run profile_run run --topology "$ROOT/topologies/dgx-h100.json" --workload "$W" --set topology.nodes=2 \
    --profile "$PROFILE"
check_rc "9c run --profile on H100" profile_run 0
check_has "9c the report counts the kernels timed from the profile" "$TMP/profile_run.out" \
    "compute costs from profile" "gemm" "attention" "memory_bound"

# ---- 10. GPUs of issue 15: an uncalibrated GPU is named as such; an NVLink domain of 72 over trays ----
run h200_small run --topology "$ROOT/topologies/dgx-h200.json" --workload "$DATA/small.json" --set topology.nodes=2
check_rc "10a run on dgx-h200" h200_small 0
check_has "10a the report says the H200's constants are H100's (uncalibrated)" "$TMP/h200_small.out" \
    "note      GPU H200-SXM-141GB is uncalibrated" "H100-SXM5-80GB's"
if grep -qF "uncalibrated" "$TMP/small.out"; then fail "10b a calibrated GPU (A100) is called uncalibrated"; else
    pass "10b no uncalibrated note on a calibrated GPU"; fi
run nvl72_small run --topology "$ROOT/topologies/gb200-nvl72.json" --workload "$DATA/small.json" \
    --set topology.nodes=18 --set layout.dp=18 --set layout.global_batch=72 --json
check_rc "10c run on one GB200 NVL72 rack (18 trays of 4 GPUs)" nvl72_small 0
check_has "10c the JSON report names the uncalibrated GB200" "$TMP/nvl72_small.out" '"gpu_uncalibrated"' \
    '"gpus": 72'

# Time to train (docs/metrics.md): --tokens with K/M/B/T suffixes, --gpu-hour-price for the cost.
run train_small run "${SMALL[@]}" --tokens 15T --gpu-hour-price 2.5
check_rc "11a run --tokens 15T --gpu-hour-price 2.5" train_small 0
check_has "11a the text gives tokens/day and the time to train with its cost" "$TMP/train_small.out" \
    "tokens/s per GPU" "tokens/day" "time to train 15.0T tokens" "GPU-hours" "(at \$2.50 per GPU-hour)"
run train_small_json run "${SMALL[@]}" --tokens 15T --json
check_rc "11b run --tokens 15T --json" train_small_json 0
check_has "11b the JSON has tokens/day and time_to_train" "$TMP/train_small_json.out" '"tokens_per_day"' \
    '"tokens_per_s_per_gpu"' '"time_to_train"' '"gpu_hours"' '"tokens": 15000000000000.0'

echo
echo "e2e: $passes passed, $failures failed in $((SECONDS - START)) s"
[ "$failures" -eq 0 ]
