// MoE communication as Megatron-Core runs it beyond the plain alltoall dispatcher: the combined 1F1B
// schedule of --overlap-moe-expert-parallel-comm (one extra warm-up forward; forward and backward layers
// merged so that each EP all-to-all runs under the other micro-batch's compute), and the flex dispatchers
// (DeepEP / HybridEP) sending one copy of a token per destination rank.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"

using namespace trainsim;
using trainsim::test::small_topology;

namespace {

std::string compact(const std::vector<ScheduleItem>& items) {
    std::string s;
    for (const auto& it : items) {
        s.push_back(it.forward ? 'F' : 'B');
        s.append(std::to_string(it.micro_batch));
        if (it.chunk > 0) s.push_back('\'');
        s.push_back(' ');
    }
    return s;
}

/// 4 layers, the first dense, 4 experts top-2, 256 hidden; EP 2 over DP 4, 2 micro-batches per GPU.
ModelSpec tiny_moe() {
    ModelSpec m;
    m.name = "tiny-moe";
    m.layers = 4;
    m.hidden = 256;
    m.heads = 4;
    m.kv_heads = 4;
    m.ffn_hidden = 512;
    m.vocab = 1024;
    m.seq_len = 128;
    m.num_experts = 4;
    m.moe_top_k = 2;
    m.moe_first_dense_layers = 1;
    return m;
}
Layout tiny_layout(bool overlap) {
    Layout l;
    l.dp = 4;
    l.ep = 2;
    l.micro_batch = 1;
    l.global_batch = 8;
    l.moe_a2a_overlap = overlap;
    return l;
}

bool ep_launch(const Op& op) {
    return op.kind == OpKind::tp_launch && op.group == CommGroup::ep;
}
/// For each EP all-to-all: the compute ops between its launch and the wait that follows it.
std::vector<int> computes_under_a2a(const std::vector<Op>& ops) {
    std::vector<int> out;
    for (std::size_t i = 0; i < ops.size(); ++i) {
        if (!ep_launch(ops[i])) continue;
        int n = 0;
        std::size_t j = i + 1;
        for (; j < ops.size() && ops[j].kind != OpKind::tp_wait; ++j)
            n += ops[j].kind == OpKind::compute ? 1 : 0;
        out.push_back(n);
    }
    return out;
}

}  // namespace

TEST_CASE("moe overlap: the combined 1F1B schedule runs one more warm-up forward") {
    // No pipelining (combined_1f1b_schedule_for_no_pipelining): F0 alone, then F(i+1) with B(i), B last.
    CHECK(compact(pipeline_schedule(Schedule::one_f_one_b, 1, 0, 3, 1)) == "F0 B0 F1 B1 F2 B2 ");
    CHECK(compact(pipeline_schedule(Schedule::one_f_one_b, 1, 0, 3, 1, true)) == "F0 F1 B0 F2 B1 B2 ");
    // Interleaved, PP 2, VPP 2, 4 micro-batches, rank 1: warm-up (2-1-1)*2 + (2-1)*2 = 2, plus 1.
    const auto plain = pipeline_schedule(Schedule::one_f_one_b, 2, 1, 4, 2);
    const auto comb = pipeline_schedule(Schedule::one_f_one_b, 2, 1, 4, 2, true);
    CHECK(compact(plain) == "F0 F1 F0' B0' F1' B1' F2 B0 F3 B1 F2' B2' F3' B3' B2 B3 ");
    CHECK(compact(comb) == "F0 F1 F0' F1' B0' F2 B1' F3 B0 F2' B1 F3' B2' B3' B2 B3 ");
    CHECK(comb.size() == plain.size());
}

/// The forwards the combined schedule merges with the backward after them, compactly ("F1 F2 ").
std::string merged(const std::vector<ScheduleItem>& items) {
    std::string s;
    for (const auto& it : items)
        if (it.steady) {
            s.push_back('F');
            s.append(std::to_string(it.micro_batch));
            s.append(it.chunk > 0 ? "' " : " ");
        }
    return s;
}

TEST_CASE("moe overlap: only steady-state forwards are merged; one micro-batch runs its passes apart") {
    // A warm-up forward followed by a cool-down backward is not a 1F1B step: with one micro-batch per
    // pipeline that backward is its own (merging them built a program whose memory walk found nothing
    // stored: an internal error on a valid layout); with all passes warm-up Megatron runs no 1F1B step.
    CHECK(merged(pipeline_schedule(Schedule::one_f_one_b, 1, 0, 1, 1, true)).empty());
    CHECK(merged(pipeline_schedule(Schedule::one_f_one_b, 1, 0, 3, 1, true)) == "F1 F2 ");
    CHECK(merged(pipeline_schedule(Schedule::one_f_one_b, 2, 0, 2, 2, true)).empty());  // m == pp
    CHECK(merged(pipeline_schedule(Schedule::one_f_one_b, 2, 1, 4, 2, true)) == "F1' F2 F3 F2' F3' ");
    ModelSpec m = tiny_moe();
    Layout one = tiny_layout(true);
    one.global_batch = 4;  // DP 4, micro-batch 1: one micro-batch per pipeline
    const Cluster c(small_topology(1, 4, 4));
    const SimulationResult r = simulate(c, m, one, build_program(m, one), "one-micro-batch");
    CHECK(r.report.step_time_s > 0);
    CHECK(r.report.step_time_s == doctest::Approx(simulate(c, m, tiny_layout(false),
                                                           build_program(m,
                                                                         [] {
                                                                             Layout l = tiny_layout(false);
                                                                             l.global_batch = 4;
                                                                             return l;
                                                                         }()),
                                                           "plain")
                                                      .report.step_time_s));
}

TEST_CASE("moe overlap: each EP all-to-all of a merged step runs under the other micro-batch's compute") {
    const ModelSpec m = tiny_moe();
    const Program plain = build_program(m, tiny_layout(false));
    const Program comb = build_program(m, tiny_layout(true));
    const auto& po = plain.stages.at(0).ops;
    const auto& co = comb.stages.at(0).ops;
    // Same work: 3 MoE layers x 2 all-to-alls x (forward + backward) x 2 micro-batches, same compute ops.
    const auto n_plain = computes_under_a2a(po), n_comb = computes_under_a2a(co);
    REQUIRE(n_plain.size() == 24u);
    REQUIRE(n_comb.size() == 24u);
    auto count = [](const std::vector<Op>& ops, OpKind k) {
        int n = 0;
        for (const Op& op : ops)
            n += op.kind == k ? 1 : 0;
        return n;
    };
    // The same kernels (the overlap cuts a layer's compute runs at its MLP, so there are more runs).
    auto kernels = [](const Program& p) {
        std::size_t n = 0;
        for (const Op& op : p.stages[0].ops)
            if (op.kind == OpKind::compute)
                n += p.segments[static_cast<std::size_t>(op.segment)].kernels.size();
        return n;
    };
    CHECK(kernels(plain) == kernels(comb));
    // One more compute run per layer pass: 4 layers x (forward + backward) x 2 micro-batches.
    CHECK(count(co, OpKind::compute) == count(po, OpKind::compute) + 16);
    CHECK(count(po, OpKind::tp_wait) == count(co, OpKind::tp_wait));
    // Plain: every all-to-all is waited for at once.
    for (int n : n_plain)
        CHECK(n == 0);
    // Combined (F0 | F1 + B0 | B1): F0's 6 and B1's 6 all-to-alls alone; each of the merged step's 12
    // under compute. Layer pairs (F1 layer i, B0 layer 3 - i): (dense, MoE): B0's combine backward under
    // F1's attention, its dispatch backward under F1's dense MLP; (MoE, MoE) x 2: all four hidden; (MoE,
    // dense): F1's dispatch under B0's dense MLP backward, its combine under B0's attention backward.
    for (std::size_t i = 6; i < 18; ++i)
        CHECK(n_comb[i] > 0);
    for (std::size_t i = 0; i < 6; ++i)
        CHECK(n_comb[i] == 0);
    for (std::size_t i = 18; i < 24; ++i)
        CHECK(n_comb[i] == 0);
    // Memory marks stay in op order and as many.
    const auto& pm = plain.stages[0].memory_marks;
    const auto& cm = comb.stages[0].memory_marks;
    CHECK(pm.size() == cm.size());
    for (std::size_t i = 1; i < cm.size(); ++i)
        CHECK(cm[i - 1].op <= cm[i].op);
    // F1's layers are stored as B0's are freed: one micro-batch in flight at most, as without the overlap.
    CHECK(comb.stages[0].peak_in_flight_microbatches == 1);
    CHECK(plain.stages[0].peak_in_flight_microbatches == 1);
}

TEST_CASE("moe overlap: on the executor the merged step hides EP time and is not slower") {
    const ModelSpec m = tiny_moe();
    Program plain = build_program(m, tiny_layout(false));
    Program comb = build_program(m, tiny_layout(true));
    for (Program* p : {&plain, &comb})  // 2 us per kernel: the same compute in both
        for (Segment& s : p->segments)
            s.seconds = 2e-6 * static_cast<double>(s.kernels.size());
    const Cluster c(small_topology(1, 4, 4));
    const ExecutionResult a = execute(c, tiny_layout(false), plain, {});
    const ExecutionResult b = execute(c, tiny_layout(true), comb, {});
    CHECK(b.ranks.at(0).compute_s == doctest::Approx(a.ranks.at(0).compute_s));
    CHECK(b.ranks[0].ep_exposed_s < a.ranks[0].ep_exposed_s);
    CHECK(b.step_time_s < a.step_time_s);
}

TEST_CASE("moe overlap: the layout check refuses PP without VPP, as Megatron-Core asserts") {
    ModelSpec m = tiny_moe();
    Layout l = tiny_layout(true);
    l.dp = 2;
    l.pp = 2;
    l.global_batch = 4;
    bool found = false;
    for (const auto& v : layout_violations(m, l, 4))
        found = found || (v.check == LayoutCheck::moe_shape && v.message.find("vpp") != std::string::npos);
    CHECK(found);
}

TEST_CASE("moe dispatchers: copies per token by hand") {
    ModelSpec m = tiny_moe();  // 4 experts, top-2
    Layout l = tiny_layout(false);
    CHECK(moe_dispatch_copies_per_token(m, l) == 2);  // alltoall: k copies
    l.moe_dispatcher = MoeDispatcher::deepep;
    // EP 2, 2 experts per rank: a rank is missed when both experts are on the other: C(2,2)/C(4,2) = 1/6.
    CHECK(moe_dispatch_copies_per_token(m, l) == doctest::Approx(2.0 * 5.0 / 6.0));
    l.moe_dispatcher = MoeDispatcher::hybridep;
    CHECK(moe_dispatch_copies_per_token(m, l) == doctest::Approx(5.0 / 3.0));
    // EP 4: one expert per rank, two distinct ranks: no saving.
    l.ep = 4;
    CHECK(moe_dispatch_copies_per_token(m, l) == doctest::Approx(2.0));
    // Qwen3-30B-A3B, 128 experts top-8 over EP 8: 8 (1 - C(112,8)/C(128,8)).
    m.num_experts = 128;
    m.moe_top_k = 8;
    l.ep = 8;
    double miss = 1;
    for (int i = 0; i < 8; ++i)
        miss *= (112.0 - i) / (128.0 - i);
    CHECK(moe_dispatch_copies_per_token(m, l) == doctest::Approx(8 * (1 - miss)));
    CHECK(moe_dispatch_copies_per_token(m, l) < 8);
    CHECK(moe_dispatch_copies_per_token(m, l) > 5);
    // The dispatch all-to-all's bytes follow it: T·copies·h·2.
    m = tiny_moe();
    l = tiny_layout(false);
    l.moe_dispatcher = MoeDispatcher::deepep;
    const Program p = build_program(m, l);
    for (const Op& op : p.stages[0].ops)
        if (ep_launch(op)) CHECK(op.bytes == doctest::Approx(128 * (5.0 / 3.0) * 256 * 2));
}

TEST_CASE("moe overlap: extensions.moe_a2a_overlap and moe_dispatcher_backend are read") {
    using nlohmann::json;
    json row = {
        {"id", "r"},
        {"source", "Megatron-Bridge performance summary"},
        {"cluster",
         {{"gpu", "H100-SXM5-80GB"},
          {"gpus", 16},
          {"gpus_per_node", 8},
          {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 450}}},
          {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 8}, {"nic_Gbps", 400}}}}},
        {"model",
         {{"layers", 4},
          {"hidden", 1024},
          {"heads", 8},
          {"kv_heads", 8},
          {"ffn_hidden", 4096},
          {"vocab", 32000},
          {"seq_len", 1024},
          {"mlp", "swiglu"}}},
        {"training",
         {{"tp", 1},
          {"pp", 1},
          {"dp", 16},
          {"cp", 1},
          {"micro_batch", 1},
          {"global_batch", 64},
          {"sequence_parallel", false},
          {"recompute", "none"},
          {"zero_stage", 0},
          {"distributed_optimizer", true},
          {"precision", "bf16"}}},
        {"measured", {{"step_time_s", 1.0}, {"peak_memory_GiB", nullptr}}},
        {"extensions",
         {{"moe", {{"num_experts", 16}, {"top_k", 2}, {"moe_ffn_hidden", 512}, {"ep", 8}, {"etp", 1}}},
          {"moe_a2a_overlap", true},
          {"moe_dispatcher_backend", "hybridep"}}}};
    json d = {{"format", "trainsim-measured-runs/1"}, {"runs", json::array({row})}};
    const MeasuredRun r = parse_measured_runs(d, "f.json").runs.at(0);
    REQUIRE_FALSE(r.error);
    CHECK(r.layout.moe_a2a_overlap);
    CHECK(r.layout.moe_dispatcher == MoeDispatcher::hybridep);
    for (const std::string& i : r.ignored)
        CHECK(i.find("moe_") == std::string::npos);
}
