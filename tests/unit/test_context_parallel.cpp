#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;
using trainsim::test::small_gpt;
using trainsim::test::small_topology;

namespace {
Layout cp_layout(int tp, int cp, int dp) {
    Layout l;
    l.tp = tp;
    l.cp = cp;
    l.dp = dp;
    l.pp = 1;
    l.micro_batch = 1;
    l.global_batch = 4 * dp;
    l.attention = AttentionKernel::flash;
    return l;
}
}  // namespace

TEST_CASE("context parallelism: rank order tp-cp-dp-pp") {
    Layout l = cp_layout(2, 2, 2);
    l.pp = 2;
    const RankCoord c = coord_of(l, 1 + 2 * (1 + 2 * (1 + 2 * 1)));
    CHECK(c.tp == 1);
    CHECK(c.cp == 1);
    CHECK(c.dp == 1);
    CHECK(c.pp == 1);
    for (int r = 0; r < l.gpus(); ++r)
        CHECK(rank_of(l, coord_of(l, r)) == r);
}

TEST_CASE("context parallelism: per-GPU work is split by cp, K/V exchanged per layer") {
    const ModelSpec m = small_gpt(4, 1024, 16, 2048);
    const Program one = build_program(m, cp_layout(1, 1, 8));
    const Program two = build_program(m, cp_layout(1, 2, 4));
    // Every kernel handles half the tokens: the layers' FLOPs per GPU halve exactly (attention included: s/cp
    // queries against s keys); the P2P-free stage has one CP all-gather per layer forward (4 layers x 4
    // micro-batches) and an all-gather plus a reduce-scatter per layer backward.
    CHECK(two.stages[0].hardware_flops == doctest::Approx(one.stages[0].hardware_flops / 2).epsilon(1e-9));
    int cp_ops = 0;
    for (const auto& op : two.stages[0].ops)
        if (op.kind == OpKind::tp_launch && op.group == CommGroup::cp) ++cp_ops;
    CHECK(cp_ops == 4 * 4 * 3);
    for (const auto& op : one.stages[0].ops)
        CHECK_FALSE((op.kind == OpKind::tp_launch && op.group == CommGroup::cp));
}

TEST_CASE("context parallelism: simulates, folds exactly, and is refused without flash attention") {
    const ModelSpec m = small_gpt(4, 1024, 16, 2048);
    const auto topo = small_topology(1);
    const Layout l = cp_layout(2, 2, 2);
    const auto r = simulate(topo, m, l, "cp");
    CHECK(r.report.step_time_s > 0);
    // Same as the layout without CP on the same GPUs, the step is shorter than 2x DP's.
    const auto dp_only = simulate(topo, m, cp_layout(2, 1, 4), "dp");
    CHECK(r.report.step_time_s < 2 * dp_only.report.step_time_s);
    const Cluster c(topo);
    Program p = build_program(m, l);
    assign_durations(p, ComputeModel(c.gpu(), l.precision));
    ExecutionOptions unfolded;
    unfolded.fold_tp_groups = false;
    CHECK(execute(c, l, p, {}).step_time_s == execute(c, l, p, {}, unfolded).step_time_s);
    Layout bad = l;
    bad.attention = AttentionKernel::unfused;
    CHECK(contains(message_of<InputError>([&] { check_layout(m, bad, 8); }), "layout.cp = 2 needs"));
    bad = l;
    bad.cp = 3;
    CHECK(contains(message_of<InputError>([&] { check_layout(small_gpt(4, 1024, 16, 2000), bad, 12); }),
                   "2 * cp does not divide model.seq_len"));
}
