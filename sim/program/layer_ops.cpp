// Kernels of one transformer layer and of the embedding, LM head and optimizer, per GPU, from the shapes.
// Notation: b micro-batch, s sequence, h hidden, a heads, g KV heads, d head dim, f ffn width, t TP, V vocab,
// T = b·s tokens, Tsp = T/t tokens in the sequence-parallel regions (T without SP), E = 2 bytes per
// activation. Element-wise byte counts (read + write) per kernel, from the tensors each kernel touches in
// Megatron-LM:
//   LayerNorm/RMSNorm fwd 2·E·h per token, bwd 4·E·h; bias-dropout-add fwd (3E+1)·h (x, residual, out, 1-byte
//   mask), bwd the same; GeLU fwd 2·E·f/t, bwd 3·E·f/t; SwiGLU fwd 3·E·f/t, bwd 5·E·f/t; unfused attention
//   (fused scale-mask-softmax, then dropout; Megatron fused_softmax): softmax fwd 2E, dropout fwd 2E+1,
//   backward 3E and 2E+1 bytes per score element, b·(a/t)·s² elements; vocab-parallel cross-entropy
//   (Megatron-LM tensor_parallel/cross_entropy.py on logits.float()): forward 38 bytes per logit (cast to
//   fp32 2+4, max 4, subtract max 8, exp in place 8, sum 4, divide in place 8), backward 14 (scale the saved
//   softmax 8, cast back to 16 bits 4+2). Fused (Layout::cross_entropy_fusion, TransformerEngine
//   pytorch/triton/cross_entropy.py): forward 6 bytes per logit (online max and sum of exponentials read
//   E; loss and gradient pass read E, write the gradient in place E), backward 4 (the gradient scaled by
//   the loss's gradient, read and write E). flash-attn's fused CrossEntropyLoss (Composer / llm-foundry,
//   whose `loss_fn` defaults to `fused_crossentropy`: llmfoundry/models/mpt/modeling_mpt.py): forward 2E per
//   logit (the max and the sum of exponentials over each row of 16-bit logits: apex's xentropy kernel, which
//   flash-attn 1.0.x, pinned by llm-foundry's `gpu` extra until 2024, calls), backward 2E (read the logits,
//   write the gradient).
#include "layer_ops.hpp"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim {

double rope_unfused_bytes_per_element(const ModelSpec& m, const Layout& l, bool backward) {
    if (l.framework != Framework::megatron || m.mla() || m.yarn_concentration_factor == 1.0) return 0;
    const double e = l.activation_bytes();
    // Forward: t * cos_, the negated half, the rotate-half cat, * sin_, the sum, the final cat.
    if (!backward) return 2 * e + e + 2 * e + 2 * e + 3 * e + 2 * e;
    // Backward: grad * sin_, the negation, the chunk's cat, grad * cos_, the branches' sum, t_pass's zero
    // fill and its sum.
    return 2 * e + e + 2 * e + 2 * e + 3 * e + e + 3 * e;
}

namespace {
/// Keys per tile of a fused attention kernel's key loop: FlashAttention-2's forward at head_dim 64-128
/// (kBlockN 128 at d 64, flash_fwd_launch_template.h) and cuDNN's 128-row tiles (compute_model.cpp).
constexpr double kWindowKeyTile = 128;
}  // namespace

double window_key_span(double seq_len, double window) {
    // The kernel skips the key tiles wholly outside the band (FlashAttention-2 window_size: n_block_min /
    // n_block_max in flash_fwd_kernel.h; cuDNN's sliding-window mask likewise) and computes the tiles the
    // band cuts: query tile m of M = s / 128 computes min(m, W) whole key tiles, W = ceil(w / 128), and the
    // diagonal one, which counts half as in the causal triangle (0.5 · s keys per query). The mean over the
    // query tiles: 128 · (W + 1/2 - W (W + 1) / (2M)), W at most M - 1, where it is the causal 0.5 · s.
    const double m = seq_len / kWindowKeyTile;
    if (m <= 1) return 0.5 * seq_len;
    const double w = std::min(std::ceil(window / kWindowKeyTile), std::ceil(m) - 1);
    return std::min(0.5 * seq_len, kWindowKeyTile * (w + 0.5 - w * (w + 1) / (2 * m)));
}

bool repeats_kv(const ModelSpec& m, const Layout& l) {
    return !m.mla() && l.framework == Framework::torchtitan && m.kv_heads < m.heads;
}

}  // namespace trainsim

namespace trainsim::detail {

namespace {
constexpr double kFusedCrossEntropyFwdBytes = 6.0;
constexpr double kFusedCrossEntropyBwdBytes = 4.0;
constexpr double kFlashAttnCrossEntropyFwdBytesPerE = 2.0;  ///< times E per logit (header)
constexpr double kFlashAttnCrossEntropyBwdBytesPerE = 2.0;
}  // namespace

BlockBuilder::BlockBuilder(const ModelSpec& m, const Layout& l, std::vector<Segment>& segments)
    : m_(m), l_(l), segments_(segments) {
    b_ = static_cast<double>(l.micro_batch);
    s_ = static_cast<double>(m.seq_len);
    h_ = static_cast<double>(m.hidden);
    a_ = static_cast<double>(m.heads);
    g_ = static_cast<double>(m.kv_heads);
    d_ = static_cast<double>(m.head_dim());
    f_ = static_cast<double>(m.ffn_hidden);
    t_ = static_cast<double>(l.tp);
    V_ = static_cast<double>(m.vocab);
    cp_ = static_cast<double>(l.cp);
    T_ = b_ * s_ / cp_;  // tokens of this GPU: context parallelism splits the sequence
    Tsp_ = l.sequence_parallel ? T_ / t_ : T_;
    E_ = l.activation_bytes();
    fp8_ = l.precision == Precision::fp8;
    gemm_elem_ = fp8_ ? 1.0 : 2.0;
    shared_f_ = static_cast<double>(m.moe_shared_expert_ffn_hidden);
    dqk_ = m.mla() ? d_ + static_cast<double>(m.qk_rope_head_dim) : d_;
    dv_ = m.mla() ? static_cast<double>(m.v_head_dim) : d_;
    repeat_kv_ = repeats_kv(m, l);  // the attention core and CP's K/V collectives see a heads
    kvh_ = m.mla() || repeat_kv_ ? a_ : g_;
}

void BlockBuilder::kernel(OpTemplate& /*t*/, const Kernel& k) {
    open_.push_back(k);
    // TransformerEngine's FP8 attention: every fused-attention call (also ring attention's per-step calls)
    // runs cuDNN's FP8 kernel (Layout::fp8_attention; the casts around it: fp8_attention_casts).
    if (k.kind == KernelKind::flash_attention && l_.fp8_attention) open_.back().fp8 = true;
}

// TE FusedAttnFunc with fp8_dpa and not fp8_mha (dot_product_attention/backends.py): forward, Q, K and V
// quantized (read E, write 1 per element) and the FP8 output dequantized to 16 bits (read 1, write E);
// backward, the output gradient quantized and dQ, dK, dV dequantized. Per micro-batch on this GPU.
void BlockBuilder::fp8_attention_casts(OpTemplate& t, bool backward) {
    if (!l_.fp8_attention || !l_.fused_attention()) return;
    const double q = T_ * a_ * dqk_ / t_, kv = T_ * kvh_ * (dqk_ + dv_) / t_, o = T_ * a_ * dv_ / t_;
    if (!backward) {
        kernel(t, Kernel::memory("fp8_attention_cast_qkv", (E_ + 1) * (q + kv)));
        kernel(t, Kernel::memory("fp8_attention_dequantize_out", (1 + E_) * o));
    } else {
        kernel(t, Kernel::memory("fp8_attention_cast_grad_out", (E_ + 1) * o));
        kernel(t, Kernel::memory("fp8_attention_dequantize_grads", (1 + E_) * (q + kv)));
    }
}

void BlockBuilder::flush(OpTemplate& t) {
    if (open_.empty()) return;
    Segment seg;
    // Kernel names joined by '+'; a run of kernels of one name is written once with its count ("x 1120").
    for (std::size_t i = 0; i < open_.size();) {
        std::size_t j = i + 1;
        while (j < open_.size() && std::string_view(open_[j].name) == open_[i].name)
            ++j;
        if (!seg.name.empty()) seg.name.push_back('+');
        seg.name.append(open_[i].name);
        if (j - i > 1) seg.name.append(fmt::format(" x {}", j - i));
        for (std::size_t k = i; k < j; ++k)
            seg.flops += open_[k].flops;
        i = j;
    }
    seg.kernels = std::move(open_);
    open_.clear();
    Op op;
    op.kind = OpKind::compute;
    op.segment = static_cast<int>(segments_.size());
    segments_.push_back(std::move(seg));
    t.push_back(op);
}

void BlockBuilder::tp(OpTemplate& t, CollectiveKind kind, double bytes, bool wait) {
    if (l_.tp <= 1) return;
    // funcol's chunk + cat around a dim-1 collective (funcol_chunk_cat): before a reduce-scatter, after an
    // all-gather's wait. (Every all-gather it applies to is waited for here.)
    const bool cat = funcol_chunk_cat() && kind != CollectiveKind::all_reduce;
    if (cat && kind == CollectiveKind::reduce_scatter)
        kernel(t, Kernel::memory("funcol_chunk_cat", 2 * bytes));
    flush(t);
    Op op;
    op.kind = OpKind::tp_launch;
    op.collective = kind;
    op.bytes = bytes;
    t.push_back(op);
    if (wait) tp_wait(t);
    if (cat && kind == CollectiveKind::all_gather && wait)
        kernel(t, Kernel::memory("funcol_chunk_cat", 2 * bytes));
}

bool BlockBuilder::funcol_chunk_cat() const {
    return l_.framework == Framework::torchtitan && l_.tp > 1 && l_.sequence_parallel &&
           (!l_.tp_comm_overlap || unfused_tp_);
}

void BlockBuilder::tp_unfused(OpTemplate& t, CollectiveKind kind, double bytes, bool wait) {
    unfused_tp_ = true;
    tp(t, kind, bytes, wait);
    unfused_tp_ = false;
}

bool BlockBuilder::symm_mem_tp() const {
    return l_.framework == Framework::torchtitan && l_.tp_comm_overlap && l_.tp > 1 && l_.sequence_parallel;
}

void BlockBuilder::symm_mem_shard_copy(OpTemplate& t, double gathered_bytes) {
    if (symm_mem_tp()) kernel(t, Kernel::memory("symm_mem_shard_copy", 2 * gathered_bytes / t_));
}

bool BlockBuilder::regathers_in_backward() const {
    return l_.sequence_parallel && l_.framework != Framework::torchtitan;
}

void BlockBuilder::cp_collective(OpTemplate& t, CollectiveKind kind, double bytes) {
    flush(t);
    Op op;
    op.kind = OpKind::tp_launch;
    op.group = CommGroup::cp;
    op.collective = kind;
    op.bytes = bytes;
    t.push_back(op);
}

void BlockBuilder::tp_wait(OpTemplate& t) {
    if (l_.tp <= 1 && l_.cp <= 1) return;
    flush(t);
    Op op;
    op.kind = OpKind::tp_wait;
    t.push_back(op);
}

// TP communication overlap (Layout::tp_comm_overlap): the collective runs beside the GEMM next to it.
//   all-gather -> GEMM (qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad): Megatron/TE userbuffers' ring exchange
//     (copy engine, 1 SM) or torchtitan's fused_all_gather_matmul (copy engines): the GEMM keeps the GPU,
//     and the chunks' GEMMs run on several compute streams (TE's num_max_streams), so the GEMM is timed
//     whole, overlapped with the whole all-gather.
//   GEMM -> reduce-scatter (proj_fprop, fc2_fprop): Megatron (TE userbuffers, Megatron initialize.py
//     _initialize_tp_communicators, TE pytorch/module/base.py initialize_ub; ../shared/design/frameworks.md)
//     uses the "pipeline" method: kUbPipelineSplits chunks, each chunk's reduce-scatter overlapping the
//     next chunk's GEMM, its communication kernels holding kUbPipelineCommSms SMs while the GEMM runs
//     (Kernel::sms_reserved); the last chunk's reduce-scatter can only start after the GEMM: exposed.
//     torchtitan's fused_matmul_reduce_scatter (PyTorch torch/distributed/_symmetric_memory) pipelines TP
//     row chunks over the copy engines (no SMs held), the local chunk last, and then sums the TP partials
//     in one reduction kernel (row_forward); its fused_all_gather_matmul copies the local shard into
//     symmetric memory before the first mm (symm_mem_shard_copy). What async TP leaves unfused: tp_unfused.
namespace {
constexpr int kUbPipelineSplits = 4;         ///< TE userbuffers "pipeline" num_splits (initialize_ub)
constexpr double kUbPipelineCommSms = 16.0;  ///< TE userbuffers "pipeline" num_sm (initialize_ub)
}  // namespace

int BlockBuilder::overlap_rs_splits() const {
    return l_.framework == Framework::megatron ? kUbPipelineSplits : static_cast<int>(t_);
}

double BlockBuilder::overlap_rs_comm_sms() const {
    return l_.framework == Framework::megatron ? kUbPipelineCommSms : 0.0;
}

double BlockBuilder::column_cast_elements() const {
    // The column-parallel inputs: gathered in 16 bits, or cast to FP8 on the shard and gathered in FP8.
    return fp8_tp_all_gather() ? Tsp_ * h_ : T_ * h_;
}

void BlockBuilder::column_forward(OpTemplate& t, const Kernel& gemm) {
    if (l_.sequence_parallel) {
        const double act = T_ * h_ * E_;  // one full activation [T, h]
        const bool ov = l_.tp_comm_overlap;
        const double gathered = fp8_tp_all_gather() ? T_ * h_ : act;
        symm_mem_shard_copy(t, gathered);
        tp(t, CollectiveKind::all_gather, gathered, !ov);
        kernel(t, gemm);
        if (ov) tp_wait(t);
    } else {
        kernel(t, gemm);
    }
}

void BlockBuilder::row_forward(OpTemplate& t, const Kernel& gemm) {
    const double act = T_ * h_ * E_;  // one full activation [T, h]
    const CollectiveKind out_kind =
        l_.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce;
    if (symm_mem_tp()) {
        // fused_matmul_reduce_scatter (_pipelined_produce_and_all2all): the mm runs in TP row chunks, each
        // remote chunk pulled by its owner's copy engine while the next is computed, the local chunk last;
        // then the owner sums the TP partials [tp, T/tp, h] in one reduction kernel (reduce_fn, torch.sum
        // over dim 0) after the last chunk: reads T h, writes T h / tp.
        flush(t);
        tp(t, out_kind, act, false);
        kernel(t, gemm);
        tp_wait(t);
        kernel(t, Kernel::memory("symm_mem_reduce_partials", act * (1.0 + 1.0 / t_)));
        return;
    }
    if (l_.tp_comm_overlap && l_.tp > 1) {
        const int splits = overlap_rs_splits();
        flush(t);
        tp(t, out_kind, act * (splits - 1) / splits, false);
        Kernel g = gemm;
        g.sms_reserved = overlap_rs_comm_sms();
        kernel(t, g);
        tp_wait(t);
        tp(t, out_kind, act / splits, true);
    } else {
        kernel(t, gemm);
        tp(t, out_kind, act, true);
    }
}

// torchtitan's repeat_kv (BlockBuilder::repeat_kv_): K and V each expanded from g to a heads and copied by
// reshape (read E·T·g·d/t, write E·T·a·d/t); backward, the expand's gradient sums the a / g copies back (read
// E·T·a·d/t, write E·T·g·d/t). One kernel each for K and V. Under torch.compile the copy's read and the
// sum's write fuse into the neighbouring RoPE pass; SDPA still needs its a-head inputs written, and its
// a-head gradients read: E·T·a·d/t each way.
void BlockBuilder::repeat_kv(OpTemplate& t, bool backward) {
    if (!repeat_kv_) return;
    const double bytes = E_ * T_ * ((l_.torch_compile ? 0.0 : g_) + a_) * d_ / t_;
    kernel(t, Kernel::memory(backward ? "repeat_kv_k_bwd" : "repeat_kv_k", bytes));
    kernel(t, Kernel::memory(backward ? "repeat_kv_v_bwd" : "repeat_kv_v", bytes));
}

void BlockBuilder::attention_forward(OpTemplate& t) {
    unit_boundary(t);
    dequantize(t, h_ * (a_ + 2 * g_) * d_ / t_);
    fp8_forward_casts(t, column_cast_elements(), h_ * (a_ + 2 * g_) * d_ / t_, true);
    column_forward(t, Kernel::gemm("qkv_gemm", T_, (a_ + 2 * g_) * d_ / t_, h_, 1, gemm_elem_));
    adapter_forward(t, l_.lora_targets.qkv, h_, (a_ + 2 * g_) * d_ / t_);
    qk_norms(t, false);
    rope(t, false);
    repeat_kv(t, false);
    attention_core_forward(t);
    unit_boundary(t);
    dequantize(t, a_ * d_ / t_ * h_);
    adapter_forward(t, l_.lora_targets.proj, a_ * d_ / t_, h_);
    fp8_forward_casts(t, T_ * a_ * d_ / t_, a_ * d_ / t_ * h_);
    row_forward(t, Kernel::gemm("attn_proj_gemm", T_, h_, a_ * d_ / t_, 1, gemm_elem_));
}

void BlockBuilder::mlp_forward(OpTemplate& t, double f) {
    const double fe = (m_.mlp == MlpKind::swiglu ? 2.0 : 1.0) * f / t_;
    unit_boundary(t);
    dequantize(t, h_ * fe);
    fp8_forward_casts(t, column_cast_elements(), h_ * fe, true);
    column_forward(t, Kernel::gemm("fc1_gemm", T_, fe, h_, 1, gemm_elem_));
    adapter_forward(t, l_.lora_targets.fc1, h_, fe);
    kernel(t, Kernel::memory(m_.mlp == MlpKind::swiglu ? "swiglu" : "gelu", act_fwd_bytes() * T_ * f / t_));
    unit_boundary(t);
    dequantize(t, f / t_ * h_);
    adapter_forward(t, l_.lora_targets.fc2, f / t_, h_);
    fp8_forward_casts(t, T_ * f / t_, f / t_ * h_);
    row_forward(t, Kernel::gemm("fc2_gemm", T_, h_, f / t_, 1, gemm_elem_));
}

void BlockBuilder::mlp_split(OpTemplate& t) {
    if (!l_.moe_a2a_overlap) return;
    flush(t);
    mlp_split_ = t.size();
}

OpTemplate BlockBuilder::layer_forward(bool moe) {
    OpTemplate t;
    kernel(t, Kernel::memory("input_norm", norm_fwd_bytes() * h_ * Tsp_));
    if (m_.mla())
        mla_forward(t);
    else
        attention_forward(t);
    kernel(t, Kernel::memory("bias_dropout_add", (3 * E_ + 1) * h_ * Tsp_));
    kernel(t, Kernel::memory("pre_mlp_norm", norm_fwd_bytes() * h_ * Tsp_));
    // With --overlap-moe-expert-parallel-comm the shared experts run before the dispatch, in the layer's
    // pre_dispatch_computation (Megatron-Core models/gpt/fine_grained_callables.py), so that the dispatch
    // overlaps another micro-batch's work rather than waiting for them (combined_pass.cpp).
    const bool shared_first = l_.moe_a2a_overlap;
    mlp_split(t);
    if (moe) {
        if (shared_first && shared_f_ > 0) mlp_forward(t, shared_f_);
        moe_forward(t);
        if (!shared_first && shared_f_ > 0) mlp_forward(t, shared_f_);
    } else {
        mlp_forward(t, f_);
    }
    kernel(t, Kernel::memory("bias_dropout_add", (3 * E_ + 1) * h_ * Tsp_));
    flush(t);
    return t;
}

// Element-wise kernels of the block, bytes per element (E = 2):
//   fused (Megatron/TE kernels, torch.compile'd blocks): norm forward 2E (read x, write y), backward 4E;
//   SwiGLU forward 3E, backward 5E; GeLU forward 2E, backward 3E; RoPE fused into its neighbours (not
//   counted). eager torchtitan (torch.compile off; torchtitan models/llama/model.py and models/norms.py,
//   2024):
//     RMSNorm `(x.float() * rsqrt(x.float().pow(2).mean(-1) + eps)).type_as(x) * weight` as ATen ops:
//     float() 2 + 4, pow 4 + 4, mean 4, mul 4 + 4, type_as 4 + 2, * weight 2 + 2 = 36 B; its autograd
//     backward: * weight (2 + 2 + 2 + 2 with the weight-gradient reduction), type_as 2 + 4, mul's two
//     gradients 4 + 4 and 4 + 4, pow's 4 + 4 + 4, the sum of the two x gradients 4 + 4 + 4, float() 4 + 2
//     = 68 B;
//     SwiGLU `silu(w1 x) * w3 x`: silu 2 + 2, mul 2 + 2 + 2 = 10 B per f element; backward mul 2 x (2 + 2
//     + 2), silu 2 + 2 + 2 = 18 B;
//     apply_rotary_emb on q and k: float() 2 + 4, complex mul 4 + 4, type_as 4 + 2 = 20 B per element,
//     backward the same 20 B.
double BlockBuilder::norm_fwd_bytes() const {
    return l_.eager_elementwise() ? 36.0 : 2 * E_;
}
double BlockBuilder::norm_bwd_bytes() const {
    return l_.eager_elementwise() ? 68.0 : 4 * E_;
}
double BlockBuilder::act_fwd_bytes() const {
    if (m_.mlp != MlpKind::swiglu) return 2 * E_;
    return l_.eager_elementwise() ? 10.0 : 3 * E_;
}
double BlockBuilder::act_bwd_bytes() const {
    if (m_.mlp != MlpKind::swiglu) return 3 * E_;
    return l_.eager_elementwise() ? 18.0 : 5 * E_;
}
// qk_layernorm (Megatron-Core SelfAttention.get_query_key_value_tensors: q_layernorm(query),
// k_layernorm(key), two TENorm calls over head_dim-wide rows, before RoPE): a norm kernel over this GPU's
// query elements (T·a·d / t) and one over its key elements (T·g·d / t), the norm's bytes per element; in the
// backward their gradients, in reverse order.
void BlockBuilder::qk_norms(OpTemplate& t, bool backward) {
    if (!m_.qk_layernorm) return;
    const double q = T_ * a_ * d_ / t_, k = T_ * g_ * d_ / t_;
    if (backward) {
        kernel(t, Kernel::memory("k_norm_bwd", norm_bwd_bytes() * k));
        kernel(t, Kernel::memory("q_norm_bwd", norm_bwd_bytes() * q));
    } else {
        kernel(t, Kernel::memory("q_norm", norm_fwd_bytes() * q));
        kernel(t, Kernel::memory("k_norm", norm_fwd_bytes() * k));
    }
}
// RoPE: eager in torchtitan without compile (models/llama/model.py apply_rotary_emb, 20 B per element of q
// and k); fused in Megatron-Core (TE's fused_apply_rotary_pos_emb, not charged) unless YaRN's concentration
// factor is not 1, where it runs unfused (rope_unfused_bytes_per_element), once for the query, once for
// the key. Each kernel pays the compute model's kernel overhead.
void BlockBuilder::rope(OpTemplate& t, bool backward) {
    if (l_.eager_elementwise()) {
        if (m_.mlp == MlpKind::swiglu)
            kernel(t, Kernel::memory(backward ? "rope_bwd" : "rope", 20.0 * T_ * (a_ + g_) * d_ / t_));
        return;
    }
    if (rope_unfused_bytes_per_element(m_, l_, backward) <= 0) return;
    const double freqs = T_ / b_ * d_;  // the [s / cp, 1, 1, d] fp32 frequencies of this GPU's tokens
    for (const double n : {T_ * a_ * d_ / t_, T_ * g_ * d_ / t_}) {  // the query's elements, then the key's
        if (!backward) {
            for (int c = 0; c < 2; ++c) {  // cos_, then sin_: (torch.cos(freqs) * mscale).to(dtype)
                kernel(t, Kernel::memory("yarn_rope_freqs", 8.0 * freqs));
                kernel(t, Kernel::memory("yarn_rope_freqs", 8.0 * freqs));
                kernel(t, Kernel::memory("yarn_rope_freqs", (4.0 + E_) * freqs));
            }
            kernel(t, Kernel::memory("yarn_rope_mul", 2 * E_ * n));  // t * cos_
            kernel(t, Kernel::memory("yarn_rope_neg", E_ * n));      // -x2 over one half
            kernel(t, Kernel::memory("yarn_rope_cat", 2 * E_ * n));  // cat((-x2, x1))
            kernel(t, Kernel::memory("yarn_rope_mul", 2 * E_ * n));  // * sin_
            kernel(t, Kernel::memory("yarn_rope_add", 3 * E_ * n));
            kernel(t, Kernel::memory("yarn_rope_cat", 2 * E_ * n));  // cat((t, t_pass))
            continue;
        }
        kernel(t, Kernel::memory("yarn_rope_mul_bwd", 2 * E_ * n));  // grad * sin_
        kernel(t, Kernel::memory("yarn_rope_neg_bwd", E_ * n));
        kernel(t, Kernel::memory("yarn_rope_cat_bwd", 2 * E_ * n));  // the chunk's backward
        kernel(t, Kernel::memory("yarn_rope_mul_bwd", 2 * E_ * n));  // grad * cos_
        kernel(t, Kernel::memory("yarn_rope_add_bwd", 3 * E_ * n));
        kernel(t, Kernel::memory("yarn_rope_zero_bwd", E_ * n));  // t_pass's SliceBackward: zeros of t
        kernel(t, Kernel::memory("yarn_rope_add_bwd", 3 * E_ * n));
    }
}

namespace {
// PyTorch context_parallel as torchtitan ran it (torch/distributed/tensor/experimental/_attention.py, torch
// 2.6: _SDPAMerger with convert_to_f32, round-robin load balance, _partial_update): the memory passes around
// the CP steps' SDPA calls of one layer on one rank, averaged over the ranks (rank r's steps 1 .. r use the
// whole local queries, its steps r+1 .. cp-1 their second half, so half of the later steps are each), with
// 16-bit activations of `e` bytes. Under torch.compile (Layout::torch_compile: torchtitan compiles each
// TransformerBlock with fullgraph=True, and the ring attention is written to be traced: functional
// collectives, _maybe_wait) Inductor fuses each step's elementwise passes: one pass per step that reads the
// block's 16-bit result and reads and writes the fp32 accumulator (e + 8 B per element).

/// The local K and V (`kv_local` bytes together) made contiguous (key.contiguous(), value.contiguous(): read
/// and write) and concatenated for the rotater at every step but the last (torch.cat, read and write; the
/// all-gather rotater uses only the first); compiled, the unused concatenations are dead code: one.
double pytorch_cp_kv_copy_bytes(double cp, double kv_local, bool compiled) {
    return 2 * kv_local + (compiled ? 1.0 : cp - 1) * 2 * kv_local;
}

/// Forward, for `n_out` output elements of the rank: step 0 casts the block output to fp32 (e + 4 B per
/// element); each later step casts it (e + 4), then out - block_out (12), sigmoid(lse) * that (8) and out -
/// that (12) over the block's elements, and a second-half step rebuilds the whole fp32 output with
/// _partial_update's torch.cat (8 B per element); results() casts back to 16 bits (4 + e). The LSE passes
/// (one value per head and query) are left out.
double pytorch_cp_merge_bytes(double cp, double n_out, double e, bool compiled) {
    if (compiled) return cp * (e + 8) * n_out;
    const double whole = (e + 4 + 32) * n_out;
    const double half = 0.5 * (e + 4 + 32) * n_out + 8 * n_out;
    return (e + 4) * n_out + 0.5 * (cp - 1) * (whole + half) + (4 + e) * n_out;
}

/// Backward, for `n_q` query and `n_kv` key (and as many value) gradient elements of the rank: the fp32
/// accumulators zeroed (4 B each); step 0 adds the block's 16-bit gradients (read 4 + e, write 4); a later
/// step with the whole queries adds the K/V gradients of the first key half and rebuilds the K/V accumulators
/// with _partial_update's cat (8 B per element), and adds the whole dQ; one with the second query half adds
/// the whole dK/dV and the half dQ, then rebuilds the dQ accumulator; every step concatenates the fp32 dK, dV
/// it sends on (torch.cat: 8 B per element each); at the end the three go back to 16 bits (4 + e).
double pytorch_cp_grad_bytes(double cp, double n_q, double n_kv, double e, bool compiled) {
    if (compiled) return cp * (e + 8) * (n_q + 2 * n_kv);
    const double add = 8 + e;
    const double all = n_q + 2 * n_kv;
    const double whole_q = 2 * (0.5 * add * n_kv + 8 * n_kv) + add * n_q;
    const double half_q = 2 * add * n_kv + 0.5 * add * n_q + 8 * n_q;
    return 4 * all + add * all + 0.5 * (cp - 1) * (whole_q + half_q) + cp * 16 * n_kv + (4 + e) * all;
}
}  // namespace

// The attention core's head width: d for standard attention; for MLA, whose query/key heads (dqk_) and value
// heads (dv_) differ, the mean (dqk_ + dv_) / 2, so that 4·s²·d per head counts the QK^T (2·s²·dqk) and PV
// (2·s²·dv) matmuls, and Q + O (K + V) bytes are 2·d per head.
void BlockBuilder::attention_core_forward(OpTemplate& t) {
    const double heads = b_ * a_ / t_;  // attention heads of this micro-batch on this GPU
    const double d = (dqk_ + dv_) / 2;
    fp8_attention_casts(t, false);
    if (l_.fused_attention()) {
        // Causal flash attention skips the masked upper triangle: half of the 4·s²·d FLOPs per head. With
        // context parallelism each rank's s/cp queries (two load-balanced chunks) meet all s keys: 1/cp of
        // the work. TransformerEngine's ring attention (Megatron-Core; CP of the frameworks other than
        // torchtitan is timed as it): one call per CP step, the K/V blocks arriving around the ring beside
        // them (te_cp_attention_forward, cp_attention.cpp).
        //
        // PyTorch context_parallel as torchtitan ran it (torch/distributed/tensor/experimental/_attention.py,
        // rotate method "allgather", the default): the local K/V made contiguous and concatenated (read and
        // write each twice), all-gathered once before the first block and waited for (no overlap), the cp
        // per-block outputs merged with their log-sum-exp in fp32 (pytorch_cp_merge_bytes).
        const double kv_full = 2 * E_ * b_ * s_ * kvh_ * d / t_;
        const bool pt_ring = l_.cp > 1 && l_.framework == Framework::torchtitan;
        if (l_.cp > 1 && !pt_ring) {
            te_cp_attention_forward(t);
            return;
        }
        if (pt_ring)
            kernel(t, Kernel::memory("cp_kv_copy",
                                     pytorch_cp_kv_copy_bytes(cp_, kv_full / cp_, l_.torch_compile)));
        if (l_.cp > 1) cp_collective(t, CollectiveKind::all_gather, kv_full);
        if (pt_ring) tp_wait(t);
        const double flops = 0.5 * 4.0 * heads * s_ * s_ * d / cp_;
        const double bytes = E_ * T_ * (2 * a_) * d / t_ + kv_full;
        if (l_.cp == 1 && m_.windowed_layer_fraction() > 0) {
            fused_attention_with_window(t, heads, d, bytes, false);
            return;
        }
        kernel(t, Kernel::flash("flash_attention_fwd", flops, bytes, l_.attention,
                                {heads, s_ / cp_, s_, d, true, false}));
        if (pt_ring)
            kernel(t, Kernel::memory("cp_lse_merge",
                                     pytorch_cp_merge_bytes(cp_, T_ * a_ * dv_ / t_, E_, l_.torch_compile)));
    } else {
        kernel(t, Kernel::gemm("attn_scores_bmm", s_, s_, dqk_, heads));
        kernel(t, Kernel::memory("scale_mask_softmax", heads * s_ * s_ * 2 * E_));
        kernel(t, Kernel::memory("attn_dropout", heads * s_ * s_ * (2 * E_ + 1)));
        kernel(t, Kernel::gemm("attn_values_bmm", s_, dv_, s_, heads));
    }
}

// Sliding-window attention (ModelSpec::sliding_window): the layers that attend fully and those that attend
// through the window run alternately (sliding_window_full_every); each layer carries their mean, as two
// calls whose FLOPs and bytes are their shares (windowed_layer_fraction) of a layer's: the full layers'
// causal call, and the windowed layers' call with window_key_span keys per query. FLOPs and bytes per stage
// are those of the alternating layers; each call's efficiency is that of a whole layer's call (CTA fill over
// all the heads; the windowed call's CTA work that of its span, FusedAttentionShape::window_keys); the
// kernel overhead is paid twice per layer.
void BlockBuilder::fused_attention_with_window(OpTemplate& t, double heads, double d, double bytes,
                                               bool backward) {
    const double f = m_.windowed_layer_fraction();
    const double pass = backward ? 2.5 : 1.0;  // the backward's 5 matmuls of the forward's 2
    const double span = window_key_span(s_, static_cast<double>(m_.sliding_window));
    if (f < 1.0)
        kernel(t, Kernel::flash(backward ? "flash_attention_bwd" : "flash_attention_fwd",
                                pass * 0.5 * 4.0 * (1 - f) * heads * s_ * s_ * d, (1 - f) * bytes,
                                l_.attention, {heads, s_, s_, d, true, backward}));
    kernel(t, Kernel::flash(backward ? "flash_attention_window_bwd" : "flash_attention_window_fwd",
                            pass * 4.0 * f * heads * s_ * span * d, f * bytes, l_.attention,
                            {heads, s_, s_, d, true, backward, span}));
}

void BlockBuilder::attention_core_backward(OpTemplate& t) {
    const double heads = b_ * a_ / t_;
    const double d = (dqk_ + dv_) / 2;
    fp8_attention_casts(t, true);
    if (l_.fused_attention()) {
        // FlashAttention backward: 5 matmuls of the forward's 2 (recomputed scores, dV, dP, dQ, dK) = 2.5x.
        // TransformerEngine's ring attention: one call per CP step (te_cp_attention_backward). PyTorch
        // context_parallel (torchtitan): K/V copied and gathered again and waited for, the per-block dQ, dK,
        // dV accumulated in fp32 (pytorch_cp_grad_bytes), and the dK/dV of the other ranks' blocks sent back
        // (a reduce-scatter's volume) after the kernel, waited for.
        const double kv_full = 2 * E_ * b_ * s_ * kvh_ * d / t_;
        const bool pt_ring = l_.cp > 1 && l_.framework == Framework::torchtitan;
        const double flops = 2.5 * 0.5 * 4.0 * heads * s_ * s_ * d / cp_;
        const double bytes = 2 * (E_ * T_ * (2 * a_) * d / t_ + kv_full);
        if (pt_ring) {
            kernel(t, Kernel::memory("cp_kv_copy_bwd",
                                     pytorch_cp_kv_copy_bytes(cp_, kv_full / cp_, l_.torch_compile)));
            cp_collective(t, CollectiveKind::all_gather, kv_full);
            tp_wait(t);
            kernel(t, Kernel::flash("flash_attention_bwd", flops, bytes, l_.attention,
                                    {heads, s_ / cp_, s_, d, true, true}));
            kernel(t, Kernel::memory("cp_grad_accumulate",
                                     pytorch_cp_grad_bytes(cp_, T_ * a_ * dqk_ / t_, T_ * kvh_ * d / t_, E_,
                                                           l_.torch_compile)));
            cp_collective(t, CollectiveKind::reduce_scatter, kv_full);
            tp_wait(t);
            return;
        }
        if (l_.cp > 1) {
            te_cp_attention_backward(t);
            return;
        }
        if (m_.windowed_layer_fraction() > 0) {
            fused_attention_with_window(t, heads, d, bytes, true);
            return;
        }
        kernel(t, Kernel::flash("flash_attention_bwd", flops, bytes, l_.attention,
                                {heads, s_ / cp_, s_, d, true, true}));
    } else {
        kernel(t, Kernel::gemm("attn_values_bmm_dgrad", s_, s_, dv_, heads));
        kernel(t, Kernel::gemm("attn_values_bmm_wgrad", s_, dv_, s_, heads));
        kernel(t, Kernel::memory("attn_dropout_bwd", heads * s_ * s_ * (2 * E_ + 1)));
        kernel(t, Kernel::memory("scale_mask_softmax_bwd", heads * s_ * s_ * 3 * E_));
        kernel(t, Kernel::gemm("attn_scores_bmm_dgrad_q", s_, dqk_, s_, heads));
        kernel(t, Kernel::gemm("attn_scores_bmm_dgrad_k", s_, dqk_, s_, heads));
    }
}

void BlockBuilder::row_backward(OpTemplate& t, const Kernel& dgrad, const Kernel& wgrad) {
    if (l_.sequence_parallel) {
        const bool ov = l_.tp_comm_overlap;
        symm_mem_shard_copy(t, T_ * h_ * E_);
        tp(t, CollectiveKind::all_gather, T_ * h_ * E_, !ov);
        kernel(t, dgrad);
        if (ov) tp_wait(t);
    } else {
        kernel(t, dgrad);
    }
    if (!l_.frozen_base()) kernel(t, wgrad);  // LoRA / QLoRA: no weight gradients for the base
}

void BlockBuilder::column_backward(OpTemplate& t, const Kernel& dgrad, const Kernel& wgrad, double in) {
    const double act = T_ * in * E_;  // the input [T, in], gathered
    const CollectiveKind grad_kind =
        l_.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce;
    const bool regather = regathers_in_backward();
    if (regather) tp(t, CollectiveKind::all_gather, act, false);
    kernel(t, dgrad);
    if (regather) tp_wait(t);
    tp_unfused(t, grad_kind, act, false);     // the sum of the dgrads of the linears sharing the input
    if (!l_.frozen_base()) kernel(t, wgrad);  // LoRA / QLoRA: no weight gradients for the base
    tp_wait(t);
}

void BlockBuilder::mlp_backward(OpTemplate& t, double f) {
    const double fe = (m_.mlp == MlpKind::swiglu ? 2.0 : 1.0) * f / t_;
    unit_boundary(t);
    dequantize(t, f / t_ * h_);
    adapter_backward(t, l_.lora_targets.fc2, f / t_, h_);
    fp8_backward_casts(t, T_ * h_, T_ * f / t_, f / t_ * h_);
    row_backward(t, Kernel::gemm("fc2_dgrad", T_, f / t_, h_, 1, gemm_elem_),
                 Kernel::gemm("fc2_wgrad", h_, f / t_, T_, 1, gemm_elem_));
    kernel(t, Kernel::memory(m_.mlp == MlpKind::swiglu ? "swiglu_bwd" : "gelu_bwd",
                             act_bwd_bytes() * T_ * f / t_));
    unit_boundary(t);
    dequantize(t, h_ * fe);
    adapter_backward(t, l_.lora_targets.fc1, h_, fe);
    fp8_backward_casts(t, T_ * fe, T_ * h_, h_ * fe, true);
    column_backward(t, Kernel::gemm("fc1_dgrad", T_, h_, fe, 1, gemm_elem_),
                    Kernel::gemm("fc1_wgrad", fe, h_, T_, 1, gemm_elem_), h_);
}

void BlockBuilder::attention_backward(OpTemplate& t) {
    unit_boundary(t);
    dequantize(t, a_ * d_ / t_ * h_);
    adapter_backward(t, l_.lora_targets.proj, a_ * d_ / t_, h_);
    fp8_backward_casts(t, T_ * h_, T_ * a_ * d_ / t_, a_ * d_ / t_ * h_);
    row_backward(t, Kernel::gemm("attn_proj_dgrad", T_, a_ * d_ / t_, h_, 1, gemm_elem_),
                 Kernel::gemm("attn_proj_wgrad", h_, a_ * d_ / t_, T_, 1, gemm_elem_));
    attention_core_backward(t);
    repeat_kv(t, true);
    rope(t, true);
    qk_norms(t, true);
    unit_boundary(t);
    dequantize(t, h_ * (a_ + 2 * g_) * d_ / t_);
    adapter_backward(t, l_.lora_targets.qkv, h_, (a_ + 2 * g_) * d_ / t_);
    fp8_backward_casts(t, T_ * (a_ + 2 * g_) * d_ / t_, T_ * h_, h_ * (a_ + 2 * g_) * d_ / t_, true);
    column_backward(t, Kernel::gemm("qkv_dgrad", T_, h_, (a_ + 2 * g_) * d_ / t_, 1, gemm_elem_),
                    Kernel::gemm("qkv_wgrad", (a_ + 2 * g_) * d_ / t_, h_, T_, 1, gemm_elem_), h_);
}

OpTemplate BlockBuilder::layer_backward(bool moe) {
    OpTemplate t;
    kernel(t, Kernel::memory("bias_dropout_add_bwd", (3 * E_ + 1) * h_ * Tsp_));
    const bool shared_last = l_.moe_a2a_overlap;  // as layer_forward's shared_first
    if (moe) {
        if (!shared_last && shared_f_ > 0) mlp_backward(t, shared_f_);
        moe_backward(t);
        if (shared_last && shared_f_ > 0) mlp_backward(t, shared_f_);
    } else {
        mlp_backward(t, f_);
    }
    mlp_split(t);
    kernel(t, Kernel::memory("pre_mlp_norm_bwd", norm_bwd_bytes() * h_ * Tsp_));
    kernel(t, Kernel::memory("bias_dropout_add_bwd", (3 * E_ + 1) * h_ * Tsp_));
    if (m_.mla())
        mla_backward(t);
    else
        attention_backward(t);
    kernel(t, Kernel::memory("input_norm_bwd", norm_bwd_bytes() * h_ * Tsp_));
    flush(t);
    return t;
}

void BlockBuilder::unit_boundary(OpTemplate& t) {
    if (unit_starts_ == nullptr) return;
    flush(t);
    unit_starts_->push_back(t.size());
}

namespace {
std::vector<OpTemplate> split_at(const OpTemplate& t, const std::vector<std::size_t>& starts) {
    std::vector<OpTemplate> out;
    std::size_t begin = 0;
    for (std::size_t s : starts) {
        out.emplace_back(t.begin() + static_cast<std::ptrdiff_t>(begin),
                         t.begin() + static_cast<std::ptrdiff_t>(s));
        begin = s;
    }
    out.emplace_back(t.begin() + static_cast<std::ptrdiff_t>(begin), t.end());
    return out;
}
}  // namespace

std::vector<OpTemplate> BlockBuilder::layer_forward_units() {
    if (m_.mla())
        throw InputError(
            "model.attention_type = \"mla\" with DeepSpeed ZeRO-3 (layout.framework = \"deepspeed\", "
            "zero_stage 3): its per-module weight fetches are not modelled for MLA");
    std::vector<std::size_t> starts;
    unit_starts_ = &starts;
    const OpTemplate t = layer_forward();
    unit_starts_ = nullptr;
    return split_at(t, starts);
}

std::vector<OpTemplate> BlockBuilder::layer_backward_units() {
    std::vector<std::size_t> starts;
    unit_starts_ = &starts;
    const OpTemplate t = layer_backward();
    unit_starts_ = nullptr;
    return split_at(t, starts);
}

std::vector<double> BlockBuilder::layer_linear_unit_weights() const {
    const double f_eff = (m_.mlp == MlpKind::swiglu ? 2.0 : 1.0) * f_ / t_;
    return {h_ * (a_ + 2 * g_) * d_ / t_, a_ * d_ / t_ * h_, h_ * f_eff, f_ / t_ * h_};
}

std::vector<double> BlockBuilder::layer_linear_unit_biases() const {
    if (m_.mlp == MlpKind::swiglu) return {0.0, 0.0, 0.0, 0.0};
    return {(a_ + 2 * g_) * d_ / t_, h_, f_ / t_, h_};
}

void BlockBuilder::adapter_forward(OpTemplate& t, bool targeted, double in, double out) {
    if (l_.adapter == Adapter::none || !targeted) return;
    // LoRA: y += (x·A)·B with A [in x r], B [r x out] (Hu et al. 2021).
    const double r = static_cast<double>(l_.lora_rank);
    kernel(t, Kernel::gemm("lora_a", T_, r, in));
    kernel(t, Kernel::gemm("lora_b", T_, out, r));
}

void BlockBuilder::adapter_backward(OpTemplate& t, bool targeted, double in, double out) {
    if (l_.adapter == Adapter::none || !targeted) return;
    const double r = static_cast<double>(l_.lora_rank);
    kernel(t, Kernel::gemm("lora_b_dgrad", T_, r, out));
    kernel(t, Kernel::gemm("lora_b_wgrad", r, out, T_));
    kernel(t, Kernel::gemm("lora_a_dgrad", T_, in, r));
    kernel(t, Kernel::gemm("lora_a_wgrad", in, r, T_));
}

void BlockBuilder::dequantize(OpTemplate& t, double weights) {
    // QLoRA: the NF4 weight (4.127 bits per weight with double quantization) is dequantized to 16 bits
    // before each use (bitsandbytes dequantize_4bit, then a 16-bit GEMM): read 0.516 B, write 2 B per weight.
    if (l_.adapter != Adapter::qlora) return;
    kernel(t, Kernel::memory("nf4_dequantize", (kQloraBaseBytesPerParam + 2.0) * weights));
}

OpTemplate BlockBuilder::layer_recompute(bool moe) {
    switch (l_.recompute) {
        case Recompute::none:
            return {};
        case Recompute::full:
            return layer_forward(moe);
        case Recompute::selective: {
            // Korthikanti et al. 2022: recompute only the attention core (scores, softmax, dropout, values);
            // flash attention already recomputes it inside its backward kernel, so nothing is added.
            OpTemplate t;
            if (m_.mla() && l_.recompute_mla_up_proj) mla_up_proj_forward(t);  // mla_ops.cpp
            if (l_.recompute_modules.core_attn && l_.attention == AttentionKernel::unfused)
                attention_core_forward(t);
            recompute_modules_forward(t, moe);
            flush(t);
            return t;
        }
        case Recompute::selective_op:
            return layer_recompute_selective_op();
    }
    return {};
}

void BlockBuilder::recompute_modules_forward(OpTemplate& t, bool moe) {
    // Megatron-Core's --recompute-modules (layout.hpp RecomputeModules): the discarded outputs are rebuilt
    // before the layer's backward by their module's forward (CheckpointWithoutOutput for layernorm and
    // moe_act, tensor_parallel.checkpoint for mlp, moe and shared_experts: transformer_layer.py,
    // moe/moe_layer.py, moe/experts.py).
    const RecomputeModules& r = l_.recompute_modules;
    if (r.layernorm && m_.mla()) kernel(t, Kernel::memory("input_norm", norm_fwd_bytes() * h_ * Tsp_));
    if (!moe) {
        if (r.mlp) mlp_forward(t, f_);
        return;
    }
    if (r.layernorm) kernel(t, Kernel::memory("pre_mlp_norm", norm_fwd_bytes() * h_ * Tsp_));
    if (r.moe) {
        moe_forward(t);
        if (shared_f_ > 0) mlp_forward(t, shared_f_);
        return;
    }
    if (r.moe_act) moe_activation_forward(t);
    if (r.shared_experts && shared_f_ > 0) mlp_forward(t, shared_f_);
}

OpTemplate BlockBuilder::layer_recompute_selective_op() {
    // torchtitan per-op SAC (AC mode "selective", option "op"; parallelize_llama.py _op_sac_save_list and
    // _get_custom_policy, v0.1.0-v0.2.2): the outputs of aten.mm (except every second mm of the block,
    // counted in forward order), of SDPA and of reduce_scatter_tensor are saved; every other op is recomputed
    // in backward. In Llama order the mms are wq, wk, wv, wo, w1, w3, w2 (GELU MLP: wq, wk, wv, wo, w1, w2),
    // so wk, wo and w3 (w2) are recomputed, with the norms, the residual adds and the MLP activation;
    // attention (saved SDPA output) is not. With sequence parallelism the all-gathers of the norm outputs
    // before the recomputed mms run again (all_gather_into_tensor is not in the save list); the
    // reduce-scatters are saved. The recomputed mms are FP8 mms in fp8 runs, with their casts.
    OpTemplate t;
    const bool sp = l_.sequence_parallel;
    const double act = T_ * h_ * E_;
    const double kv = g_ * d_ / t_;
    const bool fp8_gather = fp8_tp_all_gather();  // FP8 all-gathers of FP8-cast shards (layer_forward)
    const double column_act = fp8_gather ? T_ * h_ : act;
    const double column_cast_elements = fp8_gather ? Tsp_ * h_ : T_ * h_;
    kernel(t, Kernel::memory("input_norm", norm_fwd_bytes() * h_ * Tsp_));
    if (sp) tp(t, CollectiveKind::all_gather, column_act, true);
    fp8_forward_casts(t, column_cast_elements, h_ * kv, true);
    kernel(t, Kernel::gemm("wk_gemm", T_, kv, h_, 1, gemm_elem_));
    rope(t, false);       // non-mm: recomputed (for q from the saved wq output, and for k)
    repeat_kv(t, false);  // SDPA's K and V inputs for its backward: not saved, rebuilt
    fp8_forward_casts(t, T_ * a_ * d_ / t_, a_ * d_ / t_ * h_);
    kernel(t, Kernel::gemm("wo_gemm", T_, h_, a_ * d_ / t_, 1, gemm_elem_));
    if (!sp) tp(t, CollectiveKind::all_reduce, act, true);  // an all-reduce is not in the save list
    kernel(t, Kernel::memory("bias_dropout_add", (3 * E_ + 1) * h_ * Tsp_));
    kernel(t, Kernel::memory("pre_mlp_norm", norm_fwd_bytes() * h_ * Tsp_));
    if (sp) tp(t, CollectiveKind::all_gather, m_.mlp == MlpKind::swiglu ? column_act : act, true);
    if (m_.mlp == MlpKind::swiglu) {
        fp8_forward_casts(t, column_cast_elements, h_ * f_ / t_, true);
        kernel(t, Kernel::gemm("w3_gemm", T_, f_ / t_, h_, 1, gemm_elem_));
        kernel(t, Kernel::memory("swiglu", act_fwd_bytes() * T_ * f_ / t_));
    } else {
        kernel(t, Kernel::memory("gelu", act_fwd_bytes() * T_ * f_ / t_));
        fp8_forward_casts(t, T_ * f_ / t_, f_ / t_ * h_);
        kernel(t, Kernel::gemm("fc2_gemm", T_, h_, f_ / t_, 1, gemm_elem_));
        if (!sp) tp(t, CollectiveKind::all_reduce, act, true);
    }
    kernel(t, Kernel::memory("bias_dropout_add", (3 * E_ + 1) * h_ * Tsp_));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::embedding_forward() {
    OpTemplate t;
    const double act = T_ * h_ * E_;
    // Vocab-parallel embedding (Megatron VocabParallelEmbedding): lookup of the local vocab shard, then the
    // all-reduce (reduce-scatter with SP) that combines the shards; then embedding dropout.
    kernel(t, Kernel::memory("embedding_lookup", 2 * act));
    tp_unfused(t, l_.sequence_parallel ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, act,
               true);
    kernel(t, Kernel::memory("embedding_dropout", (2 * E_ + 1) * h_ * Tsp_));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::embedding_backward() {
    OpTemplate t;
    const double act = T_ * h_ * E_;
    kernel(t, Kernel::memory("embedding_dropout_bwd", (2 * E_ + 1) * h_ * Tsp_));
    if (l_.sequence_parallel) tp_unfused(t, CollectiveKind::all_gather, act, true);
    // Scatter-add of the output gradient into the fp32 embedding gradient rows.
    kernel(t, Kernel::memory("embedding_grad_scatter_add", act + T_ * h_ * 4 * 2));
    flush(t);
    return t;
}

// ---- FP8 (precision fp8): casts and amax passes around the FP8 GEMMs of the linear layers ----
// Only the linear layers' GEMMs run in FP8 (TE Linear / LayerNormLinear; torchao Float8Linear); attention,
// norms, activations, the LM head (TE: fp8_output_proj only for mxfp8; torchtitan's tomls filter `output`)
// and the optimizer stay in 16 bits. Bytes per element moved by the casts, E = 2 (bf16 source), per recipe:
//   delayed (TE DelayedScaling; the scale comes from the amax history, the amax of the new tensor is taken in
//     the same kernel): forward input cast_transpose, read E, write the fp8 tensor and its transpose (kept
//     for wgrad) 1 + 1: E + 2; weights cast_transpose E + 2 once per step (is_first_microbatch caches the
//     fp8 weight and its transpose, transformer_engine/pytorch/module/linear.py); backward output gradient
//     cast_transpose E + 2 (dgrad and wgrad layouts). The amax-history update is per step and tiny.
//   tensorwise (torchao Float8Linear, dynamic per-tensor scaling: the scale needs the tensor's amax first,
//     a reduction pass, then the cast; torchao float8/float8_scaling_utils.py hp_tensor_to_float8_dynamic):
//     forward input amax E + cast E + 1 = 2E + 1; weight 2E + 1 every forward (no per-step cache); backward
//     output gradient amax E + cast E + 1, plus the column-major copy _scaled_mm needs for wgrad 1 + 1:
//     2E + 3; the saved fp8 input and the fp8 weight re-laid out for wgrad and dgrad, 1 + 1 each.
//   rowwise (torchao Float8 rowwise: every operand scaled per row of the GEMM's reduction axis, so the
//     backward re-quantizes from the bf16 tensors along the other axis): forward input and weight 2E + 1
//     each; backward output gradient twice (dgrad and wgrad axes) 2(2E + 1); input and weight once more each
//     2E + 1.
//   mxfp8 (TE MXFP8BlockScaling: 32-element blocks, the E8M0 scale computed in the cast kernel, no amax
//     history or reduction): one pass writing row- and column-wise copies with their scales (both are
//     quantized from the 16-bit tensor: mxfp8.rst "Handling transposes"), E + 2 + 2/32, for inputs and
//     output gradients; weights once per step as with delayed scaling; dgrad (gradient row-wise x weight
//     column-wise) and wgrad (gradient and input column-wise) read those copies, nothing is re-laid out.
//   nvfp4 (TE NVFP4BlockScaling, recipe/__init__.py: 16-element blocks with E4M3 scales and an fp32 scale
//     per tensor): the per-tensor scale needs the tensor's amax first, so every quantization is two passes
//     (pytorch/csrc/quantizer.cpp NVFP4Quantizer::quantize_impl): the amax (inputs and gradients: one
//     kernel taking the row-wise amax and the amax after the random Hadamard transform of the column-wise
//     copy, nvte_hadamard_transform_amax; read E), then one fused kernel writing the row-wise copy and the
//     Hadamard-transformed column-wise copy with their scales (read E, write 0.5 + 0.5 + 2/16; stochastic
//     rounding on gradients is done in the same kernel): 2E + 1 + 1/8 for inputs and output gradients;
//     weights (16x16 blocks, no Hadamard transform) the same bytes, once per step. The TP amax all-reduce
//     of sequence-parallel inputs (a few bytes) is not modelled.
//   In both block-scaled recipes the norm before qkv / fc1 is not fused with the quantization by default
//   (pytorch/csrc/extensions/normalization.cpp: MXFP8 only with NVTE_NORM_FWD_USE_CUDNN, which
//   Megatron-Bridge's performance scripts remove for Llama, perf_plugins.py; NVFP4 with the Hadamard
//   transform: UNFUSED): the norm writes E and the cast above reads it.
//   tensorwise under TransformerEngine (Megatron's --fp8-recipe tensorwise, TE Float8CurrentScaling): the
//     quantizer takes the tensor's amax first (read E), then cast_transpose writes the fp8 tensor and its
//     transpose (read E, write 1 + 1): 2E + 2, for inputs and output gradients; the saved fp8 input already
//     has its transpose, so nothing is re-laid out in the backward; weights are quantized once per step and
//     cached as with delayed scaling (is_first_microbatch; transformer_engine/pytorch/tensor/
//     float8_tensor.py Float8CurrentScalingQuantizer, module/linear.py).
// With fp8_param_gather (Layout) the weights are FP8 already: no weight cast at all; their transpose is made
// once per step (read 1, write 1 B per weight) and the optimizer quantizes its fp32 master shard after the
// step (optimizer()).
// TransformerEngine's per-tensor recipes (delayed; tensorwise under Megatron) write a transpose only for
// Hopper's TN-only FP8 GEMMs: its 1 B per element (and the whole of the transpose-only kernels) is marked
// Kernel::fp8_transpose_bytes, which a GPU with GpuSpec::fp8_gemm_any_layout (Blackwell) does not move.
// torchao's re-layouts stay: torch._scaled_mm wants its second operand column-major on every GPU.
namespace {
struct Fp8CastBytes {
    double input_fwd, weight_fwd, grad_bwd, input_bwd, weight_bwd;
    bool weight_per_step;       ///< the fp8 weight is cast once per step and cached (TE)
    bool te_transpose = false;  ///< input_fwd, weight_fwd and grad_bwd include a 1-B FP8 transpose (TE)
};
Fp8CastBytes fp8_cast_bytes(Fp8Recipe r, double E, Framework f) {
    switch (r) {
        case Fp8Recipe::delayed:
            return {E + 2, E + 2, E + 2, 0, 0, true, true};
        case Fp8Recipe::tensorwise:
            if (f == Framework::megatron) return {2 * E + 2, 2 * E + 2, 2 * E + 2, 0, 0, true, true};
            return {2 * E + 1, 2 * E + 1, 2 * E + 3, 2, 2, false};
        case Fp8Recipe::rowwise:
            return {2 * E + 1, 2 * E + 1, 2 * (2 * E + 1), 2 * E + 1, 2 * E + 1, false};
        case Fp8Recipe::mxfp8:
            return {E + 2 + 2.0 / 32, E + 2 + 2.0 / 32, E + 2 + 2.0 / 32, 0, 0, true};
        case Fp8Recipe::nvfp4:
            return {2 * E + 1 + 2.0 / 16, 2 * E + 1 + 2.0 / 16, 2 * E + 1 + 2.0 / 16, 0, 0, true};
    }
    return {E + 2, E + 2, E + 2, 0, 0, true, true};
}

/// A cast of `elements` at `bytes_per_element`, of which 1 B per element is a TransformerEngine FP8 transpose
/// when `te_transpose` (Kernel::fp8_transpose_bytes).
Kernel fp8_cast(const char* name, double bytes_per_element, double elements, bool te_transpose) {
    Kernel k = Kernel::memory(name, bytes_per_element * elements);
    if (te_transpose) k.fp8_transpose_bytes = elements;
    return k;
}

/// A kernel that only transposes FP8 data (read 1, write 1 B per element): Hopper's TN layout only.
Kernel fp8_transpose_only(const char* name, double elements) {
    Kernel k = Kernel::memory(name, 2.0 * elements);
    k.fp8_transpose_bytes = k.bytes;
    return k;
}
}  // namespace

double BlockBuilder::layer_linear_weights(bool moe) const {
    const double glu = m_.mlp == MlpKind::swiglu ? 2.0 : 1.0;
    const auto mlp = [&](double f) { return h_ * glu * f / t_ + f / t_ * h_; };
    double attention = h_ * (a_ + 2 * g_) * d_ / t_ + a_ * d_ / t_ * h_;
    if (m_.mla()) {
        // MLA (mla_ops.cpp): the duplicated down-projections whole, the up- and output projections split.
        const double qr = static_cast<double>(m_.q_lora_rank), kr = static_cast<double>(m_.kv_lora_rank);
        const double rope = static_cast<double>(m_.qk_rope_head_dim);
        const double q = m_.q_lora_rank > 0 ? h_ * qr + qr * a_ * dqk_ / t_ : h_ * a_ * dqk_ / t_;
        attention = q + h_ * (kr + rope) + kr * a_ * (d_ + dv_) / t_ + a_ * dv_ / t_ * h_;
    }
    if (!moe) return attention + mlp(f_);
    // An MoE layer on this GPU: its shared experts (TP-split) and its n / ep local routed experts (split
    // over expert TP); the router stays in 16 bits.
    const double etp = l_.expert_tp();
    const double expert_f = static_cast<double>(m_.expert_ffn()) / etp;
    const double local_experts = static_cast<double>(m_.num_experts) / l_.ep;
    return attention + (shared_f_ > 0 ? mlp(shared_f_) : 0.0) +
           local_experts * (h_ * glu * expert_f + expert_f * h_);
}

bool BlockBuilder::fp8_cast_in_norm() const {
    // TransformerEngine's LayerNormLinear (Megatron's TE spec for linear_qkv and linear_fc1) writes the
    // norm's output directly in FP8 (layernorm_fwd_fp8), so those two GEMMs have no separate input cast;
    // their backward transposes the saved fp8 input for wgrad (fp8_transpose, read 1 + write 1 B per
    // element). TE's delayed recipe only (its Float8Quantizer is FULLY_FUSED in normalization.cpp; the
    // block-scaled recipes are not, see above); torchao casts after the norm.
    return l_.framework == Framework::megatron && l_.fp8_recipe == Fp8Recipe::delayed;
}

bool BlockBuilder::fp8_tp_all_gather() const {
    return fp8_ && l_.framework == Framework::torchtitan && l_.fp8_recipe == Fp8Recipe::tensorwise &&
           l_.sequence_parallel && l_.tp > 1;
}

void BlockBuilder::fp8_forward_casts(OpTemplate& t, double input_elements, double weights, bool after_norm) {
    if (!fp8_) return;
    const auto c = fp8_cast_bytes(l_.fp8_recipe, E_, l_.framework);
    if (!(after_norm && fp8_cast_in_norm()))
        kernel(t, fp8_cast("fp8_cast_input", c.input_fwd, input_elements, c.te_transpose));
    if (!c.weight_per_step && !l_.fp8_param_gather)
        kernel(t, Kernel::memory("fp8_cast_weight", c.weight_fwd * weights));
}

void BlockBuilder::fp8_backward_casts(OpTemplate& t, double grad_elements, double input_elements,
                                      double weights, bool after_norm) {
    if (!fp8_) return;
    const auto c = fp8_cast_bytes(l_.fp8_recipe, E_, l_.framework);
    kernel(t, fp8_cast("fp8_cast_grad_output", c.grad_bwd, grad_elements, c.te_transpose));
    if (after_norm && fp8_cast_in_norm())
        kernel(t, fp8_transpose_only("fp8_transpose_input", input_elements));
    if (c.input_bwd > 0) kernel(t, Kernel::memory("fp8_relayout_input", c.input_bwd * input_elements));
    if (c.weight_bwd > 0 && !l_.fp8_param_gather)
        kernel(t, Kernel::memory("fp8_relayout_weight", c.weight_bwd * weights));
}

OpTemplate BlockBuilder::fp8_weight_casts_per_step(double dense_layers, double moe_layers) {
    OpTemplate t;
    if (!fp8_ || dense_layers + moe_layers <= 0) return t;
    const double weights =
        layer_linear_weights(false) * dense_layers + layer_linear_weights(true) * moe_layers;
    const auto c = fp8_cast_bytes(l_.fp8_recipe, E_, l_.framework);
    if (!c.weight_per_step) return t;
    if (l_.fp8_weights_gathered_in_fp8())  // block-scaled: quantized from the bf16 gather (layout.hpp)
        kernel(t, fp8_transpose_only("fp8_transpose_weights", weights));
    else
        kernel(t, fp8_cast("fp8_cast_transpose_weights", c.weight_fwd, weights, c.te_transpose));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::list_all_gather_copy_out(double elements, int partitions) {
    OpTemplate t;
    kernel(t, Kernel::memory("zero3_all_gather_zero_buffer", 2.0 * elements));
    const int n = std::max(partitions, 1);
    Kernel copy = Kernel::memory("zero3_all_gather_copy_out_partition", 4.0 * elements / n);
    copy.host_issue_s = kDs3ListAllGatherHostPerPartitionS;
    for (int i = 0; i < n; ++i)
        kernel(t, copy);
    flush(t);
    return t;
}

OpTemplate BlockBuilder::memory_pass(const char* name, double bytes) {
    OpTemplate t;
    kernel(t, Kernel::memory(name, bytes));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::activation_copy_wait(const char* name, ActivationCopy copy, const OpTemplate& hiding,
                                              double count) {
    OpTemplate t;
    kernel(t, Kernel::host(KernelKind::host_copy, name, 0.0));
    flush(t);
    Segment& seg = segments_[static_cast<std::size_t>(t.back().segment)];
    seg.activation_copy = copy;
    for (const Op& op : hiding)
        if (op.kind == OpKind::compute) seg.hidden_by.emplace_back(op.segment, count);
    return t;
}

OpTemplate BlockBuilder::head_forward() {
    OpTemplate t;
    const double act = T_ * h_ * E_;
    const double logits = T_ * V_ / t_;
    // The LM head runs in 16 bits also in fp8 runs (see the FP8 notes above).
    kernel(t, Kernel::memory("final_norm", norm_fwd_bytes() * h_ * Tsp_));
    if (l_.sequence_parallel) tp_unfused(t, CollectiveKind::all_gather, act, true);
    kernel(t, Kernel::gemm("lm_head_gemm", T_, V_ / t_, h_));
    if (l_.cross_entropy_fusion)
        kernel(t, Kernel::memory("fused_cross_entropy", kFusedCrossEntropyFwdBytes * logits));
    else if (l_.framework == Framework::composer)
        kernel(t,
               Kernel::memory("flash_attn_cross_entropy", kFlashAttnCrossEntropyFwdBytesPerE * E_ * logits));
    else
        kernel(t, Kernel::memory("vocab_parallel_cross_entropy", 38 * logits));
    // Max, sum of exponentials and target logit are all-reduced over TP: 3 fp32 values per token.
    tp(t, CollectiveKind::all_reduce, 3 * 4 * T_, true);
    flush(t);
    return t;
}

OpTemplate BlockBuilder::head_backward() {
    OpTemplate t;
    const double act = T_ * h_ * E_;
    const double logits = T_ * V_ / t_;
    const bool sp = l_.sequence_parallel;
    if (l_.cross_entropy_fusion)
        kernel(t, Kernel::memory("fused_cross_entropy_bwd", kFusedCrossEntropyBwdBytes * logits));
    else if (l_.framework == Framework::composer)
        kernel(t, Kernel::memory("flash_attn_cross_entropy_bwd",
                                 kFlashAttnCrossEntropyBwdBytesPerE * E_ * logits));
    else
        kernel(t, Kernel::memory("vocab_parallel_cross_entropy_bwd", 14 * logits));
    const bool regather = regathers_in_backward();  // the final norm's output, for the weight gradient
    if (regather) tp(t, CollectiveKind::all_gather, act, false);
    kernel(t, Kernel::gemm("lm_head_dgrad", T_, h_, V_ / t_));
    if (regather) tp_wait(t);
    tp_unfused(t, sp ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce, act, false);
    kernel(t, Kernel::gemm("lm_head_wgrad", V_ / t_, h_, T_));
    tp_wait(t);
    kernel(t, Kernel::memory("final_norm_bwd", norm_bwd_bytes() * h_ * Tsp_));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::bf16_hp_grad_accumulate(double params_per_rank) {
    // DeepSpeed bf16_optimizer.py, update_hp_grads (called by the engine's and the pipeline engine's backward
    // for every micro-batch): hp_grad.add_(lp.grad.to(float32)). The cast reads the bf16 gradient (2 B) and
    // writes an fp32 temporary (4 B); the add reads both fp32 tensors (8 B) and writes the sum (4 B): 18 B.
    OpTemplate t;
    kernel(t, Kernel::memory("bf16_optimizer_update_hp_grads", 18.0 * params_per_rank));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::bf16_step_gradient_passes(double params_per_rank) {
    // DeepSpeed bf16_optimizer.py, step(): get_global_norm_of_tensors over every fp32 gradient (read 4 B),
    // clip_tensors_by_global_norm (in-place scale: read and write 4 B each), then clear_hp_grads (zero_:
    // write 4 B): 16 B per parameter of the stage, before and after the partitioned Adam step.
    OpTemplate t;
    kernel(t, Kernel::memory("bf16_optimizer_grad_norm_clip", 12.0 * params_per_rank));
    kernel(t, Kernel::memory("bf16_optimizer_clear_hp_grads", 4.0 * params_per_rank));
    flush(t);
    return t;
}

OpTemplate BlockBuilder::optimizer(double params_per_rank) {
    OpTemplate t;
    // Megatron-LM mixed-precision Adam (megatron/core/optimizer/optimizer.py, fused multi-tensor apply), per
    // parameter: with 16-bit gradients (fp16 runs) the gradients are first copied to fp32 main gradients
    // (read 2 B, write 4 B); the gradient-norm / inf check reads the fp32 gradients (4 B); Adam reads
    // gradient, master weight, m and v (16 B) and writes master, m, v (12 B) and the 16-bit weight copy (2
    // B): 30 B; with bf16 moments (Layout::adam_moments_bf16, TE FusedAdam) m and v move 2 B each way: 22 B.
    // 8-bit Adam (bitsandbytes) reads and writes 1-byte moments: 18 B; SGD with momentum 22 B (gradient,
    // master, momentum read; master, momentum, 16-bit weight written); plain SGD 14 B.
    const double g = l_.grad_reduce_bytes_per_element();
    const double step_bytes = l_.optimizer == Optimizer::adam && l_.adam_moments_bf16 ? 22.0
                              : l_.optimizer == Optimizer::adam_8bit                  ? 18.0
                              : l_.optimizer == Optimizer::sgd_momentum               ? 22.0
                              : l_.optimizer == Optimizer::sgd                        ? 14.0
                                                                                      : 30.0;
    const char* step_name = l_.optimizer == Optimizer::adam_8bit      ? "adam_8bit_step"
                            : l_.optimizer == Optimizer::sgd_momentum ? "sgd_momentum_step"
                            : l_.optimizer == Optimizer::sgd          ? "sgd_step"
                                                                      : "adam_step";
    if (l_.apex_distributed_adam) {
        // Apex DistributedFusedAdam (Layout::apex_distributed_adam): the gradient norm reads the
        // grad_sync_dtype shards (g B; _local_grad_norm); the fused Adam reads the gradient shard directly
        // (no fp32 copy) with the master weight (bf16 weight + int16 remainder with store_param_remainders,
        // else fp32), m and v, and writes them back (multi_tensor_fused_adam_with_param_remainders /
        // multi_tensor_fused_adam, which also writes the 16-bit weight copy when the master is fp32):
        // g + 24 B, or g + 26 B.
        kernel(t, Kernel::memory("grad_norm_and_inf_check", g * params_per_rank));
        kernel(t, Kernel::memory("apex_distributed_adam_step",
                                 (g + (l_.apex_param_remainders() ? 24.0 : 26.0)) * params_per_rank));
    } else if (l_.offload_optimizer == Offload::none) {
        if (g < 4) kernel(t, Kernel::memory("copy_grads_to_fp32", (g + 4) * params_per_rank));
        // DeepSpeed's BF16_Optimizer takes the norm over the whole stage (bf16_step_gradient_passes).
        if (!l_.deepspeed_bf16_optimizer())
            kernel(t, Kernel::memory("grad_norm_and_inf_check", 4 * params_per_rank));
        kernel(t, Kernel::memory(step_name, step_bytes * params_per_rank));
        // fp8_param_gather: the updated fp32 master shard becomes the FP8 weight shard (Megatron
        // fp8_utils.py quantize_param_shard): its amax (read 4 B; current scaling), then the cast (read 4,
        // write 1 B), counted over the whole shard (the norms and embeddings, a few percent of it, stay
        // 16-bit), and the 16-bit copy the Adam step writes is kept (an upper bound by 1-2 B per element).
        if (l_.fp8_weights_gathered_in_fp8())
            kernel(t, Kernel::memory("fp8_quantize_param_shard",
                                     (l_.fp8_recipe == Fp8Recipe::delayed ? 5.0 : 9.0) * params_per_rank));
    } else {
        // ZeRO-Offload (Ren et al. 2021, Sec. 4): gradients go to host memory over PCIe, the CPU runs the
        // step over the fp32 master weights and moments, the updated 16-bit weights come back. ZeRO-Infinity
        // (nvme) also reads the optimizer state from NVMe and writes it back. DeepSpeed overlaps the gradient
        // copy with the backward pass in part; here the three steps follow the backward pass (an upper
        // bound).
        kernel(t, Kernel::memory("grad_norm_and_inf_check", g * params_per_rank));
        kernel(t, Kernel::host(KernelKind::host_copy, "grads_to_host", g * params_per_rank));
        if (l_.offload_optimizer == Offload::nvme)
            kernel(t, Kernel::host(KernelKind::nvme_io, "optimizer_state_from_nvme",
                                   l_.optimizer_bytes_per_param() * params_per_rank));
        kernel(t, Kernel::host(KernelKind::host_compute, "cpu_optimizer_step", step_bytes * params_per_rank));
        if (l_.offload_optimizer == Offload::nvme)
            kernel(t, Kernel::host(KernelKind::nvme_io, "optimizer_state_to_nvme",
                                   l_.optimizer_bytes_per_param() * params_per_rank));
        kernel(t, Kernel::host(KernelKind::host_copy, "params_to_gpu", 2 * params_per_rank));
    }
    flush(t);
    return t;
}

}  // namespace trainsim::detail
