// An MoE layer's MLP as Megatron-Core runs it with the alltoall token dispatcher
// (megatron/core/transformer/moe/: router.py TopKRouter, token_dispatcher.py MoEAlltoAllTokenDispatcher,
// experts.py TEGroupedMLP, moe_layer.py MoELayer). Per GPU and micro-batch, with Tr the tokens entering the
// layer on this GPU (T / t with sequence parallelism, which Megatron requires for MoE with TP), k =
// moe_top_k, n = num_experts, h hidden, E = 2 bytes:
//   forward   router GEMM [Tr, h] x [h, n]; softmax and top-k over the Tr x n logits; permute (gather the
//             k copies of each token by expert: read and write k·Tr·h·E); dispatch all-to-all over the EP
//             group (k·Tr·h·E per rank, (ep-1)/ep of it off-rank); with expert TP > 1 an all-gather of the
//             received tokens over the expert-TP group; the local experts' GEMMs (n / ep experts, one GEMM
//             per expert and linear layer: TE's grouped GEMM runs them as one kernel each, timed here as
//             the compute model's GEMM per expert); the activation; the reduce-scatter over expert TP; the
//             combine all-to-all; unpermute (read and write k·Tr·h·E, the probabilities applied).
//   backward  the same in reverse: unpermute's backward, the combine's reverse all-to-all, expert dgrad and
//             wgrad GEMMs (2x the forward FLOPs), the dispatch's reverse all-to-all, permute's backward, the
//             router's backward.
// FP8 (precision fp8): the experts' GEMMs are FP8 GEMMs (TE GroupedLinear, the linear_fc1/linear_fc2 of
// TEGroupedMLP) with the same casts as the dense linear layers (layer_ops.cpp's FP8 notes): the dispatched
// tokens (R·h) before fc1 and the activation's output (R·ffn) before fc2 are quantized in the forward, the
// output gradients (R·h before fc2's dgrad, R·2ffn before fc1's) in the backward; the local experts' weights
// are cast once per step with the rest of the layer's (fp8_weight_casts_per_step). The router and the
// all-to-all stay in 16 bits (Megatron-Core quantizes inside GroupedLinear, after the dispatch).
// Tokens at the busiest EP rank: R = k·Tr·imbalance (dropless; moe_load_imbalance = 1: balanced, every EP
// rank receives on average what it sends), capped at k·Tr·capacity_factor with a capacity factor; each of
// its n / ep local experts gets R·etp / (n / ep) tokens. The all-to-all bytes stay the balanced k·Tr·h·E:
// the EP collective moves each rank's own tokens (the hot rank's receive side is the imbalance's cost in the
// GEMMs; its extra incoming bytes are not modelled).
#include <algorithm>

#include "layer_ops.hpp"

namespace trainsim::detail {

namespace {
/// Router softmax and top-k over the logits, bytes per logit: read the 16-bit logits, write the fp32
/// probabilities, read them for the top-k (router.py: the logits are cast to fp32 for the softmax).
constexpr double kRouterForwardBytesPerLogit = 2.0 + 4.0 + 4.0;
/// Its backward: read the fp32 probabilities and their gradient, write the 16-bit logits' gradient.
constexpr double kRouterBackwardBytesPerLogit = 4.0 + 4.0 + 2.0;
struct MoeShape {
    double tokens = 0;         ///< Tr: tokens entering the layer on this GPU
    double experts = 0;        ///< n: routed experts
    double k = 1;              ///< top-k
    double local_experts = 1;  ///< n / ep
    double received = 0;       ///< R·etp: tokens the busiest rank's experts compute (after the etp gather)
    double per_expert = 0;     ///< received / local_experts
    double etp = 1;            ///< expert TP
    double ffn = 0;            ///< one expert's FFN width on this GPU: expert_ffn() / etp
};

MoeShape moe_shape(const ModelSpec& m, const Layout& l, double tokens) {
    MoeShape x;
    x.tokens = tokens;
    x.experts = static_cast<double>(m.num_experts);
    x.k = static_cast<double>(m.moe_top_k);
    x.local_experts = x.experts / l.ep;
    x.etp = l.expert_tp();
    double load = std::max(1.0, m.moe_load_imbalance);
    if (m.moe_capacity_factor > 0) load = std::min(load, m.moe_capacity_factor);
    x.received = x.k * tokens * load * x.etp;
    x.per_expert = x.received / x.local_experts;
    x.ffn = static_cast<double>(m.expert_ffn()) / x.etp;
    return x;
}
}  // namespace

}  // namespace trainsim::detail

namespace trainsim {

double moe_dispatch_copies_per_token(const ModelSpec& m, const Layout& l) {
    const double k = static_cast<double>(m.moe_top_k);
    if (l.moe_dispatcher == MoeDispatcher::alltoall || l.ep <= 1) return k;
    // P(a rank holds none of the token's k experts) = C(n - nl, k) / C(n, k), nl = n / ep experts per rank.
    const double n = static_cast<double>(m.num_experts);
    const double nl = n / l.ep;
    double miss = 1;
    for (int i = 0; i < m.moe_top_k; ++i)
        miss *= std::max(0.0, (n - nl - i) / (n - i));
    return l.ep * (1 - miss);
}

double moe_expert_bias_bytes_per_element(const ModelSpec& m, const Layout& l, bool backward) {
    if (!m.moe() || !m.moe_expert_bias || l.moe_fused_grouped_mlp) return 0;
    // TEGroupedMLP._apply_bias (experts.py, Megatron-Core b0cc270 = Megatron-Bridge v0.3.0's pin, the same at
    // d0b3b77 = v0.5.0's): per expert `t + b * p`, torch.cat, .to(t.dtype); t the 16-bit fc2 output, b its
    // 16-bit bias, p the routing probabilities: fp32 with the flex dispatchers (token_dispatcher.py: "DeepEP
    // / HybridEP only supports float32 probs", upcast), else the router's logits dtype (router.py
    // topk_softmax_with_capacity: softmax(...).type_as(logits); 16-bit without --moe-router-dtype, which no
    // gpt-oss provider or recipe sets). q: bytes of b * p and t + bp after type promotion.
    const double t = 2.0;
    const double q = l.moe_dispatcher == MoeDispatcher::alltoall ? 2.0 : 4.0;
    const double cast = q != t ? 1.0 : 0.0;  // .to(t.dtype) and its grad are no-ops when q == t
    if (!backward)  // b * p writes; t + bp reads both, writes; cat reads, writes; the cast reads, writes
        return q + (t + q + q) + (q + q) + cast * (q + t);
    // ToCopyBackward (read t, write q); the add's grad cast back to t's dtype (read q, write t);
    // MulBackward's grad · p and grad · b (each read q, write q, then summed to b's / p's shape: read q);
    // SplitBackward's cat of the 16-bit grads (read t, write t).
    return cast * (t + q) + cast * (q + t) + 2 * (3 * q) + (t + t);
}

double moe_activation_clamp_bytes_per_element(const ModelSpec& m, const Layout& l, bool backward) {
    if (!m.moe() || !m.moe_activation_clamp || m.mlp != MlpKind::swiglu || l.moe_fused_grouped_mlp) return 0;
    const double t = 2.0;                     // the 16-bit fc1 output (TE's GroupedLinear output dtype)
    const double b = 1.0;                     // a bool mask
    if (!backward) return (t + t) + (t + t);  // the two clamps (each half), then the cat (the whole)
    // PyTorch's clamp_backward (FunctionsManual.cpp): where(mask, grad, 0), the mask `self <= max` for the
    // gate's half (one comparison), `(self >= min).logical_and_(self <= max)` for the linear half (two
    // comparisons and an in-place and); a comparison reads t, writes b; the and reads b + b, writes b; the
    // where reads b + t, writes t. Per element of the whole: the mean of the two halves, then the chunk's
    // backward (a cat: reads and writes the whole).
    const double compare = t + b, both = b + b + b, where = b + t + t;
    const double gate = compare + where, linear = 2 * compare + both + where;
    return (gate + linear) / 2 + (t + t);
}

}  // namespace trainsim

namespace trainsim::detail {

void BlockBuilder::ep_all_to_all(OpTemplate& t, double bytes) {
    if (l_.ep <= 1) return;
    flush(t);
    Op op;
    op.kind = OpKind::tp_launch;
    op.group = CommGroup::ep;
    op.collective = CollectiveKind::all_to_all;
    op.bytes = bytes;
    t.push_back(op);
    Op wait;
    wait.kind = OpKind::tp_wait;
    t.push_back(wait);
}

void BlockBuilder::etp_collective(OpTemplate& t, CollectiveKind kind, double bytes) {
    if (l_.expert_tp() <= 1) return;
    flush(t);
    Op op;
    op.kind = OpKind::tp_launch;
    op.group = l_.expert_tp() == l_.tp ? CommGroup::tp : CommGroup::etp;
    op.collective = kind;
    op.bytes = bytes;
    t.push_back(op);
    Op wait;
    wait.kind = OpKind::tp_wait;
    t.push_back(wait);
}

void BlockBuilder::moe_forward(OpTemplate& t) {
    const MoeShape x = moe_shape(m_, l_, Tsp_);
    const double swiglu = m_.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    const double a2a = moe_dispatch_copies_per_token(m_, l_) * x.tokens * h_ * E_;
    const double copies = x.k * x.tokens * h_ * E_;  // the k copies permute writes (or the receiver, flex)
    kernel(t, Kernel::gemm("router_gemm", x.tokens, x.experts, h_));
    kernel(t, Kernel::memory("router_softmax_topk", kRouterForwardBytesPerLogit * x.tokens * x.experts));
    kernel(t, Kernel::memory("moe_permute", 2 * copies));
    ep_all_to_all(t, a2a);
    etp_collective(t, CollectiveKind::all_gather, x.received * h_ * E_);
    const int n = static_cast<int>(x.local_experts);
    fp8_forward_casts(t, x.received * h_, x.local_experts * h_ * swiglu * x.ffn);
    for (int e = 0; e < n; ++e)
        kernel(t, Kernel::gemm("expert_fc1_gemm", x.per_expert, swiglu * x.ffn, h_, 1, gemm_elem_));
    moe_activation_forward(t);
    fp8_forward_casts(t, x.received * x.ffn, x.local_experts * x.ffn * h_);
    for (int e = 0; e < n; ++e)
        kernel(t, Kernel::gemm("expert_fc2_gemm", x.per_expert, h_, x.ffn, 1, gemm_elem_));
    moe_expert_bias(t, false);
    etp_collective(t, CollectiveKind::reduce_scatter, x.received * h_ * E_);
    ep_all_to_all(t, a2a);
    kernel(t, Kernel::memory("moe_unpermute", 2 * copies));
}

// The kernels of TEGroupedMLP._apply_bias as PyTorch launches them (bytes: moe_expert_bias_bytes_per_element,
// whose split they follow): forward, per local expert, b * p and t + bp, then one cat and one cast; backward,
// once the cast's grad, per expert the add's grad cast (fp32 p only) and MulBackward's two products and their
// two sums, then split's cat. Each kernel pays the compute model's kernel overhead.
void BlockBuilder::moe_expert_bias(OpTemplate& t, bool backward) {
    const double total = moe_expert_bias_bytes_per_element(m_, l_, backward);
    if (total <= 0) return;
    const MoeShape x = moe_shape(m_, l_, Tsp_);
    const int n = static_cast<int>(x.local_experts);
    const double q = l_.moe_dispatcher == MoeDispatcher::alltoall ? 2.0 : 4.0;  // as in the bytes' function
    const bool cast = q != 2.0;
    const double rows = x.per_expert * h_;  // elements of one expert's output
    if (!backward) {
        for (int e = 0; e < n; ++e) {
            kernel(t, Kernel::memory("expert_fc2_bias_mul", q * rows));
            kernel(t, Kernel::memory("expert_fc2_bias_add", (2.0 + 2 * q) * rows));
        }
        kernel(t, Kernel::memory("expert_fc2_bias_cat", 2 * q * x.received * h_));
        if (cast) kernel(t, Kernel::memory("expert_fc2_bias_cast", (q + 2.0) * x.received * h_));
        return;
    }
    if (cast) kernel(t, Kernel::memory("expert_fc2_bias_cast_bwd", (2.0 + q) * x.received * h_));
    for (int e = 0; e < n; ++e) {
        if (cast) kernel(t, Kernel::memory("expert_fc2_bias_add_bwd", (q + 2.0) * rows));
        for (int g = 0; g < 2; ++g) {  // grad · p for b, grad · b for p: the product, then its sum
            kernel(t, Kernel::memory("expert_fc2_bias_mul_bwd", 2 * q * rows));
            kernel(t, Kernel::memory("expert_fc2_bias_sum_bwd", q * rows));
        }
    }
    kernel(t, Kernel::memory("expert_fc2_bias_cat_bwd", 4.0 * x.received * h_));
}

// The kernels of the eager clamp before the experts' activation (bytes:
// moe_activation_clamp_bytes_per_element, whose split they follow): forward, a clamp of each half of fc1's
// output, then their cat; backward, the gate half's ClampBackward (a comparison and a where), the linear
// half's (two comparisons, an and, a where), then the chunk's backward (a cat). Each kernel pays the compute
// model's kernel overhead (clamp_backward's two one-element zero fills are not counted).
void BlockBuilder::moe_activation_clamp(OpTemplate& t, bool backward) {
    if (moe_activation_clamp_bytes_per_element(m_, l_, backward) <= 0) return;
    const MoeShape x = moe_shape(m_, l_, Tsp_);
    const double half = x.received * x.ffn;  // elements of one half (gate or linear) of fc1's output
    if (!backward) {
        for (int g = 0; g < 2; ++g)
            kernel(t, Kernel::memory("expert_act_clamp", 4.0 * half));  // reads and writes its half
        kernel(t, Kernel::memory("expert_act_clamp_cat", 8.0 * half));
        return;
    }
    // 16-bit values, bool masks: a comparison 2 + 1 B per element, the and 1 + 1 + 1, the where 1 + 2 + 2.
    kernel(t, Kernel::memory("expert_act_clamp_bwd_compare", 3.0 * half));  // gate: self <= max
    kernel(t, Kernel::memory("expert_act_clamp_bwd_where", 5.0 * half));
    for (int c = 0; c < 2; ++c)  // linear: self >= min, self <= max
        kernel(t, Kernel::memory("expert_act_clamp_bwd_compare", 3.0 * half));
    kernel(t, Kernel::memory("expert_act_clamp_bwd_and", 3.0 * half));
    kernel(t, Kernel::memory("expert_act_clamp_bwd_where", 5.0 * half));
    kernel(t, Kernel::memory("expert_act_clamp_cat_bwd", 8.0 * half));
}

void BlockBuilder::moe_activation_forward(OpTemplate& t) {
    const MoeShape x = moe_shape(m_, l_, Tsp_);
    moe_activation_clamp(t, false);
    kernel(t, Kernel::memory(m_.mlp == MlpKind::swiglu ? "expert_swiglu" : "expert_gelu",
                             act_fwd_bytes() * x.received * x.ffn));
}

void BlockBuilder::moe_backward(OpTemplate& t) {
    const MoeShape x = moe_shape(m_, l_, Tsp_);
    const double swiglu = m_.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    const double a2a = moe_dispatch_copies_per_token(m_, l_) * x.tokens * h_ * E_;
    const double copies = x.k * x.tokens * h_ * E_;
    const bool frozen = l_.frozen_base();
    const int n = static_cast<int>(x.local_experts);
    kernel(t, Kernel::memory("moe_unpermute_bwd", 2 * copies));
    ep_all_to_all(t, a2a);
    etp_collective(t, CollectiveKind::all_gather, x.received * h_ * E_);
    moe_expert_bias(t, true);
    fp8_backward_casts(t, x.received * h_, x.received * x.ffn, x.local_experts * x.ffn * h_);
    for (int e = 0; e < n; ++e)
        kernel(t, Kernel::gemm("expert_fc2_dgrad", x.per_expert, x.ffn, h_, 1, gemm_elem_));
    if (!frozen)
        for (int e = 0; e < n; ++e)
            kernel(t, Kernel::gemm("expert_fc2_wgrad", h_, x.ffn, x.per_expert, 1, gemm_elem_));
    kernel(t, Kernel::memory(m_.mlp == MlpKind::swiglu ? "expert_swiglu_bwd" : "expert_gelu_bwd",
                             act_bwd_bytes() * x.received * x.ffn));
    moe_activation_clamp(t, true);
    fp8_backward_casts(t, x.received * swiglu * x.ffn, x.received * h_,
                       x.local_experts * h_ * swiglu * x.ffn);
    for (int e = 0; e < n; ++e)
        kernel(t, Kernel::gemm("expert_fc1_dgrad", x.per_expert, h_, swiglu * x.ffn, 1, gemm_elem_));
    if (!frozen)
        for (int e = 0; e < n; ++e)
            kernel(t, Kernel::gemm("expert_fc1_wgrad", swiglu * x.ffn, h_, x.per_expert, 1, gemm_elem_));
    etp_collective(t, CollectiveKind::reduce_scatter, x.received * h_ * E_);
    ep_all_to_all(t, a2a);
    kernel(t, Kernel::memory("moe_permute_bwd", 2 * copies));
    kernel(t, Kernel::memory("router_softmax_topk_bwd", kRouterBackwardBytesPerLogit * x.tokens * x.experts));
    kernel(t, Kernel::gemm("router_dgrad", x.tokens, h_, x.experts));
    if (!frozen) kernel(t, Kernel::gemm("router_wgrad", x.experts, h_, x.tokens));
}

}  // namespace trainsim::detail
