// Training layout: how the model is parallelized and trained, and its checks.
//
// Rank order follows Megatron-LM's default `tp-cp-ep-dp-pp` (megatron/core/parallel_state.py): TP fastest,
// then CP, then DP, then PP: global rank = tp_rank + tp·(cp_rank + cp·(dp_rank + dp·pp_rank)). GPU g sits on
// node g / gpus_per_node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/model.hpp"
#include "trainsim/schema.hpp"

namespace trainsim {

enum class Schedule { one_f_one_b, gpipe };
/// Activation recomputation (checkpointing):
///   none       every activation kept;
///   selective  Megatron's selective recompute: the attention core (scores, softmax, dropout) recomputed,
///              everything else kept (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 5); free with flash
///              attention, which never stores the scores;
///   selective_op  torchtitan's per-op selective activation checkpointing (AC mode "selective", option
///              "op"): the outputs of matmuls, SDPA and reduce-scatters are saved, except every second
///              matmul of a block, and everything else (norms, activations, RoPE, casts) is recomputed
///              (torchtitan parallelize_llama.py, _op_sac_save_list and the mm counter of
///              _get_custom_policy);
///   full       every layer's input kept, the layer recomputed in backward.
enum class Recompute { none, selective, selective_op, full };
/// The attention kernel: `flash` FlashAttention-2 (Dao 2023; PyTorch SDPA's flash backend, flash-attn),
/// `cudnn` cuDNN fused attention (TransformerEngine's FusedAttention, preferred on sm90+; PyTorch SDPA's
/// cuDNN backend), both fused (scores never stored); `unfused` materialises the s x s scores (Megatron's
/// fused scale-mask-softmax path); `flash1` a FlashAttention-1-class fused kernel (Dao et al. 2022:
/// flash-attn 1.x, and its Triton port that llm-foundry runs as `attn_impl: triton`), timed as `flash` at
/// kFlashAttention1RelativeSpeed of its rate (compute.hpp).
enum class AttentionKernel { flash, cudnn, unfused, flash1 };
/// Low-precision recipe of the linear layers' GEMMs (precision fp8; TransformerEngine's recipes all run
/// under its fp8_autocast / autocast, transformer_engine/common/recipe/__init__.py):
///   delayed     per-tensor FP8 scales from an amax history (TransformerEngine DelayedScaling, Megatron's
///               default `--fp8-recipe delayed`);
///   tensorwise  per-tensor FP8 current scaling: an amax reduction over each tensor before its cast
///               (TE Float8CurrentScaling; torchao Float8 "tensorwise", torchtitan's default);
///   rowwise     per-row FP8 current scaling (torchao Float8 "rowwise"): an amax per row, communications in
///               bf16;
///   mxfp8       TE MXFP8BlockScaling (Megatron `--fp8-recipe mxfp8`): E4M3 elements with one E8M0 scale per
///               32 consecutive elements (1 + 1/32 B per element), row-wise (1x32) and column-wise (32x1)
///               copies quantized separately from the 16-bit tensor; no amax history or reduction; GEMMs
///               at the FP8 rate on block-scaled tensor cores (Blackwell only: GpuSpec::block_scaled_mma);
///   nvfp4       TE NVFP4BlockScaling (Megatron `--fp4-format e2m1 --fp4-recipe nvfp4`, Megatron-Bridge
///               bf16_with_nvfp4_mixed): E2M1 elements with one E4M3 scale per 16 (0.5 + 1/16 B per
///               element) and one fp32 scale per tensor (its amax taken in a pass before the cast); random
///               Hadamard transform on the column-wise (wgrad) copies of inputs and gradients, stochastic
///               rounding on gradients, 16x16 blocks for weights; fprop, dgrad and wgrad GEMMs all in FP4 at
///               the FP4 rate (Blackwell only). Attention, norms and the LM head stay 16-bit as with FP8.
/// Costs of each recipe's quantization passes: sim/program/layer_ops.cpp; GEMM rates: compute.hpp.
enum class Fp8Recipe { delayed, tensorwise, rowwise, mxfp8, nvfp4 };
/// True for the block-scaled recipes (mxfp8, nvfp4): they need block-scaled tensor cores
/// (GpuSpec::block_scaled_mma) and keep no per-tensor amax history.
inline bool block_scaled(Fp8Recipe r) {
    return r == Fp8Recipe::mxfp8 || r == Fp8Recipe::nvfp4;
}
/// Optimizer and the state it keeps per trainable parameter, besides the 16-bit weight (docs/memory.md):
///   adam          fp32 master weight + fp32 m + fp32 v = 12 B (Megatron-LM theoretical_memory_usage.py);
///                 8 B with bf16 moments (Layout::adam_moments_bf16)
///   adam_8bit     fp32 master + 8-bit m + 8-bit v = 6 B, plus one fp32 absmax per 2,048-element block for
///                 each moment (Dettmers et al. 2022, arXiv:2110.02861, block-wise quantization)
///   sgd_momentum  fp32 master + fp32 momentum = 8 B
///   sgd           fp32 master = 4 B
enum class Optimizer { adam, adam_8bit, sgd_momentum, sgd };
/// Where the optimizer state and fp32 master weights live: on the GPU; in host memory, the step computed by
/// the CPU (ZeRO-Offload, Ren et al. 2021, arXiv:2101.06840); or on NVMe, streamed through host memory
/// (ZeRO-Infinity, Rajbhandari et al. 2021, arXiv:2104.07857).
enum class Offload { none, cpu, nvme };
/// Parameter-efficient fine-tuning: LoRA (Hu et al. 2021, arXiv:2106.09685: frozen base, trainable rank-r
/// A·B on the chosen projections) or QLoRA (Dettmers et al. 2023, arXiv:2305.14314: the frozen base stored in
/// 4-bit NF4 with double quantization, adapters in 16 bits, paged optimizer).
enum class Adapter { none, lora, qlora };
/// How a checkpoint is saved: every rank writes its own shard (Megatron torch_dist, FSDP SHARDED_STATE_DICT),
/// or rank 0 gathers the full state (FSDP FULL_STATE_DICT, Megatron's legacy DP-zero optimizer state).
enum class CheckpointSave { sharded, rank0 };
/// The training framework, where its behaviour differs for the same layout:
///   megatron   Megatron-LM / Megatron-Core: the distributed optimizer reduce-scatters the gradients.
///   deepspeed  DeepSpeed (Megatron-DeepSpeed): with bf16 and ZeRO stage 1 the BF16_Optimizer all-reduces
///              the fp32 gradients (engine.allreduce_gradients -> buffered_allreduce_fallback on
///              get_grads_for_reduction()), steps its 1/DP partition and all-gathers the bf16 weights
///              (bf16_optimizer.py, update_lp_params). Its pipeline engine partitions P2P activations and
///              gradients over the TP ranks as Megatron does (pipe/engine.py, is_pipe_partitioned).
///   torchtitan PyTorch torchtitan: FSDP2 (fully_shard per TransformerBlock), DTensor TP (vanilla or async
///              TP under torch.compile), per-op or per-layer activation checkpointing, torchao Float8,
///              PyTorch context parallel (ring attention).
///   composer   MosaicML Composer / llm-foundry: PyTorch FSDP (FSDP1) with its sharding strategies and
///              per-block activation checkpointing.
///   pytorch    plain eager PyTorch DDP / FSDP, no fused kernels beyond what PyTorch ships.
/// The behaviour each selects (attention backend, overlaps, checkpointing, reshard policy, FP8 recipe) is
/// documented in docs/compute-model.md with the framework file it comes from
/// (../shared/design/frameworks.md is the survey).
enum class Framework { megatron, deepspeed, torchtitan, composer, pytorch };

/// Host time per partition of DeepSpeed 2021 ZeRO-3's list all-gather (s; framework: DeepSpeed v0.3.12-v0.5.8
/// on PyTorch 1.8-1.10, eager). Per gathered parameter and per DP partition the host runs, in
/// partition_parameters.py _allgather_param, a Python loop building the partition list (flat_tensor.narrow,
/// torch.distributed.get_rank(group), list append), then in ProcessGroupNCCL::allgather the checks of each
/// output tensor and, after the NCCL call, recordStream and copy_ into each partition: host work that grows
/// with the DP degree, issued right after a torch.cuda.synchronize() (the GPU waits on it). Source: DeepSpeed
/// issue #1069 (zarzen, 2021-06-21; DeepSpeed 0.3.16, PyTorch 1.8.0, 8 x A100 p4d): one parameter's
/// all-gather over 8 ranks spends ~250 us in the launch (after ~130 us of pre-launch, which holds the device
/// synchronize's wait): 250 us / 8 partitions, the launch's fixed part (one Python call, one ncclAllGather
/// enqueue) taken as small beside it. Not fitted to any run.
inline constexpr double kDs3ListAllGatherHostPerPartitionS = 250e-6 / 8;

/// Bytes per parameter of the int16 remainder that Apex's DistributedFusedAdam keeps with
/// store_param_remainders (bf16 weights, fp32 optimizer): the low 16 bits of the fp32 master weight whose
/// high 16 bits are the bf16 weight itself (apex/contrib/optimizers/distributed_fused_adam.py StateBucket
/// param_remainders_shard, torch.int16).
inline constexpr double kApexParamRemainderBytes = 2.0;

/// Megatron-Core's MoE token dispatcher (--moe-token-dispatcher-type, --moe-flex-dispatcher-backend):
///   alltoall  MoEAlltoAllTokenDispatcher: the tokens are permuted into top-k copies sorted by expert and
///             exchanged by an NCCL all-to-all: k copies of each token, one per chosen expert, even when
///             two chosen experts sit on one rank (transformer/moe/token_dispatcher.py);
///   deepep    the flex dispatcher with DeepEP (deepseek-ai/DeepEP): get_dispatch_layout marks
///             is_token_in_rank[token][rank] when at least one of the token's experts is on that rank, and
///             dispatch sends each token once to each such rank, the receiver expanding it to its local
///             experts (Megatron transformer/moe/fused_a2a.py FusedDispatch; DeepEP csrc/kernels/layout.cu);
///   hybridep  the flex dispatcher with HybridEP (DeepEP's hybrid-ep branch, core v0.15+): dispatch with
///             permute from the routing map and the experts per rank (fused_a2a.py HybridEPDispatch), one
///             copy per destination rank as DeepEP.
/// The flex backends' bytes per rank: docs/compute-model.md, "MoE token dispatchers".
enum class MoeDispatcher { alltoall, deepep, hybridep };

/// Bytes per base weight of QLoRA's 4-bit NormalFloat storage with double quantization: 4 bits, plus the
/// block constants, 8-bit per 64 weights and fp32 per 256 blocks: 4 + 8/64 + 32/(64·256) = 4.127 bits
/// (Dettmers et al. 2023, arXiv:2305.14314, Sec. 3 "Double Quantization").
inline constexpr double kQloraBaseBytesPerParam = (4.0 + 8.0 / 64.0 + 32.0 / (64.0 * 256.0)) / 8.0;

/// Megatron-Core's modules of selective recomputation (`--recompute-granularity selective
/// --recompute-modules ...`; megatron/core/transformer/transformer_config.py recompute_modules, default
/// ["core_attn"]; transformer_layer.py, moe/experts.py, moe/moe_layer.py), with Layout::recompute =
/// selective. Each discards what its module stored for the backward and runs the module's forward again
/// before the layer's backward (sim/memory/activations.cpp, sim/program/layer_ops.cpp):
///   core_attn       the attention core (only unfused attention stores anything: its scores);
///   layernorm       the outputs of the norms that are separate modules: the pre-MLP norm of MoE layers and
///                   the input norm of MLA layers (TransformerEngine fuses the others into the next linear
///                   layer: IdentityOp, nothing to discard);
///   mlp             the dense MLP of non-MoE layers (Megatron skips MoE layers), all its tensors but its
///   input; moe             the whole MoE block (router, dispatch, experts, combine) from its input; moe_act
///   the routed experts' activation output (fc2's input); shared_experts  the shared experts' tensors.
/// mla_up_proj is Layout::recompute_mla_up_proj.
struct RecomputeModules {
    bool core_attn = true;
    bool layernorm = false, mlp = false, moe = false, moe_act = false, shared_experts = false;
    /// The list named "mla_up_proj", which sets Layout::recompute_mla_up_proj: kept so that the check of
    /// that flag names the field the user wrote (layout.recompute_modules, not recompute_mla_up_proj).
    bool mla_up_proj = false;
    /// Anything beyond Megatron's default ["core_attn"].
    bool beyond_default() const { return !core_attn || layernorm || mlp || moe || moe_act || shared_experts; }
    /// The modules on, by Megatron's names in this order, with "mla_up_proj" last when `with_mla_up_proj`.
    std::vector<std::string> names(bool with_mla_up_proj) const;
    friend bool operator==(const RecomputeModules&, const RecomputeModules&) = default;
};

/// The linear layers of a transformer block that LoRA adapters may target.
struct LoraTargets {
    bool qkv = true, proj = true, fc1 = true, fc2 = true;  ///< QLoRA's "all linear layers" by default
    friend bool operator==(const LoraTargets&, const LoraTargets&) = default;
};

struct Layout {
    int tp = 1;
    int pp = 1;
    int dp = 1;
    /// Context parallelism: the sequence is split over cp ranks (two chunks each, load-balanced for the
    /// causal mask); attention exchanges K/V blocks around the CP ring (Megatron-Core + TransformerEngine
    /// "ring attention"); gradients are reduced over DP x CP. Needs flash attention.
    int cp = 1;
    int vpp = 1;  ///< virtual pipeline stages per rank (interleaved 1F1B when > 1)
    /// Expert parallelism (MoE models): the routed experts of each MoE layer split over ep ranks
    /// (num_experts / ep each), tokens dispatched to them by all-to-all. As in Megatron-Core
    /// (megatron/core/parallel_state.py initialize_model_parallel, the expert RankGenerator), the EP ranks
    /// are carved out of TP x CP x DP of each pipeline stage: its ranks are decomposed a second time as
    /// etp-ep-edp (expert TP fastest), so gpus() stays tp * pp * dp * cp.
    int ep = 1;
    /// Expert tensor parallelism: each routed expert's FFN split over etp ranks; 0 -> tp (Megatron-Core's
    /// default: --expert-tensor-parallel-size unset is tensor_model_parallel_size).
    int etp = 0;
    /// Expert TP size: etp, or tp when 0.
    int expert_tp() const { return etp > 0 ? etp : tp; }
    /// Expert data parallelism (EDP, Megatron-Core's expert_data_parallel group): the ranks of one pipeline
    /// stage that hold the same experts, tp * cp * dp / (expert_tp() * ep); routed-expert gradients are
    /// reduced over them (dense gradients over DP x CP).
    int expert_dp() const { return tp * cp * dp / (expert_tp() * ep); }
    std::int64_t micro_batch = 1;
    std::int64_t global_batch = 1;
    Schedule schedule = Schedule::one_f_one_b;
    bool sequence_parallel = false;
    Recompute recompute = Recompute::none;
    /// With recompute full: Megatron's `--recompute-method block --recompute-num-layers N`: only the first N
    /// transformer layers of each model chunk are recomputed; the others keep every activation as without
    /// recompute (megatron/core/transformer/transformer_block.py, _checkpointed_forward, method "block").
    /// 0: every layer is recomputed.
    std::int64_t recompute_num_layers = 0;
    /// With recompute selective and MLA: Megatron's `--recompute-modules mla_up_proj` (with its default
    /// core_attn): the q / kv up-projections and RoPE (MultiLatentAttention.recompute_up_proj,
    /// qkv_up_checkpoint) are run again before the layer's backward, their outputs (query, key, value)
    /// not stored.
    bool recompute_mla_up_proj = false;
    /// With recompute selective: the modules recomputed (Megatron --recompute-modules; RecomputeModules).
    RecomputeModules recompute_modules;
    /// Activation offloading to host memory: Megatron-Core `--cpu-offloading --cpu-offloading-num-layers N`
    /// (TransformerConfig.cpu_offloading*, TransformerBlock's get_cpu_offload_context, Transformer Engine
    /// transformer_engine/pytorch/cpu_offload.py, AsyncDoubleBufferGroupOffloadHandler). The first N
    /// transformer layers (forward order) have their saved activations copied to pinned host memory on a
    /// side stream after their forward; the copy of layer i is waited for, and the GPU copy freed, at the end
    /// of layer w(i)'s forward, w(i) = TE's layer_window_map (the offloads spread evenly over the layers,
    /// offload_window_layer); in backward the copy back starts before layer w(i)'s backward and is waited
    /// for before layer i's. Megatron-Core allows it with 0 <= N < layers, pp = 1 and no recompute
    /// (TransformerConfig.__post_init__); the same is checked here. 0: off.
    std::int64_t activation_offload_layers = 0;
    /// True when layer `index_in_chunk` (0-based, forward order within its model chunk) is recomputed.
    bool layer_recomputed(std::int64_t index_in_chunk) const {
        if (recompute == Recompute::none) return false;
        return recompute != Recompute::full || recompute_num_layers <= 0 ||
               index_in_chunk < recompute_num_layers;
    }
    Precision precision = Precision::bf16;
    bool distributed_optimizer = false;
    /// ZeRO stage (Rajbhandari et al. 2020, arXiv:1910.02054): 1 shards the optimizer state over DP (as
    /// Megatron's distributed optimizer), 2 also the gradients (reduce-scattered every micro-batch,
    /// DeepSpeed), 3 also the parameters (all-gathered per layer just in time in forward and backward,
    /// prefetching the next layer: DeepSpeed stage 3, PyTorch FSDP FULL_SHARD when tp = pp = 1).
    int zero_stage = 0;
    /// DP gradient bucket size, expressed as bytes of fp32 elements (Megatron-LM sizes buckets in elements:
    /// 40M elements = 160 MB); a bucket holds dp_bucket_bytes / 4 gradients whatever their precision. 0: the
    /// framework's default (dp_bucket_elements()).
    double dp_bucket_bytes = 0;
    bool overlap_grad_reduce = false;  ///< DP gradient reduction overlapped with the last backward
    bool overlap_param_gather =
        false;                     ///< distributed optimizer's parameter all-gather overlapped with forward
    bool tp_comm_overlap = false;  ///< TP collectives overlapped with the adjacent GEMMs (TE userbuffers)
    /// Megatron-Core `--overlap-moe-expert-parallel-comm` (with `--delay-wgrad-compute`; core v0.14+): the
    /// combined 1F1B schedule (megatron/core/pipeline_parallel/combined_1f1b.py): each steady-state forward
    /// of one micro-batch runs merged, layer by layer, with the backward of another, the EP dispatch and
    /// combine all-to-alls of one on a communication stream under the other's compute
    /// (model_chunk_schedule_plan.py, TransformerLayerSchedulePlan.run); one extra warm-up forward
    /// (schedules.py get_pp_rank_microbatches). Needs vpp > 1 when pp > 1 (Megatron asserts it); no effect
    /// with ep = 1. See docs/compute-model.md, "MoE all-to-all overlap".
    bool moe_a2a_overlap = false;
    MoeDispatcher moe_dispatcher = MoeDispatcher::alltoall;  ///< the MoE token dispatcher (see MoeDispatcher)
    /// Megatron-Core `--use-transformer-engine-op-fuser` (core v0.16+, TE >= 2.14; experts.py
    /// TEGroupedMLP._is_fused_impl_supported): the experts run as TE fused ops (GroupedLinear, scaled
    /// activation) that take fc2's bias and the routing probabilities inside, so ModelSpec::moe_expert_bias
    /// costs no extra memory passes. Off: TEGroupedMLP._apply_bias adds them in PyTorch (moe_ops.cpp).
    bool moe_fused_grouped_mlp = false;
    AttentionKernel attention = AttentionKernel::flash;
    /// TransformerEngine's FP8 fused attention (Megatron `--fp8-dot-product-attention`, TE recipe
    /// `fp8_dpa`; Megatron-Bridge `mixed_precision.fp8_dot_product_attention`): Q, K, V (forward) and the
    /// output gradient (backward) are quantized to FP8 and cuDNN's FP8 attention kernels run the matmuls at
    /// the FP8 rate (ComputeModel); the output and the input gradients come back in 16 bits
    /// (fp8_mha off: transformer_engine/pytorch/attention/dot_product_attention/backends.py FusedAttnFunc).
    /// Needs precision fp8 and attention cudnn (layout_violations). Memory: the attention core's saved Q, K,
    /// V and output are its FP8 copies, 1 byte per element (sim/memory/activations.cpp).
    bool fp8_attention = false;
    /// True when the attention kernel is fused (flash or cuDNN): the s x s scores are never stored.
    bool fused_attention() const { return attention != AttentionKernel::unfused; }
    Fp8Recipe fp8_recipe = Fp8Recipe::delayed;
    /// Megatron-LM `--fp8-param-gather` (precision fp8, TransformerEngine recipes): the model keeps its
    /// linear weights in FP8 (TE `fp8_model_init`: a Float8Tensor of 1 B per element, its transpose cached
    /// for the step, 1 B), the distributed optimizer's fp32 master shard is quantized to FP8 after each step,
    /// and the DP all-gather of those weights moves 1 B per element; no weight is cast in the forward. Off in
    /// Megatron-LM (arguments.py); set by Megatron-Bridge's FP8 recipes (bf16_with_fp8_mixed,
    /// bf16_with_fp8_current_scaling_mixed in src/megatron/bridge/training/mixed_precision.py).
    /// With the block-scaled recipes (mxfp8, nvfp4) Megatron keeps the block-scaled weights (no bf16 weight
    /// copy) but all-gathers the parameters in bf16 through the gradient buffer and quantizes them into the
    /// weights after the gather, once per step (Megatron-Bridge bf16_with_mxfp8_mixed sets fp8_param_gather
    /// with reuse_grad_buf_for_mxfp8_param_ag; megatron/core/distributed/distributed_data_parallel.py: "The
    /// parameters are cast from bf16 to MXFP8 during copy"): see fp8_weights_gathered_in_fp8().
    bool fp8_param_gather = false;
    /// True when fp8_param_gather makes the DP all-gather move FP8 weights (1 B per linear weight) and the
    /// optimizer quantize its master shard: a per-tensor or per-row FP8 recipe. False for the block-scaled
    /// recipes, whose gather is 16-bit and whose weights are quantized after it (fp8_param_gather above).
    bool fp8_weights_gathered_in_fp8() const {
        return precision == Precision::fp8 && fp8_param_gather && !block_scaled(fp8_recipe);
    }
    /// Megatron-LM `--cross-entropy-loss-fusion` with `--cross-entropy-fusion-impl te` (TransformerEngine's
    /// parallel_cross_entropy, Triton): the loss reads the 16-bit logits twice (online max / sum of
    /// exponentials, then loss and gradient) and writes the gradient in place in the forward; the backward
    /// scales it. Off in Megatron-LM; on in Megatron-Bridge (GPTModelProvider cross_entropy_loss_fusion =
    /// True; the Llama 3 providers select impl "te"). Off: the unfused fp32 loss of
    /// tensor_parallel/cross_entropy.py.
    bool cross_entropy_fusion = false;
    /// Megatron-LM `--grad-reduce-in-bf16`: the gradient buffer (main_grad) is bf16 and the DP reduce-scatter
    /// / all-reduce moves 2 B per element instead of fp32's 4 (megatron/training/arguments.py: without it,
    /// --bf16 forces accumulate_allreduce_grads_in_fp32). Off in Megatron-LM; the Megatron-Bridge and NeMo 2
    /// performance scripts set grad_reduce_in_fp32 = False (scripts/performance/utils helpers).
    bool grad_reduce_in_bf16 = false;
    /// NeMo 1.x `optim.name: distributed_fused_adam` (nemo/core/optim/distributed_adam.py
    /// MegatronDistributedFusedAdam over Apex's apex/contrib/optimizers/distributed_fused_adam.py) instead of
    /// Megatron-Core's distributed optimizer; the DP reduce-scatter / all-gather pattern is the same. With
    /// 16-bit bf16 weights (bf16 and fp8 runs) NeMo sets store_params = False, store_param_remainders = True
    /// (megatron_base_model.py setup_optimization, optimizer dtype fp32, param_sync_dtype bf16): the fp32
    /// master weight is the bf16 weight plus an int16 remainder shard, so the state is 2 + 4 + 4 = 10 B per
    /// parameter, not 12 (fp16 runs: store_params, 12 B). The contiguous gradient buffer is in
    /// grad_sync_dtype (grad_reduce_bytes_per_element(), the apex default fp32 unless grad_sync_dtype=bf16,
    /// i.e. grad_reduce_in_bf16); the reduce-scattered shards stay in that dtype until zero_grad
    /// (GradientBucket grads_shard) and the fused Adam (multi_tensor_fused_adam_with_param_remainders) reads
    /// them directly: no fp32 main-gradient copy. Without distributed_optimizer the state is replicated
    /// (NeMo's disable_distributed_parameters).
    bool apex_distributed_adam = false;
    /// Megatron-Core's precision-aware optimizer with bf16 Adam moments (`--use-precision-aware-optimizer
    /// --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`: TransformerEngine's FusedAdam keeps m and v in bf16,
    /// megatron/core/optimizer/optimizer_config.py): Adam's state is the fp32 master weight + 2 + 2 B = 8 B
    /// per parameter instead of 12, and the step moves 22 B per parameter instead of 30. Megatron-Bridge's
    /// DeepSeek-V3 recipes set it (src/megatron/bridge/recipes/deepseek/deepseek_v3.py from v0.2.0,
    /// perf_recipes/deepseek/common.py in v0.6.0). Adam only, on the GPU, not with apex_distributed_adam.
    bool adam_moments_bf16 = false;
    /// ZeRO-3 / FSDP: parameters are freed after each module's forward and all-gathered again for its
    /// backward (FSDP2 reshard_after_forward=True, FSDP1 FULL_SHARD, DeepSpeed stage 3). False keeps the
    /// gathered parameters from forward to backward (torchtitan under PP: reshard_after_forward = not
    /// pp_enabled; FSDP SHARD_GRAD_OP, i.e. ZeRO-2-like).
    bool reshard_after_forward = true;
    /// Transformer layers per pipeline stage, when they are not divided evenly; empty = even split. With
    /// vpp > 1 each entry is split evenly over the rank's vpp model chunks (Megatron-LM
    /// --decoder-first/last-pipeline-num-layers: the per-rank count must divide by vpp).
    std::vector<std::int64_t> layers_per_stage;
    /// Megatron-LM --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split (core
    /// v0.11+, megatron/core/transformer/transformer_block.py get_num_layers_to_build): the input embedding
    /// (the output layer and loss) counts as one layer in the split, so layers + the flags set must divide by
    /// pp, and the per-rank count by vpp; the first virtual stage (the last one) builds one layer fewer. With
    /// 126 layers, both flags, PP 16 and VPP 8: 128 / 128 = 1 per virtual stage, the first holding only the
    /// embedding, the last only the output layer and loss. Cannot be combined with layers_per_stage.
    bool account_for_embedding_in_pipeline_split = false;
    bool account_for_loss_in_pipeline_split = false;
    /// Megatron-Core --pipeline-model-parallel-layout (megatron/core/transformer/
    /// pipeline_parallel_layer_layout.py): the layers of every virtual pipeline stage, in virtual stage order
    /// (chunk·pp + rank), stages separated by '|': 'E' the input embedding, 't' a transformer (decoder)
    /// layer, 'm' a multi-token-prediction layer, 'L' the output layer and loss; "x*n" repeats one character,
    /// "(...)*n" a group; ',' is cosmetic. DeepSeek-V3 with PP 16 (Megatron-Bridge): "Et*4|(t*4|)*14tmL" --
    /// the embedding and 4 layers first, 14 stages of 4, the last layer with the MTP layer and the loss.
    /// Empty = not used. It must have pp·vpp stages, 'E' once at the start, 'L' once at the end, model.layers
    /// 't's, model.mtp_layers 'm's, all in the last stage after its 't's; not with layers_per_stage or the
    /// account_for_* flags (Megatron refuses the combinations). See parse_pipeline_layout.
    std::string pipeline_layout;
    Optimizer optimizer = Optimizer::adam;
    Offload offload_optimizer = Offload::none;
    Adapter adapter = Adapter::none;
    std::int64_t lora_rank = 16;  ///< r of LoRA / QLoRA adapters
    LoraTargets lora_targets;
    CheckpointSave checkpoint_save = CheckpointSave::sharded;
    Framework framework = Framework::megatron;
    /// torchtitan: each TransformerBlock compiled with torch.compile (job config `training.compile`, off by
    /// default). Without it the norms, RoPE and SwiGLU run as eager ATen ops, one kernel each
    /// (eager_elementwise()).
    bool torch_compile = false;

    int gpus() const { return tp * pp * dp * cp; }
    std::int64_t micro_batches() const { return global_batch / (micro_batch * dp); }
    /// True when the DP reduction is a reduce-scatter of gradients + all-gather of parameters (distributed
    /// optimizer or ZeRO-1) rather than an all-reduce.
    bool sharded_optimizer() const { return distributed_optimizer || zero_stage >= 1; }
    /// Bytes per element of the DP gradient reduction: fp32 for bf16 and fp8 runs (Megatron-LM arguments.py
    /// forces accumulate_allreduce_grads_in_fp32 with --bf16, which FP8 runs also pass; torchtitan's FSDP2
    /// MixedPrecisionPolicy reduce_dtype float32; DeepSpeed's BF16_Optimizer all-reduces fp32 gradients),
    /// 2 bytes for fp16 runs (gradients reduced in fp16).
    /// With grad_reduce_in_bf16 (Megatron `--grad-reduce-in-bf16`) the gradient buffer and its DP reduction
    /// are 16-bit also for bf16 and fp8 runs.
    double grad_reduce_bytes_per_element() const {
        return precision == Precision::fp16 || grad_reduce_in_bf16 ? 2.0 : 4.0;
    }
    /// Bytes per element of activations and weights used by GEMMs (fp8 runs keep bf16 activations between
    /// kernels; the GEMM inputs are cast in the kernel).
    double activation_bytes() const { return 2.0; }
    /// Bytes of optimizer state per trainable parameter on the device that holds it, fp32 master weight
    /// included (see Optimizer); Apex's distributed Adam with bf16 weights keeps a 2 B remainder instead of
    /// the fp32 master (apex_distributed_adam): 10 B; Adam with bf16 moments (adam_moments_bf16): 8 B.
    double optimizer_bytes_per_param() const;
    /// Gradients per DP bucket: dp_bucket_bytes / 4 when set; else the framework's default. Megatron-Core
    /// (megatron/core/distributed/distributed_data_parallel.py, DistributedDataParallelConfig.bucket_size:
    /// "If unspecified, MCore uses a default value of max(40000000, 1000000 * dp_size) parameters (larger DP
    /// sizes need larger buckets to ensure collectives do not become latency-bound)", dp_size over DP x CP):
    /// max(40M, 1M x dp x cp); the other frameworks 40M (their own defaults are not modelled).
    double dp_bucket_elements() const {
        if (dp_bucket_bytes > 0) return dp_bucket_bytes / 4.0;
        constexpr double kMegatronMinBucketElements = 40e6, kMegatronBucketElementsPerDpRank = 1e6;
        if (framework != Framework::megatron) return kMegatronMinBucketElements;
        return std::max(kMegatronMinBucketElements,
                        kMegatronBucketElementsPerDpRank * static_cast<double>(dp) * static_cast<double>(cp));
    }
    /// True when the block's element-wise ops run op by op in eager PyTorch: torchtitan without torch.compile
    /// (its RMSNorm, apply_rotary_emb and SwiGLU are compositions of ATen ops; docs/compute-model.md).
    bool eager_elementwise() const { return framework == Framework::torchtitan && !torch_compile; }
    /// True when the base weights are frozen (LoRA, QLoRA): no weight gradients for them.
    bool frozen_base() const { return adapter != Adapter::none; }
    /// True when ZeRO-3 runs DeepSpeed's own stage-3 coordinator as its 2021 releases (v0.3.12-v0.5.8) ran it
    /// (sim/program/deepspeed_stage3.cpp, docs/compute-model.md): framework deepspeed, ZeRO-3 over dp > 1, no
    /// PP (DeepSpeed refuses stage 3 with its pipeline engine), no frozen base, resharded after forward.
    bool deepspeed_stage3_2021() const {
        return framework == Framework::deepspeed && zero_stage >= 3 && dp > 1 && pp == 1 && vpp == 1 &&
               !frozen_base() && reshard_after_forward;
    }
    /// True when DeepSpeed wraps the optimizer in its BF16_Optimizer (bf16 with ZeRO stage 0 or 1;
    /// deepspeed/runtime/engine.py picks it for bf16 with fp32 gradient accumulation): the gradients of every
    /// micro-batch are added into fp32 copies by a separate pass (bf16_optimizer.py, update_hp_grads).
    bool deepspeed_bf16_optimizer() const {
        return framework == Framework::deepspeed && precision == Precision::bf16 && zero_stage <= 1;
    }
    /// True when Apex's distributed Adam stores its fp32 master weights as the bf16 weight plus an int16
    /// remainder (apex_distributed_adam with bf16 weights: bf16 and fp8 runs; NeMo sets
    /// store_param_remainders when the optimizer dtype is fp32 and the model dtype bf16).
    bool apex_param_remainders() const {
        return apex_distributed_adam && optimizer == Optimizer::adam && precision != Precision::fp16;
    }

    /// Every field equal (validate simulates runs with equal inputs once).
    friend bool operator==(const Layout&, const Layout&) = default;
};

/// The layout's fields as a workload file's "layout" object writes them (include/trainsim/schema.hpp): name,
/// type, unit, default (Layout{}'s), range or choices, documentation and accessors, in the order the loader
/// reads them. docs/inputs.md is generated from it.
const schema::Table<Layout>& layout_fields();

/// Trainable adapter parameters of one transformer layer (all TP shards): r·(in + out) per targeted linear
/// layer (LoRA's A is in x r, B is r x out; Hu et al. 2021, Sec. 4.1), one adapter per projection as
/// Hugging Face PEFT places them: q, k, v (3), o, and SwiGLU's gate and up (2) with down. 0 without adapters.
double adapter_params_per_layer(const ModelSpec& m, const Layout& l);

/// One virtual pipeline stage of Layout::pipeline_layout: its decoder layers ('t'), MTP layers ('m'), and
/// whether it holds the input embedding ('E') or the output layer and loss ('L').
struct VirtualStageLayout {
    std::int64_t decoder_layers = 0;
    std::int64_t mtp_layers = 0;
    bool embedding = false;
    bool loss = false;
    /// The characters in order (after expansion), e.g. "Etttt": where 'E', 'L' and 'm' stand is checked.
    std::string layers;
};
/// Parses a pipeline layout string (Layout::pipeline_layout) as Megatron-Core's
/// PipelineParallelLayerLayout.parse_str_to_list does: commas removed, "(...)*n" then "x*n" expanded, split
/// at
/// '|'. Throws InputError "layout.pipeline_layout = \"...\": ..." for a character other than E, L, t, m, (,
/// ), *, digits, '|' and ',', a '*' without a count, unbalanced or nested parentheses, a repeat count above
/// limits::kMaxLayers, or a string or expansion longer than 16 * limits::kMaxLayers characters.
std::vector<VirtualStageLayout> parse_pipeline_layout(const std::string& layout);

/// Layers on pipeline stage `stage` (0-based, all its model chunks), from layers_per_stage, pipeline_layout
/// or the even split (with the account_for_* flags, see Layout).
std::int64_t layers_on_stage(const ModelSpec& m, const Layout& l, int stage);

/// Layers of model chunk `chunk` (0 .. vpp-1) on pipeline rank `stage`, i.e. of virtual stage chunk·pp +
/// stage: the 't's of that stage of pipeline_layout, layers_per_stage[stage] / vpp, or
/// pipeline_split_layers / (pp·vpp) less one on the first virtual
/// stage with account_for_embedding_in_pipeline_split and on the last with account_for_loss_in_pipeline_split
/// (Megatron-LM get_num_layers_to_build). Assumes check_layout passed.
std::int64_t layers_on_virtual_stage(const ModelSpec& m, const Layout& l, int stage, int chunk);
/// layers_on_virtual_stage of every virtual stage v = chunk·pp + stage (pp·vpp entries), the layout string
/// parsed once: what a loop over the virtual stages calls. Assumes check_layout passed.
std::vector<std::int64_t> virtual_stage_layers(const ModelSpec& m, const Layout& l);

/// The global 0-based indices of the transformer layers pipeline rank `stage` holds, in forward order of its
/// model chunks (virtual stage chunk * pp + stage holds the layers after those of the virtual stages before
/// it, as Megatron-LM numbers them). Assumes check_layout passed.
std::vector<std::int64_t> stage_layer_indices(const ModelSpec& m, const Layout& l, int stage);

/// The layer count the pipeline split divides: model.layers plus one for each account_for_* flag set.
std::int64_t pipeline_split_layers(const ModelSpec& m, const Layout& l);

/// Refuses sizes above trainsim/limits.hpp (model dimensions, the layout fields whose schema range names
/// the limit, batch, micro-batches and layer passes per step), naming the field and the limit. Throws
/// InputError. check_layout calls it.
void check_sizes(const ModelSpec& m, const Layout& l);

/// The simulation's work per step (limits.hpp): (model.layers + model.mtp_layers) * micro-batches per step *
/// layout.dp * layout.cp * layout.tp, GPU layer passes. At most limits::kMaxGpuLayerPassesPerStep for a
/// layout that passed check_sizes (the caller's precondition: the product is not checked for overflow here).
std::int64_t gpu_layer_passes_per_step(const ModelSpec& m, const Layout& l);
/// The layer passes the program of one pipeline holds, weighed by their cost to build: (model.layers +
/// limits::kMtpLayerProgramPassWeight * model.mtp_layers) * micro-batches per step (global_batch /
/// (micro_batch * dp)), over all its stages (an MTP layer builds an embedding, a transformer layer and an
/// output layer: it costs about 2.4 layers). What building, hashing and bounding a layout's program costs
/// grows with it (a sweep does that for every grid point; limits.hpp kMaxSweepProgramLayerPasses; a what-if
/// study for every remedy, kMaxWhatIfProgramLayerPasses). Same precondition as gpu_layer_passes_per_step.
std::int64_t program_layer_passes(const ModelSpec& m, const Layout& l);

/// The category of a failed layout check. The first fifteen are the rank-grid checks a layout sweep fails
/// (is_grid_check), in the order the sweep counts a layout that fails several (its reject counts are by
/// category: to_string gives the sweep's text); the others are checks of the base layout or the model.
enum class LayoutCheck {
    gpu_count,   ///< tp * pp * dp * cp is not the cluster's GPUs (dp = 0: tp * pp * cp does not divide them)
    cp_seq_len,  ///< 2 * cp does not divide model.seq_len
    cp_attention,       ///< cp > 1 with an unfused attention kernel or a sliding window
    tp_heads,           ///< tp does not divide model.heads
    tp_kv_heads,        ///< tp does not divide model.kv_heads
    tp_ffn_hidden,      ///< tp does not divide model.ffn_hidden
    tp_seq_len,         ///< sequence_parallel and tp does not divide model.seq_len
    batch_split,        ///< micro_batch * dp does not divide global_batch
    pp_layers,          ///< pp does not divide the layers of the split
    vpp_layers,         ///< vpp does not divide the layers per stage
    vpp_schedule,       ///< vpp > 1 with the GPipe schedule
    vpp_micro_batches,  ///< vpp > 1 and the micro-batches per pipeline are not a multiple of pp
    ep_experts,         ///< ep does not divide model.num_experts
    ep_grid,            ///< expert_tp() * ep does not divide tp * cp * dp (the ranks of a pipeline stage)
    etp_ffn_hidden,     ///< expert_tp() does not divide the routed experts' FFN width
    positive,           ///< a size of the model or the layout is not positive
    model_shape,        ///< heads do not divide hidden, or kv_heads do not divide heads
    size_limit,         ///< above a limit of trainsim/limits.hpp (check_sizes)
    recompute_layers,   ///< recompute_num_layers without recompute full; recompute_mla_up_proj or
                        ///< recompute_modules beyond core_attn without recompute selective (or MoE / MLA)
    layers_per_stage,   ///< layers_per_stage or pipeline_layout: wrong entry / stage count, negative entry,
                        ///< wrong sum, misplaced E / L / m, combined with the other split settings
    vpp_needs_pp,       ///< vpp > 1 with pp = 1
    zero_stage,         ///< zero_stage outside 0 .. 3
    adapter,            ///< LoRA rank or targets
    offload,            ///< NVMe offload without ZeRO-3
    dp_bucket,          ///< dp_bucket_size negative
    ep_needs_moe,       ///< ep > 1 or etp set for a dense model (num_experts = 0)
    moe_shape,          ///< MoE fields inconsistent: moe_top_k > num_experts, dense layers >= layers, tp
                        ///< not dividing the shared experts' width; moe_a2a_overlap with pp > 1 and vpp 1
    mla_shape,       ///< MLA without kv_lora_rank / qk_rope_head_dim / v_head_dim, or with kv_heads != heads
    optimizer_impl,  ///< apex_distributed_adam with another optimizer than adam, offload, ZeRO stages or a
                     ///< framework other than megatron
    adam_moments,    ///< adam_moments_bf16 with another optimizer than adam, offload or apex_distributed_adam
    activation_offload,  ///< activation_offload_layers negative, >= layers, with pp > 1, recompute, a
                         ///< framework other than megatron or moe_a2a_overlap
    fp8_attention,       ///< fp8_attention without precision fp8 and attention cudnn
};
/// A failed layout check: its category and the one-line message naming the fields and the values, e.g.
/// {tp_heads, "layout.tp = 7 does not divide model.heads = 96"}.
struct LayoutViolation {
    LayoutCheck check;
    std::string message;
};
/// Every check the layout fails against the model and the cluster size (`cluster_gpus` GPUs), in check
/// order; empty when it passes. A non-positive size stops the checks that would divide by it (only those
/// found so far are returned).
std::vector<LayoutViolation> layout_violations(const ModelSpec& m, const Layout& l, int cluster_gpus);
/// Throws InputError with the message of the first of layout_violations, e.g. "layout.tp = 7 does not divide
/// model.heads = 96".
void check_layout(const ModelSpec& m, const Layout& l, int cluster_gpus);
/// True for the rank-grid checks (gpu_count .. etp_ffn_hidden).
bool is_grid_check(LayoutCheck c);
/// The category in a few words ("tp does not divide heads"): the sweep's reject reason for the grid checks.
std::string to_string(LayoutCheck c);

/// Layout::activation_offload_layers: the layer (0-based, forward order, of `layers`) at whose forward's end
/// the copy of offloaded layer `group` (0 <= group < offloaded < layers) is waited for and its GPU copy
/// freed: Transformer Engine's AsyncDoubleBufferGroupOffloadHandler.layer_window_map (cpu_offload.py),
/// (layers / offloaded) * (group + 1) - 1, plus group + 1 for the first layers % offloaded groups and that
/// remainder for the others. Always > group. Throws InternalError outside those ranges.
std::int64_t offload_window_layer(std::int64_t layers, std::int64_t offloaded, std::int64_t group);

std::string to_string(Schedule s);
std::string to_string(Recompute r);
std::string to_string(AttentionKernel a);
std::string to_string(Fp8Recipe r);
std::string to_string(Optimizer o);
std::string to_string(Offload o);
std::string to_string(Adapter a);
std::string to_string(CheckpointSave c);
std::string to_string(MoeDispatcher d);
std::string to_string(Framework f);
/// The Framework named `name` ("megatron", "deepspeed", "torchtitan", "composer", "pytorch"); nullopt when
/// unknown.
std::optional<Framework> framework_from_string(const std::string& name);
/// Every framework name, in enum order (for error messages and choices).
const std::vector<std::string>& framework_names();

}  // namespace trainsim
