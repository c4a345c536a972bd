// The whole path once: cluster and workload in, one simulated iteration out.
//   TopologySpec -> Cluster (graph, routes), and
//   ModelSpec + Layout -> Program (per stage ops) -> execute() on a fresh Simulator -> Report
#pragma once

#include <string>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/report.hpp"

namespace trainsim {

enum class TraceRanks { none, first_replica, all };

struct SimulationResult {
    Report report;
    ExecutionResult execution;
};

/// Checks the layout (InputError naming the field), builds the cluster and the program, simulates one
/// iteration. `trace` selects the ranks whose timeline slices are kept: none, the ranks of DP replica 0, or
/// all.
SimulationResult simulate(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                          const std::string& workload_name, TraceRanks trace = TraceRanks::none);

}  // namespace trainsim
