// `trainsim memory --what-if`: the standard remedies for memory, each applied to the layout, against the
// layout as given. A remedy's memory comes from the memory walk over its program's order (simulate_memory, no
// timeline: the piles and peaks do not depend on the times, include/trainsim/memory.hpp); its step time from
// a simulation, bounded by WhatIfOptions::max_events so that a layout whose simulation is large (a TP group
// across nodes on an ECMP fabric: tens of millions of events) still gets its memory answer at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/report.hpp"

namespace trainsim {

struct Remedy {
    std::string name;         ///< e.g. "recompute full", "ZeRO-3 / FSDP", "micro-batch 1 (halved)"
    bool applicable = false;  ///< false: already in the layout, or the changed layout is invalid
    std::string reason;       ///< why not applicable (the layout check's message), else empty
    double peak_bytes = 0;    ///< the new peak over stages and phases (memory walk)
    double saved_bytes = 0;   ///< baseline peak - new peak (negative: it costs memory)
    bool fits = false;
    std::string peak_where;        ///< "stage 0 backward"
    bool step_simulated = false;   ///< false: the simulation passed WhatIfOptions::max_events
    double step_time_s = 0;        ///< the new simulated step time (step_simulated only)
    double step_time_delta_s = 0;  ///< new - baseline step time (both simulated only)
};

struct WhatIf {
    double baseline_peak_bytes = 0, capacity_bytes = 0;
    bool baseline_fits = false;
    bool baseline_step_simulated = false;
    double baseline_step_time_s = 0;  ///< baseline_step_simulated only
    std::uint64_t max_events = 0;     ///< the bound the step times were simulated under (0: none)
    std::vector<Remedy> remedies;
};

struct WhatIfOptions {
    /// Bound on the events of each simulation of a step time (ExecutionOptions::max_events); 0: none. A
    /// remedy (or baseline) past it keeps its memory figures and has step_simulated = false. When the
    /// baseline passes it, no remedy is simulated (each would pass it too, and its cost has no baseline).
    std::uint64_t max_events = 0;
    /// The layout's own report, when the caller simulated it already (trainsim memory does): reused for the
    /// baseline instead of simulating it again. Null: the baseline is computed like a remedy.
    const Report* baseline = nullptr;
    /// Threads that simulate the remedies (parallel_map): the output does not depend on it.
    int jobs = 1;
};

/// Refuses a what-if study whose program layer passes (the layout's and each applicable remedy's,
/// program_layer_passes) pass limits::kMaxWhatIfProgramLayerPasses: InputError naming --what-if, the passes
/// and the limit. memory_what_if calls it; a caller calls it first to refuse before simulating the layout.
void check_what_if_size(const TopologySpec& topology, const ModelSpec& model, const Layout& layout);

/// Evaluates the layout and each remedy: recompute selective and full, distributed optimizer (ZeRO-1),
/// ZeRO-2, ZeRO-3 / FSDP, micro-batch halved (same global batch), 8-bit Adam, optimizer offloaded to the CPU.
/// Throws InputError if the layout itself is invalid.
WhatIf memory_what_if(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                      const std::string& name, const WhatIfOptions& options = {});

}  // namespace trainsim
