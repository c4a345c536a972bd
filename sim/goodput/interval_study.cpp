// A job's goodput configuration and the study of its checkpoint intervals (include/trainsim/goodput.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

FailureModel job_failure_model(const Layout& layout, const TopologySpec& topology) {
    const double job_nodes = std::ceil(static_cast<double>(layout.gpus()) / topology.gpus_per_node);
    const double job_fraction = job_nodes / topology.nodes;  // the job's share of the fabric's switches
    // Hosts fail as units: an NVL72 domain (a node here) is 18 trays (TopologySpec::gpus_per_host).
    const double job_hosts = std::ceil(static_cast<double>(layout.gpus()) / topology.host_gpus());
    return default_failure_model(layout.gpus(), job_hosts, job_nodes * topology.nics_per_node,
                                 std::round(switch_count(topology) * job_fraction));
}

GoodputConfig job_goodput_config(double step_s, const ModelSpec& model, const Layout& layout,
                                 const TopologySpec& topology, const CheckpointCost& checkpoint) {
    GoodputConfig c;
    c.step_s = step_s;
    c.tokens_per_step = static_cast<double>(layout.global_batch) * static_cast<double>(model.seq_len);
    c.save_s = checkpoint.save_s;
    c.copy_s = checkpoint.copy_s;
    c.load_s = checkpoint.load_s;
    c.failures = job_failure_model(layout, topology);
    return c;
}

CheckpointIntervalStudy study_checkpoint_intervals(const GoodputConfig& c,
                                                   std::optional<std::int64_t> interval_steps,
                                                   std::uint64_t first_seed, int seeds, int jobs) {
    CheckpointIntervalStudy st;
    const double rate = c.failures.rate_per_s();
    st.mtbf_s = rate > 0 ? 1.0 / rate : 0.0;
    st.blocking_s = c.mode == CheckpointMode::sync ? c.save_s : c.copy_s;
    st.recovery_s = c.detection_s + c.restart_s + c.load_s;
    st.formulas = interval_formulas(st.blocking_s, st.mtbf_s, st.recovery_s);
    std::vector<std::int64_t> intervals;
    if (interval_steps) {
        intervals.push_back(*interval_steps);
    } else {
        const double center = st.formulas.young_s > 0 ? st.formulas.young_s : 1000.0 * c.step_s;
        intervals = interval_sweep(center, c.step_s);
    }
    double work = 0;  // per seed, over the intervals
    for (auto n : intervals) {
        GoodputConfig ci = c;
        ci.interval_steps = n;
        check_goodput_config(ci);
        work += std::max(expected_run_events(ci), 1.0);
    }
    if (seeds > 0 &&
        static_cast<double>(seeds) * work > static_cast<double>(limits::kMaxGoodputStudyEvents)) {
        const std::string runs =
            intervals.size() == 1
                ? fmt::format("{} runs of about {:.3g} checkpoints and failures each", seeds, work)
                : fmt::format(
                      "{} runs at each of the {} checkpoint intervals swept (about {:.3g} checkpoints "
                      "and failures per seed in all)",
                      seeds, intervals.size(), work);
        const double allowed = std::floor(static_cast<double>(limits::kMaxGoodputStudyEvents) / work);
        throw InputError(fmt::format(
            "--seeds = {}: {} pass the limit of {} for a goodput study (limits.hpp); {}{}", seeds, runs,
            limits::kMaxGoodputStudyEvents,
            allowed >= 1 ? fmt::format("at most {:.0f} seeds here", allowed) : "not one seed fits here",
            intervals.size() == 1 ? "" : ", or fix --checkpoint-interval"));
    }
    for (auto n : intervals) {
        GoodputConfig ci = c;
        ci.interval_steps = n;
        st.sweep.push_back(simulate_goodput(ci, first_seed, seeds, jobs));
    }
    for (std::size_t i = 1; i < st.sweep.size(); ++i)
        if (st.sweep[i].goodput.p50 > st.sweep[st.best].goodput.p50) st.best = i;
    return st;
}

}  // namespace trainsim
