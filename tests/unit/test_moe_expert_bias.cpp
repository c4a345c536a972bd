// gpt-oss's experts. Expert biases (ModelSpec::moe_expert_bias): Megatron-Core's TEGroupedMLP._apply_bias
// adds fc2's bias with the routing probabilities in PyTorch, per expert, unless the TE op fuser runs the
// experts (Layout::moe_fused_grouped_mlp); the activation's clamp (ModelSpec::moe_activation_clamp): two
// clamps and a cat before the fused activation, unless the op fuser; the measured-runs reader recognises
// gpt-oss's activation and full-iteration CUDA graphs.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;

namespace {

/// 2 MoE layers, 4 experts top-2, hidden 256, seq 128; EP 2 over DP 2, one micro-batch.
ModelSpec tiny_moe() {
    ModelSpec m;
    m.name = "tiny-moe";
    m.layers = 2;
    m.hidden = 256;
    m.heads = 4;
    m.kv_heads = 4;
    m.ffn_hidden = 512;
    m.vocab = 1024;
    m.seq_len = 128;
    m.num_experts = 4;
    m.moe_top_k = 2;
    return m;
}
Layout tiny_layout() {
    Layout l;
    l.dp = 2;
    l.ep = 2;
    l.micro_batch = 1;
    l.global_batch = 2;
    return l;
}

/// TEGroupedMLP._apply_bias's kernels ("expert_fc2_bias_*").
double bias_kernel_bytes(const Program& p, bool backward, int* count) {
    return trainsim::test::stage0_kernel_bytes(p, "expert_fc2_bias", backward, count);
}

}  // namespace

TEST_CASE("moe expert bias: bytes per element by hand") {
    ModelSpec m = tiny_moe();
    Layout l = tiny_layout();
    CHECK(moe_expert_bias_bytes_per_element(m, l, false) == 0);  // no biases
    m.moe_expert_bias = true;
    // alltoall: 16-bit probabilities, no promotion. Forward: b*p writes 2; t + bp reads 2 + 2, writes 2;
    // cat 2 + 2; .to(bf16) a no-op: 12. Backward: two mul grads 2 x (2 + 2 + 2); split's cat 2 + 2: 16.
    CHECK(moe_expert_bias_bytes_per_element(m, l, false) == 12);
    CHECK(moe_expert_bias_bytes_per_element(m, l, true) == 16);
    // HybridEP / DeepEP upcast the probabilities to fp32. Forward: b*p writes 4; t + bp reads 2 + 4, writes
    // 4; cat 4 + 4; .to(bf16) 4 + 2: 28. Backward: cast grad 2 + 4; add's grad cast back 4 + 2; two mul
    // grads 2 x (4 + 4 + 4); cat 2 + 2: 40.
    for (MoeDispatcher d : {MoeDispatcher::hybridep, MoeDispatcher::deepep}) {
        l.moe_dispatcher = d;
        CHECK(moe_expert_bias_bytes_per_element(m, l, false) == 28);
        CHECK(moe_expert_bias_bytes_per_element(m, l, true) == 40);
    }
    l.moe_fused_grouped_mlp = true;  // TE op fuser: bias inside the fused ops
    CHECK(moe_expert_bias_bytes_per_element(m, l, false) == 0);
    CHECK(moe_expert_bias_bytes_per_element(m, l, true) == 0);
    ModelSpec dense = m;
    dense.num_experts = 0;
    CHECK(moe_expert_bias_bytes_per_element(dense, tiny_layout(), false) == 0);
}

TEST_CASE("moe expert bias: per-expert kernels over the received tokens") {
    ModelSpec m = tiny_moe();
    Layout l = tiny_layout();
    int n = 0;
    CHECK(bias_kernel_bytes(build_program(m, l), false, &n) == 0);
    CHECK(n == 0);
    m.moe_expert_bias = true;
    // Balanced: each rank's experts compute k·T = 2·128 token copies of 256, two MoE layers.
    const double elements = 2.0 * 128 * 256;
    Program p = build_program(m, l);
    // alltoall: 12 B / 16 B per element; per layer forward 2 local experts x (mul, add) + cat, backward
    // 2 x (two products, two sums) + cat.
    CHECK(bias_kernel_bytes(p, false, &n) == doctest::Approx(2 * 12 * elements));
    CHECK(n == 2 * (2 * 2 + 1));
    CHECK(bias_kernel_bytes(p, true, &n) == doctest::Approx(2 * 16 * elements));
    CHECK(n == 2 * (2 * 4 + 1));
    // HybridEP: fp32 probabilities, 28 B / 40 B; the casts add one kernel forward, 1 + 2 backward.
    l.moe_dispatcher = MoeDispatcher::hybridep;
    p = build_program(m, l);
    CHECK(bias_kernel_bytes(p, false, &n) == doctest::Approx(2 * 28 * elements));
    CHECK(n == 2 * (2 * 2 + 2));
    CHECK(bias_kernel_bytes(p, true, &n) == doctest::Approx(2 * 40 * elements));
    CHECK(n == 2 * (2 * 5 + 2));
    l.moe_fused_grouped_mlp = true;
    CHECK(bias_kernel_bytes(build_program(m, l), false, &n) == 0);
    CHECK(bias_kernel_bytes(build_program(m, l), true, &n) == 0);
}

TEST_CASE("moe expert bias: gpt-oss's activation and full-iteration graphs are read") {
    using nlohmann::json;
    const json moe = {{"num_experts", 16}, {"top_k", 2}, {"moe_ffn_hidden", 512}, {"ep", 8}, {"etp", 1}};
    const std::string act = "clamped SwiGLU variant (quick_gelu gate, clamp 7.0), gated -> 3 matrices";
    MeasuredRun r =
        parse_measured_runs(trainsim::test::one_row_runs_file({{"moe", moe}, {"activation", act}}), "f")
            .runs.at(0);
    REQUIRE_FALSE(r.error);
    CHECK(r.model.moe_expert_bias);
    CHECK(r.model.moe_activation_clamp);
    CHECK_FALSE(r.layout.moe_fused_grouped_mlp);
    for (const std::string& i : r.ignored)
        CHECK(i.find("activation") == std::string::npos);
    r = parse_measured_runs(trainsim::test::one_row_runs_file(
                                {{"moe", moe}, {"activation", act}, {"cuda_graphs", "full_iteration"}}),
                            "f")
            .runs.at(0);
    CHECK(r.layout.moe_fused_grouped_mlp);
    r = parse_measured_runs(
            trainsim::test::one_row_runs_file({{"moe", moe}, {"cuda_graphs", "transformer_engine"}}), "f")
            .runs.at(0);
    CHECK_FALSE(r.layout.moe_fused_grouped_mlp);
    CHECK_FALSE(r.model.moe_expert_bias);
    // Another activation stays ignored; a dense row never gets expert biases.
    r = parse_measured_runs(trainsim::test::one_row_runs_file({{"moe", moe}, {"activation", "relu^2"}}), "f")
            .runs.at(0);
    CHECK_FALSE(r.model.moe_expert_bias);
    CHECK_FALSE(r.model.moe_activation_clamp);
    r = parse_measured_runs(trainsim::test::one_row_runs_file({{"activation", act}}), "f").runs.at(0);
    CHECK_FALSE(r.model.moe_expert_bias);
    CHECK_FALSE(r.model.moe_activation_clamp);
}

namespace {
/// The eager clamp's kernels ("expert_act_clamp*").
double clamp_kernel_bytes(const Program& p, bool backward, int* count) {
    return trainsim::test::stage0_kernel_bytes(p, "expert_act_clamp", backward, count);
}
}  // namespace

TEST_CASE("moe activation clamp: bytes per element of fc1's output by hand") {
    ModelSpec m = tiny_moe();
    m.mlp = MlpKind::swiglu;
    Layout l = tiny_layout();
    CHECK(moe_activation_clamp_bytes_per_element(m, l, false) == 0);  // no clamp
    m.moe_activation_clamp = true;
    // Forward: each half's clamp reads 2 and writes 2 B per element of its half (4 B per two elements:
    // 2 per element of the whole), as both halves: 4; the cat reads and writes the whole: 4. Total 8.
    CHECK(moe_activation_clamp_bytes_per_element(m, l, false) == 8);
    // Backward (PyTorch's clamp_backward): the gate's half where(self <= max, grad, 0): the comparison reads
    // 2, writes a bool 1; the where reads 1 + 2, writes 2: 8. The linear half's mask is (self >= min) and
    // (self <= max): two comparisons 3 + 3, the in-place and 1 + 1 + 1, the where 5: 14. Per element of the
    // whole (8 + 14) / 2 = 11; the chunk's backward concatenates (2 + 2): 15.
    CHECK(moe_activation_clamp_bytes_per_element(m, l, true) == 15);
    l.moe_fused_grouped_mlp = true;  // TE's op fuser clamps inside its fused activation
    CHECK(moe_activation_clamp_bytes_per_element(m, l, false) == 0);
    CHECK(moe_activation_clamp_bytes_per_element(m, l, true) == 0);
    ModelSpec gelu = m;
    gelu.mlp = MlpKind::gelu;  // the clamp splits a gated activation's input
    CHECK(moe_activation_clamp_bytes_per_element(gelu, tiny_layout(), false) == 0);
    ModelSpec dense = m;
    dense.num_experts = 0;
    CHECK(moe_activation_clamp_bytes_per_element(dense, tiny_layout(), false) == 0);
}

TEST_CASE("moe activation clamp: two clamps and a cat per MoE layer, repeated by the moe_act recompute") {
    ModelSpec m = tiny_moe();
    m.mlp = MlpKind::swiglu;
    Layout l = tiny_layout();
    int n = 0;
    CHECK(clamp_kernel_bytes(build_program(m, l), false, &n) == 0);
    CHECK(n == 0);
    m.moe_activation_clamp = true;
    // Balanced: each rank's experts take k·T = 2·128 token copies; fc1's output is 2 x 512 wide.
    const double elements = 2.0 * 128 * 2 * 512;
    Program p = build_program(m, l);
    CHECK(clamp_kernel_bytes(p, false, &n) == doctest::Approx(2 * 8 * elements));  // two MoE layers
    CHECK(n == 2 * 3);
    CHECK(clamp_kernel_bytes(p, true, &n) == doctest::Approx(2 * 15 * elements));
    CHECK(n == 2 * 7);  // gate: compare, where; linear: two compares, and, where; the cat
    l.recompute = Recompute::selective;
    l.recompute_modules.moe_act = true;  // the activation (with its clamp) runs again before the backward
    p = build_program(m, l);
    CHECK(clamp_kernel_bytes(p, false, &n) == doctest::Approx(2 * 2 * 8 * elements));
    CHECK(n == 2 * 2 * 3);
    l = tiny_layout();
    l.moe_fused_grouped_mlp = true;
    CHECK(clamp_kernel_bytes(build_program(m, l), false, &n) == 0);
    CHECK(clamp_kernel_bytes(build_program(m, l), true, &n) == 0);
}

TEST_CASE("moe activation clamp: the clamped copy of fc1's output is stored unless moe_act recomputes it") {
    ModelSpec m = tiny_moe();
    m.mlp = MlpKind::swiglu;
    Layout l = tiny_layout();
    const LayerActivations plain = layer_activations(m, l);
    m.moe_activation_clamp = true;
    const LayerActivations clamped = layer_activations(m, l);
    // The cat's output: k·T = 256 rows of 2 x 512 16-bit elements.
    const double copy = 2.0 * 128 * 2 * 512 * 2;
    CHECK(clamped.stored == doctest::Approx(plain.stored + copy));
    l.recompute = Recompute::selective;
    l.recompute_modules.moe_act = true;
    const LayerActivations recomputed = layer_activations(m, l);
    m.moe_activation_clamp = false;
    const LayerActivations recomputed_plain = layer_activations(m, l);
    CHECK(recomputed.stored == doctest::Approx(recomputed_plain.stored));
    CHECK(recomputed.recomputed == doctest::Approx(recomputed_plain.recomputed + copy));
    // With TE's op fuser the clamp runs inside the fused activation: nothing more is stored (no recompute).
    l = tiny_layout();
    l.moe_fused_grouped_mlp = true;
    m.moe_activation_clamp = true;
    const LayerActivations fused = layer_activations(m, l);
    m.moe_activation_clamp = false;
    CHECK(fused.stored == doctest::Approx(layer_activations(m, l).stored));
    CHECK(fused.stored == doctest::Approx(plain.stored));
}
