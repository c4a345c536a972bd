#include <doctest/doctest.h>

#include <cmath>

#include "test_helpers.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::rel_diff;
using trainsim::test::small_gpt;

namespace {

/// 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)): model FLOPs of a GPT (Korthikanti et al. 2022, Sec. 6.3).
double gpt_model_flops(const ModelSpec& m, double B) {
    const double s = static_cast<double>(m.seq_len), l = static_cast<double>(m.layers),
                 h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
    return 72.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * l * h));
}

/// 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)): hardware FLOPs with full recomputation (Narayanan et al. 2021, Eq.
/// 3).
double narayanan_eq3(const ModelSpec& m, double B) {
    const double s = static_cast<double>(m.seq_len), l = static_cast<double>(m.layers),
                 h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
    return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double program_flops(const Program& p, const Layout& l) {
    double total = 0;
    for (const auto& st : p.stages)
        total += st.hardware_flops * l.tp * l.dp;
    return total;
}

Layout small_layout(Recompute rc, AttentionKernel attn) {
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 2;
    l.micro_batch = 2;
    l.global_batch = 16;
    l.recompute = rc;
    l.attention = attn;
    return l;
}

}  // namespace

TEST_CASE("model: model_flops of a GPT layer equals 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))") {
    for (const auto& m : {small_gpt(), small_gpt(24, 2048, 16, 2048, 50257), trainsim::test::gpt3_175b()}) {
        CAPTURE(m.hidden);
        for (double B : {1.0, 8.0, 1536.0})
            CHECK(rel_diff(m.model_flops(B), gpt_model_flops(m, B)) < 1e-9);
        // Forward of one layer is a third of its forward + backward.
        const double tokens = 4.0 * static_cast<double>(m.seq_len);
        const double s = static_cast<double>(m.seq_len), h = static_cast<double>(m.hidden);
        CHECK(rel_diff(m.layer_forward_flops(tokens), 24.0 * tokens * h * h * (1.0 + s / (6.0 * h))) < 1e-9);
    }
}

TEST_CASE("model: model_flops of a Llama-style layer (GQA, SwiGLU) follows Megatron's general form") {
    const ModelSpec m = test::llama_style(32, 4096, 32, 8, 14336);  // Llama 3 8B
    // Per token and layer, forward: QKV 2·h·(h + 2·h·g/a), attention scores and values 4·s·h, projection
    // 2·h², SwiGLU MLP 3 matrices 2·3·h·f; logits 2·h·V per token; fwd + bwd = 3x forward.
    const double B = 2, s = 8192, h = 4096, g = 8, a = 32, f = 14336, V = 128256, L = 32;
    const double per_token_layer = 2 * h * (h + 2 * h * g / a) + 4 * s * h + 2 * h * h + 6 * h * f;
    const double expected = 3.0 * B * s * (L * per_token_layer + 2 * h * V);
    CHECK(rel_diff(m.model_flops(B), expected) < 1e-9);
}

TEST_CASE("model: GPT-3 175B has ~174.6e9 parameters") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    CHECK(rel_diff(m.total_params(), 174.6e9) < 0.01);
    // 12·h² + 13·h per layer (QKV, projection, 2 MLP matrices, biases, 2 LayerNorms).
    const double h = 12288;
    CHECK(m.layer_params() == doctest::Approx(12 * h * h + 13 * h).epsilon(1e-12));
    CHECK(m.embedding_params() == 51200.0 * h);
    CHECK(m.output_params() == 2 * h);  // tied: final LayerNorm only
    ModelSpec untied = m;
    untied.tied_embeddings = false;
    CHECK(untied.total_params() == doctest::Approx(m.total_params() + 51200.0 * h).epsilon(1e-12));
}

TEST_CASE("model: program hardware FLOPs with full recompute match Narayanan et al. Eq. 3") {
    // Unfused attention: the s² terms are full (not halved for the causal mask), as Eq. 3 counts them.
    const ModelSpec m = small_gpt();
    const Layout l = small_layout(Recompute::full, AttentionKernel::unfused);
    const Program p = build_program(m, l);
    REQUIRE(p.stages.size() == 2);
    const double hw = program_flops(p, l);
    const double eq3 = narayanan_eq3(m, static_cast<double>(l.global_batch));
    CAPTURE(hw);
    CAPTURE(eq3);
    CHECK(rel_diff(hw, eq3) < 0.03);
    CHECK(rel_diff(hw, eq3) < 1e-9);  // element-wise kernels carry no FLOPs, so the match is exact
}

TEST_CASE("model: program hardware FLOPs without recompute equal the model FLOPs") {
    const ModelSpec m = small_gpt();
    const Layout l = small_layout(Recompute::none, AttentionKernel::unfused);
    const Program p = build_program(m, l);
    CHECK(rel_diff(program_flops(p, l), m.model_flops(static_cast<double>(l.global_batch))) < 1e-9);
    // Selective recompute of an unfused attention core adds its forward s² FLOPs: 4·B·s²·h per layer.
    const Layout sel = small_layout(Recompute::selective, AttentionKernel::unfused);
    const double B = static_cast<double>(l.global_batch), s = 512, h = 1024, layers = 8;
    CHECK(rel_diff(program_flops(build_program(m, sel), sel),
                   m.model_flops(B) + 4.0 * B * s * s * h * layers) < 1e-9);
}

TEST_CASE("model: flash attention halves the causal s² FLOPs and its backward costs 2.5x its forward") {
    const ModelSpec m = small_gpt();
    const Layout l = small_layout(Recompute::full, AttentionKernel::flash);
    const double B = static_cast<double>(l.global_batch), s = 512, h = 1024, L = 8, V = 8192;
    // Per layer: GEMMs 24·B·s·h² forward, x4 with full recompute; attention core 2·B·s²·h forward (half of
    // 4·B·s²·h), x (1 forward + 1 recompute + 2.5 backward); LM head 6·B·s·h·V.
    const double expected =
        96.0 * B * s * h * h * L + (1 + 1 + 2.5) * 2.0 * B * s * s * h * L + 6.0 * B * s * h * V;
    CHECK(rel_diff(program_flops(build_program(m, l), l), expected) < 1e-9);
}

TEST_CASE("model: stage parameters add up to the model's") {
    const ModelSpec m = small_gpt();
    Layout l = small_layout(Recompute::none, AttentionKernel::flash);
    const Program p = build_program(m, l);
    double params = 0;
    for (const auto& st : p.stages)
        params += st.params;
    // With pp > 1 the tied embedding is held twice (first and last stage), as in Megatron-LM.
    CHECK(rel_diff(params, m.total_params() + m.embedding_params()) < 1e-12);
}
