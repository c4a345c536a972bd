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
#include "trainsim/program.hpp"
#include "trainsim/report.hpp"

namespace trainsim {

/// Which ranks' timelines are kept: none; the GPUs of DP replica 0; one GPU per pipeline stage (tp = cp = dp
/// = 0: what the memory timeline needs); or all.
enum class TraceRanks { none, first_replica, stage_leaders, all };

struct SimulationResult {
    Report report;
    ExecutionResult execution;
};

/// The host side of one GPU of this topology (PCIe to the GPU, the node's DRAM and NVMe bandwidth shared by
/// its GPUs), for offloaded optimizer work.
HostLinks host_links(const TopologySpec& t);

/// Per kernel kind, how many kernels of one iteration of one GPU per stage take their cost from the compute
/// model's profile, and how many from the analytic model.
std::vector<ProfileUse> profile_use(const Program& program, const ComputeModel& compute);

/// Checks the layout (InputError naming the field), builds the cluster and the program, simulates one
/// iteration. `trace` selects the ranks whose timeline slices are kept: none, the ranks of DP replica 0, or
/// all.
SimulationResult simulate(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                          const std::string& workload_name, TraceRanks trace = TraceRanks::none);

/// The same path on a cluster already built and a program already built by build_program(model, layout)
/// (durations not yet assigned; they are assigned here). The cluster is only read, so parallel calls may
/// share one (the sweep does). Does not check the layout: the caller has called check_layout.
SimulationResult simulate(const Cluster& cluster, const ModelSpec& model, const Layout& layout,
                          Program program, const std::string& workload_name,
                          TraceRanks trace = TraceRanks::none);

}  // namespace trainsim
