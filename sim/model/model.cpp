#include "trainsim/model.hpp"

#include <algorithm>

namespace trainsim {

namespace {
/// Weights of one MLP `f` wide: 2 (gelu) or 3 (swiglu) matrices hidden x f, plus gelu's biases (f + hidden).
double mlp_params(const ModelSpec& m, double f) {
    const double h = static_cast<double>(m.hidden);
    const bool gpt = m.mlp == MlpKind::gelu;
    return gpt ? 2 * h * f + f + h : 3 * h * f;
}
/// The two norms of a layer: LayerNorm weight + bias (gelu) or RMSNorm weight (swiglu), twice.
double norm_params(const ModelSpec& m) {
    return (m.mlp == MlpKind::gelu ? 4.0 : 2.0) * static_cast<double>(m.hidden);
}
}  // namespace

bool ModelSpec::layer_is_moe(std::int64_t layer) const {
    if (!moe() || layer < moe_first_dense_layers) return false;
    return moe_layer_freq <= 1 || (layer - moe_first_dense_layers) % moe_layer_freq == 0;
}

std::int64_t ModelSpec::moe_layer_count() const {
    if (!moe() || layers <= moe_first_dense_layers) return 0;
    const std::int64_t after = layers - moe_first_dense_layers;
    const std::int64_t freq = moe_layer_freq > 1 ? moe_layer_freq : 1;
    return (after + freq - 1) / freq;
}

double ModelSpec::expert_params() const {
    return mlp_params(*this, static_cast<double>(expert_ffn()));
}

double ModelSpec::router_params() const {
    return static_cast<double>(hidden) * static_cast<double>(num_experts);
}

double ModelSpec::shared_expert_params() const {
    return moe_shared_expert_ffn_hidden > 0
               ? mlp_params(*this, static_cast<double>(moe_shared_expert_ffn_hidden))
               : 0.0;
}

double ModelSpec::attention_params() const {
    const double h = static_cast<double>(hidden);
    const double d = static_cast<double>(head_dim());
    const double a = static_cast<double>(heads);
    if (mla()) {
        // Megatron-Core MLASelfAttention: linear_q_down_proj (h x q_lora_rank), q_layernorm, linear_q_up_proj
        // (q_lora_rank x a(d + rope)) -- or linear_q_proj (h x a(d + rope)) without q_lora_rank --,
        // linear_kv_down_proj (h x (kv_lora_rank + rope)), kv_layernorm, linear_kv_up_proj (kv_lora_rank x
        // a(d + v)), linear_proj (a v x h). No biases.
        const double qr = static_cast<double>(q_lora_rank), kvr = static_cast<double>(kv_lora_rank);
        const double rope = static_cast<double>(qk_rope_head_dim), v = static_cast<double>(v_head_dim);
        const double q = q_lora_rank > 0 ? h * qr + qr + qr * a * (d + rope) : h * a * (d + rope);
        const double kv = h * (kvr + rope) + kvr + kvr * a * (d + v);
        return q + kv + a * v * h;
    }
    const double g = static_cast<double>(kv_heads);
    const double qkv = h * (a + 2 * g) * d;
    const double proj = a * d * h;
    const double biases = mlp == MlpKind::gelu ? (a + 2 * g) * d + h : 0.0;
    const double qk_norms = qk_layernorm ? 2 * d : 0.0;  // q_layernorm, k_layernorm: head_dim weights each
    return qkv + proj + biases + qk_norms;
}

double ModelSpec::tp_replicated_attention_params() const {
    if (!mla()) return qk_layernorm ? 2.0 * static_cast<double>(head_dim()) : 0.0;
    const double h = static_cast<double>(hidden);
    const double qr = static_cast<double>(q_lora_rank), kvr = static_cast<double>(kv_lora_rank);
    const double rope = static_cast<double>(qk_rope_head_dim);
    return (q_lora_rank > 0 ? h * qr + qr : 0.0) + h * (kvr + rope) + kvr;
}

double ModelSpec::layer_params() const {
    return layer_params(0);  // attention (with its biases and qk norms) + norms + MLP: layer_dense_params
}

double ModelSpec::layer_dense_params(std::int64_t layer) const {
    const double mlp_part = layer_is_moe(layer) ? router_params() + shared_expert_params()
                                                : mlp_params(*this, static_cast<double>(ffn_hidden));
    return attention_params() + norm_params(*this) + mlp_part;
}

double ModelSpec::layer_expert_params(std::int64_t layer) const {
    return layer_is_moe(layer) ? static_cast<double>(num_experts) * expert_params() : 0.0;
}

double ModelSpec::layer_params(std::int64_t layer) const {
    return layer_dense_params(layer) + layer_expert_params(layer);
}

double ModelSpec::linear_params() const {
    if (mla())  // the MLA projections (attention_params() less the q / kv norm weights) and the dense MLP
        return attention_params() - static_cast<double>(q_lora_rank > 0 ? q_lora_rank : 0) -
               static_cast<double>(kv_lora_rank) +
               (mlp == MlpKind::gelu ? 2.0 : 3.0) * static_cast<double>(hidden) *
                   static_cast<double>(ffn_hidden);
    const double h = static_cast<double>(hidden);
    const double d = static_cast<double>(head_dim());
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double f = static_cast<double>(ffn_hidden);
    return h * (a + 2 * g) * d + a * d * h + (mlp == MlpKind::gelu ? 2.0 : 3.0) * h * f;
}

double ModelSpec::embedding_params() const {
    return static_cast<double>(vocab) * static_cast<double>(hidden);
}

double ModelSpec::output_params() const {
    const double norm = (mlp == MlpKind::gelu ? 2.0 : 1.0) * static_cast<double>(hidden);
    return (tied_embeddings ? 0.0 : embedding_params()) + norm;
}

double ModelSpec::mtp_params() const {
    if (mtp_layers <= 0) return 0.0;
    const double h = static_cast<double>(hidden);
    const double norm = mlp == MlpKind::gelu ? 2 * h : h;  // one LayerNorm (weight + bias) or RMSNorm
    return static_cast<double>(mtp_layers) * (3 * norm + 2 * h * h + layer_params(layers - 1));
}

double ModelSpec::mtp_expert_params() const {
    return static_cast<double>(std::max<std::int64_t>(mtp_layers, 0)) * layer_expert_params(layers - 1);
}

double ModelSpec::total_params() const {
    if (!moe() && !mla() && mtp_layers <= 0)
        return static_cast<double>(layers) * layer_params() + embedding_params() + output_params();
    double p = embedding_params() + output_params() + mtp_params();
    for (std::int64_t i = 0; i < layers; ++i)
        p += layer_params(i);
    return p;
}

double ModelSpec::active_params() const {
    double p = embedding_params() + output_params();
    for (std::int64_t i = 0; i < layers; ++i)
        p += layer_dense_params(i) +
             (layer_is_moe(i) ? static_cast<double>(moe_top_k) * expert_params() : 0.0);
    return p;
}

namespace {
/// Megatron-Core's num_floating_point_operations (megatron/training/training.py, transformer_flops, main
/// after core r0.13) for BSHD batches: per token 3 (forward, wgrad, dgrad) x 2 (FMA) x the GEMM weights it
/// goes through -- dense MLPs ffn_hidden wide, moe_top_k routed experts and the shared experts of each MoE
/// layer (the router GEMM is not counted), the attention projections (MLA: q down/up with the q norm, kv
/// down/up with the kv norm and the rotary key, output), the logits -- plus the core attention, halved for
/// the causal mask: 6 * s * a * d per token (MLA: 6 * s * a * (d + rope + v) / 2). MTP layers count as
/// layers of the last decoder layer's kind with their norms, eh_proj and logits.
double megatron_core_model_flops(const ModelSpec& m, double sequences) {
    const double T = sequences * static_cast<double>(m.seq_len);  // tokens
    const double s = static_cast<double>(m.seq_len);
    const double h = static_cast<double>(m.hidden);
    const double a = static_cast<double>(m.heads);
    const double d = static_cast<double>(m.head_dim());
    const double V = static_cast<double>(m.vocab);
    const double fe = m.mlp == MlpKind::swiglu ? 3.0 : 2.0;  // ffn_expansion_factor
    // MTP layers count as layers of the last decoder layer's kind, plus their norms and eh_proj and one more
    // logits GEMM each (training.py: num_layers + mtp_num_layers, "MTP norms and proj", "MTP + final logit").
    const double mtp = static_cast<double>(std::max<std::int64_t>(m.mtp_layers, 0));
    const bool mtp_moe = m.layer_is_moe(m.layers - 1);
    const double L = static_cast<double>(m.layers) + mtp;
    const double moe_layers = static_cast<double>(m.moe_layer_count()) + (mtp_moe ? mtp : 0.0);
    const double dense_layers = L - moe_layers;
    const double mlp =
        6.0 * h *
        (static_cast<double>(m.ffn_hidden) * fe * dense_layers +
         static_cast<double>(m.expert_ffn()) * static_cast<double>(m.moe_top_k) * fe * moe_layers +
         static_cast<double>(m.moe_shared_expert_ffn_hidden) * fe * moe_layers);
    double attn_linear = 0, attn_core = 0;  // per layer and token; core per token and key
    if (m.mla()) {
        const double qr = static_cast<double>(m.q_lora_rank), kvr = static_cast<double>(m.kv_lora_rank);
        const double rope = static_cast<double>(m.qk_rope_head_dim), v = static_cast<double>(m.v_head_dim);
        const double q_term = m.q_lora_rank > 0 ? qr * (h + a * (d + rope) + 1) : h * a * (d + rope);
        attn_linear = 6.0 * (q_term + kvr * (h + a * (d + v) + 1) + h * rope + a * v * h);
        attn_core = 6.0 * (a * (d + rope) / 2 + a * v / 2);
    } else {
        const double q = d * a, kv = d * static_cast<double>(m.kv_heads);
        attn_linear = 6.0 * (h * (q + 2 * kv) + q * h);
        attn_core = 6.0 * q / 2 * 2;
    }
    const double mtp_own = 6.0 * mtp * (3 * h + 2 * h * h);
    return T * (mlp + attn_linear * L + mtp_own + 6.0 * h * V * (1 + mtp)) +
           sequences * s * s * attn_core * L;
}
}  // namespace

double ModelSpec::model_flops(double sequences) const {
    if (moe() || mla() || mtp_layers > 0) return megatron_core_model_flops(*this, sequences);
    const double B = sequences;
    const double s = static_cast<double>(seq_len);
    const double L = static_cast<double>(layers);
    const double h = static_cast<double>(hidden);
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double q = static_cast<double>(head_dim()) * a;
    const double ffn = static_cast<double>(ffn_hidden);
    const double V = static_cast<double>(vocab);
    const double swiglu = mlp == MlpKind::swiglu ? 1.5 : 1.0;
    return 12.0 * B * s * L * h * h *
           ((1.0 + g / a + s / h) * (q / h) + (ffn / h) * swiglu + V / (2.0 * L * h));
}

double ModelSpec::layer_forward_flops(double tokens) const {
    const double s = static_cast<double>(seq_len);
    const double h = static_cast<double>(hidden);
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double q = static_cast<double>(head_dim()) * a;
    const double ffn = static_cast<double>(ffn_hidden);
    const double swiglu = mlp == MlpKind::swiglu ? 1.5 : 1.0;
    return 4.0 * tokens * h * h * ((1.0 + g / a + s / h) * (q / h) + (ffn / h) * swiglu);
}

}  // namespace trainsim
