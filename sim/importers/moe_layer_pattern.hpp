// Megatron's --moe-layer-freq (and Hugging Face's sparse-layer keys) as trainsim's MoE layer fields
// (private to sim/importers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::importers_detail {

/// Which layers are MoE, as ModelSpec holds it: the first `first_dense_layers` dense, then every
/// `layer_freq`-th layer MoE (model.hpp).
struct MoeLayerPattern {
    std::int64_t first_dense_layers = 0;
    std::int64_t layer_freq = 1;
};

/// The pattern of a per-layer list (1 = MoE, 0 = dense), `layers` long. Throws InputError "SOURCE: WHAT =
/// "TEXT" ..." when it is not dense layers first and then every n-th layer MoE, or has no MoE layer.
MoeLayerPattern pattern_of(const std::vector<int>& is_moe, const std::string& source, const std::string& what,
                           const std::string& text);

/// Megatron-Core's --moe-layer-freq (megatron/training/arguments.py moe_freq_type): an integer N (layer i
/// is MoE when i % N == 0) or a Python list expression such as "([0]*3+[1]*58)" or "[1,0,1,0]" with one
/// entry per layer. Throws InputError naming `what` and the text for anything else.
MoeLayerPattern moe_layer_pattern(const std::string& text, std::int64_t layers, const std::string& source,
                                  const std::string& what);

}  // namespace trainsim::importers_detail
