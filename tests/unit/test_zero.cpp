#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/program.hpp"
#include "trainsim/report.hpp"
#include "trainsim/simulate.hpp"

using namespace trainsim;
using trainsim::test::small_gpt;
using trainsim::test::small_topology;

namespace {

struct DpCounts {
    int all_gather = 0, reduce_scatter = 0, all_reduce = 0;
};

DpCounts count_dp(const StageProgram& sp) {
    DpCounts c;
    for (const auto& op : sp.ops)
        if (op.kind == OpKind::dp_launch) {
            if (op.collective == CollectiveKind::all_gather) ++c.all_gather;
            if (op.collective == CollectiveKind::reduce_scatter) ++c.reduce_scatter;
            if (op.collective == CollectiveKind::all_reduce) ++c.all_reduce;
        }
    return c;
}

Layout dp_layout(int zero, int m) {
    Layout l;
    l.tp = 1;
    l.pp = 1;
    l.dp = 8;
    l.micro_batch = 1;
    l.global_batch = 8 * m;
    l.zero_stage = zero;
    l.dp_bucket_bytes = 1;  // one bucket per parameter group
    return l;
}

}  // namespace

TEST_CASE("ZeRO: DP collectives per stage follow DDP, ZeRO-1, ZeRO-2 and ZeRO-3 / FSDP") {
    const ModelSpec m = small_gpt(4);  // 4 layers + embedding + head (tied: head group holds the final norm)
    const int groups = 4 + 2;
    const int mbs = 3;
    {  // DDP, no overlap: one all-reduce per bucket after the last backward
        const auto c = count_dp(build_program(m, dp_layout(0, mbs)).stages[0]);
        CHECK(c.all_reduce == groups);
        CHECK(c.all_gather + c.reduce_scatter == 0);
    }
    {  // ZeRO-1: reduce-scatter once, all-gather once
        const auto c = count_dp(build_program(m, dp_layout(1, mbs)).stages[0]);
        CHECK(c.reduce_scatter == groups);
        CHECK(c.all_gather == groups);
    }
    {  // ZeRO-2: gradients reduce-scattered every micro-batch
        const auto c = count_dp(build_program(m, dp_layout(2, mbs)).stages[0]);
        CHECK(c.reduce_scatter == mbs * groups);
        CHECK(c.all_gather == groups);
    }
    {  // ZeRO-3: parameters gathered in forward and again in backward, gradients reduce-scattered, per
       // micro-batch
        const auto c = count_dp(build_program(m, dp_layout(3, mbs)).stages[0]);
        CHECK(c.all_gather == 2 * mbs * groups);
        CHECK(c.reduce_scatter == mbs * groups);
        CHECK(c.all_reduce == 0);
    }
}

TEST_CASE("ZeRO: sharding shrinks the piles by DP and the simulation runs") {
    const ModelSpec m = small_gpt(4);
    const auto topo = small_topology(1);
    double prev_total = 1e300;
    for (int z = 0; z <= 3; ++z) {
        CAPTURE(z);
        const auto r = simulate(topo, m, dp_layout(z, 2), "zero");
        const auto& load = r.report.memory.stages.at(0).phase_peaks[0].piles;  // the load phase
        CHECK(r.report.step_time_s > 0);
        const double held = load[0] + load[1] + load[2];
        CHECK(held < prev_total);
        prev_total = held;
        const double params = load[static_cast<std::size_t>(Pile::parameters)];
        if (z < 3) CHECK(params == doctest::Approx(2.0 * m.total_params()));
        if (z == 3) CHECK(params == doctest::Approx(2.0 * m.total_params() / 8));
        if (z >= 1)
            CHECK(load[static_cast<std::size_t>(Pile::optimizer)] ==
                  doctest::Approx(12.0 * m.total_params() / 8));
    }
    // ZeRO-3 moves 1.5x the data of ZeRO-1 per micro-batch (two 16-bit gathers and one reduce-scatter,
    // against one of each per step): with 2 micro-batches and fp32 gradients, (2*2*2 + 2*4) / (4 + 2) = 16/6
    // of ZeRO-1.
    auto dp_bytes = [&](int z) {
        double b = 0;
        const Program p = build_program(m, dp_layout(z, 2));
        for (const auto& op : p.stages[0].ops)
            if (op.kind == OpKind::dp_launch) b += op.bytes;
        return b;
    };
    CHECK(dp_bytes(3) / dp_bytes(1) == doctest::Approx(16.0 / 6.0));
}

TEST_CASE(
    "DeepSpeed: BF16 ZeRO-1 all-reduces the fp32 gradients; pipeline messages are partitioned over TP") {
    const ModelSpec m = small_gpt(4);
    const int groups = 1 + 4 + 1;  // final norm (head), layers, embedding
    Layout l = dp_layout(1, 2);
    l.framework = Framework::deepspeed;
    auto c = count_dp(build_program(m, l).stages[0]);
    CHECK(c.all_reduce == groups);  // one bucket per group (dp_bucket_bytes = 1)
    CHECK(c.reduce_scatter == 0);
    CHECK(c.all_gather == groups);  // weights gathered after the partitioned step
    l.precision = Precision::fp16;  // DeepSpeed's fp16 ZeRO-1 optimizer reduce-scatters
    c = count_dp(build_program(m, l).stages[0]);
    CHECK(c.reduce_scatter == groups);
    CHECK(c.all_reduce == 0);

    // P2P message per TP rank: 1/t of the activation, with Megatron's scatter-gather and with DeepSpeed's
    // partitioned pipe buffers alike.
    Layout p;
    p.tp = 4;
    p.pp = 2;
    p.global_batch = 2;
    auto send_bytes = [&](const Layout& x) {
        const Program prog = build_program(m, x);
        for (const auto& op : prog.stages[0].ops)
            if (op.kind == OpKind::send) return op.bytes;
        return 0.0;
    };
    const double megatron = send_bytes(p);
    p.framework = Framework::deepspeed;
    CHECK(send_bytes(p) == doctest::Approx(megatron));
    CHECK(megatron == doctest::Approx(512.0 * 1024 * 2 / 4));  // s·b·h·2 B / t
}

TEST_CASE("DeepSpeed BF16_Optimizer: every micro-batch's gradients are added into fp32 copies (18 B/param)") {
    const ModelSpec m = small_gpt(4);
    Layout l = dp_layout(1, 3);  // ZeRO-1, 3 micro-batches
    l.pp = 2;
    l.dp = 4;
    l.global_batch = 4 * 3;
    l.framework = Framework::deepspeed;
    // Bytes of the named kernel over a stage's program, and how many times it runs.
    auto kernel_total = [](const Program& prog, int stage, const std::string& name) {
        std::pair<int, double> n{0, 0.0};
        for (const auto& op : prog.stages[static_cast<std::size_t>(stage)].ops)
            if (op.kind == OpKind::compute)
                for (const auto& k : prog.segments[static_cast<std::size_t>(op.segment)].kernels)
                    if (name == std::string(k.name)) {
                        ++n.first;
                        n.second += k.bytes;
                    }
        return n;
    };
    const Program ds = build_program(m, l);
    for (int r = 0; r < 2; ++r) {
        CAPTURE(r);
        const double params = ds.stages[static_cast<std::size_t>(r)].trainable_params;  // TP 1: per rank
        const auto acc = kernel_total(ds, r, "bf16_optimizer_update_hp_grads");
        CHECK(acc.first == 3);
        CHECK(acc.second == doctest::Approx(3 * 18.0 * params));
        // In the step: norm + clip (12 B) and zeroing (4 B) over all the stage's gradients, not its
        // partition.
        CHECK(kernel_total(ds, r, "bf16_optimizer_grad_norm_clip").second == doctest::Approx(12.0 * params));
        CHECK(kernel_total(ds, r, "bf16_optimizer_clear_hp_grads").second == doctest::Approx(4.0 * params));
        CHECK(kernel_total(ds, r, "grad_norm_and_inf_check").first == 0);
        // The pass ends the backward of each micro-batch: on stage 1 it comes before the gradient is sent.
        if (r == 1) {
            const auto& ops = ds.stages[1].ops;
            bool pending = false;
            int sends_after_accumulate = 0;
            for (const auto& op : ops) {
                if (op.kind == OpKind::compute)
                    for (const auto& k : ds.segments[static_cast<std::size_t>(op.segment)].kernels)
                        if (std::string(k.name) == "bf16_optimizer_update_hp_grads") pending = true;
                if (op.kind == OpKind::send && op.direction == -1) {
                    CHECK(pending);
                    sends_after_accumulate += pending ? 1 : 0;
                    pending = false;
                }
            }
            CHECK(sends_after_accumulate == 3);
        }
    }
    // Megatron accumulates in the fp32 main_grad inside the wgrad GEMM (gradient_accumulation_fusion): no
    // pass.
    l.framework = Framework::megatron;
    const Program mg = build_program(m, l);
    CHECK(kernel_total(mg, 0, "bf16_optimizer_update_hp_grads").first == 0);
    CHECK(kernel_total(mg, 0, "grad_norm_and_inf_check").first == 1);
    // fp16 DeepSpeed runs use the ZeRO optimizer, not the BF16_Optimizer.
    l.framework = Framework::deepspeed;
    l.precision = Precision::fp16;
    CHECK(kernel_total(build_program(m, l), 0, "bf16_optimizer_update_hp_grads").first == 0);
}

TEST_CASE("DP buckets: Megatron-Core's default grows with DP x CP; a size given wins; others keep 40M") {
    Layout l;
    l.dp = 8;
    CHECK(l.dp_bucket_bytes == 0);                           // the framework's default
    CHECK(l.dp_bucket_elements() == doctest::Approx(40e6));  // max(40M, 1M x 8)
    l.dp = 64;
    l.cp = 4;
    CHECK(l.dp_bucket_elements() == doctest::Approx(256e6));  // 1M x DP x CP
    l.framework = Framework::torchtitan;
    CHECK(l.dp_bucket_elements() == doctest::Approx(40e6));
    l.framework = Framework::megatron;
    l.dp_bucket_bytes = 3.072e9;  // MLPerf's BUCKET_SIZE=768000000 parameters, as bytes of fp32
    CHECK(l.dp_bucket_elements() == doctest::Approx(768e6));
    // Fewer, larger buckets on a large DP group: the stage's DP collectives shrink in number.
    const ModelSpec m = small_gpt(4, 1024, 16, 2048);
    Layout big = l;
    big.dp_bucket_bytes = 0;
    big.cp = 1;
    big.distributed_optimizer = true;
    big.dp = 256;
    big.global_batch = 256;
    Layout small = big;
    small.dp_bucket_bytes = 4e5;  // 100k elements
    auto dp_ops = [&](const Layout& x) {
        int n = 0;
        const Program p = build_program(m, x);
        for (const auto& op : p.stages[0].ops)
            if (op.kind == OpKind::dp_launch) ++n;
        return n;
    };
    CHECK(dp_ops(big) < dp_ops(small));
    Layout bad = big;
    bad.dp_bucket_bytes = -1;
    CHECK_THROWS_AS(check_layout(m, bad, 256), InputError);
}
