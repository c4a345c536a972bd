// The executor: the only place where ops meet time. It runs every rank's program on the engine:
// the main stream issues ops in order, compute takes its segment's duration, a collective starts when the
// last member of its group has reached it (NCCL semantics: the k-th collective on a communicator is the same
// operation on every member), a receive waits for its message, and the TP and DP streams run their
// collectives in order.
//
// Time accounting per rank (seconds, they sum to the step time):
//   compute      the main stream runs kernels
//   tp_exposed   waiting for TP collectives
//   pp_exposed   waiting for a P2P message that is already in flight
//   bubble       pipeline bubble: waiting for a P2P transfer whose peer was not ready yet (fill, and the
//                dependencies of the schedule), plus, with pp > 1, the wait after the rank's last pass until
//                the step ends (the drain)
//   dp_exposed   waiting for DP collectives (gradient reduction, parameter all-gather)
//   idle         pp = 1 only: done, waiting for the slowest rank to finish the step
#pragma once

#include <array>
#include <string>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

struct RankTimes {
    double compute_s = 0;
    double tp_exposed_s = 0;
    double pp_exposed_s = 0;
    double bubble_s = 0;
    double dp_exposed_s = 0;
    double idle_s = 0;
    double finish_s = 0;
    std::array<double, 4> compute_by_phase_s{};  ///< indexed by Phase
};

/// One slice of the timeline, for the Chrome trace.
struct TraceSlice {
    int rank = 0;
    int track = 0;  ///< 0 compute, 1 TP stream, 2 DP stream, 3 P2P sends
    std::string name;
    Time start;
    Time duration;
};

struct ExecutionResult {
    double step_time_s = 0;
    std::vector<RankTimes> ranks;   ///< [global rank]
    std::vector<TraceSlice> trace;  ///< only for traced ranks, in execution order
    std::uint64_t events = 0;
    std::uint64_t flows = 0;
};

/// How the executor may exploit symmetry.
struct ExecutionOptions {
    /// The TP ranks of a group run the same ops in lockstep (they meet at a TP collective after every few
    /// kernels): simulate their main stream once per group, while every GPU's flows (TP, P2P, DP) still run
    /// on the network. Exact when the group's GPUs see the same bandwidths (symmetric node); a test checks
    /// folded == unfolded.
    bool fold_tp_groups = true;
    /// When a TP group fills its node (tp == GPUs per node), its NVLink links carry nothing but its own TP
    /// collectives, one at a time (the TP stream is in order; every other group has at most one GPU per node
    /// and goes through the NICs): each TP collective is then timed in closed form as a flow alone on its
    /// links (FlowNetwork::start_private_flow_after), one event instead of three. Same times; a test checks
    /// on == off.
    bool private_tp_links = true;
    /// With TP folding and private TP links, a unit's compute and TP collectives between two ops that involve
    /// other units (P2P, DP, CP, tied embeddings) depend on nothing else: run them ahead in one go (the same
    /// time arithmetic, in the same order) and schedule one event where the unit meets the others, instead of
    /// one per compute run and per TP collective. Not for traced ranks (their slices are recorded as before).
    /// Same times; a test checks on == off.
    bool run_local_ops_ahead = true;
    // DP replicas are not folded: on the fat-tree presets they are not identical in the full simulation (the
    // ECMP hash puts some replicas' P2P transfers on a shared spine uplink and not others), so simulating one
    // replica would change the result (docs/performance.md, "Folding identical DP replicas").
};

/// Simulates one iteration. `traced[r]` selects the ranks whose slices are recorded (may be empty: none).
/// Throws InternalError if some rank cannot finish (a deadlock in the program).
ExecutionResult execute(const Cluster& cluster, const Layout& layout, const Program& program,
                        const std::vector<bool>& traced, const ExecutionOptions& options = {});

/// Rank coordinates in Megatron-LM's default order `tp-cp-ep-dp-pp` (megatron/core/parallel_state.py): tp
/// fastest, then cp, then dp, then pp: rank = tp + TP·(cp + CP·(dp + DP·pp)).
struct RankCoord {
    int tp = 0, dp = 0, pp = 0, cp = 0;
};
RankCoord coord_of(const Layout& l, int rank);
int rank_of(const Layout& l, RankCoord c);

}  // namespace trainsim
