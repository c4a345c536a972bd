// The model's fields, declared once (include/trainsim/schema.hpp): the workload loader's "model" object,
// --set and docs/inputs.md read them from here.
#include "trainsim/limits.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

namespace {

using schema::Range;

constexpr const char* kLimits = "trainsim/limits.hpp";

Range up_to(std::int64_t limit) {
    return {1, static_cast<double>(limit), kLimits};
}
/// 0 (not set / none) .. limit.
Range zero_to(std::int64_t limit) {
    return {0, static_cast<double>(limit), kLimits};
}

schema::Field<ModelSpec> number_field(std::string name, double ModelSpec::*member, Range range,
                                      std::string doc) {
    schema::Field<ModelSpec> f;
    f.name = std::move(name);
    f.kind = schema::Kind::number;
    f.range = std::move(range);
    f.doc = std::move(doc);
    f.get = [member](const ModelSpec& m) { return schema::Value{m.*member}; };
    f.set = [member](ModelSpec& m, const schema::Value& v) { m.*member = std::get<double>(v); };
    return f;
}

schema::Table<ModelSpec> make_model_fields() {
    using schema::integer_field;
    schema::Table<ModelSpec> t;
    {
        auto f = schema::string_field("name", &ModelSpec::name, "the model's name in reports");
        f.default_doc = "the workload's name";
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("layers", &ModelSpec::layers, up_to(limits::kMaxLayers), "layers",
                              "transformer layers", true));
    t.push_back(integer_field("hidden", &ModelSpec::hidden, up_to(limits::kMaxHidden), "",
                              "hidden size (model width); divisible by heads", true));
    t.push_back(integer_field("heads", &ModelSpec::heads, up_to(limits::kMaxHeads), "",
                              "attention heads; head_dim = hidden / heads unless head_dim is set", true));
    {
        auto f = integer_field("kv_heads", &ModelSpec::kv_heads, up_to(limits::kMaxHeads), "",
                               "key/value heads (grouped-query attention when < heads); divides heads");
        f.derive_default = [](ModelSpec& m) { m.kv_heads = m.heads; };
        f.default_doc = "heads";
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("ffn_hidden", &ModelSpec::ffn_hidden, up_to(limits::kMaxHidden), "",
                              "MLP inner size", true));
    t.push_back(integer_field("vocab", &ModelSpec::vocab, up_to(limits::kMaxVocab), "tokens",
                              "vocabulary size", true));
    t.push_back(integer_field("seq_len", &ModelSpec::seq_len, up_to(limits::kMaxSeqLen), "tokens",
                              "sequence length", true));
    t.push_back(
        schema::enum_field("mlp", &ModelSpec::mlp, mlp_kind_names(),
                           "block style: gelu = GPT (LayerNorm, biases, two MLP matrices), swiglu = Llama "
                           "(RMSNorm, no biases, gate/up/down)",
                           true));
    {
        auto f = schema::boolean_field("tied_embeddings", &ModelSpec::tied_embeddings,
                                       "the output layer shares the input embedding's weights");
        f.derive_default = [](ModelSpec& m) { m.tied_embeddings = m.mlp == MlpKind::gelu; };
        f.default_doc = "true for gelu, false for swiglu";
        t.push_back(std::move(f));
    }
    t.push_back(schema::boolean_field("dropout", &ModelSpec::dropout,
                                      "dropout after the attention softmax and the attention and MLP blocks "
                                      "(1-byte masks kept as activations)"));
    // Mixture-of-experts: Megatron-Core megatron/core/transformer/moe/ (MoELayer, TopKRouter, experts.py,
    // shared_experts.py) with the arguments of megatron/training/arguments.py named in each doc.
    t.push_back(integer_field("num_experts", &ModelSpec::num_experts, zero_to(limits::kMaxExperts), "experts",
                              "routed experts per MoE layer (Megatron-Core --num-experts); 0 = dense model"));
    t.push_back(integer_field("moe_top_k", &ModelSpec::moe_top_k, up_to(limits::kMaxExperts), "experts",
                              "experts each token is routed to (--moe-router-topk); at most num_experts"));
    {
        auto f = integer_field("moe_ffn_hidden", &ModelSpec::moe_ffn_hidden, zero_to(limits::kMaxHidden), "",
                               "FFN width of one routed expert (--moe-ffn-hidden-size); ffn_hidden stays the "
                               "dense layers' width");
        f.default_doc = "0: ffn_hidden";
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("moe_shared_expert_ffn_hidden", &ModelSpec::moe_shared_expert_ffn_hidden,
                              zero_to(limits::kMaxHidden), "",
                              "total FFN width of the shared experts every token goes through "
                              "(--moe-shared-expert-intermediate-size); 0 = none"));
    t.push_back(integer_field("moe_first_dense_layers", &ModelSpec::moe_first_dense_layers,
                              zero_to(limits::kMaxLayers), "layers",
                              "the first k layers have a dense MLP (DeepSeek-V3 first_k_dense_replace = 3; "
                              "Megatron --moe-layer-freq as a list)"));
    t.push_back(
        integer_field("moe_layer_freq", &ModelSpec::moe_layer_freq, up_to(limits::kMaxLayers), "layers",
                      "after the dense layers, every n-th layer is MoE (Megatron-Core --moe-layer-freq)"));
    t.push_back(number_field("moe_capacity_factor", &ModelSpec::moe_capacity_factor, Range{0, 1024, ""},
                             "0 = dropless; else tokens per expert capped at factor * tokens * top_k / "
                             "num_experts (--moe-expert-capacity-factor)"));
    t.push_back(
        number_field("moe_load_imbalance", &ModelSpec::moe_load_imbalance, Range{1, 1024, ""},
                     "routed tokens at the busiest EP rank / the mean: 1 = balanced (Megatron-Bridge's "
                     "benchmarks force-balance), > 1 a hot-expert what-if"));
    t.push_back(schema::boolean_field("moe_expert_bias", &ModelSpec::moe_expert_bias,
                                      "routed experts' linear layers have biases (Megatron add_bias_linear; "
                                      "gpt-oss): fc2's is added per expert with the routing probabilities"));
    t.push_back(schema::boolean_field(
        "moe_activation_clamp", &ModelSpec::moe_activation_clamp,
        "routed experts' gated activation clamps its inputs (Megatron activation_func_clamp_value; gpt-oss "
        "7.0): without the TE op fuser, two clamps and a cat before the activation (gated MoE only)"));
    t.push_back(
        number_field("yarn_concentration_factor", &ModelSpec::yarn_concentration_factor, Range{0.01, 100, ""},
                     "YaRN's concentration factor on RoPE's cos and sin (Megatron-Core mscale: 0.1 ln(s) + 1 "
                     "for scaling factor s; gpt-oss 1.3466); other than 1, Megatron-Core runs RoPE unfused"));
    {
        auto f = integer_field("head_dim", &ModelSpec::head_dim_override, zero_to(limits::kMaxHidden), "",
                               "attention head width when not hidden / heads (Megatron-Core --kv-channels; "
                               "Qwen3, gpt-oss); with MLA the non-rotary query/key head (qk_head_dim)");
        f.default_doc = "0: hidden / heads";
        t.push_back(std::move(f));
    }
    t.push_back(schema::boolean_field("qk_layernorm", &ModelSpec::qk_layernorm,
                                      "RMSNorm of each query and key head before RoPE (Megatron-Core "
                                      "--qk-layernorm; Qwen3, OLMo 2, Gemma 3); standard attention only"));
    {
        auto f =
            integer_field("sliding_window", &ModelSpec::sliding_window, zero_to(limits::kMaxSeqLen), "tokens",
                          "sliding-window attention: each query attends to this many keys up to its own "
                          "position (Megatron-Core --window-size (w, 0); Hugging Face sliding_window; "
                          "gpt-oss 128); fused attention skips the key tiles outside the window");
        f.default_doc = "0: full causal attention";
        t.push_back(std::move(f));
    }
    {
        auto f = integer_field("sliding_window_full_every", &ModelSpec::sliding_window_full_every,
                               zero_to(limits::kMaxLayers), "",
                               "with sliding_window: every N-th layer (layer number divisible by N) attends "
                               "fully (Megatron-Core window_attn_skip_freq; gpt-oss 2)");
        f.default_doc = "0: every layer through the window";
        t.push_back(std::move(f));
    }
    t.push_back(schema::enum_field("attention_type", &ModelSpec::attention_type, attention_type_names(),
                                   "standard multi-head / grouped-query attention, or multi-head latent "
                                   "attention (Megatron-Core --multi-latent-attention, MLASelfAttention)"));
    t.push_back(integer_field("q_lora_rank", &ModelSpec::q_lora_rank, zero_to(limits::kMaxHidden), "",
                              "MLA: query down-projection rank (--q-lora-rank; DeepSeek-V3 1536); 0 = none"));
    t.push_back(integer_field("kv_lora_rank", &ModelSpec::kv_lora_rank, zero_to(limits::kMaxHidden), "",
                              "MLA: key/value latent rank (--kv-lora-rank; DeepSeek-V3 512)"));
    t.push_back(
        integer_field("qk_rope_head_dim", &ModelSpec::qk_rope_head_dim, zero_to(limits::kMaxHidden), "",
                      "MLA: rotary part of the query/key head (--qk-pos-emb-head-dim; DeepSeek-V3 64)"));
    t.push_back(integer_field("v_head_dim", &ModelSpec::v_head_dim, zero_to(limits::kMaxHidden), "",
                              "MLA: value head width (--v-head-dim; DeepSeek-V3 128)"));
    t.push_back(integer_field("mtp_layers", &ModelSpec::mtp_layers, zero_to(limits::kMaxLayers), "layers",
                              "multi-token prediction layers on the last pipeline stage (--mtp-num-layers; "
                              "DeepSeek-V3 1)"));
    return t;
}

}  // namespace

const std::vector<std::string>& mlp_kind_names() {
    static const std::vector<std::string> names = {"gelu", "swiglu"};
    return names;
}

const std::vector<std::string>& attention_type_names() {
    static const std::vector<std::string> names = {"standard", "mla"};
    return names;
}

const schema::Table<ModelSpec>& model_fields() {
    static const schema::Table<ModelSpec> table = make_model_fields();
    return table;
}

}  // namespace trainsim
