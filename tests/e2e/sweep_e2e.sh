#!/usr/bin/env bash
# End-to-end checks of `trainsim sweep`: the same CSV and stdout with 1 and 2 threads, the reject reasons
# named, an unknown --fix key refused (exit 2, one line), a --gpus that does not fill whole nodes refused,
# the topology's size without --gpus.
# usage: sweep_e2e.sh TRAINSIM_BINARY SOURCE_DIR
set -u
bin="$1"
src="$2"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"

topo="$src/topologies/dgx-a100.json"
work="$src/tests/e2e/data/small.json"
# 24 GPUs (3 nodes), the small 8-layer model (16 heads); a reduced grid keeps it to a few seconds. tp = 3
# fits 24 GPUs but not the 16 heads.
args=(sweep --topology "$topo" --workload "$work" --gpus 24 --global-batch 48 --vary micro_batch=1,2
      --vary recompute=none,full --vary tp=1,2,3,4 --top 5)

"$bin" "${args[@]}" --jobs 1 --csv "$tmp/j1.csv" >"$tmp/j1.txt" 2>"$tmp/j1.err"
rc1=$?
"$bin" "${args[@]}" --jobs 2 --csv "$tmp/j2.csv" >"$tmp/j2.txt" 2>"$tmp/j2.err"
rc2=$?
check "sweep --jobs 1 exits 0" test "$rc1" -eq 0
check "sweep --jobs 2 exits 0" test "$rc2" -eq 0
check "CSV identical for --jobs 1 and --jobs 2" cmp -s "$tmp/j1.csv" "$tmp/j2.csv"
check "stdout identical for --jobs 1 and --jobs 2" cmp -s "$tmp/j1.txt" "$tmp/j2.txt"
check "CSV has a header and rows" test "$(wc -l <"$tmp/j1.csv")" -gt 10
check "CSV header" grep -q '^rank,tp,pp,dp,cp,micro_batch,vpp,recompute,' "$tmp/j1.csv"
check "output names the reject reasons" grep -q '^ *[0-9]*  tp does not divide heads$' "$tmp/j1.txt"
check "output names the reject reasons (2)" grep -q '^ *[0-9]*  tp\*pp\*cp does not divide the GPUs$' "$tmp/j1.txt"
check "output counts the rejected layouts" grep -q '^rejected layouts by reason' "$tmp/j1.txt"
# --csv prunes as the text does: the pruned layouts are rows of their own, with their bound and no memory.
pruned=$(sed -n 's/^pruned: \([0-9]*\) more.*/\1/p' "$tmp/j1.txt")
check "the text counts pruned layouts" test "${pruned:-0}" -gt 0
check "CSV lists each pruned layout, with its bound and no peak memory" python3 -c '
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "pruned"]
assert len(rows) == int(sys.argv[2]), len(rows)
assert all(r["reason"].startswith("lower bound ") and r["peak_memory_gib"] == "" and r["step_time_s"] == "" for r in rows)
' "$tmp/j1.csv" "${pruned:-0}"
check "output lists the top layouts" grep -q '^top 5 of' "$tmp/j1.txt"
check "output explains what limits the best layout" \
    grep -Eq '^ +1 .*(compute-bound|bubble|exposed (TP|PP|DP)|idle)' "$tmp/j1.txt"
check "output ends with the best layout's report" grep -q '^where the step goes' "$tmp/j1.txt"
check "no progress line when stderr is not a terminal" test ! -s "$tmp/j1.err"

"$bin" "${args[@]}" --jobs 2 --json >"$tmp/j.json" 2>/dev/null
check "--json exits 0" test $? -eq 0
check "--json is JSON with the format and the layouts" \
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["format"]=="trainsim-sweep/1"; assert len(d["layouts"])==d["counts"]["layouts"]; assert d["best"]["step_time_s"]>0' "$tmp/j.json"

"$bin" sweep --topology "$topo" --workload "$work" --gpus 16 --fix tensor_parallel=2 >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
check "unknown --fix key exits 2" test "$rc" -eq 2
check "unknown --fix key: one line on stderr" test "$(wc -l <"$tmp/bad.err")" -eq 1
check "unknown --fix key: the message names the key" grep -q 'unknown key "tensor_parallel"' "$tmp/bad.err"
check "unknown --fix key: nothing on stdout" test ! -s "$tmp/bad.out"

"$bin" sweep --topology "$topo" --workload "$work" --gpus 12 >"$tmp/bad.out" 2>"$tmp/bad.err"
rc=$?
check "--gpus not a multiple of gpus_per_node exits 2" test "$rc" -eq 2
check "--gpus not a multiple: the message names gpus_per_node" grep -q 'gpus_per_node = 8' "$tmp/bad.err"

# Without --gpus the sweep takes the topology's size (here 3 nodes of 8, by --set): the same output as
# --gpus 24.
nogpus=(sweep --topology "$topo" --workload "$work" --set topology.nodes=3 --global-batch 48 --vary micro_batch=1,2
        --vary recompute=none,full --vary tp=1,2,3,4 --top 5)
"$bin" "${nogpus[@]}" >"$tmp/nogpus.txt" 2>"$tmp/nogpus.err"
check "--gpus omitted: exits 0" test $? -eq 0
"$bin" "${nogpus[@]}" --gpus 24 >"$tmp/gpus24.txt" 2>/dev/null
check "--gpus omitted: the topology's 24 GPUs, the output of --gpus 24" cmp -s "$tmp/nogpus.txt" "$tmp/gpus24.txt"
check "--gpus omitted: the report names 24 GPUs" grep -q 'on 24 x ' "$tmp/nogpus.txt"

# --set as for run: the overridden sequence length reaches every layout (tokens per step double).
"$bin" "${args[@]}" --json >"$tmp/base.json" 2>/dev/null
"$bin" "${args[@]}" --set model.seq_len=4096 --json >"$tmp/set.json" 2>/dev/null
check "--set exits 0" test $? -eq 0
check "--set model.seq_len changes the sweep" \
    python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a["best"]["step_time_s"] != b["best"]["step_time_s"]' "$tmp/base.json" "$tmp/set.json"
"$bin" "${args[@]}" --set model.no_such_field=1 >"$tmp/bad.out" 2>"$tmp/bad.err"
check "--set with an unknown field exits 2" test $? -eq 2
check "--set with an unknown field: nothing on stdout" test ! -s "$tmp/bad.out"

# Several cluster sizes in one ranking, the memory margin, the time to train and its cost.
"$bin" sweep --topology "$topo" --workload "$work" --gpus 16,24 --global-batch 48 --vary micro_batch=1 \
    --vary recompute=none --vary tp=1,2 --min-headroom 10% --tokens 15T --gpu-hour-price 2.5 --top 3 \
    --csv "$tmp/sizes.csv" >"$tmp/sizes.txt" 2>"$tmp/sizes.err"
check "--gpus 16,24 exits 0" test $? -eq 0
check "--gpus 16,24: the CSV has a gpus column and the time-to-train columns" \
    grep -q '^rank,gpus,tp,.*,tokens_per_s_per_gpu,tokens_per_day,time_to_train_days,gpu_hours,cost_usd,mfu,' \
    "$tmp/sizes.csv"
check "--gpus 16,24: both sizes ranked together" \
    python3 -c 'import csv,sys; r=[x for x in csv.DictReader(open(sys.argv[1])) if x["rank"]]; assert {x["gpus"] for x in r}=={"16","24"}; t=[float(x["step_time_s"]) for x in r]; assert t==sorted(t)' "$tmp/sizes.csv"
check "--gpus 16,24: the best layout of each size" grep -q '^best layout per cluster size' "$tmp/sizes.txt"
check "--min-headroom 10%: named in the counts" grep -q '10% headroom kept' "$tmp/sizes.txt"
check "--tokens: days, GPU-hours and cost columns" grep -q ' days GPU-hours      cost ' "$tmp/sizes.txt"
check "the single-size CSV has no gpus column" test "$(head -c 8 "$tmp/j1.csv")" = "rank,tp,"

# A mixture-of-experts model: the sweep enumerates EP and its top table shows it (a dense one has no ep column).
"$bin" sweep --topology "$src/topologies/dgx-h100.json" --workload "$src/workloads/mixtral-8x7b.json" --gpus 64 \
    --vary tp=1 --vary pp=4 --vary micro_batch=1 --vary recompute=selective --vary cp=1 --vary vpp=1 --top 3 \
    >"$tmp/moe.txt" 2>/dev/null
check "MoE sweep exits 0" test $? -eq 0
check "MoE sweep: an ep column in the top table" grep -Eq '^rank +tp +pp +dp +cp +ep +mb ' "$tmp/moe.txt"
check "MoE sweep: layouts of several EP sizes ranked" \
    python3 -c 'import sys; rows=[l.split() for l in open(sys.argv[1]) if l[:4].strip().isdigit() and len(l.split())>5]; assert len({r[5] for r in rows})>1, rows' "$tmp/moe.txt"
check "dense sweep: no ep column" grep -Eq '^rank +tp +pp +dp +cp +mb ' "$tmp/j1.txt"

exit $fail
