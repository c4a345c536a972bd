#include "trainsim/what_if.hpp"

#include <functional>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/simulate.hpp"

namespace trainsim {

WhatIf memory_what_if(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                      const std::string& name) {
    WhatIf w;
    const auto base = simulate(topology, model, layout, name);
    w.baseline_peak_bytes = base.report.memory.peak().peak_bytes;
    w.baseline_step_time_s = base.report.step_time_s;
    w.capacity_bytes = base.report.memory.capacity_bytes;
    w.baseline_fits = base.report.memory.fits();

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
            const auto res = simulate(topology, model, l, name);
            const auto& mem = res.report.memory;
            r.applicable = true;
            r.peak_bytes = mem.peak().peak_bytes;
            r.saved_bytes = w.baseline_peak_bytes - r.peak_bytes;
            r.step_time_s = res.report.step_time_s;
            r.step_time_delta_s = r.step_time_s - w.baseline_step_time_s;
            r.fits = mem.fits();
            r.peak_where = fmt::format("stage {} {}", mem.peak_stage, to_string(mem.peak().peak_phase));
        } catch (const InputError& e) {
            r.reason = e.what();
        }
        w.remedies.push_back(r);
    }
    return w;
}

}  // namespace trainsim
