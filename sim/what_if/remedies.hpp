// The standard memory remedies of `trainsim memory --what-if`, as data: each a change of the layout, with the
// reason it does not apply to a layout that already does it. Private to sim/what_if.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim::what_if {

struct Candidate {
    std::string name;     ///< e.g. "recompute full", "micro-batch 2 (halved)"
    std::string already;  ///< non-empty: the layout already does this (or cannot), the reason
    std::function<void(Layout&)> apply;
};

/// Recompute selective and full, distributed optimizer (ZeRO-1), ZeRO-2, ZeRO-3 / FSDP, micro-batch halved
/// (same global batch), 8-bit Adam, optimizer offloaded to the CPU, the activations of half of `model`'s
/// layers offloaded to host memory (Layout::activation_offload_layers: pp 1, no recompute, Megatron); in that
/// order, named for `layout`.
std::vector<Candidate> standard_remedies(const ModelSpec& model, const Layout& layout);

}  // namespace trainsim::what_if
