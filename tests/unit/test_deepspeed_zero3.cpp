// DeepSpeed ZeRO-3 as its 2021 releases ran it (v0.3.12-v0.5.8): the op sequence build_program emits.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::small_gpt;

namespace {

/// GPT-3-shaped layers (h = hidden, 4h MLP, tied embeddings), 2 layers, ZeRO-3 over 384 ranks, fp16, full
/// recompute, one micro-batch: the Narayanan et al. 2021 Table 2 setting, small enough to inspect.
struct Ds3Case {
    ModelSpec m;
    Layout l;
    explicit Ds3Case(std::int64_t hidden, std::int64_t heads, Framework f = Framework::deepspeed)
        : m(small_gpt(2, hidden, heads, 2048, 51200)) {
        l.framework = f;
        l.dp = 384;
        l.micro_batch = 1;
        l.global_batch = 384;
        l.zero_stage = 3;
        l.precision = Precision::fp16;
        l.recompute = Recompute::full;
    }
};

/// One stage-0 op, with what was on the DP stream when it ran.
struct Step {
    const Op* op;
    std::string first_kernel;   ///< compute: the first kernel's name
    int gathers_in_flight = 0;  ///< all-gathers launched and not yet waited for, at this op
    bool drains = false;        ///< dp_wait for everything launched so far
};

std::vector<Step> steps(const Program& p) {
    std::vector<Step> out;
    int launched = 0, waited = 0;
    std::vector<bool> is_gather;
    for (const auto& op : p.stages[0].ops) {
        Step s{&op, "", 0};
        if (op.kind == OpKind::dp_launch) {
            ++launched;
            is_gather.push_back(op.collective == CollectiveKind::all_gather);
        }
        if (op.kind == OpKind::dp_wait) {
            waited = std::max(waited, op.dp_target);
            s.drains = op.dp_target == launched;
        }
        for (int i = waited; i < launched; ++i)
            if (is_gather[static_cast<std::size_t>(i)]) ++s.gathers_in_flight;
        if (op.kind == OpKind::compute)
            s.first_kernel = p.segments[static_cast<std::size_t>(op.segment)].kernels.front().name;
        out.push_back(s);
    }
    return out;
}

int gathers_of(const Program& p, double elements) {
    int n = 0;
    for (const auto& op : p.stages[0].ops)
        if (op.kind == OpKind::dp_launch && op.collective == CollectiveKind::all_gather &&
            op.bytes == doctest::Approx(2.0 * elements))
            ++n;
    return n;
}

bool weight_gemm(const std::string& k) {
    return k == "qkv_gemm" || k == "attn_proj_gemm" || k == "fc1_gemm" || k == "fc2_gemm" ||
           k == "fc2_dgrad" || k == "fc1_dgrad" || k == "attn_proj_dgrad" || k == "qkv_dgrad";
}

}  // namespace

TEST_CASE("DeepSpeed ZeRO-3 2021: per-module gathers, again in the recompute, fc2 kept into its backward") {
    const Ds3Case c(12288, 96);
    const Program p = build_program(c.m, c.l);
    const double h = 12288;
    // qkv (3h^2) and proj (h^2): forward, recompute forward, backward (released after the recompute: the
    // rest of the layer, twice, is more than stage3_max_reuse_distance = 1e9 elements away).
    CHECK(gathers_of(p, 3 * h * h) == 3 * 2);
    CHECK(gathers_of(p, h * h) == 3 * 2);
    // fc1 and fc2 (4h^2 each): both in forward and recompute; in backward only fc1 (2 x 4h^2 = 1.2e9
    // elements between its two uses), fc2 is used next at once and stays gathered.
    CHECK(gathers_of(p, 4 * h * h) == 5 * 2);
    // No gather of a whole layer: DeepSpeed fetches per module.
    CHECK(gathers_of(p, c.m.layer_params()) == 0);
}

TEST_CASE("DeepSpeed ZeRO-3 2021: each fetch drains the device, one prefetch computes alongside") {
    const Ds3Case c(12288, 96);
    const Program p = build_program(c.m, c.l);
    const auto st = steps(p);
    int forward_units = 0, with_prefetch = 0;
    for (std::size_t i = 0; i < st.size(); ++i) {
        if (st[i].op->kind != OpKind::compute || !weight_gemm(st[i].first_kernel)) continue;
        if (st[i].op->phase == Phase::forward) {
            ++forward_units;
            if (st[i].gathers_in_flight == 1) ++with_prefetch;
            CHECK(st[i].gathers_in_flight <= 1);  // prefetch only when nothing is in flight
        }
        // The fetch's torch.cuda.synchronize(): a wait for everything launched on the DP stream so far,
        // between the previous unit's compute and this one's (the gather's copy-out aside).
        bool synced = false;
        for (std::size_t j = i; j-- > 0;) {
            if (st[j].op->kind == OpKind::compute && st[j].first_kernel != "zero3_all_gather_zero_buffer")
                break;
            synced = synced || st[j].drains;
        }
        if (st[i].op->phase != Phase::backward) CHECK(synced);  // never kept from forward to recompute
    }
    CHECK(forward_units == 2 * 4);
    CHECK(with_prefetch == 2 * 4);  // h = 12288: every unit is under stage3_max_live_parameters
}

TEST_CASE("DeepSpeed ZeRO-3 2021: stage3_max_live_parameters stops the prefetch of 529.6B-sized modules") {
    // h = 20480: qkv (1.26e9), fc1 and fc2 (1.68e9 each) alone exceed max_live = 1e9 elements, so nothing
    // is prefetched while they are gathered; only the attention projection (4.2e8) computes with the next
    // module (fc1) in flight.
    const Ds3Case c(20480, 128);
    const Program p = build_program(c.m, c.l);  // kept alive: the steps point into its ops
    const auto st = steps(p);
    int forward_units = 0;
    std::vector<std::string> overlapped;
    for (const auto& s : st)
        if (s.op->kind == OpKind::compute && s.op->phase == Phase::forward && weight_gemm(s.first_kernel)) {
            ++forward_units;
            if (s.gathers_in_flight > 0) overlapped.push_back(s.first_kernel);
        }
    CHECK(forward_units == 2 * 4);
    CHECK(overlapped == std::vector<std::string>{"attn_proj_gemm", "attn_proj_gemm"});
}

TEST_CASE("DeepSpeed ZeRO-3 2021: gradients all-reduced in 16 bits, in reduce_bucket_size buckets") {
    const Ds3Case c(12288, 96);
    const Program p = build_program(c.m, c.l);
    double reduced = 0;
    int reductions = 0;
    for (const auto& op : p.stages[0].ops) {
        if (op.kind != OpKind::dp_launch || op.collective == CollectiveKind::all_gather) continue;
        CHECK(op.collective == CollectiveKind::all_reduce);  // contiguous_gradients = False (< v0.5.0)
        CHECK(op.bytes <=
              2.0 * (5e8 + 4.0 * 12288.0 * 12288.0));  // a bucket plus the param that overflows it
        reduced += op.bytes;
        ++reductions;
    }
    CHECK(reduced == doctest::Approx(2.0 * c.m.total_params()));  // every gradient once, 2 B each
    CHECK(reductions > 2 * 4);                                    // not one bucket per layer
}

TEST_CASE("ZeRO-3 coordinator is DeepSpeed's only: FSDP keeps per-block gathers") {
    const Ds3Case c(12288, 96, Framework::pytorch);
    const Program p = build_program(c.m, c.l);
    CHECK(gathers_of(p, 3 * 12288.0 * 12288.0) == 0);
    CHECK(gathers_of(p, c.m.layer_params()) == 2 * 2);  // forward and backward, per block
}
