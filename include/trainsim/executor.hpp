// The executor: the only place where ops meet time. It runs every rank's program on the engine:
// the main stream issues ops in order, compute takes its segment's duration, a collective starts when the
// last member of its group has reached it (NCCL semantics: the k-th collective on a communicator is the same
// operation on every member), a receive waits for its message, and the TP and DP streams run their
// collectives in order.
//
// Time accounting per rank (seconds, they sum to the step time):
//   compute      the main stream runs kernels
//   tp_exposed   waiting for TP collectives, and for the CP and EP collectives that run on the TP stream
//                (their parts: cp_exposed, ep_exposed)
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
#include "trainsim/executor_observer.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/parallel_groups.hpp"
#include "trainsim/perturbation.hpp"
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
    // The collective waits split (what-if attribution, docs/what-if.md): the part of a blocked wait before
    // the collective started, i.e. waiting for its last member to arrive; the rest is its transfer.
    double tp_wait_s = 0;     ///< part of tp_exposed_s, TP collectives
    double cp_exposed_s = 0;  ///< part of tp_exposed_s: CP collectives (they run on the TP stream)
    double cp_wait_s = 0;     ///< part of cp_exposed_s
    double ep_exposed_s = 0;  ///< part of tp_exposed_s: EP all-to-alls (MoE token dispatch / combine)
    double ep_wait_s = 0;     ///< part of ep_exposed_s
    double dp_wait_s = 0;     ///< part of dp_exposed_s
};

struct ExecutionResult {
    double step_time_s = 0;
    std::vector<RankTimes> ranks;  ///< [global rank]
    std::uint64_t events = 0;
    std::uint64_t flows = 0;
    bool tp_folded = false;  ///< ExecutionOptions::fold_tp_groups was taken
    bool ran_ahead = false;  ///< ExecutionOptions::run_local_ops_ahead was taken (folded, or per TP group)
    /// With ExecutionScenario::attribute: [GPU] the waiting this GPU caused others, in GPU-seconds: at each
    /// TP/CP/DP collective whose last member it was, the others' wait for it; at each P2P receive whose
    /// message it sent, the receiver's wait before the transfer started. Empty otherwise.
    std::vector<double> caused_wait_s;
    std::vector<double> link_bytes;  ///< with ExecutionScenario::attribute: bytes per link
};

/// What a what-if scenario changes in the executor (include/trainsim/perturbation.hpp), resolved per GPU by
/// simulate(). The default changes nothing.
struct ExecutionScenario {
    std::vector<double> compute_factor;  ///< [GPU] multiplies every kernel's time; empty: all 1
    double jitter_sigma = 0;             ///< > 0: per-kernel log-normal jitter (Jitter)
    std::uint64_t seed = kDefaultSeed;
    std::vector<std::vector<double>> kernel_seconds;  ///< [segment][kernel] seconds, needed with jitter
    /// The links are perturbed (the cluster's perturbed_links() is not empty).
    bool links_perturbed = false;
    bool attribute = false;  ///< fill ExecutionResult::caused_wait_s and link_bytes
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
    /// on == off. A TP group smaller than its node (TP 4 in a DGX of 8) shares its GPUs' NVLink ports with
    /// the DP, CP and EP collectives of its members, whose flows can only be there while the unit is engaged
    /// on them: its local ops then run ahead with private TP timings only while its DP stream is empty (an
    /// unfolded TP group: only from the ops where, by the program's structure, every DP collective launched
    /// before has been waited for), and only where no P2P route crosses a TP group's links (PP peers in other
    /// nodes), no relay GPU forwards (rail-only fabrics) and the node is not PCIe-only; elsewhere its TP
    /// collectives are network flows.
    /// Same times; a test checks ahead == event by event.
    bool private_tp_links = true;
    /// With TP folding and private TP links, a unit's compute and TP collectives between two ops that involve
    /// other units (P2P, DP, CP, tied embeddings) depend on nothing else: run them ahead in one go (the same
    /// time arithmetic, in the same order) and schedule one event where the unit meets the others, instead of
    /// one per compute run and per TP collective. Not for observed ranks (ExecutorObserver: their slices are
    /// reported one by one).
    /// Where folding declines (the members of a TP group run differently: jitter, a straggler, a link
    /// perturbation), a TP group with private TP links runs such a run of local ops ahead together once all
    /// its members have reached it: each member's compute on its own clock (its own jitter draws), each TP
    /// collective starting at its members' latest arrival, each member's wait for it split into the wait for
    /// the last member (tp_wait_s) and the transfer, as event by event. Not for a group with an observed GPU,
    /// nor for a run that may start with a collective still on the TP stream (a CP or tied-embedding
    /// collective not yet waited for) or that leaves one there. Same times, accounts and waiting caused, bit
    /// for bit (exact ties of event times aside, which jitter makes unlikely); tests check on == off.
    bool run_local_ops_ahead = true;
    /// 0: no bound. Else the simulation stops after this many events and execute() throws EventLimitExceeded
    /// (include/trainsim/errors.hpp), naming the bound: for callers that can do without the timeline (the
    /// memory what-if: memory needs only the program's order, include/trainsim/memory.hpp).
    std::uint64_t max_events = 0;
    // Each shortcut checks the scenario (ExecutionScenario) and declines where a perturbation breaks the
    // symmetry it relies on: TP folding when the members of a TP group would not run alike: jitter, different
    // compute factors within a TP group, or any link perturbation (a NIC, rail or leaf uplink serves one
    // member of a group and not the others); running ahead then goes on per unfolded TP group (above).
    // Private TP links stay exact under perturbations: a perturbed NVLink capacity or latency is in the links
    // the closed form reads, and the member that uses it is timed on its own.
    // DP replicas are not folded: on the fat-tree presets they are not identical in the full simulation (the
    // ECMP hash puts some replicas' P2P transfers on a shared spine uplink and not others), so simulating one
    // replica would change the result (docs/performance.md, "Folding identical DP replicas").
};

/// Simulates one iteration. Every slice of the timeline of a rank that an observer observes is reported to
/// it as the simulation runs (include/trainsim/executor_observer.hpp; `observers` may be empty, at most 32).
/// Throws InternalError if some rank cannot finish (a deadlock in the program), or with more than 32
/// observers; what an observer throws propagates.
ExecutionResult execute(const Cluster& cluster, const Layout& layout, const Program& program,
                        const std::vector<ExecutorObserver*>& observers, const ExecutionOptions& options = {},
                        const ExecutionScenario& scenario = {});

// Rank coordinates (RankCoord, coord_of, rank_of) and the parallel groups:
// include/trainsim/parallel_groups.hpp.

}  // namespace trainsim
