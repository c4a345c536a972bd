// Multi-head latent attention (DeepSeek-V2/V3) as Megatron-Core runs it: MLASelfAttention
// (megatron/core/transformer/multi_latent_attention.py) with the TransformerEngine layer spec
// (megatron/core/models/gpt/gpt_layer_specs.py, multi_latent_attention branch). Per GPU and micro-batch, with
// T = b·s/cp tokens, Tsp = T/t with sequence parallelism (else T), a heads, d = qk_head_dim (head_dim()),
// r = qk_rope_head_dim, v = v_head_dim, qr = q_lora_rank, kr = kv_lora_rank, E = 2 bytes:
//   linear_q_down_proj   TELinear, parallel_mode "duplicated": NOT split by TP, every TP rank holds the
//                        whole h x qr weight and runs it on its own tokens (Tsp: the sequence-parallel shard,
//                        so there is no TP collective before it): GEMM [Tsp, h] x [h, qr]
//   linear_kv_down_proj  the same, h x (kr + r): GEMM [Tsp, h] x [h, kr + r]
//   k_pos_emb            with SP and TP > 1 the rotary key part [Tsp, r] is all-gathered over TP
//                        (gather_from_sequence_parallel_region)
//   linear_q_up_proj     TELayerNormColumnParallelLinear (the q RMSNorm fused in, qk_layernorm): the norm
//                        over [Tsp, qr], the all-gather of its output over TP (SP), GEMM [T, qr] x
//                        [qr, a·(d + r)/t]
//   linear_kv_up_proj    the same with the kv norm: [T, kr] x [kr, a·(d + v)/t]
//   RoPE                 the fused MLA RoPE kernels (megatron/core/fusions/fused_mla_yarn_rope_apply.py,
//                        YaRN with apply_rope_fusion): q read and written in place (2·E·a·(d + r)/t per
//                        token); kv and k_pos_emb read, key (a·(d + r)) and value (a·v) written (E·(a·(d + v)
//                        /t + r + a·(d + r)/t + a·v/t)); backward the same bytes
//   core attention       fused attention with query/key heads d + r and value heads v wide (every head its
//   own
//                        K and V: no grouping), attention_core_forward / _backward (layer_ops.cpp)
//   linear_proj          row parallel [T, a·v/t] x [a·v/t, h], then the TP all-reduce / reduce-scatter
// Without q_lora_rank the query is one column-parallel linear_q_proj [T, h] x [h, a·(d + r)/t] fed by the SP
// all-gather of the input norm's output. The backward reverses it: linear_proj's dgrad / wgrad, the core,
// RoPE, each up-projection's dgrad (its input gradient reduce-scattered over TP with SP) and wgrad and its
// norm, the k_pos_emb gradient's reduce-scatter, the down-projections' dgrad and wgrad, and the sum of the
// two input gradients (read 2, write 1 element per token and hidden unit). Not modelled: the per-step TP
// all-reduce of the replicated down-projection weights' gradients under SP (Megatron's
// _allreduce_non_tensor_model_parallel_grads); LoRA / QLoRA adapters on MLA (refused).
#include <fmt/format.h>

#include "layer_ops.hpp"
#include "trainsim/errors.hpp"

namespace trainsim::detail {

namespace {
struct MlaShape {
    double qr, kr, rope, q_out, kv_out, down_tokens;
};
MlaShape mla_shape(const ModelSpec& m, const Layout& l, double a, double d, double t, double T, double Tsp) {
    MlaShape x;
    x.qr = static_cast<double>(m.q_lora_rank);
    x.kr = static_cast<double>(m.kv_lora_rank);
    x.rope = static_cast<double>(m.qk_rope_head_dim);
    x.q_out = a * (d + x.rope) / t;                              // q up-projection outputs per GPU
    x.kv_out = a * (d + static_cast<double>(m.v_head_dim)) / t;  // kv up-projection outputs per GPU
    x.down_tokens = l.sequence_parallel ? Tsp : T;               // the duplicated down-projections'
    return x;
}
}  // namespace

void BlockBuilder::mla_up_proj_forward(OpTemplate& t) {
    const MlaShape x = mla_shape(m_, l_, a_, d_, t_, T_, Tsp_);
    const bool sp = l_.sequence_parallel;
    const bool ov = l_.tp_comm_overlap;
    // TELayerNormColumnParallelLinear: the norm on the shard, the all-gather of its output (SP), the GEMM.
    auto up = [&](const char* norm, const char* gemm, double in, double out) {
        kernel(t, Kernel::memory(norm, norm_fwd_bytes() * in * Tsp_));
        fp8_forward_casts(t, T_ * in, in * out, true);
        if (sp) {
            tp(t, CollectiveKind::all_gather, T_ * in * E_, !ov);
            kernel(t, Kernel::gemm(gemm, T_, out, in, 1, gemm_elem_));
            if (ov) tp_wait(t);
        } else {
            kernel(t, Kernel::gemm(gemm, T_, out, in, 1, gemm_elem_));
        }
    };
    if (m_.q_lora_rank > 0) {
        up("q_norm", "q_up_proj_gemm", x.qr, x.q_out);
    } else {
        fp8_forward_casts(t, T_ * h_, h_ * x.q_out);
        if (sp) tp(t, CollectiveKind::all_gather, T_ * h_ * E_, true);
        kernel(t, Kernel::gemm("q_proj_gemm", T_, x.q_out, h_, 1, gemm_elem_));
    }
    up("kv_norm", "kv_up_proj_gemm", x.kr, x.kv_out);
    kernel(t, Kernel::memory("mla_rope_q", 2 * E_ * T_ * x.q_out));
    kernel(t, Kernel::memory("mla_rope_kv", E_ * T_ * (x.kv_out + x.rope + x.q_out + a_ * dv_ / t_)));
}

void BlockBuilder::mla_forward(OpTemplate& t) {
    if (l_.adapter != Adapter::none)
        throw InputError(
            fmt::format("layout.adapter = \"{}\" with model.attention_type = \"mla\": adapters "
                        "on multi-head latent attention are not modelled",
                        to_string(l_.adapter)));
    const MlaShape x = mla_shape(m_, l_, a_, d_, t_, T_, Tsp_);
    // The duplicated down-projections (no TP collective), each quantizing its input in fp8 runs.
    if (m_.q_lora_rank > 0) {
        fp8_forward_casts(t, x.down_tokens * h_, h_ * x.qr);
        kernel(t, Kernel::gemm("q_down_proj_gemm", x.down_tokens, x.qr, h_, 1, gemm_elem_));
    }
    fp8_forward_casts(t, x.down_tokens * h_, h_ * (x.kr + x.rope));
    kernel(t, Kernel::gemm("kv_down_proj_gemm", x.down_tokens, x.kr + x.rope, h_, 1, gemm_elem_));
    if (l_.sequence_parallel) tp(t, CollectiveKind::all_gather, T_ * x.rope * E_, true);  // k_pos_emb
    mla_up_proj_forward(t);
    attention_core_forward(t);
    const double o = a_ * dv_ / t_;  // the core's output width per GPU
    fp8_forward_casts(t, T_ * o, o * h_);
    row_forward(t, Kernel::gemm("attn_proj_gemm", T_, h_, o, 1, gemm_elem_));
}

void BlockBuilder::mla_backward(OpTemplate& t) {
    const MlaShape x = mla_shape(m_, l_, a_, d_, t_, T_, Tsp_);
    const bool sp = l_.sequence_parallel;
    const bool frozen = l_.frozen_base();
    const double o = a_ * dv_ / t_;
    // linear_proj (row parallel): with SP the output gradient is all-gathered first.
    fp8_backward_casts(t, T_ * h_, T_ * o, o * h_);
    row_backward(t, Kernel::gemm("attn_proj_dgrad", T_, o, h_, 1, gemm_elem_),
                 Kernel::gemm("attn_proj_wgrad", h_, o, T_, 1, gemm_elem_));
    attention_core_backward(t);
    kernel(t, Kernel::memory("mla_rope_kv_bwd", E_ * T_ * (x.kv_out + x.rope + x.q_out + a_ * dv_ / t_)));
    kernel(t, Kernel::memory("mla_rope_q_bwd", 2 * E_ * T_ * x.q_out));
    // Column-parallel up-projection backward (column_backward): the SP input regathered and overlapped with
    // dgrad, the input gradient reduce-scattered (all-reduced) and overlapped with wgrad, then the fused
    // norm's backward on the shard.
    auto up_bwd = [&](const char* dgrad, const char* wgrad, const char* norm, double in, double out) {
        fp8_backward_casts(t, T_ * out, T_ * in, in * out, true);
        column_backward(t, Kernel::gemm(dgrad, T_, in, out, 1, gemm_elem_),
                        Kernel::gemm(wgrad, out, in, T_, 1, gemm_elem_), in);
        if (norm != nullptr) kernel(t, Kernel::memory(norm, norm_bwd_bytes() * in * Tsp_));
    };
    up_bwd("kv_up_proj_dgrad", "kv_up_proj_wgrad", "kv_norm_bwd", x.kr, x.kv_out);
    if (m_.q_lora_rank > 0)
        up_bwd("q_up_proj_dgrad", "q_up_proj_wgrad", "q_norm_bwd", x.qr, x.q_out);
    else
        up_bwd("q_proj_dgrad", "q_proj_wgrad", nullptr, h_, x.q_out);
    if (sp) tp(t, CollectiveKind::reduce_scatter, T_ * x.rope * E_, true);  // k_pos_emb's gradient
    // The duplicated down-projections, then the sum of their input gradients.
    fp8_backward_casts(t, x.down_tokens * (x.kr + x.rope), x.down_tokens * h_, h_ * (x.kr + x.rope));
    kernel(t, Kernel::gemm("kv_down_proj_dgrad", x.down_tokens, h_, x.kr + x.rope, 1, gemm_elem_));
    if (!frozen)
        kernel(t, Kernel::gemm("kv_down_proj_wgrad", x.kr + x.rope, h_, x.down_tokens, 1, gemm_elem_));
    if (m_.q_lora_rank > 0) {
        fp8_backward_casts(t, x.down_tokens * x.qr, x.down_tokens * h_, h_ * x.qr);
        kernel(t, Kernel::gemm("q_down_proj_dgrad", x.down_tokens, h_, x.qr, 1, gemm_elem_));
        if (!frozen) kernel(t, Kernel::gemm("q_down_proj_wgrad", x.qr, h_, x.down_tokens, 1, gemm_elem_));
    }
    kernel(t, Kernel::memory("mla_input_grad_add", 3 * E_ * x.down_tokens * h_));
}

// Multi-token prediction (megatron/core/transformer/multi_token_prediction.py, MultiTokenPredictionLayer
// _concat_embeddings): enorm on the next token's embedding and hnorm on the hidden state (Tsp tokens each),
// their concatenation (read 2·h, write 2·h per token), eh_proj ColumnParallelLinear [T, 2h] x [2h, h/t]
// (with SP its input all-gathered), then gather_from_tensor_model_parallel_region: its [T, h/t] output
// all-gathered over TP to [T, h] (and re-split to the sequence shard with SP). Backward: the split's
// gradient needs no communication, the SP re-split's is an all-gather; eh_proj's dgrad and wgrad with the
// input gradient reduce-scattered (all-reduced); the cat and the two norms.
OpTemplate BlockBuilder::mtp_forward() {
    OpTemplate t;
    const bool sp = l_.sequence_parallel;
    kernel(t, Kernel::memory("mtp_enorm", norm_fwd_bytes() * h_ * Tsp_));
    kernel(t, Kernel::memory("mtp_hnorm", norm_fwd_bytes() * h_ * Tsp_));
    kernel(t, Kernel::memory("mtp_concat", 4 * E_ * h_ * Tsp_));
    fp8_forward_casts(t, T_ * 2 * h_, 2 * h_ * h_ / t_);
    if (sp) tp(t, CollectiveKind::all_gather, T_ * 2 * h_ * E_, true);
    kernel(t, Kernel::gemm("mtp_eh_proj_gemm", T_, h_ / t_, 2 * h_, 1, gemm_elem_));
    tp(t, CollectiveKind::all_gather, T_ * h_ * E_, true);
    flush(t);
    return t;
}

OpTemplate BlockBuilder::mtp_backward() {
    OpTemplate t;
    const bool sp = l_.sequence_parallel;
    if (sp) tp(t, CollectiveKind::all_gather, T_ * h_ * E_, true);
    fp8_backward_casts(t, T_ * h_ / t_, T_ * 2 * h_, 2 * h_ * h_ / t_);
    const bool regather = regathers_in_backward();
    if (regather) tp(t, CollectiveKind::all_gather, T_ * 2 * h_ * E_, false);
    kernel(t, Kernel::gemm("mtp_eh_proj_dgrad", T_, 2 * h_, h_ / t_, 1, gemm_elem_));
    if (regather) tp_wait(t);
    tp(t, sp ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, T_ * 2 * h_ * E_, false);
    if (!l_.frozen_base()) kernel(t, Kernel::gemm("mtp_eh_proj_wgrad", h_ / t_, 2 * h_, T_, 1, gemm_elem_));
    tp_wait(t);
    kernel(t, Kernel::memory("mtp_concat_bwd", 4 * E_ * h_ * Tsp_));
    kernel(t, Kernel::memory("mtp_hnorm_bwd", norm_bwd_bytes() * h_ * Tsp_));
    kernel(t, Kernel::memory("mtp_enorm_bwd", norm_bwd_bytes() * h_ * Tsp_));
    flush(t);
    return t;
}

}  // namespace trainsim::detail
