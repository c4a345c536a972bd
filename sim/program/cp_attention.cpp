// Context-parallel attention as TransformerEngine runs it for Megatron-Core (cp_comm_type "p2p", the
// default): AttnFuncWithCPAndKVP2P,
// transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py (TE v2.x). One
// fused-attention call per CP step, not one over the whole sequence, and the partial outputs merged with
// their log-sum-exp.
#include "layer_ops.hpp"

namespace trainsim::detail {

namespace {

/// The shapes of one rank's CP steps, in tokens per sequence: the rank holds two load-balanced chunks of
/// s / (2 cp) tokens (its own and the mirrored one). Step 0 is causal attention of the rank's two chunks
/// over themselves; at step i >= 1 the K/V of rank (r - i) mod cp arrive, and TE runs either both query
/// chunks against the first half of those K/V (i <= r) or the second query chunk against all of them
/// (i > r), both non-causal and of equal FLOPs. Rank 0 runs the second kind at every step i >= 1, the query
/// chunk alone (half the query tiles): its sequence is the one timed for every rank of the group (a stage's
/// program is one for its CP ranks; they wait for each other at each step's K/V exchange).
struct CpStepShapes {
    double diagonal_len;  ///< step 0: queries = keys = s / cp, causal
    double query_len;     ///< steps >= 1: s / (2 cp) queries
    double key_len;       ///< steps >= 1: s / cp keys
};

CpStepShapes cp_step_shapes(double s, double cp) {
    return CpStepShapes{s / cp, s / (2 * cp), s / cp};
}

}  // namespace

double BlockBuilder::cp_attention_bytes(double q_len, double kv_len) const {
    // Q and O of the step's queries, K and V of its keys (bytes of one micro-batch on this GPU).
    return E_ * b_ * (q_len * (a_ / t_) + kv_len * (kvh_ / t_)) * (dqk_ + dv_);
}

void BlockBuilder::te_cp_attention_calls(OpTemplate& t, bool backward) {
    // FlashAttention backward per step: 2.5x the forward's matmuls, twice its bytes.
    const double flop_factor = backward ? 2.5 : 1.0, byte_factor = backward ? 2.0 : 1.0;
    const double heads = b_ * a_ / t_;
    const double d = (dqk_ + dv_) / 2;
    const CpStepShapes sh = cp_step_shapes(s_, cp_);
    kernel(t, Kernel::flash(backward ? "cp_attention_bwd_diagonal" : "cp_attention_fwd_diagonal",
                            flop_factor * 0.5 * 4.0 * heads * sh.diagonal_len * sh.diagonal_len * d,
                            byte_factor * cp_attention_bytes(sh.diagonal_len, sh.diagonal_len), l_.attention,
                            {heads, sh.diagonal_len, sh.diagonal_len, d, true, backward}));
    for (int i = 1; i < l_.cp; ++i)
        kernel(t, Kernel::flash(backward ? "cp_attention_bwd_step" : "cp_attention_fwd_step",
                                flop_factor * 4.0 * heads * sh.query_len * sh.key_len * d,
                                byte_factor * cp_attention_bytes(sh.query_len, sh.key_len), l_.attention,
                                {heads, sh.query_len, sh.key_len, d, false, backward}));
}

void BlockBuilder::te_cp_attention_forward(OpTemplate& t) {
    // The K/V blocks go around the CP ring (cp - 1 P2P steps, an all-gather's volume) beside the steps.
    const double kv_full = 2 * E_ * b_ * s_ * kvh_ * (dqk_ + dv_) / 2 / t_;
    cp_collective(t, CollectiveKind::all_gather, kv_full);
    te_cp_attention_calls(t, false);
    // flash_attn_fwd_softmax_lse_correction per step (fp32 LSE of the step's queries: read both, write one)
    // and the output merge: flash_attn_fwd_out_correction_init reads step 0's output and writes the merged
    // one (2 E per output element), each later step's second-half correction reads the step's output and
    // reads and writes the merged half (3 E per element of the half).
    const double out_elements = T_ * (a_ / t_) * dv_;
    const double lse_elements = T_ * (a_ / t_);
    const double steps = cp_ - 1;
    kernel(t, Kernel::memory("cp_out_lse_correction",
                             out_elements * E_ * (2.0 + steps * 1.5) + steps * 0.5 * lse_elements * 12.0));
    tp_wait(t);
}

void BlockBuilder::te_cp_attention_backward(OpTemplate& t) {
    // The K/V blocks go around the ring again and their gradients come back (an all-gather and a
    // reduce-scatter of the full-sequence K/V), beside the steps.
    const double kv_full = 2 * E_ * b_ * s_ * kvh_ * (dqk_ + dv_) / 2 / t_;
    cp_collective(t, CollectiveKind::all_gather, kv_full);
    cp_collective(t, CollectiveKind::reduce_scatter, kv_full);
    te_cp_attention_calls(t, true);
    // The gradients of the steps merged (backward of AttnFuncWithCPAndKVP2P): dq of the second query chunk
    // added per later step (read the step's, read and write the sum: 3 E per element of the half), the
    // block's dK/dV added to the gradient that travels with it (3 E per element of the s / cp keys' K and V).
    const double dq_elements = T_ * (a_ / t_) * dqk_;
    const double dkv_elements = b_ * (s_ / cp_) * (kvh_ / t_) * (dqk_ + dv_);
    const double steps = cp_ - 1;
    kernel(t, Kernel::memory("cp_grad_accumulate", steps * (0.5 * dq_elements + dkv_elements) * 3.0 * E_));
    tp_wait(t);
}

}  // namespace trainsim::detail
