// `memory`: the study of one layout's memory and its JSON document (include/trainsim/frontend.hpp).
#include <nlohmann/json.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/frontend.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

MemoryStudy study_memory(const Inputs& in, std::uint64_t max_events, bool what_if,
                         const std::vector<ExecutorObserver*>& observers, int jobs) {
    MemoryStudy s;
    s.max_events = max_events;
    with_label(in, [&] {
        // A study too large is refused before the layout is simulated (limits.hpp).
        if (what_if) check_what_if_size(in.topology, in.model, in.layout);
        SimulationOptions so = with_timeline(observers);
        so.execution.max_events = max_events;
        try {
            s.result = simulate(in.topology, in.model, in.layout, in.name, so);
        } catch (const EventLimitExceeded&) {
            s.simulated = false;
            const GpuSpec& gpu = topology_gpu(in.topology);
            s.walked = simulate_memory(in.model, in.layout, build_program(in.model, in.layout), gpu);
        }
        if (what_if) {
            WhatIfOptions wo;
            wo.max_events = max_events;
            wo.jobs = jobs;
            if (s.simulated) wo.baseline = &s.result.report;
            s.what_if = memory_what_if(in.topology, in.model, in.layout, in.name, wo);
        }
    });
    s.gpu_name = s.simulated ? s.result.report.gpu_name : in.topology.gpu;
    return s;
}

nlohmann::json to_json(const WhatIf& w) {
    nlohmann::json j;
    const auto step = [](bool simulated, double s) {
        return simulated ? nlohmann::json(s) : nlohmann::json();
    };
    j["baseline"] = {{"peak_bytes", w.baseline_peak_bytes},
                     {"step_time_s", step(w.baseline_step_simulated, w.baseline_step_time_s)},
                     {"fits", w.baseline_fits}};
    j["max_events"] = w.max_events;
    j["remedies"] = nlohmann::json::array();
    for (const auto& r : w.remedies) {
        nlohmann::json x = {{"name", r.name}, {"applicable", r.applicable}};
        if (r.applicable) {
            x["peak_bytes"] = r.peak_bytes;
            x["saved_bytes"] = r.saved_bytes;
            x["step_time_s"] = step(r.step_simulated, r.step_time_s);
            x["step_time_delta_s"] = step(r.step_simulated && w.baseline_step_simulated, r.step_time_delta_s);
            x["fits"] = r.fits;
            x["peak_at"] = r.peak_where;
        } else {
            x["reason"] = r.reason;
        }
        j["remedies"].push_back(x);
    }
    return j;
}

nlohmann::json memory_document(const Inputs& in, const MemoryStudy& s, bool timeline) {
    nlohmann::json j;
    j["workload"] = in.name;
    j["gpu"] = s.gpu_name;
    j["gpus"] = in.layout.gpus();
    j["step_time_s"] = s.simulated ? nlohmann::json(s.result.report.step_time_s) : nlohmann::json();
    if (!s.simulated) j["max_events"] = s.max_events;
    j["memory"] = memory_json(s.memory(), timeline);
    if (s.what_if) j["what_if"] = to_json(*s.what_if);
    return j;
}

}  // namespace trainsim
