// Internal to sim/io: layout keys read the same way by the workload loader (config.cpp) and the measured-runs
// reader (measured_runs.cpp).
#pragma once

#include "schema_reader.hpp"
#include "strict_json.hpp"
#include "trainsim/layout.hpp"

namespace trainsim::detail {

/// Reads the optional `attention`, `fp8_recipe`, `reshard_after_forward`, `fp8_param_gather`,
/// `cross_entropy_fusion`, `grad_reduce_in_bf16`, `apex_distributed_adam` and `adam_moments_bf16` keys of
/// `o` over the values
/// already in `l`, as the workload loader reads them (layout_fields()). Throws InputError naming the field
/// for a value outside its choices.
inline void read_kernel_choices(StrictObject& o, Layout& l) {
    read_fields(
        o, layout_fields(), l,
        {"attention", "fp8_recipe", "reshard_after_forward", "fp8_param_gather", "cross_entropy_fusion",
         "grad_reduce_in_bf16", "apex_distributed_adam", "adam_moments_bf16"});
}

}  // namespace trainsim::detail
