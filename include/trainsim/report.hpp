// Results of one simulated iteration and their writers (text table, JSON, Chrome trace).
//
// Definitions (docs/metrics.md has the derivations):
//   tokens/s          = global_batch · seq_len / step_time
//   model TFLOP/s/GPU = model FLOPs (ModelSpec::model_flops, no recomputation) / step_time / GPUs
//   MFU               = model TFLOP/s per GPU / peak (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 6.3)
//   HFU               = hardware FLOPs executed (recomputation included) / step_time / GPUs / peak
//   bubble            = mean over ranks of the pipeline waits measured on the simulated timeline (a P2P
//   transfer
//                       whose peer was not ready, and the drain after a stage's last pass);
//                       bubble ratio = bubble / (step - bubble), comparable to the closed form
//                       (p-1)/m (1F1B, GPipe) or (p-1)/(m·v) (interleaved) of Narayanan et al. 2021.
//   exposed comm      = mean over ranks of the main stream's waits on TP, PP (in-flight messages), DP
//   collectives.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

struct StageTimes {
    int stage = 0;
    double compute_s = 0, tp_exposed_s = 0, pp_exposed_s = 0, bubble_s = 0, dp_exposed_s = 0, idle_s = 0;
};

/// Kernel costs of one kind that came from a hardware profile (--profile) or from the analytic model, over
/// one iteration of one GPU of each pipeline stage (the kernels of every compute op, recomputation included).
struct ProfileUse {
    std::string kind;  ///< gemm, attention, memory_bound, host
    long long from_profile = 0, analytic = 0;
    double profile_s = 0, analytic_s = 0;  ///< their summed durations
};

struct Report {
    std::string topology_name, workload_name, gpu_name;
    /// uncalibrated_note() of the GPU (gpu_catalog.hpp): empty when its model constants are calibrated; the
    /// text report prints it under the cluster line, the JSON report as "gpu_uncalibrated" (absent if empty).
    std::string gpu_uncalibrated;
    int gpus = 0;
    ModelSpec model;
    Layout layout;
    double step_time_s = 0;
    double tokens_per_s = 0;
    double model_flops = 0;     ///< per iteration, whole cluster
    double hardware_flops = 0;  ///< per iteration, whole cluster (recomputation included)
    double model_tflops_per_gpu = 0;
    double hardware_tflops_per_gpu = 0;
    double mfu = 0, hfu = 0;
    double peak_flops = 0;
    double bubble_s = 0, bubble_ratio = 0, bubble_closed_form = 0;
    double compute_s = 0, tp_exposed_s = 0, pp_exposed_s = 0, dp_exposed_s = 0, idle_s = 0;
    std::vector<StageTimes> stages;
    MemoryReport memory;  ///< per stage and phase; memory.fits() false: the layout runs out of memory
    double gpu_memory_bytes = 0;
    std::uint64_t events = 0, flows = 0;
    std::string profile_file;             ///< the profile used (--profile), empty without one
    std::vector<ProfileUse> profile_use;  ///< per kernel kind, with a profile
};

/// Builds the report of one simulated iteration, memory included (simulate_memory, with the simulated times
/// of the traced stage leaders when `r` has them; `memory_timeline` keeps every memory sample).
Report make_report(const Cluster& cluster, const ModelSpec& m, const Layout& l, const Program& p,
                   const ExecutionResult& r, const std::string& topology_name,
                   const std::string& workload_name, bool memory_timeline = false);

std::string format_text(const Report& r, const Measured* measured);
nlohmann::json to_json(const Report& r, const Measured* measured);
/// Chrome trace / Perfetto JSON: one process per GPU, threads for compute, TP, DP and P2P streams.
nlohmann::json chrome_trace(const ExecutionResult& r, const Layout& l);

}  // namespace trainsim
