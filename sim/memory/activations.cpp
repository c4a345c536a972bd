// Stored activations of one transformer layer for one micro-batch (docs/memory.md, "Activations").
//
// Per token of this GPU (T = b·s/cp tokens), 16-bit tensors (E = 2 B), 1-byte dropout masks. "rep" terms
// are not split by TP without sequence parallelism (the LayerNorm region), "tp" terms are split by t:
//   norm inputs            2·E·h                       rep   (two norms)
//   QKV GEMM input         G·h                         rep   (G = E, or 1 B when fp8 GEMMs keep fp8 inputs;
//                                                             torchtitan's DTensor TP keeps it gathered: not
//                                                             split)
//   Q                      E·a·d                       tp
//   K, V                   2·E·w                       tp    (w = g·d with flash attention, which takes GQA
//                                                              as is; a·d unfused: Megatron repeats K, V)
//   scores (unfused, no recompute)  E·a·s softmax out, + (1 + E)·a·s mask and dropout out with dropout
//   flash attention        E·a·d output O, 4·a fp32 log-sum-exp per head                    tp
//   projection input       G·a·d (unfused; flash: O itself, or its fp8 copy G·a·d)           tp
//   fc1 input              G·h                         rep   (as the QKV input)
//   MLP                    GeLU: E·f in, G·f out; SwiGLU: E·2f in (gate, up), G·f out          tp
//   dropout masks          2·h with dropout (after attention and MLP)                        rep
//   LoRA                   E·r per targeted projection (x·A)                                 rep
// For a GPT layer (g = a, f = 4h, dropout, 16-bit) this is Korthikanti et al. 2022 Sec. 4.1:
// s·b·h·(34 + 5·a·s/h) without parallelism; 10 + 24/t with TP; 34/t with TP + SP.
// Full recomputation keeps only the layer input (E·h, rep) and rebuilds the whole set before the backward.
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

namespace trainsim {

LayerActivations layer_activations(const ModelSpec& m, const Layout& l) {
    const double T = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) / l.cp;
    const double s = static_cast<double>(m.seq_len) / l.cp;
    const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads);
    const double g = static_cast<double>(m.kv_heads), d = static_cast<double>(m.head_dim());
    const double f = static_cast<double>(m.ffn_hidden), t = l.tp;
    const double E = l.activation_bytes();
    const double G = l.precision == Precision::fp8 ? 1.0 : E;
    const double rep = l.sequence_parallel ? t : 1.0;
    const bool flash = l.fused_attention();
    const bool swiglu = m.mlp == MlpKind::swiglu;
    const double drop = m.dropout ? 1.0 : 0.0;

    // The stored tensors of the unrecomputed layer, bytes per GPU, one entry per tensor.
    std::vector<double> all;
    auto rep_t = [&](double per_token) {
        if (per_token > 0) all.push_back(T * per_token / rep);
    };
    auto tp_t = [&](double per_token) {
        if (per_token > 0) all.push_back(T * per_token / t);
    };
    rep_t(E * h);  // the two norm inputs
    rep_t(E * h);
    // QKV and fc1 GEMM inputs. Under TP + SP Megatron saves them sequence-sharded and gathers them again in
    // the backward; torchtitan's DTensor linears save the all-gathered input (whole sequence).
    const double gemm_in = l.framework == Framework::torchtitan ? T * G * h : T * G * h / rep;
    all.push_back(gemm_in);
    all.push_back(gemm_in);
    rep_t(drop * h);
    rep_t(drop * h);
    if (l.adapter != Adapter::none) {
        const auto& tg = l.lora_targets;
        const double per = E * static_cast<double>(l.lora_rank);
        rep_t(per *
              ((tg.qkv ? 3 : 0) + (tg.proj ? 1 : 0) + (tg.fc1 ? (swiglu ? 2 : 1) : 0) + (tg.fc2 ? 1 : 0)));
    }
    const double kv_width = flash ? g * d : a * d;
    tp_t(E * a * d);  // Q, K, V
    tp_t(E * kv_width);
    tp_t(E * kv_width);
    if (flash) {
        tp_t(E * a * d);  // O
        tp_t(4 * a);      // log-sum-exp
        if (G < E) tp_t(G * a * d);
    } else {
        tp_t(G * a * d);
    }
    if (swiglu) {
        tp_t(E * f);  // gate and up outputs
        tp_t(E * f);
    } else {
        tp_t(E * f);
    }
    tp_t(G * f);  // fc2 input
    const double base = std::accumulate(all.begin(), all.end(), 0.0);
    // The s x s scores of unfused attention, per token: softmax output, and with dropout its mask and output.
    const double scores = flash ? 0.0 : T * (E + drop * (1 + E)) * a * s / t;
    const double input = T * E * h / rep;

    // Gradients alive in the layer's backward: the output gradient and the widest intermediate gradient (the
    // fc1 output's, or the unfused attention scores').
    const double widest = std::max(E * (swiglu ? 2 : 1) * f / t, flash ? 0.0 : E * a * s / t);
    LayerActivations out;
    auto& fwd = out.forward_transient_tensors;
    auto& rec = out.recomputed_tensors;
    auto& bwd = out.backward_transient_tensors;
    bwd = {T * E * h / rep, T * widest};
    std::vector<double> with_scores = all;
    if (scores > 0) with_scores.push_back(scores);
    switch (l.recompute) {
        case Recompute::none:
            out.stored_tensors = with_scores;
            break;
        case Recompute::selective:
            // The attention core is recomputed in the backward: its scores exist only then (unfused).
            out.stored_tensors = all;
            if (scores > 0) fwd = rec = {scores};
            break;
        case Recompute::selective_op: {
            auto keep = [&](double bytes) { out.stored_tensors.push_back(bytes); };
            keep(input);              // block input (the checkpoint's input)
            keep(T * E * a * d / t);  // wq output (mm 1)
            keep(T * E * g * d / t);  // wv output (mm 3)
            if (flash) {
                keep(T * E * a * d / t);  // SDPA output
                keep(T * 4 * a / t);      // its log-sum-exp
            }
            keep(T * E * f / t);  // w1 output (mm 5)
            keep(T * E * h);      // w2 output (mm 7), a partial sum under TP
            if (l.tp > 1 && l.sequence_parallel) {
                keep(T * E * h / rep);  // reduce_scatter outputs after wo and w2
                keep(T * E * h / rep);
            }
            const double kept = std::accumulate(out.stored_tensors.begin(), out.stored_tensors.end(), 0.0);
            // The rebuilt set, as tensors of the layer's sizes: the largest of the unrecomputed set first.
            std::vector<double> sizes = all;
            std::sort(sizes.begin(), sizes.end(), std::greater<>());
            double left = std::max(0.0, base - kept);
            for (std::size_t i = 0; left > 0 && !sizes.empty(); i = (i + 1) % sizes.size()) {
                const double x = std::min(left, sizes[i]);
                rec.push_back(x);
                left -= x;
            }
            if (scores > 0) {
                rec.push_back(scores);
                fwd.push_back(scores);
            }
            break;
        }
        case Recompute::full:
            out.stored_tensors = {input};
            fwd = with_scores;
            rec = with_scores;
            break;
    }
    if (l.adapter == Adapter::qlora) {
        // The 16-bit weight of the widest linear layer, dequantized from NF4 for the GEMM.
        const double widest_weight = h * std::max((swiglu ? 2 : 1) * f, (a + 2 * g) * d) / t;
        fwd.push_back(E * widest_weight);
        bwd.push_back(E * widest_weight);
    }
    if (l.precision == Precision::fp8 && !caches_fp8_weights(l)) {
        // fp8 GEMMs without a weight cache (torchao Float8, TE without is_first_microbatch): the fp8 cast of
        // a weight exists only around its GEMM; the widest is counted, 1 B per element.
        const double widest_weight = h * std::max((swiglu ? 2 : 1) * f, (a + 2 * g) * d) / t;
        fwd.push_back(widest_weight);
        bwd.push_back(widest_weight);
    }
    if (l.cp > 1) {
        // Context parallelism: the K and V the attention of this rank reads beyond its own. PyTorch's
        // context_parallel with the default all-gather rotation (torchtitan) gathers the whole sequence's K/V
        // once per attention call; Megatron's p2p ring holds the block being received beside its own.
        const double kv_local = T * E * g * d / t;  // K or V of this rank
        const double kv = l.framework == Framework::torchtitan ? kv_local * l.cp : 2 * kv_local;
        for (auto* v : {&fwd, &bwd}) {
            v->push_back(kv);  // K
            v->push_back(kv);  // V
        }
    }
    auto sum = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); };
    out.stored = sum(out.stored_tensors);
    out.forward_transient = sum(fwd);
    out.recomputed = sum(rec);
    out.backward_transient = sum(bwd);
    return out;
}

}  // namespace trainsim
