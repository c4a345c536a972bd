// What each training framework does by default, for the layout fields a run description may leave out.
//
// One place derives them from the framework and the GPU type; the measured-runs reader
// (sim/io/measured_runs.cpp) applies them to the fields a run does not state. Sources (framework file or doc,
// release) are given per field below and in docs/compute-model.md, "Frameworks";
// ../shared/design/frameworks.md is the survey they were read from.
#pragma once

#include <string>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"

namespace trainsim {

/// The defaults one framework implies on one GPU type, for one parallel layout.
struct FrameworkDefaults {
    /// Attention kernel:
    ///   megatron   cuDNN FusedAttention on sm90+ (TransformerEngine get_attention_backend drops flash-attn
    ///   for
    ///              FusedAttention when both are eligible on sm90+, TE >= 1.2); `unfused` before Hopper (the
    ///              2020-22 Megatron-LM A100 runs used the fused scale-mask-softmax path; an A100 run with
    ///              flash-attn states `attention`);
    ///   deepspeed  `unfused` (Megatron-DeepSpeed of the BLOOM / ZeRO-3 era: fused softmax, no flash);
    ///   torchtitan `flash`: PyTorch SDPA, flash backend first up to torchtitan v0.1.0 (models/attention.py;
    ///              cuDNN first from v0.2.0: state `attention` = "cudnn" for those runs);
    ///   composer   `flash`: llm-foundry attn_impl flash / triton (models/layers/attention.py);
    ///   pytorch    `flash`: SDPA's default order on sm80+ (flash, efficient, math).
    AttentionKernel attention = AttentionKernel::flash;
    /// TP collectives overlapped with their GEMMs:
    ///   megatron   with sequence parallelism and tp > 1 (TE userbuffers, `--tp-comm-overlap`, which the NeMo
    ///              performance recipes pass through MegatronCommOverlapCallback; needs SP);
    ///   torchtitan only with async TP (`async_tp`: Inductor's micro-pipeline TP fuses all-gather -> mm and
    ///              mm -> reduce-scatter, torch/_inductor/fx_passes/micro_pipeline_tp.py); vanilla DTensor TP
    ///              waits for each collective;
    ///   others     never.
    bool tp_comm_overlap = false;
    /// Megatron-Core overlaps the DP gradient reduce-scatter and the parameter all-gather with the
    /// distributed optimizer (NeMo MegatronCommOverlapCallback: overlap_grad_reduce and overlap_param_gather
    /// whenever DP > 1 with the distributed optimizer); the others do not use these Megatron paths.
    bool overlap_grad_reduce = false;
    bool overlap_param_gather = false;
    /// ZeRO-3 / FSDP: parameters freed after each block's forward, gathered again in backward. torchtitan:
    /// reshard_after_forward = not pp_enabled (parallelize_llama.py apply_fsdp, policy "default"); FSDP1
    /// FULL_SHARD (Composer) and DeepSpeed stage 3: always.
    bool reshard_after_forward = true;
    /// FP8 recipe: megatron `delayed` (Megatron `--fp8-recipe` default, TE DelayedScaling); torchtitan,
    /// composer and pytorch `tensorwise` (torchao Float8 dynamic scaling, torchtitan's default recipe);
    /// deepspeed `delayed` (it runs TE's modules when it runs FP8 at all).
    Fp8Recipe fp8_recipe = Fp8Recipe::delayed;
};

/// True for GPUs of compute capability 8.9 or newer (the ones with FP8 tensor cores: Ada, Hopper,
/// Blackwell); TransformerEngine's backend choice keys on sm90, the catalog has no sm89 part.
bool hopper_or_newer(const GpuSpec& gpu);

/// The defaults `framework` implies on `gpu` for the layout's tp, pp, sequence_parallel,
/// distributed_optimizer and dp. `async_tp` (torchtitan only): the run used async TP.
FrameworkDefaults framework_defaults(Framework framework, const GpuSpec& gpu, const Layout& layout,
                                     bool async_tp = false);

/// Writes framework_defaults() into `layout` (attention, tp_comm_overlap, overlap_grad_reduce,
/// overlap_param_gather, reshard_after_forward, fp8_recipe). Fields the caller states afterwards override.
void apply_framework_defaults(Layout& layout, const GpuSpec& gpu, bool async_tp = false);

/// Why torchtitan refuses async TP in this run, or "" when it does not: async TP (tp > 1) without
/// torch.compile, since Inductor's micro-pipeline TP pass is what runs it (torchtitan
/// parallelisms/parallelize_llama.py @3faaa1a: `raise RuntimeError("Async TP requires --training.compile")`;
/// config/configs.py later). Other frameworks have no async TP: "".
std::string async_tp_refusal(Framework framework, bool async_tp, int tp, bool torch_compile);

}  // namespace trainsim
