// The memory report's notes: what the layout changes, in words (memory_notes.hpp).
#include "memory_notes.hpp"

#include <fmt/format.h>

#include "trainsim/memory.hpp"

namespace trainsim::memory_walk {

namespace {

/// The note on a run with fp8 GEMMs: where the weights' fp8 copies live and what they hold.
std::string fp8_note(const Layout& l, const GpuSpec& gpu) {
    // TE's per-tensor FP8 tensors carry a transpose only where FP8 GEMMs are TN-only (static_piles.cpp).
    const char* fp8_weight =
        block_scaled(l.fp8_recipe) ? "a row-wise and a column-wise block-scaled copy, about 2 B"
        : gpu.fp8_gemm_any_layout  ? "1 B, no transpose: this GPU's FP8 GEMMs take any layout"
                                   : "1 B and its transpose, 1 B";
    if (l.fp8_param_gather && caches_fp8_weights(l))
        return fmt::format(
            "fp8 GEMMs (TransformerEngine) with fp8_param_gather: each linear weight held in fp8 ({}), "
            "all-gathered {}, GEMM inputs stored quantized",
            fp8_weight, block_scaled(l.fp8_recipe) ? "in 16 bits and quantized after the gather" : "in fp8");
    if (caches_fp8_weights(l))
        return fmt::format(
            "fp8 GEMMs (TransformerEngine): each linear weight's fp8 copy cached for the step ({}; sharded "
            "like the weights), GEMM inputs stored quantized, scaling state per GEMM",
            fp8_weight);
    return "fp8 GEMMs without a weight cache (torchao Float8 or TE without is_first_microbatch): a weight's "
           "fp8 cast exists only around its GEMM";
}

}  // namespace

std::vector<std::string> memory_notes(const ModelSpec& m, const Layout& l, const Program& p,
                                      const GpuSpec& gpu) {
    std::vector<std::string> notes;
    double params = 0, trainable = 0;
    for (const auto& st : p.stages) {
        params += st.params;
        trainable += st.trainable_params;
    }
    if (l.adapter != Adapter::none) {
        std::string targets;
        for (const auto& [on, name] :
             {std::pair{l.lora_targets.qkv, "qkv"}, std::pair{l.lora_targets.proj, "proj"},
              std::pair{l.lora_targets.fc1, "fc1"}, std::pair{l.lora_targets.fc2, "fc2"}})
            if (on) targets += targets.empty() ? name : fmt::format(", {}", name);
        notes.push_back(fmt::format(
            "{} rank {} on {}: {:.1f} M trainable parameters ({:.3f}% of {:.2f} B); the base is frozen: no "
            "gradients, optimizer state or weight-gradient GEMMs for it",
            l.adapter == Adapter::lora ? "LoRA" : "QLoRA", l.lora_rank, targets, trainable / 1e6,
            100.0 * trainable / params, params / 1e9));
        if (l.adapter == Adapter::qlora)
            notes.push_back(
                fmt::format("QLoRA: the linear weights are stored in NF4 with double quantization ({:.3f} "
                            "bits each: {:.2f} GB "
                            "instead of {:.2f} GB in 16 bits over all GPUs of one replica) and dequantized "
                            "before each GEMM; the "
                            "paged optimizer's state is counted on the GPU",
                            kQloraBaseBytesPerParam * 8,
                            static_cast<double>(m.layers) * m.linear_params() * kQloraBaseBytesPerParam / 1e9,
                            static_cast<double>(m.layers) * m.linear_params() * 2 / 1e9));
    }
    if (l.offload_optimizer != Offload::none)
        notes.push_back(fmt::format(
            "optimizer state and fp32 master weights offloaded to {}: the step includes the gradients' copy "
            "to "
            "the host, the CPU step{} and the weights' copy back",
            l.offload_optimizer == Offload::cpu ? "host memory (ZeRO-Offload)" : "NVMe (ZeRO-Infinity)",
            l.offload_optimizer == Offload::nvme ? ", the state's NVMe read and write" : ""));
    if (l.activation_offload_layers > 0)
        notes.push_back(fmt::format(
            "activations of {} of {} layers offloaded to host memory (Megatron-Core "
            "--cpu-offloading-num-layers, "
            "Transformer Engine's windows): {:.2f} GiB per layer and micro-batch copied out after its "
            "forward "
            "and back before its backward on side streams; the copy waits the layers do not hide are in the "
            "compute time (activation_offload_d2h, activation_reload_h2d)",
            l.activation_offload_layers, m.layers, layer_activations(m, l).stored / (1024.0 * 1024 * 1024)));
    if (l.optimizer != Optimizer::adam)
        notes.push_back(fmt::format("optimizer {}: {:.3f} B of state per trainable parameter (Adam: 12)",
                                    to_string(l.optimizer), l.optimizer_bytes_per_param()));
    if (l.adam_moments_bf16)  // check_layout: Adam only
        notes.push_back(
            "optimizer adam with bf16 moments (Megatron-Core precision-aware optimizer): 8 B of state per "
            "trainable parameter (fp32 master weight, bf16 m and v), not 12");
    if (l.precision == Precision::fp8) notes.push_back(fp8_note(l, gpu));
    if (l.deepspeed_stage3_2021())
        notes.push_back(fmt::format(
            "ZeRO-3 as DeepSpeed's 2021 releases ran it (v0.3.12-v0.5.8 on PyTorch 1.8-1.10): one "
            "all-gather per Linear weight through a list of the DP partitions, each partition costing the "
            "host {:.0f} us, a device synchronize at every fetch, one prefetch in flight; later releases "
            "coalesce the gathers into one buffer (all_gather_into_tensor), which this does not model, so "
            "at scale the step is longer than theirs (docs/compute-model.md)",
            kDs3ListAllGatherHostPerPartitionS * 1e6));
    else if (l.zero_stage >= 3 && l.dp * l.cp > 1)
        notes.push_back(fmt::format(
            "ZeRO-3 / FSDP: parameter groups all-gathered just in time with one prefetched (two groups "
            "alive), gradients of a group held until its reduce-scatter; {}{}",
            l.reshard_after_forward ? "resharded after forward" : "kept gathered from forward to backward",
            l.framework == Framework::torchtitan
                ? "; torchtitan (FSDP2): fp32 shards are the master weights, the root unit (embeddings, "
                  "norm, "
                  "output) and the last block stay gathered, fp32 reduce-scatter buffers on their own stream"
                : ""));
    notes.push_back("peak memory as the framework prints it: " +
                    std::string(reported_memory(l.framework) == ReportedMemory::reserved ? "max reserved"
                                : reported_memory(l.framework) == ReportedMemory::allocated
                                    ? "max allocated"
                                    : "device total") +
                    " (caching-allocator model: include/trainsim/caching_allocator.hpp)");
    return notes;
}

}  // namespace trainsim::memory_walk
