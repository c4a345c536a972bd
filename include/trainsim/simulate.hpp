// The whole path once: cluster and workload in, one simulated iteration out.
//   TopologySpec -> Cluster (graph, routes), and
//   ModelSpec + Layout -> Program (per stage ops) -> execute() on a fresh Simulator -> Report
#pragma once

#include <string>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/perturbation.hpp"
#include "trainsim/program.hpp"
#include "trainsim/report.hpp"

namespace trainsim {

/// Everything about one simulation besides its inputs: the scenario seam (what the CLI builds).
struct SimulationOptions {
    /// Time the memory walk from the executor (memory.hpp, ComputeEndTimes: the compute ends of one GPU per
    /// stage) and keep every memory sample (MemoryReport's timelines).
    bool memory_timeline = false;
    /// Subscribers to the executor's timeline (executor_observer.hpp; not owned), e.g. the Chrome trace
    /// writer (report.hpp, ChromeTraceWriter).
    std::vector<ExecutorObserver*> observers;
    ExecutionOptions execution;         ///< the executor's symmetry shortcuts (all on by default)
    ClusterOptions cluster;             ///< the cluster's route shortcuts (the topology overload only)
    Perturbations perturbations;        ///< what-if perturbations (include/trainsim/perturbation.hpp)
    std::uint64_t seed = kDefaultSeed;  ///< for the random draws of the perturbations
    /// Fill ExecutionResult::caused_wait_s and link_bytes (the what-if attribution).
    bool attribute = false;
};

/// The default options with the memory timeline (SimulationOptions::memory_timeline) and `observers`.
inline SimulationOptions with_timeline(std::vector<ExecutorObserver*> observers = {}) {
    SimulationOptions o;
    o.memory_timeline = true;
    o.observers = std::move(observers);
    return o;
}

struct SimulationResult {
    Report report;
    ExecutionResult execution;
};

/// The host side of one GPU of this topology (PCIe to the GPU, the node's DRAM and NVMe bandwidth shared by
/// its GPUs), for offloaded optimizer work.
HostLinks host_links(const TopologySpec& t, const GpuSpec& gpu);

/// The compute model of a run of `layout` on a GPU `gpu` of `topology`, as simulate() builds it: the layout's
/// precision and FP8 recipe, the topology's host links (host_links) and kernel profile. Throws as
/// ComputeModel's constructor (a profile of another GPU, a recipe the GPU lacks).
ComputeModel run_compute_model(const TopologySpec& topology, const GpuSpec& gpu, const Layout& layout);

/// Times `program` as simulate() does: its activation copies sized (set_activation_copy_bytes in
/// include/trainsim/memory.hpp), then every segment's duration from `compute` (assign_durations).
void time_program(Program& program, const ComputeModel& compute, const ModelSpec& model,
                  const Layout& layout);

/// Per kernel kind, how many kernels of one iteration of one GPU per stage take their cost from the compute
/// model's profile, and how many from the analytic model.
std::vector<ProfileUse> profile_use(const Program& program, const ComputeModel& compute);

/// Refuses (InputError naming the layer passes, layout.tp, the topology field and the limit) a layout with
/// TP > 1 whose layer passes per step pass limits::kMaxLayerPassesSharedTpPorts on a fabric whose TP groups
/// share their GPUs' ports (scale_out.topology rail-only, scale_up.kind pcie). Precondition: check_layout
/// passed. simulate() and the what-if studies call it.
void check_shared_tp_port_work(const TopologySpec& topology, const ModelSpec& model, const Layout& layout);

/// Checks the layout (InputError naming the field), builds the cluster (with the link perturbations of
/// `options`) and the program, simulates one iteration. Throws InputError for a perturbation that does not
/// fit the cluster (a GPU or link name out of range), naming the option.
SimulationResult simulate(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                          const std::string& workload_name, const SimulationOptions& options = {});

/// The same path on a cluster already built and a program already built by build_program(model, layout)
/// (durations not yet assigned; they are assigned here). The cluster is only read, so parallel calls may
/// share one (the sweep does). Does not check the layout: the caller has called check_layout. The link
/// perturbations are the cluster's (Cluster(spec, links)): options.perturbations.links and
/// options.cluster are not read here.
SimulationResult simulate(const Cluster& cluster, const ModelSpec& model, const Layout& layout,
                          Program program, const std::string& workload_name,
                          const SimulationOptions& options = {});

/// The executor's scenario for `options` on `cluster` (per-GPU compute factors, the jitter with each
/// segment's kernel times from `compute`).
ExecutionScenario execution_scenario(const Cluster& cluster, const Program& program,
                                     const ComputeModel& compute, const SimulationOptions& options);
/// The parts of an ExecutionScenario that depend on the seed, set for `seed` (the seed itself and the
/// compute factors of `p.stragglers`, which may draw their GPUs from it): a scenario built once by
/// execution_scenario() serves every seed of a study.
void set_scenario_seed(ExecutionScenario& sc, const Cluster& cluster, const Perturbations& p,
                       std::uint64_t seed);

}  // namespace trainsim
