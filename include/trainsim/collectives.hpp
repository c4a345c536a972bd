// Collective algorithms built from flows, with the structure NCCL uses.
//
// Ring algorithms (NCCL src/device/all_reduce.h, all_gather.h, reduce_scatter.h): n ranks in a ring, the
// message cut into chunks that circulate in lockstep; in steady state every ring edge carries a stream at the
// pace of the slowest edge, so each ring (channel) is modelled as one coupled flow over the links of all its
// edges (FlowNetwork counts a link once per edge that uses it) carrying one edge's total bytes, after a
// pipeline-fill delay of (steps - 1) per-step latencies. On an idle fabric with per-edge bandwidth B and
// per-step latency alpha:
//   all-reduce      T = 2(n-1)·alpha + 2(n-1)/n · S / B     (S = message bytes per rank)
//   all-gather      T = (n-1)·alpha + (n-1)/n · S / B       (S = gathered output bytes per rank)
//   reduce-scatter  T = (n-1)·alpha + (n-1)/n · S / B       (S = input bytes per rank)
//   send/recv       T = kNcclLaunchLatency + route latency + S / B
//   all-to-all      T = kNcclLaunchLatency + route latency + (S / n) · k / B   (k: pairs crossing the most
//                   loaded link, B its bandwidth; below)
// (Thakur, Rabenseifner, Gropp 2005; nccl-tests doc/PERFORMANCE.md for algbw/busbw.) For the rings alpha =
// route latency + kNcclStepLatency, plus kNcclLaunchLatency once per collective. Channels: a group spanning
// several nodes with g > 1 members per node runs C = min(g, kMaxRingChannels) rings (NCCL channels), each
// carrying S/C; ring c enters node k at local member (c - k) mod g and leaves at (c - k - 1) mod g, so
// node-crossing edges are rail-aligned (same local index, same NIC rail) as NCCL's rail-aware rings are — all
// but the wrap-around edge from the last node to the first, which is aligned only when the node count is a
// multiple of g.
//
// All-to-all (NCCL has no all-to-all kernel: it is ncclSend / ncclRecv to every peer inside one
// ncclGroupStart / ncclGroupEnd, as torch.distributed.all_to_all_single and Megatron-Core's MoE token
// dispatcher issue it; nccl-tests src/alltoall.cu): S / n bytes from every member to every other member, all
// started together after the launch latency, the collective ending when the last pair does. Modelled as one
// coupled flow of S / n bytes over the routes of all n(n-1) pairs (a link counted once per pair that crosses
// it), as the ring's channels are: every pair advances at the rate of the most loaded link (its capacity over
// the pairs crossing it), so on an idle fabric T = kNcclLaunchLatency + slowest pair's route latency +
// max over links (pairs crossing it x S / n / capacity): the busiest link's bytes over its capacity, the
// lower bound any schedule of the pairs meets and the time NCCL's grouped send/recv reaches when its
// channels keep every link of that bound busy (balanced groups on a switch or rail-aligned fabric, the MoE
// dispatcher's case). Where pairs see different contention, independent per-pair flows would let the
// unloaded pairs finish first without moving the end; the coupled flow keeps the end and costs one flow per
// all-to-all instead of n(n-1) (EP 64: 4,032), which made the MoE rows of the validation set minutes long.
#pragma once

#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/collective_kind.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/network.hpp"

namespace trainsim {

/// NCCL's fixed cost per collective launch (ring, Simple protocol base latency in NCCL src/graph/tuning.cc),
/// s.
inline constexpr double kNcclLaunchLatencyS = 8e-6;
/// NCCL's per-step software/synchronization cost on top of the wire latency, s. An estimate: NCCL's tuning.cc
/// models 3.4 us (NVLink) to 5.7 us (PCIe) per ring step for the Simple protocol and far less for LL/LL128,
/// which NCCL picks for small messages; trainsim's wire latencies already carry part of it.
inline constexpr double kNcclStepLatencyS = 1e-6;
/// The most distinct rings NCCL's ring search builds for a communicator: ringGraph->maxChannels = MAXCHANNELS
/// / 2 (NCCL src/init.cc; MAXCHANNELS = 64 in src/include/device.h); NCCL then duplicates rings over the same
/// paths, which carry the same links. A group with more members per node (an NVL72 domain) runs this many
/// rings.
inline constexpr int kMaxRingChannels = 32;

/// NCCL's protocols (src/device/prims_*.h; tuning.cc): LL moves 8 bytes of data per 16-byte line (data +
/// flag, half the bandwidth) with the lowest latency; LL128 moves 120 of every 128 bytes; Simple moves all
/// bytes with the highest per-step synchronization cost. NCCL's tuner picks, per call, the algorithm and
/// protocol its model predicts fastest on an idle fabric; trainsim does the same with these figures (launch:
/// tuning.cc baseLat for Ring; step overhead on top of the wire latency: estimates in the ratio of
/// tuning.cc's hwLat for NVLink rings).
struct NcclProtocol {
    const char* name;
    double launch_s;          ///< fixed cost per call
    double step_s;            ///< per ring step, on top of the wire latency
    double bandwidth_factor;  ///< fraction of the link bandwidth that carries data
};
inline constexpr NcclProtocol kNcclProtocols[] = {
    {"LL", 6.6e-6, 0.2e-6, 0.5},
    {"LL128", 14.0e-6, 0.6e-6, 120.0 / 128.0},
    {"Simple", kNcclLaunchLatencyS, kNcclStepLatencyS, 1.0},
};
/// NVLS (NVLink SHARP) all-reduce inside one node: each GPU sends its S bytes up to the switch, which reduces
/// them and multicasts the result down, so each NVLink direction carries S instead of the ring's 2(n-1)/n·S.
/// It reaches this fraction of the ring's effective link bandwidth: NVIDIA reports ~480 GB/s all-reduce bus
/// bandwidth for NVLS on DGX H100 (NCCL 2.17+ with nccl-tests), an algorithm bandwidth of 480 / (2·7/8) =
/// 274 GB/s per GPU, against 450 GB/s x nvlink_efficiency 0.8 = 360 GB/s for the ring's links.
inline constexpr double kNvlsEfficiency = 274.0 / 360.0;
/// NVLS effective per-call cost, s. NOT a wire latency: NCCL's NVLS all-reduce approaches its bandwidth
/// slowly with the message size (channel count and pipeline ramp), which this single term stands for. Read
/// off NVIDIA's published nccl-tests all-reduce sweep on one DGX H100 (dgxc-benchmarking, the `collectives`
/// rows of shared/validation): t(128 MiB) = 586 us and t(1 GiB) = 4,029 us against S / 274 GB/s give 96-111
/// us; 100 us is used. With it the tuner below picks the ring up to ~54 MB and NVLS above on DGX H100.
inline constexpr double kNvlsLatencyS = 100e-6;

/// NCCL's tree all-reduce across nodes (NCCL 2.4+; NCCL src/graph/trees.cc, src/device/all_reduce.h
/// runTreeUpDown): inside each node the group's members form a chain (NCCL's tree graph: one GPU of the
/// node, the chain's head, reaches the network), across nodes two binary trees over the nodes carry half of
/// the data each, arranged so that a node that is interior in one tree is a leaf in the other ("double binary
/// tree": Sanders, Speck, Traeff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
/// Parallel Computing 35(12), 2009; NVIDIA blog "Massively Scale Your Deep Learning Training with NCCL 2.4",
/// 2019). Tree 0 is the balanced in-order binary tree of nodes 0..N-1 (node mid of [lo, hi] the root of its
/// range); tree 1 is tree 0 mirrored (node r -> N-1-r) when N is even, shifted by one (r -> (r+1) mod N)
/// when N is odd. Data reduces up both trees and is broadcast down them, pipelined. trainsim runs it as
/// one coupled flow per channel (as the rings: channel c's chains start at each node's c-th member, whose
/// NIC rail the tree's node-crossing edges use) over the links of every edge of both trees, up and down,
/// and of every node's chain, carrying S / (2 channels) (each edge's stream), so a node's NIC carries what
/// the trees put on it (an interior node: up to its parent and down to two children) under max-min
/// sharing. On an idle fabric with node NIC rate B and g channels of single-NIC nodes this is
/// T = 2 S / (g B) (NCCL tuning.cc: tree algorithm bandwidth = busBw / 2), after the latency of NCCL's
/// tuning.cc model with trainsim's wire latencies:
///   L_tree = launch + 2 ((g - 1) (w_intra + step) + floor(log2 N) (w_inter + step)),
/// where w_intra / w_inter are the route latencies of a chain edge / a tree edge and launch, step the
/// protocol's (kNcclProtocols). Used for all-reduce only, over a group with the same number of members on
/// each of at least 2 nodes, when the tuner (Collectives::plan) predicts it faster than the ring (and NVLS).
/// NCCL applies two refinements to the tree's bandwidth, taken here too (tuning.cc, ncclTopoTuneModel and
/// ncclTopoGetAlgoTime): busBw x 0.92 for tree all-reduce, and a per-message-size correction for medium sizes
/// ("Trees are not perfectly sticking to the model for medium sizes"), below.
inline constexpr double kNcclTreeBandwidthFactor = 0.92;
/// NCCL's tree correction factors (tuning.cc treeCorrectionFactor), per protocol (LL, LL128, Simple, the
/// order of kNcclProtocols), for message sizes 64 B x 2^k, k = 0..23 (floor(log2(bytes / 64)); 1 outside that
/// range): the fraction of the tree's modelled bandwidth NCCL's tree reaches at that size.
inline constexpr double kNcclTreeCorrection[3][24] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9},
};
/// kNcclTreeCorrection for `protocol` (index into kNcclProtocols) and a message of `bytes`.
double nccl_tree_correction(int protocol, double bytes);

/// InfiniBand SHARP in-network all-reduce (NCCL's CollNet algorithms with the NCCL-RDMA-SHARP plugin, and
/// NVLS+SHARP on NVLink-SHARP nodes; topology field scale_out.sharp): inside each node the members reduce to
/// one share per NIC rail (NVLS when the GPU has NVLink SHARP, else NCCL's intra-node reduce-scatter and
/// all-gather), each node sends its share of rail c once up to the rail's leaf switch, the leaf and spine
/// switches reduce the streams of their ports (SHARP aggregation nodes, Graham et al., "Scalable Hierarchical
/// Aggregation Protocol (SHArP): A Hardware Architecture for Efficient Data Reduction", COMHPC 2016) and
/// multicast the result down; the node then broadcasts it to its members. trainsim runs it as one coupled
/// flow per rail carrying S / g (g members per node) over: each node's NIC path up and down once (the
/// node-crossing edges of a ring through the nodes in order, which cross each leaf group's spine bundle once
/// up and once down, as one reduced stream per leaf does), and inside the node: with NVLS each member's
/// NVLink up and down once (each member's data crosses its NVLink once each way, S in all over the rails),
/// without it a chain of g - 1 edges from member c twice (reduce-scatter then all-gather: (g-1)/g S per
/// member and pass over the rails). Idle time with node NIC rate B: T = S / (g B): half the ring's 2 (n-1)/n
/// S / (g B). Simple protocol only (NCCL's CollNet has no LL/LL128). Latency: launch + (g > 1: 2 (w_intra +
/// step)) + kSharpLatencyS, plus the route latency. NCCL's CollNet bandwidth refinement on Hopper and later:
/// busBw x 0.85 (tuning.cc, CollNet Direct, minCompCap >= 90); taken for every GPU (NCCL applies none before
/// Hopper: an A100 cluster's SHARP runs 15% pessimistic).
inline constexpr double kSharpBandwidthFactor = 0.85;
/// SHARP's switch aggregation round (up the tree, reduction, multicast down): NCCL tuning.cc's modelled
/// network latency of CollNet Direct with the Simple protocol, 31 us (hwLatencies[NET][CollNetDirect]).
inline constexpr double kSharpLatencyS = 31e-6;

/// NCCL's NVLS_TREE all-reduce (NCCL 2.18+, src/device/all_reduce.h runTreeSplit with NVLS; algorithm
/// NCCL_ALGO_NVLS_TREE in src/graph/tuning.cc): inside each node NVLink SHARP reduces the members' data in
/// the NVSwitch and multicasts the result back (as the one-node NVLS above), across nodes a double binary
/// tree per NIC rail carries the node's reduced share of that rail (one head GPU per rail, as the tree).
/// NCCL enables it only across nodes (tuning.cc: "Disable NVLS Tree on a single node"), with NVLS support
/// (NVLink SHARP, Hopper and later, and at least 2 GPUs of the communicator per node: src/transport/nvls.cc,
/// gpuCount < 2), Simple protocol only. trainsim runs it as the tree's flows without the intra-node chain:
/// one coupled flow per rail c over both trees' edges (up and down) between the nodes' c-th members,
/// carrying S / (2 g), beside one NVLS flow over every member's NVLink up and down carrying S /
/// kNvlsEfficiency (each member's data crosses its NVLink once each way, as in the one-node NVLS; NCCL
/// pipelines the two: tuning.cc takes min(intra, inter) bandwidth). On an idle fabric with node NIC rate B
/// and N >= 3 nodes this is T = max(2 S / (g B), S / (B_nvlink kNvlsEfficiency)); over 2 nodes the trees'
/// single edge halves the NIC term (tuning.cc: interBw x 2 for nNodes <= 2). NCCL applies no tree factor
/// (0.92) nor, on Hopper, the tree correction to NVLS_TREE (tuning.cc ncclTopoGetAlgoTime applies
/// treeCorrectionFactor to NVLS_TREE only on Blackwell x86 hosts, which trainsim does not distinguish: not
/// applied). Latency (tuning.cc: baseLatencies 0, + intraLat + 2 log2i(nNodes) interLat), with trainsim's
/// wire latencies for the tree hops as for the tree:
///   L_nvls_tree = kNvlsTreeIntraLatencyS + 2 floor(log2 N) (w_inter + step_Simple).
/// NCCL's per-channel cap perChMaxNVLSTreeBw (Hopper 45.5 GB/s over >= 3 nodes, 57.7 GB/s over 2; 16 NVLS
/// channels on SM90: 728 / 923 GB/s bus bandwidth) is above what 8 NDR NICs carry (8 x 46 GB/s = 368 GB/s)
/// and is not modelled.
inline constexpr double kNvlsTreeIntraLatencyS = 25e-6;  ///< tuning.cc hwLatencies[NVLINK][NVLS_TREE][Simple]

class Collectives {
  public:
    Collectives(Simulator& sim, FlowNetwork& net, const Cluster& cluster);

    /// The algorithm a FlowPlan runs (NCCL's names).
    enum class Algorithm { ring, nvls, tree, sharp, nvls_tree };
    /// How run(kind, comm, bytes, ...) moves a collective other than all-to-all (for a group of at least 2
    /// ranks and bytes > 0): after `delay` (launch and pipeline fill), one flow of `flow_bytes` on `route`
    /// (NVLS, or a ring of one channel), or, when `route` is null, one such flow on each route of `routes`
    /// (comm.channel_routes, tree_routes, sharp_routes or nvls_tree_routes), and when `side_route` is set
    /// (NVLS_TREE's NVLS part) one flow of `side_bytes` on it beside them. Throws InternalError for
    /// all_to_all, which is a set of pairwise flows (all_to_all_flows).
    struct FlowPlan {
        Time delay;
        double flow_bytes = 0;
        const Route* route = nullptr;
        const std::vector<Route>* routes = nullptr;
        Algorithm algorithm = Algorithm::ring;
        const Route* side_route = nullptr;
        double side_bytes = 0;
    };
    /// What a group's rings need, computed once per group (as NCCL sets up a communicator once). Stays valid
    /// (same address) as long as the Collectives object.
    struct Communicator {
        std::vector<Route> channel_routes;      ///< one coupled route per channel
        Route nvls_route;                       ///< every member's NVLink up and down (empty: no NVLS)
        std::vector<Route> tree_routes;         ///< one coupled route per tree channel (empty: no tree)
        double tree_bandwidth = 0;              ///< idle rate of each tree channel's flow, all at once, B/s
        Time tree_intra_wire, tree_inter_wire;  ///< slowest chain edge / tree edge wire latency
        int tree_depth = 0;                     ///< floor(log2(nodes)): tree edges on the way up
        std::vector<Route> nvls_tree_routes;    ///< NVLS_TREE: the trees, one coupled route per rail
        Route nvls_tree_nvlink;                 ///< NVLS_TREE: every member's NVLink up and down
        double nvls_tree_bandwidth = 0;         ///< idle rate of each NVLS_TREE rail's tree flow, all at once
        double nvls_tree_nvlink_bandwidth = 0;  ///< slowest NVLink of the group, bytes/s
        std::vector<Route> sharp_routes;        ///< one coupled route per rail (empty: no SHARP)
        double sharp_bandwidth = 0;             ///< idle rate of one SHARP rail's flow, bytes/s
        Time sharp_intra_wire;                  ///< an intra-node edge's wire latency (0: one member/node)
        double nvls_bandwidth = 0;              ///< slowest NVLink of the group, bytes/s
        Time wire;                              ///< slowest ring edge's wire latency
        double ring_bandwidth = 0;              ///< idle bandwidth of one channel, bytes/s
        int channels = 1;
        int size = 0;            ///< ranks in the group
        std::vector<int> ranks;  ///< the members (GPU ids), in ring order
        /// plan()'s results by (kind, bytes), computed once each (planned()): a group runs a few sizes
        /// thousands of times.
        struct PlanMemo {
            CollectiveKind kind;
            double bytes;
            FlowPlan plan;
        };
        mutable std::vector<PlanMemo> plans;
    };
    /// The communicator of `ranks` (in ring order), set up on first use.
    const Communicator& communicator(const std::vector<int>& ranks);

    /// Runs a ring collective over `ranks` (GPU ids, in ring order, size >= 1). `bytes` as in the formulas
    /// above. `done` runs when every rank has its result. A group of one rank completes at once.
    void run(CollectiveKind kind, const std::vector<int>& ranks, double bytes, Simulator::Callback done);
    /// The same on a communicator already looked up (the executor keeps one per group). `private_links`: the
    /// caller guarantees that no other flow uses the group's links while it runs (FlowNetwork::
    /// start_private_flow_after: the same times, fewer events).
    void run(CollectiveKind kind, const Communicator& comm, double bytes, Simulator::Callback done,
             bool private_links = false);

    static FlowPlan plan(CollectiveKind kind, const Communicator& comm, double bytes);
    /// plan(), remembered in comm.plans (the same result; at most 64 per group).
    static FlowPlan planned(CollectiveKind kind, const Communicator& comm, double bytes);

    /// One flow of an all-to-all: `bytes` from GPU `src` to GPU `dst`.
    struct PairFlow {
        int src = 0, dst = 0;
        double bytes = 0;
    };
    /// The flows of an all-to-all of `bytes` per rank over `ranks` (S / n from every member to every other,
    /// in member order); exposed for tests.
    static std::vector<PairFlow> all_to_all_flows(const std::vector<int>& ranks, double bytes);

    /// Point-to-point transfer of `bytes` from GPU `src` to GPU `dst` (src != dst).
    void send(int src, int dst, double bytes, Simulator::Callback done);
    /// A P2P message split over the GPUs of a TP group: a flow of `bytes` from pairs[i].first to
    /// pairs[i].second for each i (as send()), launched together (one event), `done` running once when the
    /// last has arrived (FlowNetwork::start_joined_flows_after).
    void send_all(const std::vector<std::pair<int, int>>& pairs, double bytes, Simulator::Callback done);

    /// The ring edges (src, dst) of channel `c` of `channels` for `ranks` (channels > 1: each node's members
    /// rotated by c - k, k the node's index, whatever the members per node); exposed for tests.
    static std::vector<std::pair<int, int>> ring_edges(const std::vector<int>& ranks, int gpus_per_node,
                                                       int channel, int channels);
    /// Number of channels the group uses (members per node when the group spans several nodes, at most
    /// kMaxRingChannels; else 1).
    static int channels_for(const std::vector<int>& ranks, int gpus_per_node);
    /// The double binary tree over `nodes` nodes (see kNcclTreeBandwidthFactor): the (parent, child) edges of
    /// tree `tree` (0 or 1), node indices 0..nodes-1; exposed for tests.
    static std::vector<std::pair<int, int>> tree_edges(int nodes, int tree);

  private:
    const Route& route(int src, int dst);
    void add_tree(Communicator& comm, const std::vector<std::vector<int>>& nodes);
    void add_sharp(Communicator& comm, const std::vector<std::vector<int>>& nodes);
    void add_nvls_tree(Communicator& comm, const std::vector<std::vector<int>>& nodes);
    /// Appends to `r` the edges (up and down) of double binary tree `tree` between the nodes' c-th members,
    /// raising `wire` to the slowest edge's latency.
    void append_tree(Route& r, Time& wire, const std::vector<std::vector<int>>& nodes, int c, int tree);
    void run_all_to_all(const Communicator& comm, double bytes, Simulator::Callback done);
    /// The coupled route of `comm`'s all-to-all: every pair's route (all_to_all_flows' order), built on first
    /// use.
    const Route& all_to_all_route(const Communicator& comm);

    Simulator& sim_;
    FlowNetwork& net_;
    const Cluster& cluster_;
    std::vector<std::vector<std::pair<int, Route>>> route_cache_;  ///< [src] -> (dst, route)
    // scratch: the flows started together (FlowNetwork::start_joined_flows_after)
    std::vector<const Route*> batch_routes_;
    std::vector<double> batch_bytes_;
    std::map<std::vector<int>, Communicator> communicators_;
    /// all_to_all_route's cache, by communicator (entries of communicators_ never move).
    std::unordered_map<const Communicator*, Route> all_to_all_routes_;
};

/// Each link's capacity in bytes/s, indexed by link id: what a FlowNetwork over `cluster` is built with.
std::vector<double> link_capacities(const Cluster& cluster);

/// Time, in seconds, of one collective over `ranks` on an otherwise idle `cluster` (as nccl-tests measures
/// it).
double isolated_collective_seconds(const Cluster& cluster, CollectiveKind kind, const std::vector<int>& ranks,
                                   double bytes);

/// Bus bandwidth factor of nccl-tests (doc/PERFORMANCE.md): busbw = algbw * factor(n); 2(n-1)/n for
/// all-reduce, (n-1)/n for all-gather, reduce-scatter and all-to-all.
double busbw_factor(CollectiveKind kind, int n);

}  // namespace trainsim
