// The static piles of a stage (static_piles.hpp): parameters, gradients, optimizer state, held buffers, the
// step's temporaries and what lives outside the allocator; and the MoE stage parameters they start from.
#include "static_piles.hpp"

#include <algorithm>

namespace trainsim {

MoeStageParams moe_stage_params(const ModelSpec& m, const Layout& l, int stage, double embedding_params) {
    MoeStageParams p;
    const double t = l.tp, experts_split = static_cast<double>(l.ep) * l.expert_tp();
    p.dense = embedding_params / t;
    // MLA's duplicated down-projections and the q / k norms are whole on every TP rank
    // (ModelSpec::tp_replicated_attention_params).
    const double replicated = m.tp_replicated_attention_params() * (1.0 - 1.0 / t);
    for (const std::int64_t i : stage_layer_indices(m, l, stage)) {
        p.dense += m.layer_dense_params(i) / t + replicated;
        p.experts += m.layer_expert_params(i) / experts_split;
    }
    // The MTP layers' routed experts on the loss stage (their dense part is in embedding_params: the program
    // counts it with the output layer's group).
    if (stage == l.pp - 1) p.experts += m.mtp_expert_params() / experts_split;
    p.linear = p.dense - embedding_params / t + p.experts;
    return p;
}

namespace memory_walk {

namespace {

constexpr auto P = [](Pile p) { return static_cast<std::size_t>(p); };

int communicators(const ModelSpec& m, const Layout& l, int stage) {
    int n = 0;
    if (l.tp > 1) ++n;
    if (l.cp > 1) ++n;
    if (l.dp * l.cp > 1) ++n;
    if (l.pp > 1) ++n;  // P2P to the neighbouring stages
    // The embedding group: tied embeddings, or MTP's copy of the embedding on the last stage.
    if (l.pp > 1 && (m.tied_embeddings || m.mtp_layers > 0) && (stage == 0 || stage == l.pp - 1)) ++n;
    return n;
}

/// The stage's parameters per GPU and how the layout shards them: what every static pile starts from.
struct ParamShares {
    double t = 1;                      ///< TP
    double dpc = 1;                    ///< DP x CP: ZeRO and the distributed optimizer shard over DP x CP
    double params = 0, trainable = 0;  ///< per GPU (over TP; MoE: dense + experts)
    double frozen = 0;                 ///< per GPU, the frozen base of an adapter layout
    double layers = 0;                 ///< the stage's transformer layers
    double linear = 0;                 ///< linear weights of the stage's layers, per GPU
    double edp = 1;                    ///< the expert-DP group
    bool moe = false;                  ///< an MoE model without adapters
    MoeStageParams mp;                 ///< with `moe`
    bool zero3 = false;                ///< ZeRO-3 / FSDP with DP x CP > 1
    bool sharded = false;              ///< optimizer state sharded (ZeRO-1/2/3, distributed optimizer)
    /// PyTorch FSDP: the fp32 sharded parameter is the master weight; no 16-bit shard beside it.
    bool fp32_shards = false;

    /// Per-GPU parameters left after sharding the dense part over `dense_ways` and the experts over
    /// `expert_ways` (for dense models: trainable / dense_ways).
    double sharded_params(double dense_ways, double expert_ways) const {
        return moe ? mp.dense / dense_ways + mp.experts / expert_ways : trainable / dense_ways;
    }
};

ParamShares param_shares(const ModelSpec& m, const Layout& l, const StageProgram& sp, int stage) {
    ParamShares q;
    q.t = l.tp;
    q.dpc = static_cast<double>(l.dp) * l.cp;
    q.params = sp.params / q.t;
    q.trainable = sp.trainable_params / q.t;
    q.layers = static_cast<double>(sp.layers);
    q.linear = q.layers * m.linear_params() / q.t;
    // MoE (no adapters): dense parts over TP and sharded over DP x CP, routed experts over EP x ETP and
    // sharded over the expert-DP group (Megatron-Core's distributed optimizer shards expert parameters over
    // expert_data_parallel, megatron/core/distributed/distributed_data_parallel.py expert buffers).
    q.moe = m.moe() && !l.frozen_base();
    if (q.moe) {
        q.mp = moe_stage_params(m, l, stage, sp.embedding_params);
        q.params = q.trainable = q.mp.dense + q.mp.experts;
        q.linear = q.mp.linear;
    }
    q.edp = std::max(1, l.expert_dp());
    q.frozen = q.params - (l.frozen_base() ? 0.0 : q.trainable);
    q.zero3 = l.zero_stage >= 3 && q.dpc > 1;
    q.sharded = l.sharded_optimizer() && q.dpc > 1;
    q.fp32_shards = pytorch_fsdp(l) && q.zero3 && !l.frozen_base() && l.offload_optimizer == Offload::none;
    return q;
}

/// Parameters, gradients and optimizer state (on the GPU, or in host memory when offloaded).
void add_parameter_piles(StaticPiles& s, const ParamShares& q, const Layout& l, const GpuSpec& gpu) {
    // Parameters: 16-bit weights, or NF4 linear weights (QLoRA); adapters in 16 bits; ZeRO-3 keeps 1/DP.
    double weights = l.frozen_base() ? 2.0 * q.frozen + 2.0 * q.trainable : 2.0 * q.params;
    if (l.adapter == Adapter::qlora) weights -= (2.0 - kQloraBaseBytesPerParam) * q.linear;
    if (q.fp32_shards) weights = 4.0 * q.params;
    if (q.zero3) weights = q.moe ? weights / q.params * q.sharded_params(q.dpc, q.edp) : weights / q.dpc;
    // fp8 GEMMs under Megatron (TransformerEngine with is_first_microbatch): an fp8 copy of each linear
    // weight and its transpose, cached across the micro-batches of a step, sharded like the weights. With
    // fp8_param_gather the linear weights are FP8 themselves (1 B) with their cached transpose (1 B): the
    // 2 B already counted.
    // On a GPU whose FP8 GEMMs take any layout (GpuSpec::fp8_gemm_any_layout) TE's per-tensor FP8 weight has
    // no transpose: 1 B (block-scaled recipes keep a row-wise and a column-wise copy everywhere).
    const bool transpose_free = gpu.fp8_gemm_any_layout && !block_scaled(l.fp8_recipe);
    const double linear = q.linear / (q.zero3 ? q.dpc : 1.0);  // linear weights on this GPU
    if (l.precision == Precision::fp8 && caches_fp8_weights(l) && !l.fp8_param_gather)
        weights += (transpose_free ? 1.0 : 2.0) * linear;
    if (l.fp8_weights_gathered_in_fp8() && caches_fp8_weights(l) && transpose_free) weights -= linear;
    s.piles[P(Pile::parameters)] = weights;

    const bool grad_sharded = l.zero_stage >= 2 && q.dpc > 1;
    s.piles[P(Pile::gradients)] = gradient_bytes_per_element(l) *
                                  q.sharded_params(grad_sharded ? q.dpc : 1.0, grad_sharded ? q.edp : 1.0);

    const double master = q.fp32_shards ? 4.0 : 0.0;  // counted with the parameters
    const double optimizer = (l.optimizer_bytes_per_param() - master) *
                             q.sharded_params(q.sharded ? q.dpc : 1.0, q.sharded ? q.edp : 1.0);
    if (l.offload_optimizer == Offload::none)
        s.piles[P(Pile::optimizer)] = optimizer;
    else
        s.host_bytes = optimizer;
}

/// Buffers held all along and the framework's own allocations.
void add_held_buffers(StaticPiles& s, const ParamShares& q, const ModelSpec& m, const Layout& l) {
    // The pipeline's send and receive buffers (one activation or gradient message each way), DeepSpeed
    // ZeRO-2's reduction bucket, and fp8 delayed-scaling state (amax history of 1,024 steps plus scale and
    // inverse scale, fp32, for the input, weight and output-gradient of each of 4 GEMMs per layer; current
    // scaling keeps no history).
    const double act_message = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) *
                               static_cast<double>(m.hidden) * l.activation_bytes() / l.cp / q.t;
    double buffers = l.pp > 1 ? 2.0 * act_message : 0.0;
    if (l.zero_stage == 2 && q.dpc > 1)
        buffers += std::min(l.dp_bucket_elements(), q.trainable) * gradient_bytes_per_element(l);
    if (l.precision == Precision::fp8 && l.fp8_recipe == Fp8Recipe::delayed)
        buffers += q.layers * 4 * 3 * (1024 + 2) * 4.0;
    s.piles[P(Pile::buffers)] = buffers;
    s.piles[P(Pile::framework)] = kCublasWorkspaceBytes;  // allocated through PyTorch's allocator
}

/// The temporaries of the optimizer step and of a checkpoint save.
void add_step_temporaries(StaticPiles& s, const ParamShares& q, const ModelSpec& m, const Layout& l) {
    const double updated = q.sharded_params(q.sharded ? q.dpc : 1.0, q.sharded ? q.edp : 1.0);
    if (l.apex_distributed_adam) {
        // Apex's DistributedFusedAdam: each bucket's reduce-scattered gradient shard, in grad_sync_dtype, is
        // kept from the last backward until zero_grad (GradientBucket grads_shard) and read by the fused Adam
        // directly: no fp32 copy. One shard per bucket of dp_bucket_elements() elements.
        const double g = gradient_bytes_per_element(l);
        s.optimizer_temporary = g * updated;
        s.optimizer_temporary_tensor = g *
                                       std::min(l.dp_bucket_elements(), updated * (q.sharded ? q.dpc : 1.0)) /
                                       (q.sharded ? q.dpc : 1.0);
    } else {
        // The optimizer step's temporaries: 16-bit gradients copied to fp32 (Megatron's fp16 optimizer,
        // _copy_model_grads_to_main_grads) for the parameters this GPU updates, one fp32 copy per parameter
        // tensor: the largest is a layer's widest weight (or its shard).
        if (gradient_bytes_per_element(l) < 4 && l.offload_optimizer == Offload::none)
            s.optimizer_temporary = 4.0 * updated;
        const double h = static_cast<double>(m.hidden), d = static_cast<double>(m.head_dim());
        const double widest =
            h *
            std::max((m.mlp == MlpKind::swiglu ? 2.0 : 1.0) * static_cast<double>(m.ffn_hidden),
                     static_cast<double>(m.heads + 2 * m.kv_heads) * d) /
            q.t;
        s.optimizer_temporary_tensor = 4.0 * widest / (q.sharded ? q.dpc : 1.0);
    }
    // A rank-0 save gathers the sharded state: FSDP FULL_STATE_DICT unshards one group at a time in fp32 with
    // its optimizer state; Megatron's DP-zero optimizer state gathers one bucket of one fp32 tensor at a
    // time.
    if (l.checkpoint_save == CheckpointSave::rank0) {
        const double group = l.frozen_base() ? 0.0 : q.layers > 0 ? q.trainable / q.layers : q.trainable;
        if (q.zero3)
            s.checkpoint_temporary = l.optimizer_bytes_per_param() * group;  // fp32 weight + moments
        else if (q.sharded)
            s.checkpoint_temporary = 4.0 * std::min(l.dp_bucket_elements(), q.trainable);
    }
}

}  // namespace

StaticPiles static_piles(const ModelSpec& m, const Layout& l, const StageProgram& sp, int stage,
                         const GpuSpec& gpu) {
    const ParamShares q = param_shares(m, l, sp, stage);
    StaticPiles s;
    add_parameter_piles(s, q, l, gpu);
    add_held_buffers(s, q, m, l);
    add_step_temporaries(s, q, m, l);
    s.outside_allocator =
        kCudaContextBytes + communicators(m, l, stage) * kNcclChannels * kNcclChannelBufferBytes;
    return s;
}

}  // namespace memory_walk
}  // namespace trainsim
