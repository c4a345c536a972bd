// Mixture-of-experts and multi-head latent attention: the model's fields, parameter counts and the layout's
// EP / ETP checks (include/trainsim/model.hpp, layout.hpp).
#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

using namespace trainsim;

namespace {

/// A tiny SwiGLU MoE: 4 layers, hidden 64, 8 heads (2 KV), 8 experts of width 32, top-2, the first layer
/// dense (ffn 128), then every layer MoE, a shared expert 16 wide.
ModelSpec tiny_moe() {
    ModelSpec m;
    m.name = "tiny-moe";
    m.layers = 4;
    m.hidden = 64;
    m.heads = 8;
    m.kv_heads = 2;
    m.ffn_hidden = 128;
    m.vocab = 1000;
    m.seq_len = 256;
    m.mlp = MlpKind::swiglu;
    m.tied_embeddings = false;
    m.dropout = false;
    m.num_experts = 8;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 32;
    m.moe_shared_expert_ffn_hidden = 16;
    m.moe_first_dense_layers = 1;
    return m;
}

/// A tiny MLA model: hidden 64, 4 heads, q_lora 24, kv_lora 16, qk head 8 (nope) + 4 (rope), v head 8.
ModelSpec tiny_mla() {
    ModelSpec m = tiny_moe();
    m.num_experts = 0;
    m.moe_shared_expert_ffn_hidden = 0;
    m.moe_first_dense_layers = 0;
    m.heads = 4;
    m.kv_heads = 4;
    m.attention_type = AttentionType::mla;
    m.head_dim_override = 8;
    m.q_lora_rank = 24;
    m.kv_lora_rank = 16;
    m.qk_rope_head_dim = 4;
    m.v_head_dim = 8;
    return m;
}

}  // namespace

TEST_CASE("moe model: layer pattern, expert and router parameters by hand") {
    ModelSpec m = tiny_moe();
    CHECK(m.moe());
    CHECK_FALSE(m.layer_is_moe(0));
    CHECK(m.layer_is_moe(1));
    CHECK(m.layer_is_moe(3));
    CHECK(m.moe_layer_count() == 3);
    CHECK(m.expert_ffn() == 32);
    CHECK(m.expert_params() == 3.0 * 64 * 32);                  // gate, up, down
    CHECK(m.router_params() == 64.0 * 8);                       // hidden x experts
    CHECK(m.shared_expert_params() == 3.0 * 64 * 16);           // one SwiGLU MLP 16 wide
    const double attn = 64.0 * (8 + 2 * 2) * 8 + 8 * 8 * 64.0;  // QKV (head_dim 8) + projection
    CHECK(m.attention_params() == attn);
    const double norms = 2.0 * 64;
    CHECK(m.layer_params(0) == attn + norms + 3.0 * 64 * 128);
    CHECK(m.layer_expert_params(0) == 0);
    CHECK(m.layer_expert_params(2) == 8 * 3.0 * 64 * 32);
    CHECK(m.layer_dense_params(2) == attn + norms + 64.0 * 8 + 3.0 * 64 * 16);
    CHECK(m.layer_params(2) == m.layer_dense_params(2) + m.layer_expert_params(2));
    const double emb = 1000.0 * 64, out = 1000.0 * 64 + 64;
    CHECK(m.total_params() == emb + out + m.layer_params(0) + 3 * m.layer_params(1));
    CHECK(m.active_params() ==
          emb + out + m.layer_params(0) + 3 * (m.layer_dense_params(1) + 2 * 3.0 * 64 * 32));
    // every other layer after the dense one: layers 1 and 3
    m.moe_layer_freq = 2;
    CHECK(m.layer_is_moe(1));
    CHECK_FALSE(m.layer_is_moe(2));
    CHECK(m.layer_is_moe(3));
    CHECK(m.moe_layer_count() == 2);
    // moe_ffn_hidden 0: the experts are ffn_hidden wide
    m.moe_ffn_hidden = 0;
    CHECK(m.expert_ffn() == 128);
}

TEST_CASE("moe model: the defaults are a dense model whose counts are unchanged") {
    const ModelSpec g = trainsim::test::gpt3_175b();
    CHECK_FALSE(g.moe());
    CHECK(g.moe_layer_count() == 0);
    CHECK(g.layer_params(5) == g.layer_params());
    CHECK(g.layer_dense_params(5) == g.layer_params());
    CHECK(g.active_params() == g.total_params());
    CHECK(g.head_dim() == g.hidden / g.heads);
}

TEST_CASE("mla model: attention parameters by hand (Megatron-Core MLASelfAttention)") {
    ModelSpec m = tiny_mla();
    const double h = 64, a = 4, d = 8, r = 4, v = 8, qr = 24, kvr = 16;
    const double q = h * qr + qr + qr * a * (d + r);            // q down, q norm, q up
    const double kv = h * (kvr + r) + kvr + kvr * a * (d + v);  // kv down (+ rope key), kv norm, kv up
    CHECK(m.attention_params() == q + kv + a * v * h);
    m.q_lora_rank = 0;  // a plain query projection
    CHECK(m.attention_params() == h * a * (d + r) + kv + a * v * h);
    CHECK(layout_violations(m, Layout{}, 1).empty());
}

TEST_CASE("layout: EP and ETP fields and their typed checks") {
    const ModelSpec m = tiny_moe();
    Layout l;
    l.tp = 2;
    l.dp = 4;
    l.micro_batch = 1;
    l.global_batch = 8;
    l.ep = 4;
    CHECK(l.expert_tp() == 2);  // etp 0 -> tp
    CHECK(l.expert_dp() == 1);
    CHECK(l.gpus() == 8);
    CHECK(layout_violations(m, l, 8).empty());
    l.etp = 1;
    CHECK(l.expert_dp() == 2);
    CHECK(layout_violations(m, l, 8).empty());
    l.ep = 3;  // divides neither the 8 experts nor the 8 ranks
    auto v = layout_violations(m, l, 8);
    REQUIRE(v.size() == 2);
    CHECK(v[0].check == LayoutCheck::ep_experts);
    CHECK(v[0].message == "layout.ep = 3 does not divide model.num_experts = 8");
    CHECK(v[1].check == LayoutCheck::ep_grid);
    CHECK(v[1].message ==
          "layout.etp * layout.ep = 1 * 3 = 3 does not divide the ranks of a pipeline stage, layout.tp * "
          "layout.cp * layout.dp = 2 * 1 * 4 = 8");
    CHECK(is_grid_check(LayoutCheck::ep_grid));
    CHECK(to_string(LayoutCheck::ep_experts) == "ep does not divide num_experts");
    l.ep = 1;
    l.etp = 3;  // divides neither the 8 ranks nor the expert width 32
    v = layout_violations(m, l, 8);
    REQUIRE(!v.empty());
    CHECK(v[0].check == LayoutCheck::ep_grid);
    CHECK(v.back().check == LayoutCheck::etp_ffn_hidden);
    CHECK(v.back().message ==
          "layout.etp = 3 does not divide the routed experts' FFN width model.moe_ffn_hidden = 32");
    // a dense model refuses EP
    ModelSpec dense = m;
    dense.num_experts = 0;
    dense.moe_shared_expert_ffn_hidden = 0;
    l.etp = 0;
    l.ep = 2;
    v = layout_violations(dense, l, 8);
    REQUIRE(v.size() == 1);
    CHECK(v[0].check == LayoutCheck::ep_needs_moe);
    CHECK_FALSE(is_grid_check(LayoutCheck::ep_needs_moe));
    // top-k above the experts, MLA without its ranks
    ModelSpec bad = m;
    bad.moe_top_k = 9;
    l.ep = 1;
    CHECK(layout_violations(bad, l, 8).front().check == LayoutCheck::moe_shape);
    ModelSpec mla = tiny_mla();
    mla.kv_lora_rank = 0;
    CHECK(layout_violations(mla, Layout{}, 1).front().check == LayoutCheck::mla_shape);
    mla = tiny_mla();
    mla.kv_heads = 2;
    CHECK(layout_violations(mla, Layout{}, 1).front().check == LayoutCheck::mla_shape);
}

TEST_CASE("model schema: the MoE and MLA fields with their Megatron-Core names in the docs") {
    for (const char* name :
         {"num_experts", "moe_top_k", "moe_ffn_hidden", "moe_shared_expert_ffn_hidden",
          "moe_first_dense_layers", "moe_layer_freq", "moe_capacity_factor", "moe_load_imbalance", "head_dim",
          "attention_type", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim"}) {
        CAPTURE(name);
        const auto* f = schema::find(model_fields(), name);
        REQUIRE(f != nullptr);
        CHECK_FALSE(f->required);
        const bool cited = f->doc.find("--") != std::string::npos ||
                           f->doc.find("Megatron") != std::string::npos ||
                           f->doc.find("DeepSeek") != std::string::npos;
        CHECK(cited);
    }
    for (const char* name : {"ep", "etp"}) {
        const auto* f = schema::find(layout_fields(), name);
        REQUIRE(f != nullptr);
        CHECK_FALSE(f->summary);  // run --json's layout summary is unchanged for dense runs
    }
}
