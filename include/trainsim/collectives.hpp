// Collective algorithms built from flows, with the structure NCCL uses.
//
// Ring algorithms (NCCL src/device/all_reduce.h, all_gather.h, reduce_scatter.h): n ranks in a ring, the
// message cut into chunks that circulate; in steady state every ring edge carries a stream, so a collective
// is modelled as one concurrent flow per ring edge carrying that edge's total bytes, after a pipeline-fill
// delay of (steps - 1) per-step latencies. On an idle fabric with per-edge bandwidth B and per-step latency
// alpha:
//   all-reduce      T = 2(n-1)·alpha + 2(n-1)/n · S / B     (S = message bytes per rank)
//   all-gather      T = (n-1)·alpha + (n-1)/n · S / B       (S = gathered output bytes per rank)
//   reduce-scatter  T = (n-1)·alpha + (n-1)/n · S / B       (S = input bytes per rank)
//   send/recv       T = kNcclLaunchLatency + route latency + S / B
// (Thakur, Rabenseifner, Gropp 2005; nccl-tests doc/PERFORMANCE.md for algbw/busbw.) For the rings alpha =
// route latency + kNcclStepLatency, plus kNcclLaunchLatency once per collective. Channels: a group spanning
// several nodes with g > 1 members per node runs g rings (NCCL channels), each carrying S/g; ring c enters
// node k at local member (c - k) mod g and leaves at (c - k - 1) mod g, so node-crossing edges are
// rail-aligned (same local index, same NIC rail) as NCCL's rail-aware rings are — all but the wrap-around
// edge from the last node to the first, which is aligned only when the node count is a multiple of g.
#pragma once

#include <functional>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/network.hpp"

namespace trainsim {

enum class CollectiveKind { all_reduce, all_gather, reduce_scatter };

/// NCCL's fixed cost per collective launch (ring, Simple protocol base latency in NCCL src/graph/tuning.cc),
/// s.
inline constexpr double kNcclLaunchLatencyS = 8e-6;
/// NCCL's per-step software/synchronization cost on top of the wire latency, s. An estimate: NCCL's tuning.cc
/// models 3.4 us (NVLink) to 5.7 us (PCIe) per ring step for the Simple protocol and far less for LL/LL128,
/// which NCCL picks for small messages; trainsim's wire latencies already carry part of it.
inline constexpr double kNcclStepLatencyS = 1e-6;

class Collectives {
  public:
    Collectives(Simulator& sim, FlowNetwork& net, const Cluster& cluster);

    /// Runs a ring collective over `ranks` (GPU ids, in ring order, size >= 1). `bytes` as in the formulas
    /// above. `done` runs when every rank has its result. A group of one rank completes at once.
    void run(CollectiveKind kind, const std::vector<int>& ranks, double bytes, std::function<void()> done);

    /// Point-to-point transfer of `bytes` from GPU `src` to GPU `dst` (src != dst).
    void send(int src, int dst, double bytes, std::function<void()> done);

    /// The ring edges (src, dst) of channel `c` of `channels` for `ranks`; exposed for tests.
    static std::vector<std::pair<int, int>> ring_edges(const std::vector<int>& ranks, int gpus_per_node,
                                                       int channel, int channels);
    /// Number of channels the group uses (members per node when the group spans several nodes, else 1).
    static int channels_for(const std::vector<int>& ranks, int gpus_per_node);

  private:
    const Route& route(int src, int dst);

    Simulator& sim_;
    FlowNetwork& net_;
    const Cluster& cluster_;
    std::vector<std::vector<std::pair<int, Route>>> route_cache_;  ///< [src] -> (dst, route)
};

/// Bus bandwidth factor of nccl-tests: busbw = algbw * factor(n).
double busbw_factor(CollectiveKind kind, int n);

}  // namespace trainsim
