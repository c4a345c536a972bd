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
//
// Three tiers (scale_out.tiers = 3, for clusters beyond what one spine layer joins: with 64-port switches a
// non-blocking two-tier fat-tree ends at 64 x 32 = 2,048 NICs, a three-tier one at 64^3 / 4 = 65,536;
// Al-Fares, Loukissas, Vahdat, "A Scalable, Commodity Data Center Network Architecture", SIGCOMM 2008):
// leaf groups are gathered into pods of `nodes_per_pod` nodes; the leaves of a pod (every rail) reach only
// the pod's spines (uplinks per leaf as above, one per pod spine), and spine s of every pod reaches the
// cores of plane s: ceil(leaves per pod / spine_oversubscription) cores per plane, one link to each. Inside
// a pod a flow turns at a spine (leaf -> spine -> leaf); between pods it climbs to a core (leaf -> spine ->
// core -> spine -> leaf). This is the shape of NVIDIA's DGX SuperPOD reference architectures beyond one
// spine layer (leaf, spine and core switches; DGX SuperPOD with DGX H100/B200 RA, "compute fabric") and of
// Meta's 24K-GPU RoCE clusters (Gangidi et al., "RDMA over Ethernet for Distributed Training at Meta Scale",
// SIGCOMM 2024: rack (RTSW), cluster (CTSW) and aggregation (ATSW) switches; "The Llama 3 Herd of Models",
// arXiv:2407.21783, Sec. 3.3.1: pods of 3,072 GPUs at full bisection, 8 pods joined by aggregation switches
// oversubscribed 1:7), with the leaves rail-optimized as in the two-tier fabric. Routing as in two tiers:
// ECMP hashes a flow onto one spine (the hash picks the plane) and one core of that plane; adaptive routing
// spreads it over all of them, modelled as one logical spine per pod and one logical core, each pod's spines
// joined to it by one bundle of (spine uplinks of the pod x NIC rate). Latency convention (as two tiers):
// a link up carries the switch_latency of the switch it enters, a link down none.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/perturbation.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

struct Profile;

/// How flows cross the spine layer of the fat-tree (see the header comment).
enum class ScaleOutRouting { adaptive, ecmp };

/// The scale-out fabric's shape (topology field scale_out.topology):
///   fat_tree   the rail-optimized two-tier fat-tree of the header comment: every leaf to every spine.
///   rail_only  no connection between rails (Wang, Ghobadi et al., "Rail-only: A Low-Cost High-Performance
///              Network for Training LLMs with Trillion Parameters", arXiv:2307.12169, 2023): the leaves of
///              rail k reach only rail k's spines (one logical spine per rail under adaptive routing, the
///              rail's uplinks under ECMP). A flow between GPUs of different nodes on different rails first
///              crosses NVLink inside the source node to the GPU on the destination's rail (NCCL's PXN, the
///              paper's "forwarding through the scale-up domain"), then that rail.
enum class ScaleOutTopology { fat_tree, rail_only };

/// PCIe Gen6 x16's raw rate per direction (PCI-SIG PCIe 6.0: 64 GT/s x 16 lanes / 8 bits = 128 GB/s): the
/// most a GPU's link to the PCIe switch of a PCIe-only node (scale_up.kind "pcie") can carry.
inline constexpr double kMaxPcieBandwidthPerGpu = 128e9;

/// Shared-storage bandwidth per node, read and write, bytes/s: Meta's Tectonic file system sustained 2 TB/s
/// for the Llama 3 405B pre-training on 2,048 servers (arXiv:2407.21783, Sec. 3.3.1 "Storage": 2 TB/s
/// sustained, 7 TB/s peak): 2e12 / 2,048 = 976.6 MB/s. A cluster's aggregate is nodes x this.
inline constexpr double kDefaultStorageBandwidthPerNode = 2e12 / 2048.0;

struct TopologySpec {
    std::string name;
    std::string gpu;  ///< GPU catalog name
    /// Scale-up domains: the GPUs of a node share one NVSwitch (or Infinity Fabric) domain, NCCL's
    /// collectives and P2P sends between them run over it, and its NICs (nics_per_node) reach the scale-out
    /// fabric.
    int nodes = 1;
    int gpus_per_node = 8;  ///< GPUs of one scale-up domain (DGX: the 8 GPUs of a server; NVL72: 72)
    /// GPUs of one host (a server or compute tray: its CPUs, DRAM, NVMe, and a failure unit) where the
    /// scale-up domain spans several hosts (GB200 NVL72: 18 trays of 4 GPUs on one NVLink domain, see
    /// apply_scale_up_domain()); 0: a node is one host. Host figures below stay per node (domain).
    int gpus_per_host = 0;
    /// `scale_up.domain_gpus` as the topology file states it (0: not stated, the domain is gpus_per_node);
    /// parse_topology folds it in with apply_scale_up_domain() and resets it to 0.
    int scale_up_domain_gpus = 0;
    // scale-up fabric: "nvswitch" (NVLink through NVSwitches) or "pcie" (PCIe-only node: no NVLink, GPU <->
    // GPU through the node's PCIe switches and host bridge; each GPU's PCIe link, nvlink_bandwidth below,
    // also carries its NIC traffic, and there is no NVLS)
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
    ScaleOutTopology fabric = ScaleOutTopology::fat_tree;  ///< scale_out.topology
    /// Switch tiers of the fat-tree (scale_out.tiers): 2 (leaf, spine) or 3 (leaf, spine, core; see the
    /// header comment). Three tiers need a fat_tree fabric and nodes_per_pod.
    int tiers = 2;
    /// Three tiers: nodes under one pod's spines, a multiple of nodes_per_leaf (0 with two tiers).
    int nodes_per_pod = 0;
    /// Three tiers: a pod spine's down:up bandwidth ratio toward the cores (1 = non-blocking; Llama 3's
    /// aggregation layer: 7).
    double spine_oversubscription = 1.0;
    /// InfiniBand SHARP in-network reduction in the leaf and spine switches (NVIDIA Quantum/Quantum-2 with
    /// the NCCL-RDMA-SHARP plugin: NCCL's CollNet and NVLS+SHARP all-reduce, collectives.hpp kSharp*). Only
    /// with scale_out_kind "infiniband" (check_topology).
    bool sharp = false;
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

    int gpus() const { return nodes * gpus_per_node; }  ///< after check_topology: at most limits::kMaxGpus
    /// GPUs of one host: gpus_per_host, or gpus_per_node when a node is one host.
    int host_gpus() const { return gpus_per_host > 0 ? gpus_per_host : gpus_per_node; }
    /// The field that sets a node's GPUs as the topology file writes it, with its value, for messages:
    /// "gpus_per_node = 8", or "scale_up.domain_gpus = 72" for a domain across hosts (gpus_per_node is then
    /// the domain's GPUs, not the file's gpus_per_node).
    std::string node_gpus_field() const {
        return (gpus_per_host > 0 && gpus_per_host != gpus_per_node ? "scale_up.domain_gpus = "
                                                                    : "gpus_per_node = ") +
               std::to_string(gpus_per_node);
    }

    /// Every field equal (validate simulates runs with equal inputs once; `profile` compares by
    /// pointer: runs share the one profile validate attaches).
    friend bool operator==(const TopologySpec&, const TopologySpec&) = default;
};

/// The GPU of `spec`: its calibrated entry (gpu_calibrated), else the catalog's entry for `spec.gpu`. Throws
/// InputError naming topology.gpu when the name is not in the catalog (find_gpu).
const GpuSpec& topology_gpu(const TopologySpec& spec);

/// Joins hosts into the scale-up domain they share: `spec` describes hosts (nodes of gpus_per_node GPUs,
/// nics_per_node NICs, host and storage bandwidth per host, nodes_per_leaf hosts per leaf group) whose
/// NVLink domain spans `domain_gpus` GPUs (GB200 NVL72: hosts of 4 GPUs, domains of 72). Afterwards a node
/// is one domain of domain_gpus GPUs with the NICs and host bandwidths of its domain_gpus / gpus_per_node
/// hosts, nodes_per_leaf and nodes_per_pod count domains, gpus_per_host is the host's GPUs; NICs stay one
/// rail each, so a GPU keeps its own host's NIC (GPU i of the domain uses NIC floor(i * nics / domain_gpus)).
/// domain_gpus equal to gpus_per_node changes nothing. Throws InputError naming the field
/// ("topology.scale_up.domain_gpus = ...") unless domain_gpus is a multiple of gpus_per_node that divides
/// the cluster's GPUs and nodes_per_leaf is a multiple of the hosts per domain.
void apply_scale_up_domain(TopologySpec& spec, int domain_gpus);

/// Checks `spec`'s counts: positive, nics_per_node <= gpus_per_node, oversubscription >= 1, three tiers only
/// on a fat_tree fabric with nodes_per_pod a positive multiple of nodes_per_leaf ("topology.scale_out.
/// nodes_per_pod = 48 must be a multiple of scale_out.nodes_per_leaf = 32"), nodes_per_pod and
/// spine_oversubscription only with three tiers, sharp only on
/// InfiniBand ("topology.scale_out.sharp = true needs scale_out.kind = infiniband, not roce"), a PCIe-only
/// node within one host and at most kMaxPcieBandwidthPerGpu per GPU, and the sizes of trainsim/limits.hpp
/// (GPUs, GPUs per node, nodes per leaf, oversubscription), computed without overflow. Throws InputError
/// naming the field ("topology.nodes * topology.gpus_per_node = ..."). The Cluster constructor and the
/// topology reader call it.
void check_topology(const TopologySpec& spec);

enum class VertexKind { gpu, nvswitch, nic, leaf, spine, core };  ///< core: three tiers only
enum class LinkKind { nvlink, pcie, nic_to_leaf, leaf_to_spine, spine_to_core };

struct Link {
    int from = 0;  ///< vertex
    int to = 0;
    LinkKind kind = LinkKind::nvlink;
    Bandwidth bandwidth;  ///< effective capacity used by the flow model, bytes/s
    Time latency;
};

/// A route's distinct links in order of first use, and how many times the route lists each (uses[i] for
/// links[i]).
struct LinkUses {
    std::vector<int> links;
    std::vector<int> uses;
    /// Filled by the flow network that runs the route's flows (FlowNetwork::set_distinct_links, at its
    /// first flow): capacity / uses of each link, its share while it carries one flow of the route alone;
    /// solo_share_owner: that network. The routes of a simulation (its Collectives) serve one network.
    mutable std::vector<double> solo_share;
    mutable const void* solo_share_owner = nullptr;
};

struct Route {
    std::vector<int>
        links;     ///< link ids in order (without links that can never bind, see the header comment)
    Time latency;  ///< sum of the latencies of every link traversed
    /// `links` counted by link (count_link_uses), or null. A flow network counts them per flow when null; a
    /// long coupled route built once and used by many flows (an all-to-all's: every pair's links, tens of
    /// thousands of entries over a few hundred links) carries them.
    std::shared_ptr<const LinkUses> link_uses;
};

/// Sets route.link_uses from route.links (link ids >= 0).
void count_link_uses(Route& route);

/// A scale-out efficiency: fraction of the NIC line rate that NCCL's transport reaches over InfiniBand/RoCE
/// (nccl-tests multi-node all_reduce on DGX A100 with 8x HDR: ~185 GB/s busbw per node of 200 GB/s = 0.92).
inline constexpr double kScaleOutEfficiency = 0.92;

/// The route shortcuts a cluster may take (on by default; tests turn them off to check they are exact).
struct ClusterOptions {
    /// Adaptive routing on a non-blocking fabric: routes leave out the spine bundles, which can never bind
    /// (see the constructor). Declined when a perturbation lowers a bundle's capacity (leaf<L>.uplink).
    /// Three tiers: the pods' bundles up to the cores likewise when the spines are non-blocking (declined
    /// when a perturbation changes a leaf bundle's capacity).
    bool omit_unbinding_bundles = true;
};

/// A link perturbation as applied: its option text and the directed links it changed.
struct PerturbedLinks {
    std::string name;  ///< the documented link name (include/trainsim/perturbation.hpp)
    std::string text;  ///< the option as given
    std::vector<int> links;
};

class Cluster {
  public:
    /// Builds the graph. Throws InputError on inconsistent parameters (e.g. nics_per_node > gpus_per_node).
    explicit Cluster(const TopologySpec& spec);
    /// The same graph with `perturbations` applied to its links (include/trainsim/perturbation.hpp): a
    /// capacity times the bandwidth factor, the extra latency added to the link's, a NIC that is down carries
    /// nothing (its GPUs use the node's next working NIC). Throws InputError naming the option when a name is
    /// out of this cluster's range ("--link node300.nic2,down: node 300 is not one of the 128 nodes") or
    /// when every NIC of a node is down.
    Cluster(const TopologySpec& spec, const std::vector<LinkPerturbation>& perturbations,
            const ClusterOptions& options = {});
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

    /// The perturbed links, one entry per perturbation in order (empty without perturbations).
    const std::vector<PerturbedLinks>& perturbed_links() const { return perturbed_; }
    /// Routes leave out the spine bundles (ClusterOptions::omit_unbinding_bundles, taken).
    bool bundles_omitted() const;

  private:
    Route rail_relay_route(int src_gpu, int dst_gpu) const;  ///< rail-only fabric, across rails
    struct Impl;
    class Builder;  ///< builds the graph (cluster.cpp)
    TopologySpec spec_;
    GpuSpec gpu_;
    std::vector<Link> links_;
    std::vector<PerturbedLinks> perturbed_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace trainsim
