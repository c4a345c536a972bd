// What-if studies (docs/what-if.md): one configuration simulated unperturbed and under a scenario of
// perturbations (include/trainsim/perturbation.hpp), over one seed or K seeds, and what the perturbation
// cost: the step-time cost, the ranks that made the others wait (the critical path), the perturbed links'
// busy time, and per pipeline stage where the ranks waited (at TP/CP/DP collectives for their last member,
// split from the collectives' transfer, and at pipeline boundaries).
//
// Everything comes out of the event simulation: the perturbed run is the same executor with slower kernels
// or links; nothing here multiplies a step time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/simulate.hpp"

namespace trainsim {

/// Per pipeline stage, the mean over its GPUs of each part of the step (seconds), perturbed and unperturbed.
struct StageWaits {
    struct Parts {
        double compute_s = 0;
        double tp_wait_s = 0, tp_transfer_s = 0;  ///< waiting for the last member / the collective itself
        double cp_wait_s = 0, cp_transfer_s = 0;
        double dp_wait_s = 0, dp_transfer_s = 0;
        double bubble_s = 0;      ///< pipeline boundaries: waiting for the neighbour stage (and the drain)
        double pp_exposed_s = 0;  ///< pipeline boundaries: the P2P transfer itself
        double idle_s = 0;        ///< pp = 1: waiting for the slowest rank at the end of the step
    };
    int stage = 0;
    Parts perturbed, base;
};

/// A GPU that made others wait.
struct CriticalRank {
    int gpu = 0;
    RankCoord coord;
    double compute_factor = 1;  ///< its straggler factor (1: none)
    double caused_wait_s = 0;   ///< the waiting it caused others, minus that of the unperturbed run
};

/// One perturbed link option: the most loaded of its directed links, busy time = bytes / capacity.
struct LinkLoad {
    std::string text;  ///< the option
    double bytes = 0, busy_s = 0;
    double base_bytes = 0, base_busy_s = 0;
};

/// One perturbed run beside the unperturbed one.
struct ScenarioRun {
    std::uint64_t seed = 0;
    double step_time_s = 0;
    int critical_gpu = -1;  ///< the GPU that caused the most extra waiting (-1: none did)
};

struct ScenarioStudy {
    std::vector<std::string> perturbations;  ///< the options, as given
    std::uint64_t seed = kDefaultSeed;       ///< the first seed
    double base_step_time_s = 0;
    // The run of the first seed, attributed:
    double step_time_s = 0;
    double cost_s = 0;                         ///< step_time_s - base_step_time_s
    double slowdown = 1;                       ///< step_time_s / base_step_time_s
    std::vector<CriticalRank> critical_ranks;  ///< the top ones by caused wait (at most 8, > 0 only)
    std::vector<LinkLoad> links;
    std::vector<StageWaits> stages;
    bool tp_folded = false, ran_ahead = false, bundles_omitted = false;  ///< the shortcuts taken
    // Over the seeds (one entry when the study has one seed):
    std::vector<ScenarioRun> runs;  ///< in seed order
    double median_step_s = 0, p90_step_s = 0, p99_step_s = 0;
    double median_slowdown = 1;
    int most_frequent_critical_gpu = -1;
    int most_frequent_critical_count = 0;
};

/// Simulates `options` unperturbed and perturbed with seeds options.seed ... options.seed + seeds - 1, on
/// `jobs` threads (the result does not depend on `jobs`: each seed's run is a pure function of its seed and
/// stored at its index). Returns the first seed's full result in `first` (the report the CLI prints).
/// Throws InputError as simulate() does.
ScenarioStudy study_scenario(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                             const std::string& workload_name, const SimulationOptions& options, int seeds,
                             int jobs, SimulationResult& first);

/// The percentile by the nearest-rank method (the ceil(q·n)-th smallest value), q in (0, 1].
double nearest_rank_percentile(std::vector<double> values, double q);

std::string format_study_text(const ScenarioStudy& s);
/// The "what_if" section of `trainsim run --json`.
nlohmann::json study_json(const ScenarioStudy& s);

}  // namespace trainsim
