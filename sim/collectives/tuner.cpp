// NCCL's tuner (src/graph/tuning.cc, ncclTopoGetAlgoTime): every (algorithm, protocol) the group supports is
// timed on an idle fabric, the fastest runs. The estimates use the communicator's idle rates and wire
// latencies (include/trainsim/collectives.hpp gives each algorithm's cost model and source).
#include <algorithm>
#include <limits>

#include "trainsim/collectives.hpp"
#include "trainsim/errors.hpp"

namespace trainsim {

namespace {

using FlowPlan = Collectives::FlowPlan;
using Communicator = Collectives::Communicator;

/// A candidate plan and its predicted idle time, s.
struct Candidate {
    double time_s = std::numeric_limits<double>::infinity();
    FlowPlan plan;
};

void keep_faster(Candidate& best, double time_s, const FlowPlan& plan) {
    if (time_s < best.time_s) best = Candidate{time_s, plan};
}

/// The ring, each protocol: T = launch + steps (wire + step) + per-edge bytes / (channels x rate x factor).
void ring(Candidate& best, CollectiveKind kind, const Communicator& comm, double bytes) {
    const int n = comm.size;
    const bool ar = kind == CollectiveKind::all_reduce;
    const int steps = ar ? 2 * (n - 1) : n - 1;
    const double per_edge = (ar ? 2.0 : 1.0) * (n - 1) / n * bytes / comm.channels;
    const double wire = comm.wire.to_seconds();
    const Route* one = comm.channel_routes.size() == 1 ? &comm.channel_routes.front() : nullptr;
    for (const auto& p : kNcclProtocols) {
        const double t =
            p.launch_s + steps * (wire + p.step_s) + per_edge / (comm.ring_bandwidth * p.bandwidth_factor);
        // The flows add their own route latency once; the pipeline fill adds the other (steps - 1) step
        // latencies.
        const Time step = comm.wire + Time::seconds(p.step_s);
        const Time fill = Time::seconds(p.launch_s) + step.times(steps - 1) + Time::seconds(p.step_s);
        keep_faster(best, t,
                    FlowPlan{fill, per_edge / p.bandwidth_factor, one, &comm.channel_routes,
                             Collectives::Algorithm::ring});
    }
}

/// NVLS all-reduce inside one NVLink domain: every member's NVLink up and down carry S.
void nvls(Candidate& best, const Communicator& comm, double bytes) {
    if (comm.nvls_route.links.empty()) return;
    const double t = kNvlsLatencyS + comm.nvls_route.latency.to_seconds() +
                     bytes / (comm.nvls_bandwidth * kNvlsEfficiency);
    keep_faster(best, t,
                FlowPlan{Time::seconds(kNvlsLatencyS), bytes / kNvlsEfficiency, &comm.nvls_route, nullptr,
                         Collectives::Algorithm::nvls});
}

/// The double binary tree across nodes, each protocol (kNcclTreeBandwidthFactor).
void tree(Candidate& best, const Communicator& comm, double bytes) {
    if (comm.tree_routes.empty()) return;
    const int g = static_cast<int>(comm.tree_routes.size());
    const double route_latency = comm.tree_routes.front().latency.to_seconds();
    for (int i = 0; i < 3; ++i) {
        const NcclProtocol& p = kNcclProtocols[i];
        const double latency =
            p.launch_s + 2.0 * ((g - 1) * (comm.tree_intra_wire.to_seconds() + p.step_s) +
                                comm.tree_depth * (comm.tree_inter_wire.to_seconds() + p.step_s));
        const double factor = p.bandwidth_factor * kNcclTreeBandwidthFactor * nccl_tree_correction(i, bytes);
        const double flow_bytes = bytes / (2.0 * g) / factor;
        const double delay = std::max(0.0, latency - route_latency);
        keep_faster(best, delay + route_latency + flow_bytes / comm.tree_bandwidth,
                    FlowPlan{Time::seconds(delay), flow_bytes, nullptr, &comm.tree_routes,
                             Collectives::Algorithm::tree});
    }
}

/// SHARP in-network all-reduce (kSharpLatencyS, kSharpBandwidthFactor), Simple protocol.
void sharp(Candidate& best, const Communicator& comm, double bytes) {
    if (comm.sharp_routes.empty()) return;
    const NcclProtocol& p = kNcclProtocols[2];
    const int g = static_cast<int>(comm.sharp_routes.size());
    const double intra = g > 1 ? 2.0 * (comm.sharp_intra_wire.to_seconds() + p.step_s) : 0.0;
    const double delay = p.launch_s + intra + kSharpLatencyS;
    const double flow_bytes = bytes / g / kSharpBandwidthFactor;
    keep_faster(best,
                delay + comm.sharp_routes.front().latency.to_seconds() + flow_bytes / comm.sharp_bandwidth,
                FlowPlan{Time::seconds(delay), flow_bytes, nullptr, &comm.sharp_routes,
                         Collectives::Algorithm::sharp});
}

/// NVLS_TREE (kNvlsTreeIntraLatencyS): the trees across nodes beside NVLS inside them, Simple protocol.
void nvls_tree(Candidate& best, const Communicator& comm, double bytes) {
    if (comm.nvls_tree_routes.empty()) return;
    const NcclProtocol& p = kNcclProtocols[2];
    const int g = static_cast<int>(comm.nvls_tree_routes.size());
    const double route_latency = comm.nvls_tree_routes.front().latency.to_seconds();
    const double latency =
        kNvlsTreeIntraLatencyS + 2.0 * comm.tree_depth * (comm.tree_inter_wire.to_seconds() + p.step_s);
    const double delay = std::max(0.0, latency - route_latency);
    const double tree_bytes = bytes / (2.0 * g);
    const double nvlink_bytes = bytes / kNvlsEfficiency;
    const double t = delay + std::max(route_latency + tree_bytes / comm.nvls_tree_bandwidth,
                                      comm.nvls_tree_nvlink.latency.to_seconds() +
                                          nvlink_bytes / comm.nvls_tree_nvlink_bandwidth);
    FlowPlan plan{Time::seconds(delay), tree_bytes, nullptr, &comm.nvls_tree_routes,
                  Collectives::Algorithm::nvls_tree};
    plan.side_route = &comm.nvls_tree_nvlink;
    plan.side_bytes = nvlink_bytes;
    keep_faster(best, t, plan);
}

}  // namespace

Collectives::FlowPlan Collectives::plan(CollectiveKind kind, const Communicator& comm, double bytes) {
    if (kind == CollectiveKind::all_to_all)
        throw InternalError("Collectives::plan: an all-to-all is a set of pairwise flows, not a ring");
    Candidate best;
    ring(best, kind, comm, bytes);
    if (kind == CollectiveKind::all_reduce) {
        nvls(best, comm, bytes);
        tree(best, comm, bytes);
        sharp(best, comm, bytes);
        nvls_tree(best, comm, bytes);
    }
    return best.plan;
}

Collectives::FlowPlan Collectives::planned(CollectiveKind kind, const Communicator& comm, double bytes) {
    for (const Communicator::PlanMemo& m : comm.plans)
        if (m.kind == kind && m.bytes == bytes) return m.plan;
    constexpr std::size_t kMaxPlans = 64;  // a group runs a few sizes; past this many, no memo grows
    const FlowPlan p = plan(kind, comm, bytes);
    if (comm.plans.size() < kMaxPlans) comm.plans.push_back(Communicator::PlanMemo{kind, bytes, p});
    return p;
}

}  // namespace trainsim
