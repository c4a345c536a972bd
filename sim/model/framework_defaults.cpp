#include "trainsim/framework_defaults.hpp"

namespace trainsim {

bool hopper_or_newer(const GpuSpec& gpu) {
    return gpu.peak_fp8_flops > 0;
}

FrameworkDefaults framework_defaults(Framework framework, const GpuSpec& gpu, const Layout& l,
                                     bool async_tp) {
    FrameworkDefaults d;
    const bool sp_tp = l.sequence_parallel && l.tp > 1;
    switch (framework) {
        case Framework::megatron:
            d.attention = hopper_or_newer(gpu) ? AttentionKernel::cudnn : AttentionKernel::unfused;
            d.tp_comm_overlap = sp_tp;
            d.overlap_grad_reduce = l.distributed_optimizer;
            d.overlap_param_gather = l.distributed_optimizer;
            d.fp8_recipe = Fp8Recipe::delayed;
            break;
        case Framework::deepspeed:
            d.attention = AttentionKernel::unfused;
            d.fp8_recipe = Fp8Recipe::delayed;
            break;
        case Framework::torchtitan:
            d.attention = AttentionKernel::flash;
            d.tp_comm_overlap = async_tp && sp_tp;
            d.reshard_after_forward = l.pp <= 1;
            d.fp8_recipe = Fp8Recipe::tensorwise;
            break;
        case Framework::composer:
            // llm-foundry's benchmark runs (scripts/train/benchmarking/submit_benchmarks.py: --attn_impl
            // default "triton" from 2023-10 to 2024-04; its `gpu` extra pinned flash-attn 1.0.9, so `flash`
            // meant FlashAttention-1 too, setup.py until 495218376): a FlashAttention-1-class kernel.
            d.attention = AttentionKernel::flash1;
            d.fp8_recipe = Fp8Recipe::tensorwise;
            break;
        case Framework::pytorch:
            d.attention = AttentionKernel::flash;
            d.fp8_recipe = Fp8Recipe::tensorwise;
            break;
    }
    return d;
}

void apply_framework_defaults(Layout& l, const GpuSpec& gpu, bool async_tp) {
    const FrameworkDefaults d = framework_defaults(l.framework, gpu, l, async_tp);
    l.attention = d.attention;
    l.tp_comm_overlap = d.tp_comm_overlap;
    l.overlap_grad_reduce = d.overlap_grad_reduce;
    l.overlap_param_gather = d.overlap_param_gather;
    l.reshard_after_forward = d.reshard_after_forward;
    l.fp8_recipe = d.fp8_recipe;
}

std::string async_tp_refusal(Framework framework, bool async_tp, int tp, bool torch_compile) {
    if (framework != Framework::torchtitan || !async_tp || tp <= 1 || torch_compile) return "";
    return "torchtitan runs async TP only compiled (it raises \"Async TP requires --training.compile\")";
}

}  // namespace trainsim
