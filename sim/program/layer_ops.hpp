// Internal to sim/program: the op templates of one transformer layer, the embedding, the LM head and the
// optimizer.
#pragma once

#include <vector>

#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim::detail {

/// A block's ops with segment ids into Program::segments; phase and micro-batch are filled when instantiated.
using OpTemplate = std::vector<Op>;

/// Builds op templates and registers their segments in `segments`.
class BlockBuilder {
  public:
    BlockBuilder(const ModelSpec& m, const Layout& l, std::vector<Segment>& segments);

    /// A transformer layer's forward / backward; `moe`: its MLP is a mixture of experts (moe_ops.cpp).
    OpTemplate layer_forward(bool moe = false);
    OpTemplate layer_backward(bool moe = false);
    /// The same kernels as layer_forward() / layer_backward(), cut where DeepSpeed ZeRO-3 fetches the weight
    /// of a linear module (its pre-forward / pre-backward hook): before the GEMM group of each linear layer.
    /// Forward: {element-wise kernels before qkv, qkv + attention core, proj + norm, fc1 + activation,
    /// fc2 + bias-dropout-add}; backward: {bias-dropout-add, fc2 + activation, fc1 + norm, proj + attention
    /// core, qkv + input norm}. Element 0 needs no parameters; element k >= 1 needs kLayerLinearUnits'
    /// weight k - 1 (forward order) or 4 - k (backward).
    std::vector<OpTemplate> layer_forward_units();
    std::vector<OpTemplate> layer_backward_units();
    /// Weight elements per GPU of the layer's linear layers, forward order: qkv, proj, fc1, fc2.
    std::vector<double> layer_linear_unit_weights() const;
    /// Their biases (output features per GPU); 0 for models without biases (SwiGLU models).
    std::vector<double> layer_linear_unit_biases() const;
    /// With Layout::moe_a2a_overlap: where the last layer_forward() began its MLP (its index in the
    /// template), or where the last layer_backward() ended its MLP's backward (the attention's backward
    /// begins): Megatron's pre_dispatch_computation / mlp boundary of a dense layer (combined_pass.cpp).
    /// 0 without the overlap (the template is not cut there).
    std::size_t last_mlp_split() const { return mlp_split_; }
    /// Extra forward work recomputed before a layer's backward (empty for recompute = none).
    OpTemplate layer_recompute(bool moe = false);
    OpTemplate embedding_forward();
    OpTemplate embedding_backward();
    OpTemplate head_forward();  ///< final norm, LM head, vocab-parallel cross-entropy
    /// A multi-token-prediction layer's own ops before its transformer layer (mla_ops.cpp): enorm, hnorm,
    /// the concatenation and eh_proj (2h -> h, column parallel, its output gathered over TP); the
    /// embedding lookup before it and the transformer layer and the output layer after it are the
    /// embedding_*, layer_* and head_* templates.
    OpTemplate mtp_forward();
    OpTemplate mtp_backward();
    OpTemplate head_backward();
    /// FP8 with delayed scaling (TransformerEngine): each linear weight of `layers` layers is cast (with its
    /// transpose) to FP8 once per step, on the first micro-batch (is_first_microbatch), and cached for the
    /// others. Empty for other precisions and recipes.
    OpTemplate fp8_weight_casts_per_step(double dense_layers, double moe_layers = 0);
    /// One memory-bound pass of `bytes` on the main stream (FSDP / ZeRO-3 all-gather copy-out).
    OpTemplate memory_pass(const char* name, double bytes);
    /// The wait for an activation host copy (Layout::activation_offload_layers) of a layer of kind `copy`
    /// that ran beside `count` runs of `hiding`'s compute segments: one host_copy kernel whose bytes the
    /// memory model sets (Segment::activation_copy), lasting what those segments did not hide
    /// (Segment::hidden_by).
    OpTemplate activation_copy_wait(const char* name, ActivationCopy copy, const OpTemplate& hiding,
                                    double count);
    /// DeepSpeed 2021 ZeRO-3's all-gather of `elements` parameters into a list of `partitions` tensors
    /// (partition_parameters.py _allgather_param): the zeroed 16-bit flat buffer (2 B per element), then
    /// ProcessGroupNCCL's copy of the flattened result into each partition, one copy kernel per partition
    /// (read and write 2 B per element in all), each issued no faster than the host's per-partition work
    /// (Kernel::host_issue_s = kDs3ListAllGatherHostPerPartitionS, layout.hpp).
    OpTemplate list_all_gather_copy_out(double elements, int partitions);
    /// Optimizer step over `params_per_rank` parameters (Adam, mixed precision).
    OpTemplate optimizer(double params_per_rank);
    /// DeepSpeed BF16_Optimizer: after each micro-batch's backward, the bf16 gradients of `params_per_rank`
    /// parameters are added into their fp32 copies (Layout::deepspeed_bf16_optimizer).
    OpTemplate bf16_hp_grad_accumulate(double params_per_rank);
    /// DeepSpeed BF16_Optimizer.step() passes over all `params_per_rank` fp32 gradients of the stage (not
    /// only the rank's partition): global norm, clipping, zeroing.
    OpTemplate bf16_step_gradient_passes(double params_per_rank);

  private:
    /// Records a fetch-unit boundary (layer_*_units) at the current end of `t`.
    void unit_boundary(OpTemplate& t);
    std::vector<std::size_t>* unit_starts_ = nullptr;
    std::size_t mlp_split_ = 0;
    /// Records the MLP boundary (last_mlp_split) at the current end of `t`, with the overlap only.
    void mlp_split(OpTemplate& t);
    OpTemplate layer_recompute_selective_op();
    /// Megatron's selective recompute modules beyond core_attn (Layout::recompute_modules), forward again.
    void recompute_modules_forward(OpTemplate& t, bool moe);
    /// The routed experts' activation (moe_ops.cpp), as moe_forward runs it: what moe_act recomputes.
    void moe_activation_forward(OpTemplate& t);
    double norm_fwd_bytes() const;  ///< per element of the normalized tensor
    double norm_bwd_bytes() const;
    double act_fwd_bytes() const;  ///< MLP activation, per element of f
    double act_bwd_bytes() const;
    /// Rotary embedding of q and k as eager ops (eager torchtitan only; fused elsewhere, not counted).
    void rope(OpTemplate& t, bool backward);
    /// ModelSpec::qk_layernorm's query and key norms (forward, or their backward).
    void qk_norms(OpTemplate& t, bool backward);
    void kernel(OpTemplate& t, const Kernel& k);
    void tp(OpTemplate& t, CollectiveKind kind, double bytes, bool wait);
    /// A TP collective that torchtitan's async TP leaves as DTensor issues it without async TP
    /// (funcol, with its chunk + cat copy): Inductor's micro-pipeline pass (torch/_inductor/fx_passes/
    /// micro_pipeline_tp.py) fuses only an all-gather whose consumers are mms and a reduce-scatter whose
    /// input is one mm's output (_find_producer_matmul), and only inside the compiled transformer blocks
    /// (torchtitan apply_compile compiles each block; embedding, final norm and output run eager). So the
    /// embedding's and the LM head's collectives and the input-gradient reduce-scatter of wq/wk/wv and of
    /// w1/w3 (a sum of the mms of the linears sharing the input) are not fused. Same as tp() otherwise.
    void tp_unfused(OpTemplate& t, CollectiveKind kind, double bytes, bool wait);
    /// torchtitan async TP: the fused ops of PyTorch's symmetric memory (torch/distributed/
    /// _symmetric_memory/__init__.py, 2024-2025).
    bool symm_mem_tp() const;
    /// fused_all_gather_matmul (_pipelined_all_gather_and_consume): each rank first copies its shard into
    /// its symmetric-memory buffer and barriers before the first (local) mm, not overlapped ("we are giving
    /// up the chance to overlap mv and b with the first shard_consumer"): one read and write of the shard of
    /// the gathered `gathered_bytes`.
    void symm_mem_shard_copy(OpTemplate& t, double gathered_bytes);
    void tp_wait(OpTemplate& t);
    void cp_collective(OpTemplate& t, CollectiveKind kind, double bytes);
    void flush(OpTemplate& t);
    /// An MoE layer's MLP (router, permute, dispatch all-to-all, the local experts' grouped GEMMs, combine,
    /// unpermute) as Megatron-Core's alltoall token dispatcher runs it (moe_ops.cpp); backward reversed.
    void moe_forward(OpTemplate& t);
    void moe_backward(OpTemplate& t);
    /// TEGroupedMLP._apply_bias with ModelSpec::moe_expert_bias (moe_ops.cpp): its per-expert kernels.
    void moe_expert_bias(OpTemplate& t, bool backward);
    /// The eager clamp before the experts' activation with ModelSpec::moe_activation_clamp (moe_ops.cpp).
    void moe_activation_clamp(OpTemplate& t, bool backward);
    /// The EP all-to-all (token dispatch or combine) of `bytes` per rank, blocking, on the TP stream.
    void ep_all_to_all(OpTemplate& t, double bytes);
    /// MoE with expert TP > 1: the all-gather (reduce-scatter) of the dispatched tokens over the expert-TP
    /// group, blocking, on the TP stream (the TP group when expert TP = TP).
    void etp_collective(OpTemplate& t, CollectiveKind kind, double bytes);
    /// Column-parallel GEMM preceded (SP) by the all-gather of its input (in FP8 with fp8_tp_all_gather()).
    void column_forward(OpTemplate& t, const Kernel& gemm);
    /// Row-parallel GEMM followed by the all-reduce (reduce-scatter with SP) of its output; overlapped
    /// (tp_comm_overlap): the chunks' collectives run beside the chunked GEMM, the last chunk's after it
    /// (exposed).
    void row_forward(OpTemplate& t, const Kernel& gemm);
    /// Row-parallel backward: with SP, the output gradient is all-gathered first (backward of the
    /// reduce-scatter); no weight gradient for a frozen base.
    void row_backward(OpTemplate& t, const Kernel& dgrad, const Kernel& wgrad);
    /// Column-parallel backward (Megatron LinearWithGradAccumulationAndAsyncCommunication): with SP the input
    /// is all-gathered again (regathers_in_backward), overlapped with the data-gradient GEMM; the input
    /// gradient's all-reduce (reduce-scatter) is launched asynchronously and overlapped with the
    /// weight-gradient GEMM. `in`: the width of the GEMM's input (hidden, or MLA's latent ranks).
    void column_backward(OpTemplate& t, const Kernel& dgrad, const Kernel& wgrad, double in);
    /// Elements a column-parallel GEMM's input is cast to FP8 from: the shard when cast before the
    /// all-gather (fp8_tp_all_gather), else the gathered input.
    double column_cast_elements() const;
    /// Self-attention without MLA: QKV GEMM, RoPE, the attention core, output projection (forward), and back.
    void attention_forward(OpTemplate& t);
    void attention_backward(OpTemplate& t);
    /// A dense MLP of width f (the layer's, or an MoE layer's shared experts): fc1, activation, fc2; and
    /// back.
    void mlp_forward(OpTemplate& t, double f);
    void mlp_backward(OpTemplate& t, double f);
    void attention_core_forward(OpTemplate& t);
    /// Layout::fp8_attention: the quantize and dequantize passes around the FP8 attention call(s).
    void fp8_attention_casts(OpTemplate& t, bool backward);
    void attention_core_backward(OpTemplate& t);
    /// torchtitan's repeat_kv of K and V before SDPA and its gradient (layer_ops.cpp); nothing elsewhere.
    void repeat_kv(OpTemplate& t, bool backward);
    /// Fused attention of a model with a sliding window, cp = 1: the full and the windowed layers' calls over
    /// their shares of the `heads` (this micro-batch's heads on this GPU), head width `d`, `bytes` the
    /// layer's Q, K, V and O traffic (layer_ops.cpp).
    void fused_attention_with_window(OpTemplate& t, double heads, double d, double bytes, bool backward);
    /// Context parallelism as TransformerEngine runs it for Megatron (cp_attention.cpp): one fused-attention
    /// call per CP step with the partial outputs merged (forward), the steps' gradients accumulated
    /// (backward), the K/V ring beside them.
    void te_cp_attention_forward(OpTemplate& t);
    void te_cp_attention_backward(OpTemplate& t);
    /// The CP steps' fused-attention calls (the forward's, or the backward's at 2.5x the FLOPs and twice the
    /// bytes).
    void te_cp_attention_calls(OpTemplate& t, bool backward);
    /// Bytes of one CP step's fused attention: Q and O of `q_len` queries, K and V of `kv_len` keys.
    double cp_attention_bytes(double q_len, double kv_len) const;
    /// Multi-head latent attention (mla_ops.cpp), Megatron-Core MLASelfAttention with the TransformerEngine
    /// spec: from the down-projections to the output projection's TP collective (forward), and back
    /// (backward). The input norm, residual adds and the MLP are layer_forward's / layer_backward's.
    void mla_forward(OpTemplate& t);
    void mla_backward(OpTemplate& t);
    /// The q / kv up-projections with their norms, SP all-gathers and the fused RoPE: what Megatron's
    /// selective recompute of "mla_up_proj" runs again before the layer's backward.
    void mla_up_proj_forward(OpTemplate& t);
    void adapter_forward(OpTemplate& t, bool targeted, double in, double out);
    void adapter_backward(OpTemplate& t, bool targeted, double in, double out);
    void dequantize(OpTemplate& t, double weights);
    /// FP8 casts before a linear layer's forward GEMM: its input of `input_elements` and, unless the recipe
    /// caches it per step, its weight of `weights` elements.
    /// `after_norm`: the GEMM's input is a norm's output (qkv, fc1), which TE writes in FP8 itself.
    void fp8_forward_casts(OpTemplate& t, double input_elements, double weights, bool after_norm = false);
    /// FP8 casts and transposes of a linear layer's backward: the output gradient (`grad_elements`), and what
    /// the recipe re-lays out for dgrad / wgrad (`input_elements`, `weights`).
    void fp8_backward_casts(OpTemplate& t, double grad_elements, double input_elements, double weights,
                            bool after_norm = false);
    bool fp8_cast_in_norm() const;
    /// torchao Float8 tensorwise under torchtitan's TP with SP (Float8ColwiseParallel, the default for
    /// Float8Linear: torchtitan docs/float8.md): the sequence-sharded input of a column-parallel GEMM is cast
    /// to FP8 before its all-gather, which then moves 1 B per element.
    bool fp8_tp_all_gather() const;
    /// torchtitan's TP with SP as DTensor runs it (torch/distributed/_functional_collectives.py,
    /// all_gather_tensor and reduce_scatter_tensor, PyTorch 2.4-2.7): the sequence dimension is dim 1 of
    /// [batch, seq, hidden], and funcol gathers and scatters along dim 0 only, so an all-gather with
    /// gather_dim != 0 is followed by torch.cat(torch.chunk(out, group_size, dim=0), dim=gather_dim) and a
    /// reduce-scatter with scatter_dim != 0 is preceded by torch.cat(torch.chunk(in, group_size,
    /// dim=scatter_dim)): one copy of the whole (gathered) tensor each, read and written. Async TP's fused
    /// all-gather-matmul and matmul-reduce-scatter (torch/distributed/_symmetric_memory) work on
    /// movedim'ed views instead: no copy; the collectives async TP does not fuse keep it (tp_unfused).
    bool funcol_chunk_cat() const;
    /// Megatron saves a column-parallel GEMM's input sequence-sharded and all-gathers it again in the
    /// backward; torchtitan's DTensor linears save the gathered input (recomputation gathers it again in the
    /// recompute pass).
    bool regathers_in_backward() const;
    /// Splits of an overlapped all-gather -> GEMM (ring exchange: TP chunks) and GEMM -> reduce-scatter, and
    /// the SMs the latter's communication kernels hold (the constants in layer_ops.cpp).
    int overlap_rs_splits() const;
    double overlap_rs_comm_sms() const;
    /// Weights of one layer's linear layers on this GPU.
    double layer_linear_weights(bool moe = false) const;

    const ModelSpec& m_;
    const Layout& l_;
    std::vector<Segment>& segments_;
    std::vector<Kernel> open_;
    std::string open_name_;
    bool unfused_tp_ = false;  ///< inside tp_unfused()
    // shapes
    double b_, s_, h_, a_, g_, d_, f_, t_, V_, T_, Tsp_, E_, gemm_elem_, cp_;
    /// The attention core's widths: query/key head dqk_, value head dv_, and the K/V heads it reads kvh_
    /// (standard attention: d, d, g; MLA: d + qk_rope_head_dim, v_head_dim, a -- the up-projection gives
    /// every head its own K and V).
    double dqk_ = 0, dv_ = 0, kvh_ = 0;
    bool repeat_kv_ = false;  ///< torchtitan: K and V repeated to the a query heads before SDPA (kvh_ = a)
    double shared_f_ = 0;     ///< MoE: total FFN width of the shared experts (0: none)
    bool fp8_ = false;
};

}  // namespace trainsim::detail
