#!/usr/bin/env bash
# End-to-end checks of `trainsim memory` and of the out-of-memory exit of `trainsim run`: the per-stage, per-phase
# table with the peak named, --what-if with bytes saved and time cost, --json, --svg, exit 3 with the stage, phase
# and pile on a layout that cannot fit, and bad input (exit 2, one line).
# usage: memory_e2e.sh TRAINSIM_BINARY SOURCE_DIR
set -u
bin="$1"
src="$2"
# shellcheck source=check_lib.sh
source "$(dirname "$0")/check_lib.sh"

a100="$src/topologies/dgx-a100.json"
h100="$src/topologies/dgx-h100.json"
small=(--topology "$a100" --workload "$src/tests/e2e/data/small.json" --set topology.nodes=2)

# 1. The small configuration: 2 stages x 5 phases, the peak named, --what-if, --svg, --json.
"$bin" memory "${small[@]}" --what-if --svg "$tmp/m.svg" >"$tmp/small.txt" 2>"$tmp/small.err"
check "memory exits 0 on a layout that fits" test $? -eq 0
check "stderr is empty" test ! -s "$tmp/small.err"
check "table header names the piles" grep -q 'params  *grads  *optim\.  *activ\.  *buffers  *framew\.  *total' "$tmp/small.txt"
check "5 phases per stage, 2 stages" test "$(grep -cE '^ +[0-9]* +(load|forward|backward|optimizer|checkpoint) +[0-9]' "$tmp/small.txt")" -eq 10
check "each stage's peak is marked" test "$(grep -c '<- stage peak' "$tmp/small.txt")" -eq 2
check "the peak is named" grep -Eq '^peak: stage [01] in (forward|backward|optimizer): [0-9.]+ GiB of 80\.0 GiB' "$tmp/small.txt"
check "what-if lists remedies with peak, saved and cost" grep -q '^  remedy  *peak GiB  *saved GiB  *step s  *cost s' "$tmp/small.txt"
check "what-if simulates recompute full" grep -Eq '^  recompute full +[0-9.]+ +-?[0-9.]+ +[0-9.]+ +[-+][0-9.]+  fits' "$tmp/small.txt"
check "what-if simulates ZeRO-3" grep -Eq '^  ZeRO-3 / FSDP +[0-9.]+ +-?[0-9.]+ ' "$tmp/small.txt"
check "what-if names what does not apply" grep -q 'micro-batch halved  *not applicable: micro-batch is 1' "$tmp/small.txt"
check "--svg writes an SVG" grep -q '^<svg xmlns="http://www.w3.org/2000/svg"' "$tmp/m.svg"
check "the SVG is complete" test "$(tail -n 1 "$tmp/m.svg")" = "</svg>"

"$bin" memory "${small[@]}" --json --timeline >"$tmp/m.json" 2>/dev/null
check "--json exits 0" test $? -eq 0
check "--json: stages, phases, piles and the timeline" \
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))["memory"]
assert d["fits"] and len(d["stages"]) == 2
for s in d["stages"]:
    assert set(s["phases"]) == {"load", "forward", "backward", "optimizer", "checkpoint"}
    assert s["phases"][s["peak_phase"]]["bytes"]["total"] == s["peak_bytes"]
    assert len(s["timeline"]["samples"]) > 10
    times = [x[0] for x in s["timeline"]["samples"]]
    assert times == sorted(times) and times[-1] > 0
' "$tmp/m.json"
"$bin" memory "${small[@]}" --json >"$tmp/m2.json" 2>/dev/null
"$bin" memory "${small[@]}" --json >"$tmp/m3.json" 2>/dev/null
check "--json twice is byte-identical" cmp -s "$tmp/m2.json" "$tmp/m3.json"

# 2. Llama-3 70B with tp = pp = 1, dp = 8 and no sharding on 80 GB GPUs: out of memory, exit 3.
oom=(--topology "$h100" --workload "$src/workloads/llama3-70b.json" --set topology.nodes=1 --set layout.tp=1
     --set layout.pp=1 --set layout.dp=8 --set layout.global_batch=64 --set layout.sequence_parallel=false
     --set layout.distributed_optimizer=false --set layout.overlap_param_gather=false)
"$bin" memory "${oom[@]}" >"$tmp/oom.txt" 2>"$tmp/oom.err"
check "memory exits 3 when a stage does not fit" test $? -eq 3
check "memory: stderr is one line naming stage, phase and pile" \
    grep -Eq '^trainsim: stage 0 runs out of memory in (forward|backward): [0-9.]+ GiB of 80\.0 GiB; optimizer state [0-9.]+ GiB$' "$tmp/oom.err"
check "memory: stderr is exactly one line" test "$(wc -l <"$tmp/oom.err")" -eq 1
check "memory: the table still prints, OOM first" grep -q '^OUT OF MEMORY: stage 0 runs out of memory' "$tmp/oom.txt"
"$bin" run "${oom[@]}" >"$tmp/run_oom.txt" 2>"$tmp/run_oom.err"
check "run exits 3 when a stage does not fit" test $? -eq 3
check "run: the report says so first" test "$(head -n 1 "$tmp/run_oom.txt" | cut -c1-14)" = "OUT OF MEMORY:"
check "run: the timing is still printed, marked infeasible" grep -q 'the timing below is infeasible' "$tmp/run_oom.txt"
check "run: the step time is printed" grep -q '^step time ' "$tmp/run_oom.txt"

# 3. validate compares a run's measured peak memory with the predicted peak (a constructed run, not a measurement).
"$bin" validate "$src/tests/e2e/data/runs-with-memory.json" --tolerance 1000 --json >"$tmp/v.json" 2>/dev/null
check "validate with peak_memory_GiB exits 0" test $? -eq 0
check "validate reports the peak_memory_GiB metric and its summary" \
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
m = {x["name"]: x for x in d["runs"][0]["metrics"]}
assert m["peak_memory_GiB"]["measured"] == 2.0 and 0.5 < m["peak_memory_GiB"]["predicted"] < 80
assert d["summary"]["peak_memory_GiB"]["within_tolerance"] == 1
' "$tmp/v.json"
"$bin" memory --from-runs "$src/tests/e2e/data/runs-with-memory.json" --id small_with_memory >"$tmp/fr.txt" 2>&1
check "memory --from-runs runs one entry" grep -q '^peak: stage 0 in ' "$tmp/fr.txt"

# 4. Bad input: exit 2, one line naming the field.
"$bin" memory "${small[@]}" --set layout.optimizer=adamw9 >"$tmp/bad1.out" 2>"$tmp/bad1.err"
check "unknown optimizer exits 2" test $? -eq 2
check "unknown optimizer: one line naming the field" grep -q 'layout.optimizer' "$tmp/bad1.err"
"$bin" memory "${small[@]}" --set layout.offload_optimizer=nvme >"$tmp/bad2.out" 2>"$tmp/bad2.err"
check "nvme offload without ZeRO-3 exits 2" test $? -eq 2
check "nvme offload without ZeRO-3: the reason" grep -q 'needs layout.zero_stage = 3' "$tmp/bad2.err"
"$bin" memory "${small[@]}" --svg "$tmp/no-such-dir/m.svg" >"$tmp/bad3.out" 2>"$tmp/bad3.err"
check "--svg into a missing folder exits 2" test $? -eq 2
"$bin" memory "${small[@]}" --set layout.lora_targets='["qkv","mlp"]' --set layout.adapter=lora >"$tmp/bad4.out" 2>"$tmp/bad4.err"
check "unknown LoRA target exits 2 naming it" grep -q 'lora_targets.*"mlp"' "$tmp/bad4.err"
"$bin" memory stray >"$tmp/bad5.out" 2>"$tmp/bad5.err"
check "a stray argument exits 2" test $? -eq 2

python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); del t["host"]; json.dump(t, open(sys.argv[2], "w"))' \
    "$a100" "$tmp/no-host.json"
"$bin" memory --topology "$tmp/no-host.json" --workload "$src/tests/e2e/data/small.json" --set topology.nodes=2 \
    --set 'layout.offload_optimizer="cpu"' >"$tmp/bad6.out" 2>"$tmp/bad6.err"
check "offload on a topology without its host side exits 2" test $? -eq 2
check "offload without a host side: the field is named" grep -q 'topology.host.memory_bandwidth is not given' "$tmp/bad6.err"

# 4. A large simulation under the event bound (issue 14): TP 16 across two nodes on a RoCE/ECMP fabric, CP 4, 2,048
#    GPUs, global batch 1,024 (6.3 M GPU layer passes, inside trainsim/limits.hpp's 2^23); the full iteration is
#    ~92 M events (11 s of `run`), so memory --what-if stops the simulation at --max-events (default 5 M), walks
#    every remedy's memory over its schedule, and simulates no remedy.
ecmp=(--topology "$h100" --workload "$src/workloads/gpt3-175b.json" --set topology.nodes=256
      --set 'topology.scale_out.kind="roce"' --set 'topology.scale_out.routing="ecmp"' --set layout.tp=16
      --set layout.cp=4 --set layout.pp=4 --set layout.dp=8 --set model.seq_len=8192
      --set 'layout.attention="flash"' --set 'layout.precision="bf16"' --set layout.global_batch=1024)
"$bin" memory "${ecmp[@]}" --what-if >"$tmp/ecmp.txt" 2>"$tmp/ecmp.err"
rc=$?
check "bounded what-if: exit 0 or 3 (out of memory), never a bad-input or internal error" test $rc -eq 0 -o $rc -eq 3
check "bounded what-if: the table, 4 stages x 5 phases" test "$(grep -cE '^ +[0-9]* +(load|forward|backward|optimizer|checkpoint) +[0-9]' "$tmp/ecmp.txt")" -eq 20
check "bounded what-if: says the times were not simulated, naming --max-events" \
    grep -q '^(times not simulated: the iteration passed --max-events 8388608 events' "$tmp/ecmp.txt"
check "bounded what-if: each remedy has its memory, no step time" \
    grep -Eq '^  distributed optimizer \(ZeRO-1\) +[0-9.]+ +-?[0-9.]+ +- +-  (fits|DOES NOT FIT)' "$tmp/ecmp.txt"
check "bounded what-if: the dash explained" grep -q 'step time not simulated, its simulation passed --max-events 8388608' "$tmp/ecmp.txt"
"$bin" memory "${small[@]}" --what-if --max-events 100 --json >"$tmp/cut.json" 2>/dev/null
check "--max-events 100 --json: exit 0" test $? -eq 0
check "--max-events 100 --json: memory whole, step times null" \
    python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert d["step_time_s"] is None and d["max_events"] == 100 and len(d["memory"]["stages"]) == 2
w = d["what_if"]
assert w["baseline"]["step_time_s"] is None and w["baseline"]["peak_bytes"] > 0
ok = [r for r in w["remedies"] if r["applicable"]]
assert len(ok) >= 4 and all(r["step_time_s"] is None and r["peak_bytes"] > 0 for r in ok)' "$tmp/cut.json"
"$bin" memory "${small[@]}" --max-events=-1 >"$tmp/bad7.out" 2>"$tmp/bad7.err"
check "--max-events -1 exits 2" test $? -eq 2

# Round 13's fix, tested in round 14: on a fabric whose TP groups share their ports (PCIe), the halved
# micro-batch doubles the layer passes past kMaxLayerPassesSharedTpPorts (2^20; here the layout is at it:
# 8 layers x 262,144 / 2). That refusal made the remedy "not applicable" and dropped its memory figures; it
# keeps them, without a step time. --max-events 1000 keeps the simulations short: the refusal comes first.
"$bin" memory --what-if --json --topology "$src/topologies/pcie-h100.json" --workload "$src/tests/e2e/data/small.json" \
    --set topology.nodes=512 --set layout.dp=1024 --set layout.micro_batch=2 --set layout.global_batch=262144 \
    --max-events 1000 >"$tmp/shared_tp.json" 2>/dev/null
check "what-if on PCIe: exit 0" test $? -eq 0
check "what-if on PCIe: the halved micro-batch past the shared-port limit keeps its memory figures" \
    python3 -c 'import json,sys
w = json.load(open(sys.argv[1]))["what_if"]
r = [r for r in w["remedies"] if r["name"].startswith("micro-batch 1")]
assert len(r) == 1 and r[0]["applicable"] and r[0]["peak_bytes"] > 0 and r[0]["step_time_s"] is None, r' "$tmp/shared_tp.json"

exit $fail
