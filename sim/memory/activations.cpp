// Stored activations of one transformer layer for one micro-batch (docs/memory.md, "Activations").
//
// Per token of this GPU (T = b·s/cp tokens), 16-bit tensors (E = 2 B), 1-byte dropout masks. "rep" terms
// are not split by TP without sequence parallelism (the LayerNorm region), "tp" terms are split by t:
//   norm inputs            2·E·h                       rep   (two norms)
//   QKV GEMM input         G·h                         rep   (G = E, or 1 B when fp8 GEMMs keep fp8 inputs)
//   Q                      E·a·d                       tp
//   K, V                   2·E·w                       tp    (w = g·d with flash attention, which takes GQA
//                                                              as is; a·d unfused: Megatron repeats K, V)
//   scores (unfused, no recompute)  E·a·s softmax out, + (1 + E)·a·s mask and dropout out with dropout
//   flash attention        E·a·d output O, 4·a fp32 log-sum-exp per head                    tp
//   projection input       G·a·d (unfused; flash: O itself, or its fp8 copy G·a·d)           tp
//   fc1 input              G·h                         rep
//   MLP                    GeLU: E·f in, G·f out; SwiGLU: E·2f in (gate, up), G·f out          tp
//   dropout masks          2·h with dropout (after attention and MLP)                        rep
//   LoRA                   E·r per targeted projection (x·A)                                 rep
// For a GPT layer (g = a, f = 4h, dropout, 16-bit) this is Korthikanti et al. 2022 Sec. 4.1:
// s·b·h·(34 + 5·a·s/h) without parallelism; 10 + 24/t with TP; 34/t with TP + SP.
// Full recomputation keeps only the layer input (E·h, rep) and rebuilds the whole set before the backward.
#include <algorithm>

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

    double lora = 0;
    if (l.adapter != Adapter::none) {
        const auto& tg = l.lora_targets;
        const double per = E * static_cast<double>(l.lora_rank);
        lora =
            per * ((tg.qkv ? 3 : 0) + (tg.proj ? 1 : 0) + (tg.fc1 ? (swiglu ? 2 : 1) : 0) + (tg.fc2 ? 1 : 0));
    }
    const double rep_bytes = 2 * E * h + G * h + G * h + 2 * drop * h + lora;
    const double kv_width = flash ? g * d : a * d;
    double tp_bytes = E * a * d + 2 * E * kv_width;
    if (flash)
        tp_bytes += E * a * d + 4 * a + (G < E ? G * a * d : 0.0);
    else
        tp_bytes += G * a * d;
    tp_bytes += swiglu ? E * 2 * f + G * f : E * f + G * f;
    // The s x s scores of unfused attention, per token: softmax output, and with dropout its mask and output.
    const double scores = flash ? 0.0 : (E + drop * (1 + E)) * a * s;

    const double base = T * (rep_bytes / rep + tp_bytes / t);
    const double with_scores = base + T * scores / t;
    const double input = T * E * h / rep;

    // Gradients alive in the layer's backward: the output gradient and the widest intermediate gradient (the
    // fc1 output's, or the unfused attention scores').
    const double widest = std::max(E * (swiglu ? 2 : 1) * f / t, flash ? 0.0 : E * a * s / t);
    LayerActivations out;
    out.backward_transient = T * (E * h / rep + widest);
    switch (l.recompute) {
        case Recompute::none:
            out.stored = with_scores;
            break;
        case Recompute::selective:
        case Recompute::selective_op:  // placeholder until torchtitan's per-op SAC is modelled
            // The attention core is recomputed in the backward: its scores exist only then (unfused).
            out.stored = base;
            out.forward_transient = T * scores / t;
            out.recomputed = T * scores / t;
            break;
        case Recompute::full:
            out.stored = input;
            out.forward_transient = with_scores;
            out.recomputed = with_scores;
            break;
    }
    if (l.adapter == Adapter::qlora) {
        // The 16-bit weight of the widest linear layer, dequantized from NF4 for the GEMM.
        const double widest_weight = h * std::max((swiglu ? 2 : 1) * f, (a + 2 * g) * d) / t;
        out.forward_transient += E * widest_weight;
        out.backward_transient += E * widest_weight;
    }
    return out;
}

}  // namespace trainsim
