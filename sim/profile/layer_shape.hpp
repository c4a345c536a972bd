// Internal to sim/profile: the shape fields of a measured layer, read the same way from a profile
// (trainsim-profile/1, profile.cpp) and from the calibration mode's measurements (import_measurements.cpp).
#pragma once

#include "io/strict_json.hpp"
#include "trainsim/profile.hpp"

namespace trainsim::detail {

/// Reads `hidden`, `heads`, `kv_heads`, `ffn_hidden`, `mlp` ("gelu" | "swiglu"), `seq`, `micro_batch` and
/// `tp` of `o` into `l`. Throws InputError naming the field for a missing, non-positive or unknown value.
inline void read_layer_shape(StrictObject& o, ProfileLayer& l) {
    l.hidden = static_cast<int>(o.positive("hidden"));
    l.heads = static_cast<int>(o.positive("heads"));
    l.kv_heads = static_cast<int>(o.positive("kv_heads"));
    l.ffn_hidden = static_cast<int>(o.positive("ffn_hidden"));
    l.mlp = o.choice("mlp", {"gelu", "swiglu"});
    l.seq = static_cast<int>(o.positive("seq"));
    l.micro_batch = static_cast<int>(o.positive("micro_batch"));
    l.tp = static_cast<int>(o.positive("tp"));
}

}  // namespace trainsim::detail
