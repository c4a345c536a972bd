// Training layout: how the model is parallelized and trained, and its checks.
//
// Rank order follows Megatron-LM's default `tp-cp-ep-dp-pp` (megatron/core/parallel_state.py): TP fastest,
// then CP, then DP, then PP: global rank = tp_rank + tp·(cp_rank + cp·(dp_rank + dp·pp_rank)). GPU g sits on
// node g / gpus_per_node.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

enum class Schedule { one_f_one_b, gpipe };
enum class Recompute { none, selective, full };
enum class AttentionKernel { flash, unfused };

struct Layout {
    int tp = 1;
    int pp = 1;
    int dp = 1;
    /// Context parallelism: the sequence is split over cp ranks (two chunks each, load-balanced for the
    /// causal mask); attention exchanges K/V blocks around the CP ring (Megatron-Core + TransformerEngine
    /// "ring attention"); gradients are reduced over DP x CP. Needs flash attention.
    int cp = 1;
    int vpp = 1;  ///< virtual pipeline stages per rank (interleaved 1F1B when > 1)
    std::int64_t micro_batch = 1;
    std::int64_t global_batch = 1;
    Schedule schedule = Schedule::one_f_one_b;
    bool sequence_parallel = false;
    Recompute recompute = Recompute::none;
    Precision precision = Precision::bf16;
    bool distributed_optimizer = false;
    /// ZeRO stage (Rajbhandari et al. 2020, arXiv:1910.02054): 1 shards the optimizer state over DP (as
    /// Megatron's distributed optimizer), 2 also the gradients (reduce-scattered every micro-batch,
    /// DeepSpeed), 3 also the parameters (all-gathered per layer just in time in forward and backward,
    /// prefetching the next layer: DeepSpeed stage 3, PyTorch FSDP FULL_SHARD when tp = pp = 1).
    int zero_stage = 0;
    /// DP gradient bucket size, expressed as bytes of fp32 elements (Megatron-LM sizes buckets in elements:
    /// 40M elements = 160 MB); a bucket holds dp_bucket_bytes / 4 gradients whatever their precision.
    double dp_bucket_bytes = 40e6 * 4;
    bool overlap_grad_reduce = false;  ///< DP gradient reduction overlapped with the last backward
    bool overlap_param_gather =
        false;                     ///< distributed optimizer's parameter all-gather overlapped with forward
    bool tp_comm_overlap = false;  ///< TP collectives overlapped with the adjacent GEMMs (TE userbuffers)
    AttentionKernel attention = AttentionKernel::flash;
    /// Transformer layers per pipeline stage, when they are not divided evenly; empty = even split.
    std::vector<std::int64_t> layers_per_stage;

    int gpus() const { return tp * pp * dp * cp; }
    std::int64_t micro_batches() const { return global_batch / (micro_batch * dp); }
    /// True when the DP reduction is a reduce-scatter of gradients + all-gather of parameters (distributed
    /// optimizer or ZeRO-1) rather than an all-reduce.
    bool sharded_optimizer() const { return distributed_optimizer || zero_stage >= 1; }
    /// Bytes per element of the DP gradient reduction: fp32 for bf16 (Megatron-LM arguments.py forces
    /// accumulate_allreduce_grads_in_fp32 with --bf16), 2 bytes otherwise.
    double grad_reduce_bytes_per_element() const { return precision == Precision::bf16 ? 4.0 : 2.0; }
    /// Bytes per element of activations and weights used by GEMMs (fp8 runs keep bf16 activations between
    /// kernels; the GEMM inputs are cast in the kernel).
    double activation_bytes() const { return 2.0; }
};

/// Layers on pipeline stage `stage` (0-based), from layers_per_stage or the even split.
std::int64_t layers_on_stage(const ModelSpec& m, const Layout& l, int stage);

/// Checks the layout against the model and the cluster size. Throws InputError with a message naming the
/// field and the values, e.g. "layout.tp = 7 does not divide model.heads = 96". `cluster_gpus` is the
/// cluster's GPU count.
void check_layout(const ModelSpec& m, const Layout& l, int cluster_gpus);

std::string to_string(Schedule s);
std::string to_string(Recompute r);
std::string to_string(AttentionKernel a);

}  // namespace trainsim
