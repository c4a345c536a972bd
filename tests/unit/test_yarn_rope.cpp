// YaRN RoPE (ModelSpec::yarn_concentration_factor): Megatron-Core applies RoPE unfused when the concentration
// factor is not 1 (rope_utils.py apply_rotary_pos_emb); its bytes per element by hand, its kernels in the
// program (query and key, forward and backward), who runs it (megatron, standard attention), and the
// measured-runs reader setting gpt-oss's factor, and the Megatron-LM and Hugging Face importers reading YaRN.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/importers.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;

namespace {

/// 2 dense layers, hidden 256, 8 query heads and 2 key/value heads of 32, SwiGLU 512, vocab 1024, seq 128.
ModelSpec yarn_model() {
    return trainsim::test::llama_style(2, 256, 8, 2, 512, 1024, 128);
}

/// The unfused RoPE's kernels ("yarn_rope*", not the small frequency kernels "yarn_rope_freqs").
double yarn_rope_bytes(const Program& p, bool backward, int* count) {
    return trainsim::test::stage0_kernel_bytes(p, "yarn_rope", backward, count, "yarn_rope_freqs");
}

}  // namespace

TEST_CASE("yarn rope: bytes per element of the query or key by hand") {
    ModelSpec m = yarn_model();
    Layout l;
    CHECK(rope_unfused_bytes_per_element(m, l, false) == 0);  // plain RoPE: TE's fused kernel, not charged
    m.yarn_concentration_factor = 0.1 * std::log(32.0) + 1.0;
    // bf16 (E = 2). Forward: t * cos_ reads and writes 2 + 2; the negated half reads and writes 1 + 1 per
    // element of the whole; the rotate-half cat 2 + 2; * sin_ 2 + 2; the sum reads 2 + 2, writes 2; the
    // final cat 2 + 2: 4 + 2 + 4 + 4 + 6 + 4 = 24.
    CHECK(rope_unfused_bytes_per_element(m, l, false) == 24);
    // Backward: grad * sin_ 4, the negation 2, the chunk's cat 4, grad * cos_ 4, the branches' sum 6,
    // t_pass's zero fill 2 and its sum 6: 28.
    CHECK(rope_unfused_bytes_per_element(m, l, true) == 28);
    Layout fp8 = l;
    fp8.precision = Precision::fp8;  // the query and key stay 16-bit (TE's Linear outputs bf16)
    CHECK(rope_unfused_bytes_per_element(m, fp8, false) == 24);
    Layout titan = l;
    titan.framework = Framework::torchtitan;  // its own eager RoPE (20 B), not Megatron-Core's
    CHECK(rope_unfused_bytes_per_element(m, titan, false) == 0);
    ModelSpec mla = m;
    mla.attention_type = AttentionType::mla;  // MLA's fused YaRN kernels take the factor
    mla.q_lora_rank = 64;
    mla.kv_lora_rank = 32;
    mla.qk_rope_head_dim = 16;
    mla.v_head_dim = 32;
    CHECK(rope_unfused_bytes_per_element(mla, l, true) == 0);
}

TEST_CASE("yarn rope: query and key kernels per layer, forward and backward") {
    ModelSpec m = yarn_model();
    Layout l;
    l.micro_batch = 2;
    l.global_batch = 2;
    l.tp = 2;
    int n = 0;
    CHECK(yarn_rope_bytes(build_program(m, l), false, &n) == 0);
    CHECK(n == 0);
    m.yarn_concentration_factor = 1.35;
    const Program p = build_program(m, l);
    // Per layer and micro-batch: T = 2 · 128 tokens, (8 + 2) / 2 heads of 32 on each of the 2 TP ranks.
    const double elements = 2.0 * 128 * (8 + 2) / 2 * 32;
    CHECK(yarn_rope_bytes(p, false, &n) == doctest::Approx(2 * 24 * elements));  // two layers
    CHECK(n == 2 * 2 * 6);                                                       // query and key, six each
    CHECK(yarn_rope_bytes(p, true, &n) == doctest::Approx(2 * 28 * elements));
    CHECK(n == 2 * 2 * 7);
    // Full recompute runs the layer's forward again, RoPE with it.
    l.recompute = Recompute::full;
    CHECK(yarn_rope_bytes(build_program(m, l), false, &n) == doctest::Approx(2 * 2 * 24 * elements));
}

TEST_CASE("yarn rope: the measured-runs reader sets gpt-oss's concentration factor") {
    using nlohmann::json;
    const json moe = {{"num_experts", 16}, {"top_k", 2}, {"moe_ffn_hidden", 512}, {"ep", 8}, {"etp", 1}};
    const std::string act = "clamped SwiGLU variant (quick_gelu gate, clamp 7.0), gated -> 3 matrices";
    MeasuredRun r =
        parse_measured_runs(trainsim::test::one_row_runs_file({{"moe", moe}, {"activation", act}}), "f")
            .runs.at(0);
    REQUIRE_FALSE(r.error);
    // GPTOSSProvider: YaRN scaling factor 32, no mscale: 0.1 ln 32 + 1.
    CHECK(r.model.yarn_concentration_factor == doctest::Approx(1.34657).epsilon(1e-5));
    r = parse_measured_runs(trainsim::test::one_row_runs_file({{"moe", moe}}), "f").runs.at(0);
    CHECK(r.model.yarn_concentration_factor == 1.0);
    // gpt-oss-20b (24 layers): its performance configs run plain RoPE in the fused single-QKV kernel.
    nlohmann::json twenty = trainsim::test::one_row_runs_file({{"moe", moe}, {"activation", act}});
    twenty["runs"][0]["model"]["layers"] = 24;
    r = parse_measured_runs(twenty, "f").runs.at(0);
    REQUIRE_FALSE(r.error);
    CHECK(r.model.moe_activation_clamp);
    CHECK(r.model.yarn_concentration_factor == 1.0);
}

TEST_CASE("yarn rope: imported from Megatron-LM flags and Hugging Face rope_scaling") {
    ImportTarget t;
    t.gpu = "H100-SXM5-80GB";
    t.cluster_gpus = 8;
    std::vector<std::string> args = {"--num-layers",          "2",    "--hidden-size", "256",
                                     "--num-attention-heads", "4",    "--seq-length",  "128",
                                     "--vocab-size",          "1024", "--bf16"};
    CHECK(import_megatron(args, "m.args", t).workload.at("model").value("yarn_concentration_factor", 1.0) ==
          1.0);
    args.insert(args.end(), {"--position-embedding-type", "yarn", "--rotary-scaling-factor", "32"});
    // Megatron-LM's defaults --mscale 1, --mscale-all-dim 0: (0.1 ln 32 + 1) / 1.
    CHECK(import_megatron(args, "m.args", t)
              .workload.at("model")
              .at("yarn_concentration_factor")
              .get<double>() == doctest::Approx(0.1 * std::log(32.0) + 1));
    std::vector<std::string> equal = args;
    equal.insert(equal.end(), {"--mscale", "1", "--mscale-all-dim", "1"});  // DeepSeek's: the ratio is 1
    CHECK(import_megatron(equal, "m.args", t).workload.at("model").value("yarn_concentration_factor", 1.0) ==
          1.0);
    std::vector<std::string> huge = args;
    huge.insert(huge.end(),
                {"--mscale", "1000"});  // 0.1 * 1000 * ln 32 + 1 = 347.6: refused, naming the flags
    CHECK_THROWS_AS(import_megatron(huge, "m.args", t), InputError);

    using nlohmann::json;
    json oss = {{"model_type", "gpt_oss"},
                {"num_hidden_layers", 2},
                {"hidden_size", 256},
                {"num_attention_heads", 4},
                {"num_key_value_heads", 2},
                {"head_dim", 64},
                {"intermediate_size", 256},
                {"vocab_size", 1024},
                {"max_position_embeddings", 4096},
                {"num_local_experts", 8},
                {"num_experts_per_tok", 2},
                {"swiglu_limit", 7.0},
                {"rope_scaling",
                 {{"rope_type", "yarn"},
                  {"factor", 32.0},
                  {"beta_fast", 32.0},
                  {"original_max_position_embeddings", 4096}}}};
    json model = import_hf_config(oss, "config.json", t).workload.at("model");
    CHECK(model.at("yarn_concentration_factor").get<double>() == doctest::Approx(0.1 * std::log(32.0) + 1));
    CHECK(model.at("num_experts") == 8);
    CHECK(model.at("moe_ffn_hidden") == 256);
    CHECK(model.at("moe_expert_bias") == true);
    CHECK(model.at("moe_activation_clamp") == true);
    const auto factor_of = [&](const json& rope_scaling) {
        json c = oss;
        c["rope_scaling"] = rope_scaling;
        return import_hf_config(c, "config.json", t)
            .workload.at("model")
            .value("yarn_concentration_factor", 1.0);
    };
    const double yarn32 = 0.1 * std::log(32.0) + 1;
    // Megatron-Bridge maps factor, mscale and mscale_all_dim, not attention_factor (model_bridge.py
    // YARN_ROPE_SCALING_MAPPING): Megatron-Core's factor stays mscale(32).
    CHECK(factor_of({{"rope_type", "yarn"}, {"factor", 32.0}, {"attention_factor", 1.0}}) ==
          doctest::Approx(yarn32));
    // Both mscales given: their ratio (DeepSeek's 1 / 1 is 1; 0 is a value, not "unset").
    CHECK(factor_of({{"rope_type", "yarn"}, {"factor", 32.0}, {"mscale", 1.0}, {"mscale_all_dim", 1.0}}) ==
          1.0);
    CHECK(factor_of({{"rope_type", "yarn"}, {"factor", 32.0}, {"mscale", 1.0}, {"mscale_all_dim", 0.0}}) ==
          doctest::Approx(yarn32));
    CHECK(factor_of({{"rope_type", "yarn"}, {"factor", 32.0}, {"mscale", 2.0}, {"mscale_all_dim", 1.0}}) ==
          doctest::Approx((0.2 * std::log(32.0) + 1) / yarn32));
    CHECK(factor_of({{"rope_type", "yarn"}, {"factor", 32.0}, {"mscale", 0.5}}) ==
          doctest::Approx(yarn32));                                    // one only
    CHECK(factor_of({{"type", "yarn"}, {"factor", 1.0}}) == 1.0);      // no scaling
    oss["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};  // not YaRN: nothing changes
    CHECK(import_hf_config(oss, "config.json", t)
              .workload.at("model")
              .value("yarn_concentration_factor", 1.0) == 1.0);
    oss["rope_scaling"] = {{"type", "yarn"}, {"factor", "32"}};  // a string factor: refused
    CHECK_THROWS_AS(import_hf_config(oss, "config.json", t), InputError);
}
