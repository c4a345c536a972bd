#include "trainsim/what_if.hpp"

#include <optional>

#include <fmt/format.h>

#include "remedies.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/parallel_map.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"

namespace trainsim {

namespace {

/// The memory of `layout` walked over its program's order, without a simulation. The kernels are costed
/// first, as a simulation would (that is where a layout the cluster cannot run is refused: an offloaded
/// optimizer on a topology without its host side), so that a remedy is applicable exactly when its simulation
/// would run.
MemoryReport walked_memory(const TopologySpec& topology, const GpuSpec& gpu, const ModelSpec& model,
                           const Layout& layout) {
    Program program = build_program(model, layout);
    time_program(program, run_compute_model(topology, gpu, layout), model, layout);
    return simulate_memory(model, layout, program, gpu);
}

/// The step time of `layout`, simulated under the bound; nullopt when the simulation passed it, or would pass
/// the layer passes a fabric whose TP groups share their ports admits (check_shared_tp_port_work: a remedy
/// that halves the micro-batch doubles them; its memory figures stand).
std::optional<double> bounded_step_time(const TopologySpec& topology, const ModelSpec& model,
                                        const Layout& layout, const std::string& name,
                                        std::uint64_t max_events) {
    SimulationOptions o;
    o.execution.max_events = max_events;
    try {
        check_shared_tp_port_work(topology, model, layout);
    } catch (const InputError&) {
        return std::nullopt;
    }
    try {
        return simulate(topology, model, layout, name, o).report.step_time_s;
    } catch (const EventLimitExceeded&) {
        return std::nullopt;
    }
}

/// The baseline's peak, capacity and step time: from the caller's report when it has one, else walked and
/// simulated as a remedy would be.
void set_baseline(WhatIf& w, const TopologySpec& topology, const GpuSpec& gpu, const ModelSpec& model,
                  const Layout& layout, const std::string& name, const WhatIfOptions& options) {
    if (options.baseline) {
        const MemoryReport& mem = options.baseline->memory;
        w.baseline_peak_bytes = mem.peak().peak_bytes;
        w.capacity_bytes = mem.capacity_bytes;
        w.baseline_fits = mem.fits();
        w.baseline_step_simulated = true;
        w.baseline_step_time_s = options.baseline->step_time_s;
    } else {
        const MemoryReport mem = walked_memory(topology, gpu, model, layout);
        w.baseline_peak_bytes = mem.peak().peak_bytes;
        w.capacity_bytes = mem.capacity_bytes;
        w.baseline_fits = mem.fits();
        if (const auto step = bounded_step_time(topology, model, layout, name, options.max_events)) {
            w.baseline_step_simulated = true;
            w.baseline_step_time_s = *step;
        }
    }
}

/// Remedy `c` applied to `layout` and evaluated against the baseline in `w`: not applicable (with the
/// reason) when the layout already does it or the changed layout is refused.
Remedy evaluate_remedy(const what_if::Candidate& c, const WhatIf& w, const TopologySpec& topology,
                       const GpuSpec& gpu, const ModelSpec& model, const Layout& layout,
                       const std::string& name, const WhatIfOptions& options) {
    Remedy r;
    r.name = c.name;
    if (!c.already.empty()) {
        r.reason = c.already;
        return r;
    }
    Layout l = layout;
    c.apply(l);
    try {
        check_layout(model, l, topology.gpus());
        const MemoryReport mem = walked_memory(topology, gpu, model, l);
        r.applicable = true;
        r.peak_bytes = mem.peak().peak_bytes;
        r.saved_bytes = w.baseline_peak_bytes - r.peak_bytes;
        r.fits = mem.fits();
        r.peak_where = fmt::format("stage {} {}", mem.peak_stage, to_string(mem.peak().peak_phase));
        // A remedy changes the simulation's size by a small factor at most (micro-batch halved: twice the
        // passes): when the baseline passed the bound, the remedies would too, and their cost has no baseline
        // to be measured against; they are not simulated.
        if (w.baseline_step_simulated)
            if (const auto step = bounded_step_time(topology, model, l, name, options.max_events)) {
                r.step_simulated = true;
                r.step_time_s = *step;
                r.step_time_delta_s = r.step_time_s - w.baseline_step_time_s;
            }
    } catch (const InputError& e) {
        r = Remedy{};
        r.name = c.name;
        r.reason = e.what();
    }
    return r;
}

}  // namespace

void check_what_if_size(const TopologySpec& topology, const ModelSpec& model, const Layout& layout) {
    check_layout(model, layout, topology.gpus());
    std::int64_t passes = program_layer_passes(model, layout);
    int layouts = 1;
    for (const what_if::Candidate& c : what_if::standard_remedies(model, layout)) {
        if (!c.already.empty()) continue;
        Layout l = layout;
        c.apply(l);
        try {
            check_layout(model, l, topology.gpus());
        } catch (const InputError&) {
            continue;  // not applicable: neither walked nor simulated
        }
        passes += program_layer_passes(model, l);
        ++layouts;
    }
    if (passes > limits::kMaxWhatIfProgramLayerPasses)
        throw InputError(fmt::format(
            "memory --what-if: the layout and its {} remedies hold {} program layer passes ((model.layers "
            "+ 3 * model.mtp_layers) * micro-batches per step = {} for the layout), above the limit of {} "
            "for a "
            "what-if study (trainsim/what_if.hpp); memory without --what-if studies the layout alone",
            layouts - 1, passes, program_layer_passes(model, layout), limits::kMaxWhatIfProgramLayerPasses));
}

WhatIf memory_what_if(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                      const std::string& name, const WhatIfOptions& options) {
    WhatIf w;
    w.max_events = options.max_events;
    check_what_if_size(topology, model, layout);
    const GpuSpec gpu = topology_gpu(topology);
    set_baseline(w, topology, gpu, model, layout, name, options);
    // The remedies are independent simulations: spread over options.jobs threads, each result at its index
    // (the same output for any number of threads).
    const std::vector<what_if::Candidate> candidates = what_if::standard_remedies(model, layout);
    w.remedies = parallel_map(candidates.size(), options.jobs, [&](std::size_t i) {
        return evaluate_remedy(candidates[i], w, topology, gpu, model, layout, name, options);
    });
    return w;
}

}  // namespace trainsim
