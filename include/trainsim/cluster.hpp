// A cluster described by parameters (TopologySpec), expanded by a generator into a Boost.Graph of GPUs,
// NVSwitches, NICs and InfiniBand/RoCE switches joined by directed links, with routes computed on that graph.
//
// Graph shape (DGX-style node, rail-optimized two-tier fat-tree):
//   GPU <-> NVSwitch (one logical switch per node; bandwidth per GPU per direction)
//   GPU <-> NIC (PCIe; GPU i uses NIC floor(i * nics / gpus_per_node))
//   NIC k of every node in a group of `nodes_per_leaf` nodes <-> leaf switch (group, rail k)
//   every leaf <-> every spine; uplinks per leaf = ceil(nodes_per_leaf / oversubscription), one per spine.
// Every physical link is two directed links (full duplex), each with its own bandwidth.
// Routing: inside a node GPU -> NVSwitch -> GPU. Across nodes GPU -> NIC -> leaf -> spine layer -> leaf ->
// NIC -> GPU. How a flow crosses the spine layer depends on `ScaleOutRouting`:
//   adaptive  (InfiniBand's default here) the switches spread every flow's packets over all of a leaf's
//             uplinks (NVIDIA Quantum adaptive routing, enabled on DGX SuperPOD compute fabrics; NCCL's IB
//             transport uses it for messages above NCCL_IB_AR_THRESHOLD, 8 KiB by default). Modelled as one
//             logical spine: each leaf has one uplink and one downlink bundle of (uplinks x NIC rate), so
//             the fabric is non-blocking up to its oversubscription and flows never collide on one spine.
//             Without oversubscription a bundle can never be the tightest link of a flow (it carries at most
//             what the leaf's NICs carry), so routes then list only the NIC links, with the bundles' latency.
//   ecmp      (RoCE's default here) each flow is pinned to one spine by a deterministic hash of its
//             endpoints (static ECMP), so two large flows can share one uplink while others idle (Meta,
//             "The Llama 3 Herd of Models", arXiv:2407.21783, Sec. 3.3.1: ECMP collisions of few, large
//             flows on RoCE; mitigated by enhanced ECMP).
// The switch layer being a complete bipartite graph, the shortest path between two leaves is closed-form
// (leaf -> spine -> leaf), so no distance table is kept (memory O(links), not O(leaves x vertices)).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

struct Profile;

/// How flows cross the spine layer of the fat-tree (see the header comment).
enum class ScaleOutRouting { adaptive, ecmp };

/// Shared-storage bandwidth per node, read and write, bytes/s: Meta's Tectonic file system sustained 2 TB/s
/// for the Llama 3 405B pre-training on 2,048 servers (arXiv:2407.21783, Sec. 3.3.1 "Storage": 2 TB/s
/// sustained, 7 TB/s peak): 2e12 / 2,048 = 976.6 MB/s. A cluster's aggregate is nodes x this.
inline constexpr double kDefaultStorageBandwidthPerNode = 2e12 / 2048.0;

struct TopologySpec {
    std::string name;
    std::string gpu;  ///< GPU catalog name
    int nodes = 1;
    int gpus_per_node = 8;
    // scale-up fabric
    std::string scale_up_kind = "nvswitch";
    Bandwidth nvlink_bandwidth;  ///< per GPU, per direction
    Time nvlink_latency;         ///< GPU -> NVSwitch hop latency
    // scale-out fabric
    std::string scale_out_kind = "infiniband";  ///< "infiniband" or "roce"
    int nics_per_node = 8;
    Bandwidth nic_bandwidth;   ///< line rate of one NIC, per direction
    Bandwidth pcie_bandwidth;  ///< GPU <-> NIC, per direction
    Time nic_latency;          ///< GPU -> NIC -> wire
    Time switch_latency;       ///< per switch traversal
    int nodes_per_leaf = 32;
    double oversubscription = 1.0;  ///< leaf down:up bandwidth ratio (1 = non-blocking)
    /// Spine-layer routing; topology files default it by kind (infiniband: adaptive, roce: ecmp).
    ScaleOutRouting routing = ScaleOutRouting::adaptive;
    // host side of a node (optional; needed to offload the optimizer): DRAM and NVMe bandwidth per node
    Bandwidth host_memory_bandwidth;  ///< zero: not described
    Bandwidth nvme_bandwidth;         ///< zero: not described
    // shared storage (checkpoints; optional "storage" object of the topology file, default below)
    Bandwidth storage_read_bandwidth_per_node{kDefaultStorageBandwidthPerNode};   ///< checkpoint load
    Bandwidth storage_write_bandwidth_per_node{kDefaultStorageBandwidthPerNode};  ///< checkpoint save

    /// Calibrated constants for this cluster's GPU (a catalog entry with measured or fitted model constants,
    /// from a calibration file); unset: the catalog's entry for `gpu`.
    std::optional<GpuSpec> gpu_calibrated;
    /// Measured kernel times of this cluster's GPU type (`--profile`, include/trainsim/profile.hpp); null:
    /// the analytic compute model alone. A profile of another GPU type is refused when the cluster is
    /// simulated.
    std::shared_ptr<const Profile> profile;

    int gpus() const { return nodes * gpus_per_node; }
};

enum class VertexKind { gpu, nvswitch, nic, leaf, spine };
enum class LinkKind { nvlink, pcie, nic_to_leaf, leaf_to_spine };

struct Link {
    int from = 0;  ///< vertex
    int to = 0;
    LinkKind kind = LinkKind::nvlink;
    Bandwidth bandwidth;  ///< effective capacity used by the flow model, bytes/s
    Time latency;
};

struct Route {
    std::vector<int>
        links;     ///< link ids in order (without links that can never bind, see the header comment)
    Time latency;  ///< sum of the latencies of every link traversed
};

/// A scale-out efficiency: fraction of the NIC line rate that NCCL's transport reaches over InfiniBand/RoCE
/// (nccl-tests multi-node all_reduce on DGX A100 with 8x HDR: ~185 GB/s busbw per node of 200 GB/s = 0.92).
inline constexpr double kScaleOutEfficiency = 0.92;

class Cluster {
  public:
    /// Builds the graph. Throws InputError on inconsistent parameters (e.g. nics_per_node > gpus_per_node).
    explicit Cluster(const TopologySpec& spec);
    ~Cluster();
    Cluster(Cluster&&) noexcept;
    Cluster& operator=(Cluster&&) noexcept;

    const TopologySpec& spec() const { return spec_; }
    const GpuSpec& gpu() const { return gpu_; }
    int gpus() const { return spec_.gpus(); }
    int node_of(int gpu) const { return gpu / spec_.gpus_per_node; }
    int num_vertices() const;
    VertexKind vertex_kind(int v) const;
    const std::vector<Link>& links() const { return links_; }

    /// Route between two GPUs (src != dst). Deterministic. Throws InternalError if no path exists.
    Route route(int src_gpu, int dst_gpu) const;

  private:
    struct Impl;
    TopologySpec spec_;
    GpuSpec gpu_;
    std::vector<Link> links_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace trainsim
