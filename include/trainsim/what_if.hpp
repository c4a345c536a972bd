// `trainsim memory --what-if`: the standard remedies for memory, each applied to the layout and simulated
// (memory walk and step time), against the layout as given.
#pragma once

#include <string>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

struct Remedy {
    std::string name;         ///< e.g. "recompute full", "ZeRO-3 / FSDP", "micro-batch 1 (halved)"
    bool applicable = false;  ///< false: already in the layout, or the changed layout is invalid
    std::string reason;       ///< why not applicable (the layout check's message), else empty
    double peak_bytes = 0;    ///< the new peak over stages and phases
    double saved_bytes = 0;   ///< baseline peak - new peak (negative: it costs memory)
    double step_time_s = 0;   ///< the new simulated step time
    double step_time_delta_s = 0;
    bool fits = false;
    std::string peak_where;  ///< "stage 0 backward"
};

struct WhatIf {
    double baseline_peak_bytes = 0, baseline_step_time_s = 0, capacity_bytes = 0;
    bool baseline_fits = false;
    std::vector<Remedy> remedies;
};

/// Simulates the layout and each remedy: recompute selective and full, distributed optimizer (ZeRO-1),
/// ZeRO-2, ZeRO-3 / FSDP, micro-batch halved (same global batch), 8-bit Adam, optimizer offloaded to the CPU.
/// Throws InputError if the layout itself is invalid.
WhatIf memory_what_if(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                      const std::string& name);

}  // namespace trainsim
