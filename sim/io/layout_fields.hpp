// Internal to sim/io: layout keys read the same way by the workload loader (config.cpp) and the measured-runs
// reader (measured_runs.cpp).
#pragma once

#include "strict_json.hpp"
#include "trainsim/layout.hpp"

namespace trainsim::detail {

/// Reads the optional `attention` ("flash", "cudnn", "unfused"), `fp8_recipe` ("delayed", "tensorwise",
/// "rowwise", "mxfp8"), `reshard_after_forward`, `fp8_param_gather`, `cross_entropy_fusion` and
/// `grad_reduce_in_bf16` keys of `o` over the values already in `l`. Throws InputError naming the field for a
/// value outside its choices.
inline void read_kernel_choices(StrictObject& o, Layout& l) {
    if (o.has("attention")) {
        const auto a = o.choice("attention", {"flash", "cudnn", "unfused"});
        l.attention = a == "unfused" ? AttentionKernel::unfused
                      : a == "cudnn" ? AttentionKernel::cudnn
                                     : AttentionKernel::flash;
    }
    if (o.has("fp8_recipe")) {
        const auto v = o.choice("fp8_recipe", {"delayed", "tensorwise", "rowwise", "mxfp8"});
        l.fp8_recipe = v == "tensorwise" ? Fp8Recipe::tensorwise
                       : v == "rowwise"  ? Fp8Recipe::rowwise
                       : v == "mxfp8"    ? Fp8Recipe::mxfp8
                                         : Fp8Recipe::delayed;
    }
    l.reshard_after_forward = o.boolean_or("reshard_after_forward", l.reshard_after_forward);
    l.fp8_param_gather = o.boolean_or("fp8_param_gather", l.fp8_param_gather);
    l.cross_entropy_fusion = o.boolean_or("cross_entropy_fusion", l.cross_entropy_fusion);
    l.grad_reduce_in_bf16 = o.boolean_or("grad_reduce_in_bf16", l.grad_reduce_in_bf16);
}

}  // namespace trainsim::detail
