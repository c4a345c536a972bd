// Decoder-only transformer described by its shapes, its parameter counts and its FLOP counts.
//
// Conventions (as in Megatron-LM): `mlp = gelu` means a GPT-style block (LayerNorm with weight and bias,
// linear biases, two MLP matrices ffn_hidden wide); `mlp = swiglu` means a Llama-style block (RMSNorm, no
// biases, three MLP matrices: gate, up, down). kv_heads < heads is grouped-query attention; head_dim = hidden
// / heads unless head_dim_override states it (Qwen3, gpt-oss: heads * head_dim != hidden).
//
// Mixture-of-experts (Megatron-Core megatron/core/transformer/moe/: MoELayer, TopKRouter, GroupedMLP /
// TEGroupedMLP, SharedExpertMLP): num_experts > 0 makes the MoE layers' MLP a router (a hidden x num_experts
// linear layer) plus num_experts routed experts, each an MLP moe_ffn_hidden wide of the model's mlp kind,
// every token going to moe_top_k of them, plus optional shared experts (moe_shared_expert_ffn_hidden wide in
// all, as Megatron --moe-shared-expert-intermediate-size) that see every token. The first
// moe_first_dense_layers layers are dense (DeepSeek-V3 first_k_dense_replace = 3), then every
// moe_layer_freq-th layer is MoE (Megatron
// --moe-layer-freq N: layer i (0-based, after the dense ones) is MoE when i % N == 0). ffn_hidden stays the
// FFN width of the dense layers (Megatron --ffn-hidden-size).
//
// Multi-head latent attention (DeepSeek-V2/V3; Megatron-Core
// megatron/core/transformer/multi_latent_attention.py MLASelfAttention): queries through a q_lora_rank
// down-projection (none when q_lora_rank = 0), keys and values through a shared kv_lora_rank latent plus a
// qk_rope_head_dim rotary key shared by the heads; the query/key head is head_dim() (the "nope" part,
// Megatron qk_head_dim) + qk_rope_head_dim wide, the value head v_head_dim wide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/schema.hpp"

namespace trainsim {

enum class MlpKind { gelu, swiglu };
/// The attention block: standard multi-head / grouped-query attention, or multi-head latent attention (MLA).
enum class AttentionType { standard, mla };

struct ModelSpec {
    std::string name;
    std::int64_t layers = 0;
    std::int64_t hidden = 0;
    std::int64_t heads = 0;
    std::int64_t kv_heads = 0;
    std::int64_t ffn_hidden = 0;
    std::int64_t vocab = 0;
    std::int64_t seq_len = 0;
    MlpKind mlp = MlpKind::gelu;
    bool tied_embeddings = true;
    /// Dropout after attention softmax and after the attention and MLP blocks (Megatron-LM's default
    /// --attention-dropout 0.1 --hidden-dropout 0.1, as GPT-3 trained); its 1-byte masks are activations.
    /// Llama-style recipes train without dropout.
    bool dropout = true;

    // Mixture-of-experts (see the header comment). Defaults: a dense model.
    std::int64_t num_experts = 0;  ///< routed experts per MoE layer; 0 = dense model (--num-experts)
    std::int64_t moe_top_k = 1;    ///< experts each token is routed to (--moe-router-topk)
    std::int64_t moe_ffn_hidden =
        0;  ///< FFN width of one routed expert; 0 -> ffn_hidden (--moe-ffn-hidden-size)
    /// Total FFN width of the shared experts; 0 = none (--moe-shared-expert-intermediate-size).
    std::int64_t moe_shared_expert_ffn_hidden = 0;
    std::int64_t moe_first_dense_layers =
        0;                            ///< the first k layers are dense (DeepSeek first_k_dense_replace)
    std::int64_t moe_layer_freq = 1;  ///< every n-th layer after the dense ones is MoE (--moe-layer-freq)
    /// 0 = dropless; else the tokens per expert are capped at cf * tokens * top_k / num_experts
    /// (--moe-expert-capacity-factor).
    double moe_capacity_factor = 0;
    /// Routed tokens at the busiest EP rank / the mean: 1 = balanced (the benchmarks force-balance), > 1 a
    /// hot-expert what-if.
    double moe_load_imbalance = 1.0;
    /// The routed experts' linear layers have biases (Megatron-Core add_bias_linear on an MoE model: gpt-oss,
    /// Megatron-Bridge GPTOSSProvider add_bias_linear = True). fc1's bias is added inside TE's GroupedLinear;
    /// fc2's (skip_bias_add) is added by TEGroupedMLP._apply_bias with the routing probabilities, unfused
    /// unless Layout::moe_fused_grouped_mlp (sim/program/moe_ops.cpp, docs/compute-model.md). The biases'
    /// parameters ((2 ffn + hidden) per expert, < 0.1% of gpt-oss's) are not counted.
    bool moe_expert_bias = false;
    /// The routed experts' gated activation clamps its inputs (Megatron-Core activation_func_clamp_value:
    /// gpt-oss 7.0, Megatron-Bridge GPTOSSProvider). Without TE's op fuser (Layout::moe_fused_grouped_mlp)
    /// Megatron-Core clamps eagerly before the fused activation: `input.chunk(2, -1)`, one clamp per half,
    /// `torch.cat` (fused_bias_geglu.py weighted_bias_quick_geglu_impl and the unfused path of
    /// TEGroupedMLP.forward, experts.py; core b0cc270 / d7288711): memory passes and a stored copy of fc1's
    /// output (moe_activation_clamp_bytes_per_element, include/trainsim/program.hpp). MoE with a gated MLP
    /// (model.mlp swiglu) only; otherwise it changes nothing.
    bool moe_activation_clamp = false;
    /// YaRN's concentration factor (attention factor, "mscale"), which multiplies RoPE's cos and sin:
    /// Megatron-Core passes it to apply_rotary_pos_emb (attention.py,
    /// _yarn_get_concentration_factor_from_config: 0.1 ln(s) + 1 for YaRN scaling factor s without
    /// yarn_mscale / yarn_mscale_all_dim, else the ratio of the two; gpt-oss: s = 32, 1.3466). 1 = plain RoPE
    /// or no scaling. Other than 1, Megatron-Core (since core 0.16, commit 9873958 "Fixes for gpt-oss") runs
    /// RoPE unfused even with apply_rope_fusion, TE's fused kernel taking no mscale (rope_utils.py): eager
    /// memory passes over the query and key (rope_unfused_bytes_per_element, include/trainsim/program.hpp).
    /// Standard attention under the megatron framework only; MLA's fused YaRN kernels take it
    /// (sim/program/mla_ops.cpp).
    double yarn_concentration_factor = 1.0;
    /// Attention head width when it is not hidden / heads (JSON "head_dim"); 0 -> hidden / heads.
    std::int64_t head_dim_override = 0;
    /// RMSNorm of every query and key head after the QKV projection, before RoPE (Megatron-Core
    /// --qk-layernorm: SelfAttention's q_layernorm / k_layernorm, one head_dim-wide weight each, replicated
    /// over TP; Qwen3 and Qwen3-MoE q_norm / k_norm, OLMo 2, Gemma 3). Two norm kernels forward and two
    /// backward over the query and key elements (sim/program/layer_ops.cpp), their inputs kept for the
    /// backward (sim/memory/activations.cpp). Standard attention only: MLA's q / kv latent norms are part of
    /// AttentionType::mla.
    bool qk_layernorm = false;
    /// Sliding-window attention (Megatron-Core --window-size (w, 0), TransformerConfig.window_size; Hugging
    /// Face sliding_window; gpt-oss 128, Mistral 7B 4096): each query attends to the `sliding_window` keys up
    /// to and including its own position. 0: full causal attention. With a fused attention kernel the kernel
    /// skips the key tiles outside the band (FlashAttention-2 window_size, cuDNN's sliding-window mask): per
    /// query tile, ceil(w / 128) + 1/2 tiles of 128 keys instead of the causal triangle's (sim/program/
    /// layer_ops.cpp); unfused attention computes the full scores and masks them (no saving). Megatron-Core's
    /// num_floating_point_operations ignores the window, and so does model_flops() (the MFU convention).
    std::int64_t sliding_window = 0;
    /// With sliding_window: every N-th layer (1-based layer number divisible by N) attends fully, the others
    /// through the window (Megatron-Core window_attn_skip_freq N, transformer/utils.py
    /// is_layer_window_attention; gpt-oss N = 2: layer_types alternating "sliding_attention" /
    /// "full_attention"). 0: every layer through the window.
    std::int64_t sliding_window_full_every = 0;
    AttentionType attention_type = AttentionType::standard;
    /// MLA ranks and head widths (DeepSeek-V3: 1536, 512, 64, 128; its qk_head_dim 128 is head_dim()).
    std::int64_t q_lora_rank = 0, kv_lora_rank = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    /// Multi-token prediction layers (DeepSeek-V3: 1; Megatron-Core --mtp-num-layers,
    /// megatron/core/transformer/multi_token_prediction.py MultiTokenPredictionLayer): each, on the last
    /// pipeline stage after the decoder, looks up the next token's embedding, normalizes it and the hidden
    /// state (enorm, hnorm), projects their concatenation 2h -> h (eh_proj), runs one transformer layer of
    /// the last decoder layer's kind, a final norm, and the shared output layer and loss once more.
    std::int64_t mtp_layers = 0;

    /// Width of one attention head (MLA: of the non-rotary query/key part, Megatron qk_head_dim).
    std::int64_t head_dim() const { return head_dim_override > 0 ? head_dim_override : hidden / heads; }

    /// The share of the transformer layers that attend through the sliding window (sliding_window,
    /// sliding_window_full_every): 0 without a window.
    double windowed_layer_fraction() const {
        if (sliding_window <= 0 || layers <= 0) return 0.0;
        if (sliding_window_full_every <= 0) return 1.0;
        const auto full = layers / sliding_window_full_every;
        return static_cast<double>(layers - full) / static_cast<double>(layers);
    }
    bool moe() const { return num_experts > 0; }
    bool mla() const { return attention_type == AttentionType::mla; }
    /// True when layer `layer` (global, 0-based) has an MoE MLP: moe(), not one of the first
    /// moe_first_dense_layers, and (layer - moe_first_dense_layers) % moe_layer_freq == 0.
    bool layer_is_moe(std::int64_t layer) const;
    /// Layers with an MoE MLP.
    std::int64_t moe_layer_count() const;
    /// FFN width of one routed expert: moe_ffn_hidden, or ffn_hidden when 0.
    std::int64_t expert_ffn() const { return moe_ffn_hidden > 0 ? moe_ffn_hidden : ffn_hidden; }
    /// Weights of ONE routed expert (all TP shards): 2 (gelu) or 3 (swiglu) matrices hidden x expert_ffn(),
    /// plus the gelu biases (expert_ffn() + hidden).
    double expert_params() const;
    /// Weights of the router of one MoE layer: hidden x num_experts (TopKRouter.weight, no bias).
    double router_params() const;
    /// Weights of the shared experts of one MoE layer (an MLP moe_shared_expert_ffn_hidden wide; 0 if none).
    double shared_expert_params() const;
    /// Attention weights of one layer: standard (QKV, projection, their gelu biases, the qk_layernorm
    /// weights) or MLA (q down / up with
    /// the q norm, kv down with the rotary key, kv norm, kv up, projection); norms before the block excluded.
    double attention_params() const;
    /// The part of attention_params() every TP rank holds whole: MLA's down-projections (h x q_lora_rank,
    /// h x (kv_lora_rank + qk_rope_head_dim); Megatron-Core builds them as TELinear with parallel_mode
    /// "duplicated") and the q / kv norm weights; for standard attention the q / k norm weights
    /// (qk_layernorm: 2 head_dim), else 0: TP splits its weights.
    double tp_replicated_attention_params() const;
    /// Parameters of layer `layer` (global 0-based): attention + norms + (dense MLP | router + all routed
    /// experts + shared experts).
    double layer_params(std::int64_t layer) const;
    /// The part of layer_params(layer) that is NOT in routed experts (gradients reduced over DP x CP).
    double layer_dense_params(std::int64_t layer) const;
    /// num_experts * expert_params() for MoE layers, else 0 (gradients reduced over the expert-DP group).
    double layer_expert_params(std::int64_t layer) const;

    /// Parameters of one transformer layer (attention + MLP + norms, biases for gelu models) of a dense
    /// model: layer_params(0).
    double layer_params() const;
    /// Weights of the four linear layers of one transformer layer (QKV, projection, MLP matrices), no
    /// biases: what QLoRA quantizes to 4 bits. MLA: its five projections (q down / up, kv down / up, output)
    /// and the dense MLP's matrices.
    double linear_params() const;
    /// Parameters of the input embedding (vocab x hidden).
    double embedding_params() const;
    /// Parameters of the output layer (0 when tied to the input embedding) plus the final norm.
    double output_params() const;
    /// Parameters of the MTP layers (mtp_layers x (enorm, hnorm, eh_proj 2h x h, a transformer layer like
    /// the last decoder layer, final norm)); the embedding and output layer they share are not counted again.
    double mtp_params() const;
    /// The part of mtp_params() in routed experts (reduced over expert DP).
    double mtp_expert_params() const;
    /// Total parameters (counting tied embeddings once; every routed expert of every MoE layer; the MTP
    /// layers).
    double total_params() const;
    /// Parameters one token goes through (dense parts, the router, moe_top_k routed experts and the shared
    /// experts of each MoE layer; the embeddings as total_params counts them): "active" parameters.
    double active_params() const;

    /// Model FLOPs of one iteration for `sequences` sequences, forward + backward, no recomputation.
    /// General form of Megatron-Core r0.8.0 `num_floating_point_operations` (megatron/training/training.py):
    ///   12·B·s·L·h²·[(1 + g/a + s/h)·(q/h) + (ffn/h)·(3/2 if SwiGLU else 1) + V/(2·L·h)]
    /// with q = head_dim·a = h here; equals 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) for a GPT layer
    /// (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 6.3). The s² attention term is not halved for the
    /// causal mask.
    /// MoE and MLA models (moe() or mla()) follow Megatron-Core's current formula (training.py
    /// num_floating_point_operations, transformer_flops, core r0.13+): dense layers ffn_hidden wide, per MoE
    /// layer moe_top_k routed experts expert_ffn() wide plus the shared experts (the router GEMM is not
    /// counted), the MLA projections (q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim, their norms),
    /// and the core attention halved for the causal mask; MTP layers (mtp_layers) as layers of the last
    /// decoder layer's kind plus their norms, eh_proj and one more logits GEMM each. Dense models without MTP
    /// keep the r0.8.0 form above, which the validated figures were computed with.
    double model_flops(double sequences) const;
    /// Forward FLOPs of one transformer layer for `tokens` tokens (the same count, one third of fwd+bwd).
    double layer_forward_flops(double tokens) const;

    /// Every field equal (validate simulates runs with equal inputs once).
    friend bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

/// The names of MlpKind's values in enum order ("gelu", "swiglu").
const std::vector<std::string>& mlp_kind_names();
/// The names of AttentionType's values in enum order ("standard", "mla").
const std::vector<std::string>& attention_type_names();

/// The model's fields as a workload file's "model" object writes them (include/trainsim/schema.hpp), in the
/// order the loader reads them. docs/inputs.md is generated from it.
const schema::Table<ModelSpec>& model_fields();

}  // namespace trainsim
