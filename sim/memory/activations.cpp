// Stored activations of one transformer layer for one micro-batch (docs/memory.md, "Activations").
//
// Per token of this GPU (T = b·s/cp tokens), 16-bit tensors (E = 2 B), 1-byte dropout masks. "rep" terms
// are not split by TP without sequence parallelism (the LayerNorm region), "tp" terms are split by t:
//   norm inputs            2·E·h                       rep   (two norms)
//   QKV GEMM input         G·h                         rep   (G = E, or the quantized copy's bytes when fp8
//                                                             GEMMs keep their inputs quantized:
//                                                             saved_gemm_input_bytes;
//                                                             torchtitan's DTensor TP keeps it gathered: not
//                                                             split)
//   Q                      E·a·d                       tp
//   K, V                   2·E·w                       tp    (w = g·d with flash attention, which takes GQA
//                                                              as is; a·d unfused: Megatron repeats K, V;
//                                                              a·d for torchtitan: repeat_kv before SDPA)
//   q / k norm inputs      E·(a + g)·d                 tp    (model.qk_layernorm: TENorm keeps its input)
//   scores (unfused, no recompute)  E·a·s softmax out, + (1 + E)·a·s mask and dropout out with dropout
//   flash attention        E·a·d output O, 4·a fp32 log-sum-exp per head                    tp
//                          (TE FP8 attention, Layout::fp8_attention: Q, K, V and O saved in FP8, 1 byte)
//   projection input       G·a·d (unfused; flash: O itself, or its fp8 copy G·a·d)           tp
//   fc1 input              G·h                         rep   (as the QKV input)
//   MLP                    GeLU: E·f in, G·f out; SwiGLU: E·2f in (gate, up), G·f out          tp
//   dropout masks          2·h with dropout (after attention and MLP)                        rep
//   LoRA                   E·r per targeted projection (x·A)                                 rep
// For a GPT layer (g = a, f = 4h, dropout, 16-bit) this is Korthikanti et al. 2022 Sec. 4.1:
// s·b·h·(34 + 5·a·s/h) without parallelism; 10 + 24/t with TP; 34/t with TP + SP.
// Full recomputation keeps only the layer input (E·h, rep) and rebuilds the whole set before the backward.
//
// Mixture-of-experts layers (m.moe(), Megatron-Core MoELayer with the alltoall dispatcher), per token of this
// GPU's MoE input (T_r = T / t with sequence parallelism, else T), R = T_r * top_k * u routed tokens arrive
// at the busiest rank (u = moe_load_imbalance, at most ep; with a capacity factor cf, padded to capacity:
// u = cf), gathered over the ETP group (x etp) when etp > 1:
//   router logits and probabilities   2 * 4 * num_experts fp32 (TopKRouter scores in fp32)      per T_r
//   routed-expert input                G * h                                                      per R*etp
//   expert FFN as the dense MLP, f_e / etp wide (SwiGLU: E * 2 f_e in, G * f_e out)              per R*etp
//   the eager clamp's cat output (moe_activation_clamp, no op fuser)  E * 2 f_e                   per R*etp
//   expert outputs before the weighted combine  E * h                                             per R
//   shared experts as a dense MLP f_s / t wide                                                    per T
// replacing the dense MLP's tensors; a model's dense layers (DeepSeek-V3's first 3,
// model.moe_first_dense_layers) store the dense MLP's (layer_activations with moe_layer = false). Megatron's
// selective recompute modules (Layout::recompute_modules, layout.hpp RecomputeModules): each moves what its
// module stored from the stored set to the recomputed set: layernorm the separate norms' outputs (the pre-MLP
// norm's of MoE layers, the input norm's of MLA layers: G·h each, as the GEMM inputs above); mlp (dense
// layers) the fc1 input and the MLP's tensors; moe every MoE tensor (the pre-MLP norm output, the
// checkpoint's input, stays); moe_act the experts' fc2 input (and the clamp's copy); shared_experts the
// shared experts' tensors.
// Multi-head latent attention (m.mla(), Megatron-Core MLASelfAttention; sim/program/mla_ops.cpp): the down-
// projections' input is the QKV GEMM input above; the q / kv up-projections (TE
// LayerNormColumnParallelLinear) keep their norm input E and normalized output G, (q_lora_rank +
// kv_lora_rank) wide, rep; the rotary key E · qk_rope_head_dim (gathered: not split); query and key E · a ·
// (d + rope), value and O E · a · v_head_dim, tp; flash attention's log-sum-exp as above. With
// recompute_mla_up_proj the query, key and value are not stored but rebuilt before the backward (Megatron's
// qkv_up_checkpoint).
//
// torchtitan's per-op selective checkpointing (selective_op, parallelize_llama.py _op_sac_save_list and
// _get_custom_policy) keeps, per token: the block input E·h (rep; the checkpoint's input), the outputs of the
// 1st, 3rd, 5th and 7th aten.mm of the block in forward order wq, wk, wv, wo, w1, w3, w2 (wq E·a·d, wv E·g·d,
// w1 E·f, all tp; w2 E·h, a partial sum over the whole sequence under TP: not split), the SDPA output E·a·d
// and its fp32 log-sum-exp 4·a (tp), and under TP + SP the two reduce_scatter outputs E·h (rep). Everything
// else (norms, RoPE, SiLU, the product, wk, wo, w3, the residual adds) is rebuilt in the backward: the
// recomputed set is the unrecomputed set less what was kept.
#include <algorithm>
#include <functional>
#include <numeric>

#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

namespace {

/// Bytes per element of a GEMM input kept for the backward in a run with quantized GEMMs: TransformerEngine's
/// Linear quantizes its input for the forward GEMM and saves the quantized tensor with only its column-wise
/// data (what the wgrad GEMM reads; transformer_engine/pytorch/module/linear.py, _Linear.forward:
/// inputmat.update_usage(rowwise_usage=False, columnwise_usage=True)). Per-tensor FP8 (delayed and current
/// scaling, torchao's tensorwise and rowwise): 1 B. MXFP8: 1 B and one E8M0 scale byte per 32 elements.
/// NVFP4: 4 bits and one E4M3 scale byte per 16 elements (NVFP4BlockScaling, 1-D blocks of 16; the per-tensor
/// fp32 scale is negligible).
double saved_gemm_input_bytes(const Layout& l) {
    if (l.precision != Precision::fp8) return l.activation_bytes();
    switch (l.fp8_recipe) {
        case Fp8Recipe::mxfp8:
            return 1.0 + 1.0 / 32.0;
        case Fp8Recipe::nvfp4:
            return 0.5 + 1.0 / 16.0;
        default:
            return 1.0;
    }
}

/// The sizes the formulas above use (per GPU; bytes per element E and G).
struct ActivationShape {
    double T, s, h, a, g, d, f, t, E, G, rep, drop;
    /// Bytes per element of the attention core's saved Q, K, V and O: 1 with TE's FP8 attention
    /// (Layout::fp8_attention: FusedAttnFunc saves the FP8 copies it ran on), else E.
    double A;
    /// K/V heads the attention kernel reads and keeps: a when the framework repeats K and V first
    /// (repeats_kv, include/trainsim/program.hpp), else g.
    double kv_heads;
    bool flash, swiglu;
    ActivationShape(const ModelSpec& m, const Layout& l)
        : T(static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) / l.cp),
          s(static_cast<double>(m.seq_len) / l.cp),
          h(static_cast<double>(m.hidden)),
          a(static_cast<double>(m.heads)),
          g(static_cast<double>(m.kv_heads)),
          d(static_cast<double>(m.head_dim())),
          f(static_cast<double>(m.ffn_hidden)),
          t(l.tp),
          E(l.activation_bytes()),
          G(saved_gemm_input_bytes(l)),
          rep(l.sequence_parallel ? t : 1.0),
          drop(m.dropout ? 1.0 : 0.0),
          A(l.fp8_attention && l.fused_attention() ? 1.0 : E),
          kv_heads(repeats_kv(m, l) ? a : g),
          flash(l.fused_attention()),
          swiglu(m.mlp == MlpKind::swiglu) {}
    /// The widest linear weight per GPU (fc1, or QKV), elements.
    double widest_weight() const { return h * std::max((swiglu ? 2 : 1) * f, (a + 2 * g) * d) / t; }
};

/// The MoE MLP's stored tensors (see the header comment), bytes per GPU, by what they belong to.
struct MoeTensors {
    double router = 0;            ///< router logits and probabilities (fp32)
    double permuted = 0;          ///< the permuted expert input (fc1's input)
    std::vector<double> fc1_out;  ///< the experts' fc1 outputs (gate and up with SwiGLU)
    double fc2_in = 0;            ///< the activation's output (fc2's input)
    /// With the eager clamp (moe_activation_clamp_bytes_per_element > 0): the clamped copy of fc1's output
    /// that torch.cat writes and the fused activation saves (the clamps keep fc1's output for their backward)
    double clamped = 0;
    double outputs = 0;          ///< expert outputs before the weighted combine
    std::vector<double> shared;  ///< the shared experts' tensors (fc1 output, fc2 input)
    std::vector<double> all() const {
        std::vector<double> v{router, permuted};
        v.insert(v.end(), fc1_out.begin(), fc1_out.end());
        v.push_back(fc2_in);
        if (clamped > 0) v.push_back(clamped);
        v.push_back(outputs);
        v.insert(v.end(), shared.begin(), shared.end());
        return v;
    }
};

MoeTensors moe_tensors(const ModelSpec& m, const ActivationShape& x, const Layout& l) {
    const double tokens = l.sequence_parallel ? x.T / x.t : x.T;  // this rank's MoE input
    double u = std::min(m.moe_load_imbalance, static_cast<double>(l.ep));
    if (m.moe_capacity_factor > 0) u = m.moe_capacity_factor;
    const double etp = l.expert_tp();
    const double routed = tokens * static_cast<double>(m.moe_top_k) * u;
    const double fe = static_cast<double>(m.expert_ffn()) / etp;
    MoeTensors t;
    t.router = tokens * 2 * 4 * static_cast<double>(m.num_experts);
    t.permuted = routed * etp * x.G * x.h;
    t.fc1_out.assign(x.swiglu ? 2 : 1, routed * etp * x.E * fe);
    t.fc2_in = routed * etp * x.G * fe;
    if (moe_activation_clamp_bytes_per_element(m, l, false) > 0) t.clamped = 2 * routed * etp * x.E * fe;
    t.outputs = routed * x.E * x.h;
    if (m.moe_shared_expert_ffn_hidden > 0) {
        const double fs = static_cast<double>(m.moe_shared_expert_ffn_hidden) / x.t;
        t.shared = {x.T * x.E * fs * (x.swiglu ? 2 : 1), x.T * x.G * fs};
    }
    return t;
}

/// The input of the QKV (or MLA down-projection) and fc1 (or router) GEMMs: the norms' outputs. Under
/// TP + SP Megatron saves them sequence-sharded and gathers them again in the backward; torchtitan's DTensor
/// linears save the all-gathered input (whole sequence).
double gemm_input_bytes(const ActivationShape& x, const Layout& l) {
    return l.framework == Framework::torchtitan ? x.T * x.G * x.h : x.T * x.G * x.h / x.rep;
}

/// The dense MLP's tensors but its input: fc1's outputs, fc2's input.
std::vector<double> dense_mlp_tensors(const ActivationShape& x) {
    std::vector<double> v(x.swiglu ? 2 : 1, x.T * x.E * x.f / x.t);
    v.push_back(x.T * x.G * x.f / x.t);
    return v;
}

/// The stored tensors of the unrecomputed layer, bytes per GPU, one entry per tensor (scores excluded).
std::vector<double> unrecomputed_tensors(const ActivationShape& x, const Layout& l, const ModelSpec& m,
                                         bool moe_layer) {
    std::vector<double> all;
    auto rep_t = [&](double per_token) {
        if (per_token > 0) all.push_back(x.T * per_token / x.rep);
    };
    auto tp_t = [&](double per_token) {
        if (per_token > 0) all.push_back(x.T * per_token / x.t);
    };
    rep_t(x.E * x.h);  // the two norm inputs
    rep_t(x.E * x.h);
    const double gemm_in = gemm_input_bytes(x, l);  // QKV and fc1 GEMM inputs
    all.push_back(gemm_in);
    all.push_back(gemm_in);
    rep_t(x.drop * x.h);
    rep_t(x.drop * x.h);
    if (l.adapter != Adapter::none) {
        const auto& tg = l.lora_targets;
        const double per = x.E * static_cast<double>(l.lora_rank);
        rep_t(per *
              ((tg.qkv ? 3 : 0) + (tg.proj ? 1 : 0) + (tg.fc1 ? (x.swiglu ? 2 : 1) : 0) + (tg.fc2 ? 1 : 0)));
    }
    if (m.mla()) {
        const double qk = x.a * (x.d + static_cast<double>(m.qk_rope_head_dim));
        const double vo = x.a * static_cast<double>(m.v_head_dim);
        // The up-projections' norm inputs (E) and normalized outputs (G), sequence-sharded with SP; the
        // rotary key, gathered.
        rep_t((x.E + x.G) * static_cast<double>(m.q_lora_rank + m.kv_lora_rank));
        all.push_back(x.T * x.E * static_cast<double>(m.qk_rope_head_dim));
        tp_t(x.A * qk);  // query, key, value (the up-projections' outputs after RoPE)
        tp_t(x.A * qk);
        tp_t(x.A * vo);
        tp_t(x.A * vo);  // O (or the projection input unfused)
        if (x.flash) tp_t(4 * x.a);
    } else {
        const double kv_width = x.flash ? x.kv_heads * x.d : x.a * x.d;
        tp_t(x.A * x.a * x.d);  // Q, K, V
        tp_t(x.A * kv_width);
        tp_t(x.A * kv_width);
        if (m.qk_layernorm) {  // the q / k norms' inputs (the QKV GEMM's query and key, 16-bit)
            tp_t(x.E * x.a * x.d);
            tp_t(x.E * x.g * x.d);
        }
        if (x.flash) {
            tp_t(x.A * x.a * x.d);  // O
            tp_t(4 * x.a);          // log-sum-exp
            if (x.G < x.E) tp_t(x.G * x.a * x.d);
        } else {
            tp_t(x.G * x.a * x.d);
        }
    }
    const std::vector<double> mlp = m.moe() && moe_layer ? moe_tensors(m, x, l).all() : dense_mlp_tensors(x);
    all.insert(all.end(), mlp.begin(), mlp.end());
    return all;
}

/// torchtitan's per-op selective checkpointing: the kept tensors into out.stored_tensors, the rebuilt set
/// (the unrecomputed set less what was kept, as tensors of the layer's sizes, largest first) into
/// out.recomputed_tensors.
void selective_op_tensors(const ActivationShape& x, const Layout& l, const std::vector<double>& all,
                          double input, LayerActivations& out) {
    auto keep = [&](double bytes) { out.stored_tensors.push_back(bytes); };
    keep(input);                        // block input (the checkpoint's input)
    keep(x.T * x.E * x.a * x.d / x.t);  // wq output (mm 1)
    keep(x.T * x.E * x.g * x.d / x.t);  // wv output (mm 3)
    if (x.flash) {
        keep(x.T * x.E * x.a * x.d / x.t);  // SDPA output
        keep(x.T * 4 * x.a / x.t);          // its log-sum-exp
    }
    keep(x.T * x.E * x.f / x.t);  // w1 output (mm 5)
    keep(x.T * x.E * x.h);        // w2 output (mm 7), a partial sum under TP
    if (l.tp > 1 && l.sequence_parallel) {
        keep(x.T * x.E * x.h / x.rep);  // reduce_scatter outputs after wo and w2
        keep(x.T * x.E * x.h / x.rep);
    }
    const double base = std::accumulate(all.begin(), all.end(), 0.0);
    const double kept = std::accumulate(out.stored_tensors.begin(), out.stored_tensors.end(), 0.0);
    std::vector<double> sizes = all;
    std::sort(sizes.begin(), sizes.end(), std::greater<>());
    double left = std::max(0.0, base - kept);
    for (std::size_t i = 0; left > 0 && !sizes.empty(); i = (i + 1) % sizes.size()) {
        const double v = std::min(left, sizes[i]);
        out.recomputed_tensors.push_back(v);
        left -= v;
    }
}

/// Megatron's mla_up_proj recompute: the query, key and value leave the stored set for the recomputed one
/// (and exist in the forward only until the attention core has run).
void mla_up_proj_recomputed(const ActivationShape& x, const ModelSpec& m, LayerActivations& out) {
    const double qk = x.T * x.E * x.a * (x.d + static_cast<double>(m.qk_rope_head_dim)) / x.t;
    const double v = x.T * x.E * x.a * static_cast<double>(m.v_head_dim) / x.t;
    for (const double bytes : {qk, qk, v}) {
        const auto it = std::find(out.stored_tensors.begin(), out.stored_tensors.end(), bytes);
        if (it != out.stored_tensors.end()) out.stored_tensors.erase(it);
        out.recomputed_tensors.push_back(bytes);
        out.forward_transient_tensors.push_back(bytes);
    }
}

/// Moves one stored tensor of `bytes` to the recomputed set (alive in the forward until consumed, and
/// again from the recomputation to the backward).
void discard(double bytes, LayerActivations& out) {
    if (!(bytes > 0)) return;
    const auto it = std::find(out.stored_tensors.begin(), out.stored_tensors.end(), bytes);
    if (it == out.stored_tensors.end()) return;
    out.stored_tensors.erase(it);
    out.recomputed_tensors.push_back(bytes);
    out.forward_transient_tensors.push_back(bytes);
}

/// Megatron's selective recompute modules beyond core_attn and mla_up_proj (Layout::recompute_modules).
void recompute_modules_discard(const ActivationShape& x, const Layout& l, const ModelSpec& m, bool moe_layer,
                               LayerActivations& out) {
    const RecomputeModules& r = l.recompute_modules;
    const bool moe = m.moe() && moe_layer;
    const double gemm_in = gemm_input_bytes(x, l);
    if (r.layernorm && m.mla()) discard(gemm_in, out);  // the input norm's output (a separate TENorm)
    if (moe) {
        const MoeTensors t = moe_tensors(m, x, l);
        if (r.layernorm) discard(gemm_in, out);  // the pre-MLP norm's output (the router's input)
        if (r.moe) {
            for (double b : t.all())
                discard(b, out);
            return;
        }
        if (r.moe_act) {  // CheckpointWithoutOutput runs the activation (and its clamp) without autograd
            discard(t.fc2_in, out);
            discard(t.clamped, out);
        }
        if (r.shared_experts)
            for (double b : t.shared)
                discard(b, out);
    } else if (r.mlp) {
        discard(gemm_in, out);  // fc1's input: the output of the norm TE fuses into fc1
        for (double b : dense_mlp_tensors(x))
            discard(b, out);
    }
}

/// Transients besides the layer's own tensors: a dequantized QLoRA weight, an uncached fp8 weight cast, the
/// K and V of other context-parallel ranks.
void extra_transients(const ActivationShape& x, const Layout& l, LayerActivations& out) {
    auto& fwd = out.forward_transient_tensors;
    auto& bwd = out.backward_transient_tensors;
    if (l.adapter == Adapter::qlora) {
        // The 16-bit weight of the widest linear layer, dequantized from NF4 for the GEMM.
        fwd.push_back(x.E * x.widest_weight());
        bwd.push_back(x.E * x.widest_weight());
    }
    if (l.precision == Precision::fp8 && !caches_fp8_weights(l)) {
        // fp8 GEMMs without a weight cache (torchao Float8, TE without is_first_microbatch): the fp8 cast of
        // a weight exists only around its GEMM; the widest is counted, 1 B per element.
        fwd.push_back(x.widest_weight());
        bwd.push_back(x.widest_weight());
    }
    if (l.cp > 1) {
        // Context parallelism: the K and V the attention of this rank reads beyond its own. PyTorch's
        // context_parallel with the default all-gather rotation (torchtitan) gathers the whole sequence's K/V
        // once per attention call; Megatron's p2p ring holds the block being received beside its own.
        const double kv_local = x.T * x.E * x.kv_heads * x.d / x.t;  // K or V of this rank
        const double kv = l.framework == Framework::torchtitan ? kv_local * l.cp : 2 * kv_local;
        for (auto* v : {&fwd, &bwd}) {
            v->push_back(kv);  // K
            v->push_back(kv);  // V
        }
    }
}

}  // namespace

LayerActivations layer_activations(const ModelSpec& m, const Layout& l, bool moe_layer) {
    const ActivationShape x(m, l);
    const std::vector<double> all = unrecomputed_tensors(x, l, m, moe_layer);
    // The s x s scores of unfused attention, per token: softmax output, and with dropout its mask and output.
    const double scores = x.flash ? 0.0 : x.T * (x.E + x.drop * (1 + x.E)) * x.a * x.s / x.t;
    const double input = x.T * x.E * x.h / x.rep;
    // Gradients alive in the layer's backward: the output gradient and the widest intermediate gradient (the
    // fc1 output's, or the unfused attention scores').
    const double widest =
        std::max(x.E * (x.swiglu ? 2 : 1) * x.f / x.t, x.flash ? 0.0 : x.E * x.a * x.s / x.t);
    LayerActivations out;
    auto& fwd = out.forward_transient_tensors;
    auto& rec = out.recomputed_tensors;
    out.backward_transient_tensors = {x.T * x.E * x.h / x.rep, x.T * widest};
    std::vector<double> with_scores = all;
    if (scores > 0) with_scores.push_back(scores);
    switch (l.recompute) {
        case Recompute::none:
            out.stored_tensors = with_scores;
            break;
        case Recompute::selective:
            // The attention core is recomputed in the backward: its scores exist only then (unfused).
            out.stored_tensors = all;
            if (scores > 0 && l.recompute_modules.core_attn) fwd = rec = {scores};
            if (scores > 0 && !l.recompute_modules.core_attn) out.stored_tensors.push_back(scores);
            if (m.mla() && l.recompute_mla_up_proj) mla_up_proj_recomputed(x, m, out);
            recompute_modules_discard(x, l, m, moe_layer, out);
            break;
        case Recompute::selective_op:
            selective_op_tensors(x, l, all, input, out);
            if (scores > 0) {
                rec.push_back(scores);
                fwd.push_back(scores);
            }
            break;
        case Recompute::full:
            out.stored_tensors = {input};
            fwd = with_scores;
            rec = with_scores;
            break;
    }
    extra_transients(x, l, out);
    auto sum = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
    out.stored = sum(out.stored_tensors);
    out.forward_transient = sum(fwd);
    out.recomputed = sum(rec);
    out.backward_transient = sum(out.backward_transient_tensors);
    return out;
}

void set_activation_copy_bytes(Program& program, const ModelSpec& m, const Layout& l) {
    if (l.activation_offload_layers <= 0) return;
    const double layer = layer_activations(m, l).stored;
    const double dense = m.moe() ? layer_activations(m, l, false).stored : layer;
    for (auto& seg : program.segments) {
        if (seg.activation_copy == ActivationCopy::none) continue;
        for (auto& k : seg.kernels)
            k.bytes = seg.activation_copy == ActivationCopy::dense_layer ? dense : layer;
    }
}

}  // namespace trainsim
