#include <doctest/doctest.h>

#include <string>
#include <vector>

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

TEST_CASE("context parallelism: TransformerEngine's ring attention runs one fused call per CP step") {
    // seq 2048, 16 heads of 64, micro-batch 1, CP 4: each rank holds two chunks of 256 tokens (512 queries).
    const ModelSpec m = small_gpt(4, 1024, 16, 2048);
    Layout l = cp_layout(1, 4, 2);
    l.attention = AttentionKernel::cudnn;
    const Program p = build_program(m, l);
    std::vector<Kernel> fwd, bwd;
    double out_correction = 0, grad_accumulate = 0;
    for (const auto& op : p.stages[0].ops) {
        if (op.kind != OpKind::compute) continue;
        for (const auto& k : p.segments[static_cast<std::size_t>(op.segment)].kernels) {
            const std::string name = k.name;
            if (name.rfind("cp_attention_fwd", 0) == 0) fwd.push_back(k);
            if (name.rfind("cp_attention_bwd", 0) == 0) bwd.push_back(k);
            if (name == "cp_out_lse_correction") out_correction = k.bytes;
            if (name == "cp_grad_accumulate") grad_accumulate = k.bytes;
        }
    }
    // 4 layers x 4 micro-batches x 4 steps each way.
    REQUIRE(fwd.size() == 4 * 4 * 4);
    REQUIRE(bwd.size() == fwd.size());
    // Step 0: causal over the rank's 512 tokens: 0.5 * 4 * 16 * 512^2 * 64 FLOPs.
    CHECK(std::string(fwd[0].name) == "cp_attention_fwd_diagonal");
    CHECK(fwd[0].flops == doctest::Approx(0.5 * 4 * 16 * 512.0 * 512 * 64));
    CHECK(fwd[0].attention_shape.causal);
    CHECK(fwd[0].attention_shape.q_len == 512);
    // Steps 1-3 (rank 0's): its second chunk's 256 queries against a whole 512-key block, non-causal.
    for (int i = 1; i < 4; ++i) {
        CHECK(std::string(fwd[static_cast<std::size_t>(i)].name) == "cp_attention_fwd_step");
        CHECK(fwd[static_cast<std::size_t>(i)].flops == doctest::Approx(4 * 16 * 256.0 * 512 * 64));
        CHECK_FALSE(fwd[static_cast<std::size_t>(i)].attention_shape.causal);
        CHECK(fwd[static_cast<std::size_t>(i)].attention_shape.q_len == 256);
        CHECK(fwd[static_cast<std::size_t>(i)].attention_shape.kv_len == 512);
        CHECK(bwd[static_cast<std::size_t>(i)].flops ==
              doctest::Approx(2.5 * fwd[static_cast<std::size_t>(i)].flops));
    }
    // The steps' FLOPs add up to the whole sequence's causal attention over cp: 0.5 * 4 * 16 * 2048^2 * 64
    // / 4.
    double sum = 0;
    for (int i = 0; i < 4; ++i)
        sum += fwd[static_cast<std::size_t>(i)].flops;
    CHECK(sum == doctest::Approx(0.5 * 4 * 16 * 2048.0 * 2048 * 64 / 4));
    // Output merge: 2 B per output element at step 0, 3 B per element of the second half at each later step
    // (512 x 16 x 64 elements of 2 B), plus 3 fp32 LSE reads/writes of the half per later step.
    const double out_elements = 512.0 * 16 * 64;
    CHECK(out_correction == doctest::Approx(out_elements * 2 * (2 + 3 * 1.5) + 3 * 0.5 * 512 * 16 * 12));
    // Gradients: per later step dq of the half and dK/dV of the block (512 keys x 16 heads x 128), 3 x 2 B.
    CHECK(grad_accumulate == doctest::Approx(3 * (0.5 * out_elements + 512.0 * 16 * 128) * 3 * 2));
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

TEST_CASE("context parallelism: PyTorch's ring attention merges and accumulations, eager and compiled") {
    // torchtitan, CP 4, seq 2048, 16 heads of 64 (MHA: no repeat_kv), micro-batch 1: each rank holds 512
    // tokens, so n = 512 x 16 x 64 output (and dQ, dK, dV) elements per layer; 16-bit activations (E = 2).
    const ModelSpec m = small_gpt(4, 1024, 16, 2048);
    Layout l = cp_layout(1, 4, 2);
    l.framework = Framework::torchtitan;
    auto bytes_of = [](const Program& p, const std::string& name) {
        for (const auto& op : p.stages[0].ops)
            if (op.kind == OpKind::compute)
                for (const auto& k : p.segments[static_cast<std::size_t>(op.segment)].kernels)
                    if (name == k.name) return k.bytes;
        return -1.0;
    };
    const double n = 512.0 * 16 * 64, E = 2, cp = 4;
    // Eager: step 0's cast (E + 4), three later steps, half over the whole output (cast, out - block,
    // sigmoid product, out - that: E + 36) and half over its second half plus the cat (8), the cast back (4 +
    // E).
    const Program eager = build_program(m, l);
    const double merge =
        (E + 4) * n + 0.5 * (cp - 1) * ((E + 36) * n + 0.5 * (E + 36) * n + 8 * n) + (4 + E) * n;
    CHECK(bytes_of(eager, "cp_lse_merge") == doctest::Approx(merge));
    const double add = 8 + E;
    const double grads =
        4 * 3 * n + add * 3 * n +
        0.5 * (cp - 1) * (2 * (0.5 * add * n + 8 * n) + add * n + 2 * add * n + 0.5 * add * n + 8 * n) +
        cp * 16 * n + (4 + E) * 3 * n;
    CHECK(bytes_of(eager, "cp_grad_accumulate") == doctest::Approx(grads));
    // The local K and V (2 E n bytes) made contiguous, then concatenated at every step but the last: read
    // and write each time, 2 x (1 + cp - 1) x 2 E n; compiled, one concatenation (the others unused).
    CHECK(bytes_of(eager, "cp_kv_copy") == doctest::Approx(2 * cp * 2 * E * n));
    // Compiled: one fused pass per step, E + 8 B per element of the output, and of dQ, dK, dV.
    l.torch_compile = true;
    const Program compiled = build_program(m, l);
    CHECK(bytes_of(compiled, "cp_lse_merge") == doctest::Approx(cp * (E + 8) * n));
    CHECK(bytes_of(compiled, "cp_grad_accumulate") == doctest::Approx(cp * (E + 8) * 3 * n));
    CHECK(bytes_of(compiled, "cp_kv_copy") == doctest::Approx(4 * 2 * E * n));
}
