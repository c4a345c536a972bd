#include "trainsim/what_if.hpp"

#include <functional>
#include <optional>

#include <fmt/format.h>

#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/memory.hpp"
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
    const ComputeModel compute(gpu, layout.precision, host_links(topology), topology.profile,
                               layout.fp8_recipe);
    assign_durations(program, compute);
    return simulate_memory(model, layout, program, gpu);
}

/// The step time of `layout`, simulated under the bound; nullopt when the simulation passed it.
std::optional<double> bounded_step_time(const TopologySpec& topology, const ModelSpec& model,
                                        const Layout& layout, const std::string& name,
                                        std::uint64_t max_events) {
    SimulationOptions o;
    o.execution.max_events = max_events;
    try {
        return simulate(topology, model, layout, name, o).report.step_time_s;
    } catch (const EventLimitExceeded&) {
        return std::nullopt;
    }
}

}  // namespace

WhatIf memory_what_if(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                      const std::string& name, const WhatIfOptions& options) {
    WhatIf w;
    w.max_events = options.max_events;
    check_layout(model, layout, topology.gpus());
    const GpuSpec gpu =
        topology.gpu_calibrated ? *topology.gpu_calibrated : find_gpu(topology.gpu, "topology.gpu");
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

    struct Candidate {
        std::string name;
        std::string already;  ///< non-empty: the layout already does this
        std::function<void(Layout&)> apply;
    };
    const bool dp = layout.dp * layout.cp > 1;
    const std::vector<Candidate> candidates = {
        {"recompute selective", layout.recompute == Recompute::selective ? "already selective" : "",
         [](Layout& l) { l.recompute = Recompute::selective; }},
        {"recompute full", layout.recompute == Recompute::full ? "already full" : "",
         [](Layout& l) { l.recompute = Recompute::full; }},
        {"distributed optimizer (ZeRO-1)",
         layout.sharded_optimizer() ? "optimizer state already sharded"
         : !dp                      ? "needs DP > 1"
                                    : "",
         [](Layout& l) { l.distributed_optimizer = true; }},
        {"ZeRO-2",
         layout.zero_stage >= 2 ? "already ZeRO-2 or 3"
         : !dp                  ? "needs DP > 1"
                                : "",
         [](Layout& l) { l.zero_stage = 2; }},
        {"ZeRO-3 / FSDP",
         layout.zero_stage >= 3 ? "already ZeRO-3"
         : !dp                  ? "needs DP > 1"
                                : "",
         [](Layout& l) { l.zero_stage = 3; }},
        {layout.micro_batch >= 2 ? fmt::format("micro-batch {} (halved)", layout.micro_batch / 2)
                                 : std::string("micro-batch halved"),
         layout.micro_batch < 2 ? "micro-batch is 1" : "", [](Layout& l) { l.micro_batch /= 2; }},
        {"8-bit Adam", layout.optimizer != Optimizer::adam ? "optimizer is not Adam" : "",
         [](Layout& l) { l.optimizer = Optimizer::adam_8bit; }},
        {"optimizer offloaded to CPU (ZeRO-Offload)",
         layout.offload_optimizer != Offload::none ? "already offloaded" : "",
         [](Layout& l) { l.offload_optimizer = Offload::cpu; }},
    };
    for (const auto& c : candidates) {
        Remedy r;
        r.name = c.name;
        if (!c.already.empty()) {
            r.reason = c.already;
            w.remedies.push_back(r);
            continue;
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
            // passes): when the baseline passed the bound, the remedies would too, and their cost has no
            // baseline to be measured against; they are not simulated.
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
        w.remedies.push_back(r);
    }
    return w;
}

}  // namespace trainsim
