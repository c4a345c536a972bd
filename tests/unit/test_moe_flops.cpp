// Model FLOPs of MoE and MLA models as Megatron-Core counts them (megatron/training/training.py,
// num_floating_point_operations / transformer_flops, core r0.13+): by hand on tiny models, and against the
// per-token model FLOPs the 2026 measured rows imply (Megatron-Bridge's published TFLOP/s/GPU divided by its
// tokens/s/GPU), with the models built from their Hugging Face config.json.
#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/model.hpp"

using namespace trainsim;
using trainsim::test::rel_diff;

namespace {

/// GFLOP per token, forward + backward.
double gflop_per_token(const ModelSpec& m) {
    return m.model_flops(1.0) / static_cast<double>(m.seq_len) / 1e9;
}

}  // namespace

TEST_CASE("moe flops: a tiny MoE by hand") {
    // 3 layers: layer 0 dense (ffn 96), layers 1, 2 MoE: 4 experts of 16, top-2, shared 8; h 32, 4 heads of
    // 8, 2 KV heads, vocab 100, s 64.
    ModelSpec m = trainsim::test::llama_style(3, 32, 4, 2, 96, 100, 64);
    m.num_experts = 4;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 16;
    m.moe_shared_expert_ffn_hidden = 8;
    m.moe_first_dense_layers = 1;
    const double s = 64, h = 32, q = 32, kv = 16;
    // per token: 6 x weights it passes (swiglu 3 matrices per MLP)
    const double mlp = 6 * h * (3 * 96) + 2 * 6 * h * (3 * 16 * 2 + 3 * 8);
    const double attn = 3 * 6 * (h * (q + 2 * kv) + q * h);
    const double logits = 6 * h * 100;
    const double core = 3 * 6 * q * s;  // QK^T and PV, halved for the causal mask: 2 x 2 x q x s / 2 x 3
    const double per_seq = s * (mlp + attn + logits + core);
    CHECK(rel_diff(m.model_flops(5.0), 5.0 * per_seq) < 1e-12);
}

TEST_CASE("mla flops: a tiny MLA model by hand") {
    ModelSpec m = trainsim::test::llama_style(2, 32, 4, 4, 64, 100, 64);
    m.attention_type = AttentionType::mla;
    m.head_dim_override = 8;
    m.q_lora_rank = 12;
    m.kv_lora_rank = 10;
    m.qk_rope_head_dim = 4;
    m.v_head_dim = 6;
    const double s = 64, h = 32, a = 4, d = 8, r = 4, v = 6, qr = 12, kvr = 10;
    const double q_term = qr * (h + a * (d + r) + 1);  // q down + q norm + q up
    const double kv_term = kvr * (h + a * (d + v) + 1) + h * r;
    const double attn = 6 * (q_term + kv_term + a * v * h);
    const double core = 6 * (a * (d + r) + a * v) / 2 * s;
    const double per_token = 2 * (attn + core + 6 * h * 3 * 64) + 6 * h * 100;
    CHECK(rel_diff(m.model_flops(3.0), 3.0 * s * per_token) < 1e-12);
    m.q_lora_rank = 0;
    const double attn0 = 6 * (h * a * (d + r) + kv_term + a * v * h);
    CHECK(rel_diff(m.model_flops(1.0), s * (2 * (attn0 + core + 6 * h * 3 * 64) + 6 * h * 100)) < 1e-12);
}

TEST_CASE("moe flops: the 2026 rows' implied model FLOPs per token, models from their config.json") {
    // Each expected figure is the row's reported TFLOP/s/GPU / tokens/s/GPU (public_runs_2026.json,
    // reported.implied_model_flops_per_token); the models are the Hugging Face configs.
    SUBCASE("Qwen3-30B-A3B (Qwen/Qwen3-30B-A3B config.json)") {
        ModelSpec m = trainsim::test::llama_style(48, 2048, 32, 4, 768, 151936, 4096);
        m.head_dim_override = 128;
        m.num_experts = 128;
        m.moe_top_k = 8;
        m.moe_ffn_hidden = 768;
        // mbridge_26.04_h100_qwen3_30b_a3b_fp8_16gpu: 23.031 GFLOP/token
        CHECK(rel_diff(gflop_per_token(m), 23.031) < 0.02);
    }
    SUBCASE("Qwen3-235B-A22B (Qwen/Qwen3-235B-A22B config.json)") {
        ModelSpec m = trainsim::test::llama_style(94, 4096, 64, 4, 1536, 151936, 4096);
        m.head_dim_override = 128;
        m.num_experts = 128;
        m.moe_top_k = 8;
        m.moe_ffn_hidden = 1536;
        // mbridge_26.02.01_b300_qwen3_235b_a22b_mxfp8_256gpu: 147.882
        CHECK(rel_diff(gflop_per_token(m), 147.882) < 0.02);
    }
    SUBCASE("DeepSeek-V3 (deepseek-ai/DeepSeek-V3 config.json), no MTP") {
        ModelSpec m = trainsim::test::llama_style(61, 7168, 128, 128, 18432, 129280, 4096);
        m.num_experts = 256;
        m.moe_top_k = 8;
        m.moe_ffn_hidden = 2048;
        m.moe_shared_expert_ffn_hidden = 2048;
        m.moe_first_dense_layers = 3;
        m.attention_type = AttentionType::mla;
        m.head_dim_override = 128;
        m.q_lora_rank = 1536;
        m.kv_lora_rank = 512;
        m.qk_rope_head_dim = 64;
        m.v_head_dim = 128;
        // mbridge_25.11_gb200_deepseek_v3_fp8mx_256gpu_nomtp: 249.627
        CHECK(rel_diff(gflop_per_token(m), 249.627) < 0.02);
        // with its MTP layer (num_nextn_predict_layers 1): mbridge_25.11_b200_deepseek_v3_fp8mx_256gpu_mtp
        // 260.402
        m.mtp_layers = 1;
        CHECK(rel_diff(gflop_per_token(m), 260.402) < 0.02);
    }
    SUBCASE("gpt-oss-120b (openai/gpt-oss-120b config.json)") {
        ModelSpec m = trainsim::test::llama_style(36, 2880, 64, 8, 2880, 201088, 4096);
        m.head_dim_override = 64;
        m.num_experts = 128;
        m.moe_top_k = 4;
        m.moe_ffn_hidden = 2880;
        // mbridge_26.06.01_gb300_gpt_oss_120b_mxfp8_64gpu: 32.581. trainsim counts full attention in every
        // layer; gpt-oss alternates 128-token sliding-window layers, whose core attention Megatron-Bridge's
        // flop_utils counts over the window: 18 x 6 x 4096 x 4096 FLOPs per token less, 5.5% of the total.
        const double swa_saving =
            18.0 * 6 * 4096 * 4096 * (1.0 - (128.0 - 127.0 * 128 / 2 / 4096) / 2048) / 1e9;
        CHECK(rel_diff(gflop_per_token(m) - swa_saving, 32.581) < 0.02);
        CHECK(rel_diff(gflop_per_token(m), 32.581) < 0.06);
    }
    SUBCASE("Mixtral 8x7B (mistralai/Mixtral-8x7B-v0.1 config.json)") {
        ModelSpec m = trainsim::test::llama_style(32, 4096, 32, 8, 14336, 32000, 4096);
        m.num_experts = 8;
        m.moe_top_k = 2;
        m.moe_ffn_hidden = 14336;
        // nemo_25.02_b200_mixtral_8x7b_fp8_64gpu: 82.94 (NeMo 25.02 counted the causal attention unhalved)
        CHECK(rel_diff(gflop_per_token(m), 82.94) < 0.06);
    }
}
