#include "trainsim/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <queue>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>

#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {
struct VertexProps {
    VertexKind kind = VertexKind::gpu;
    int index = 0;  ///< index among vertices of its kind
};
struct EdgeProps {
    int link = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, EdgeProps>;
using VertexId = boost::graph_traits<Graph>::vertex_descriptor;

/// Deterministic 64-bit mix (splitmix64 finalizer) for ECMP choices.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

}  // namespace

struct Cluster::Impl {
    Graph graph;
    std::vector<VertexId> nvswitch_of_node;
    std::vector<VertexId> nic_vertex;   ///< [node * nics + k]
    std::vector<VertexId> leaf_vertex;  ///< [group * nics + rail]
    std::vector<int> nic_of_gpu_local;  ///< local GPU -> local NIC (every NIC up)
    std::vector<int> nic_of_gpu;        ///< GPU -> local NIC, NICs that are down avoided
    /// The switch layer is a complete bipartite graph (every leaf to every spine), so the shortest paths
    /// between leaves are closed-form: leaf -> any spine -> leaf, two hops. These hold its links.
    std::vector<int> link_leaf_to_spine;  ///< [leaf index * spines + spine]
    std::vector<int> link_spine_to_leaf;  ///< [leaf index * spines + spine]
    int spines = 0;
    /// Three tiers: spine vertex v (pod * spines + spine) to core `core` of its plane: [v * cores + core].
    std::vector<int> link_spine_to_core, link_core_to_spine;
    int cores = 0;  ///< cores per plane (links up per pod spine); 0: two tiers
    /// Adaptive routing on a non-blocking fabric: the bundles can never limit a flow (below), so routes leave
    /// them out of their links and keep only their latency.
    bool bundles_never_bind = false;
    bool pod_bundles_never_bind = false;  ///< the same for the pods' bundles up to the cores (three tiers)
    std::vector<int> link_gpu_to_nvs, link_nvs_to_gpu, link_gpu_to_nic, link_nic_to_gpu, link_nic_to_leaf,
        link_leaf_to_nic;
};

Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;
Cluster::~Cluster() = default;

namespace {

/// The three-tier fields of check_topology.
void check_tiers(const TopologySpec& spec) {
    if (spec.tiers != 2 && spec.tiers != 3)
        throw InputError(fmt::format("topology.scale_out.tiers = {} must be 2 or 3", spec.tiers));
    if (spec.tiers == 2 && spec.nodes_per_pod != 0)
        throw InputError(
            fmt::format("topology.scale_out.nodes_per_pod = {} needs topology.scale_out.tiers = 3 (pods are "
                        "the third tier)",
                        spec.nodes_per_pod));
    if (spec.tiers == 2 && spec.spine_oversubscription != 1.0)
        throw InputError(
            fmt::format("topology.scale_out.spine_oversubscription = {} needs topology.scale_out.tiers = 3",
                        spec.spine_oversubscription));
    if (spec.tiers == 2) return;
    if (spec.fabric != ScaleOutTopology::fat_tree)
        throw InputError(
            "topology.scale_out.tiers = 3 needs topology.scale_out.topology = rail-optimized-fat-tree");
    if (spec.nodes_per_pod <= 0 || spec.nodes_per_leaf <= 0 || spec.nodes_per_pod % spec.nodes_per_leaf != 0)
        throw InputError(
            fmt::format("topology.scale_out.nodes_per_pod = {} must be a positive multiple of "
                        "topology.scale_out.nodes_per_leaf = {} (topology.scale_out.tiers = 3: pods of leaf "
                        "groups)",
                        spec.nodes_per_pod, spec.nodes_per_leaf));
    if (!(spec.spine_oversubscription >= 1.0) || spec.spine_oversubscription > limits::kMaxOversubscription)
        throw InputError(
            fmt::format("topology.scale_out.spine_oversubscription = {} must be between 1 and {} "
                        "(trainsim/limits.hpp)",
                        spec.spine_oversubscription, limits::kMaxOversubscription));
}

}  // namespace

void check_topology(const TopologySpec& spec) {
    if (spec.nodes <= 0) throw InputError(fmt::format("topology.nodes = {} must be positive", spec.nodes));
    if (spec.gpus_per_node <= 0)
        throw InputError(fmt::format("topology.gpus_per_node = {} must be positive", spec.gpus_per_node));
    if (spec.nics_per_node <= 0 || spec.nics_per_node > spec.gpus_per_node)
        throw InputError(fmt::format(
            "topology.scale_out.nics_per_node = {} must be between 1 and topology.gpus_per_node = {}",
            spec.nics_per_node, spec.gpus_per_node));
    if (spec.nodes_per_leaf <= 0)
        throw InputError(
            fmt::format("topology.scale_out.nodes_per_leaf = {} must be positive", spec.nodes_per_leaf));
    if (!(spec.oversubscription >= 1.0))
        throw InputError(
            fmt::format("topology.scale_out.oversubscription = {} must be >= 1", spec.oversubscription));
    if (spec.sharp && spec.scale_out_kind != "infiniband")
        throw InputError(fmt::format(
            "topology.scale_out.sharp = true needs topology.scale_out.kind = infiniband (SHARP is an "
            "InfiniBand switch "
            "feature), not {}",
            spec.scale_out_kind));
    if (spec.scale_up_kind == "pcie" && spec.gpus_per_host > 0 && spec.gpus_per_host != spec.gpus_per_node)
        throw InputError(
            fmt::format("topology.scale_up.domain_gpus = {}: a PCIe-only node (topology.scale_up.kind = "
                        "pcie) cannot span hosts",
                        spec.gpus_per_node));
    if (spec.scale_up_kind == "pcie" && spec.nvlink_bandwidth.bytes_per_s > kMaxPcieBandwidthPerGpu)
        throw InputError(fmt::format(
            "topology.scale_up.bandwidth_per_gpu = {} GB/s is above PCIe Gen6 x16's 128 GB/s per direction "
            "(topology.scale_up.kind = pcie)",
            spec.nvlink_bandwidth.bytes_per_s / 1e9));
    check_tiers(spec);
    if (spec.gpus_per_node > limits::kMaxGpusPerNode)
        throw InputError(
            fmt::format("topology.gpus_per_node = {} is above the limit of {} (trainsim/limits.hpp)",
                        spec.gpus_per_node, limits::kMaxGpusPerNode));
    const std::int64_t gpus = static_cast<std::int64_t>(spec.nodes) * spec.gpus_per_node;
    if (gpus > limits::kMaxGpus)
        throw InputError(
            fmt::format("topology.nodes * topology.gpus_per_node = {} * {} = {} GPUs is above the "
                        "limit of {} (trainsim/limits.hpp)",
                        spec.nodes, spec.gpus_per_node, gpus, limits::kMaxGpus));
    // Per host (the file's gpus_per_node): an NVL72 rack of 18 trays of 4 counts 4 (limits.hpp).
    if (gpus * spec.host_gpus() > limits::kMaxGpusTimesGpusPerNode)
        throw InputError(
            fmt::format("topology.nodes * topology.gpus_per_node = {} GPUs at {} per node: GPUs x "
                        "GPUs per node = {} is above the limit of {} (trainsim/limits.hpp)",
                        gpus, spec.host_gpus(), gpus * spec.host_gpus(), limits::kMaxGpusTimesGpusPerNode));
    if (spec.nodes_per_leaf > limits::kMaxNodesPerLeaf)
        throw InputError(fmt::format(
            "topology.scale_out.nodes_per_leaf = {} is above the limit of {} (trainsim/limits.hpp)",
            spec.nodes_per_leaf, limits::kMaxNodesPerLeaf));
    if (spec.oversubscription > limits::kMaxOversubscription)
        throw InputError(fmt::format(
            "topology.scale_out.oversubscription = {} is above the limit of {} (trainsim/limits.hpp)",
            spec.oversubscription, limits::kMaxOversubscription));
}

const GpuSpec& topology_gpu(const TopologySpec& spec) {
    return spec.gpu_calibrated ? *spec.gpu_calibrated : find_gpu(spec.gpu, "topology.gpu");
}

Cluster::Cluster(const TopologySpec& spec) : Cluster(spec, {}) {}

namespace {

/// The fabric's sizes, derived once from the topology.
struct FabricShape {
    int gpn = 0;      ///< GPUs per node
    int nics = 0;     ///< NICs per node (= rails)
    int groups = 0;   ///< leaf groups (nodes_per_leaf nodes each)
    int uplinks = 0;  ///< uplinks per leaf
    bool adaptive = false;
    bool rail_only = false;   ///< ScaleOutTopology::rail_only: a leaf reaches only its rail's spines
    int spines_per_leaf = 0;  ///< adaptive routing: one logical spine; else one per uplink
    int spine_vertices = 0;   ///< spines_per_leaf, times the rails (rail-only) or the pods (three tiers)
    // three tiers (pods == 0: two)
    int pods = 0;
    int groups_per_pod = 0;
    int spine_uplinks = 0;  ///< links up per pod spine: ceil(leaves per pod / spine_oversubscription)
    int cores = 0;          ///< cores per plane: adaptive one logical core, else spine_uplinks
};

FabricShape fabric_shape(const TopologySpec& spec) {
    FabricShape f;
    f.gpn = spec.gpus_per_node;
    f.nics = spec.nics_per_node;
    f.groups = (spec.nodes - 1) / spec.nodes_per_leaf + 1;  // (no overflow near INT_MAX)
    f.uplinks = static_cast<int>(std::ceil(static_cast<double>(spec.nodes_per_leaf) / spec.oversubscription));
    f.adaptive = spec.routing == ScaleOutRouting::adaptive;
    f.rail_only = spec.fabric == ScaleOutTopology::rail_only;
    f.spines_per_leaf = f.adaptive ? 1 : f.uplinks;
    f.spine_vertices = f.rail_only ? f.spines_per_leaf * f.nics : f.spines_per_leaf;
    if (spec.tiers == 3) {
        f.groups_per_pod = spec.nodes_per_pod / spec.nodes_per_leaf;
        f.pods = (f.groups - 1) / f.groups_per_pod + 1;
        f.spine_vertices = f.spines_per_leaf * f.pods;
        const double leaves_per_pod = static_cast<double>(f.groups_per_pod) * f.nics;
        f.spine_uplinks = static_cast<int>(std::ceil(leaves_per_pod / spec.spine_oversubscription));
        f.cores = f.adaptive ? 1 : f.spine_uplinks;
    }
    return f;
}

/// The link perturbations by name, range-checked against the fabric (InputError naming the option), and the
/// NICs they take down ([node * nics + k]).
struct ResolvedPerturbations {
    std::vector<LinkName> names;  ///< [perturbation]
    std::vector<char> nic_down;
};

ResolvedPerturbations resolve_perturbations(const TopologySpec& spec, const FabricShape& f,
                                            const std::vector<LinkPerturbation>& perturbations) {
    ResolvedPerturbations r;
    r.nic_down.assign(static_cast<std::size_t>(spec.nodes * f.nics), 0);
    for (const LinkPerturbation& p : perturbations) {
        const std::string option =
            fmt::format("--link {}", clip_for_message(p.text.empty() ? p.name : p.text));
        const LinkName n = parse_link_name(p.name, option);
        auto range = [&](int v, int count, const char* what, const char* whats,
                         const std::string& note = "") {
            if (v >= count)
                throw InputError(
                    fmt::format("{}: {} {} is not one of the {} {}{}", option, what, v, count, whats, note));
        };
        // An NVLink domain across hosts (GB200 NVL72: 18 trays of 4 GPUs) is one node of the cluster: the
        // file's 144 nodes of 4 GPUs are 8 here ("node 143 is not one of the 8 nodes" did not say why).
        const std::string domain =
            spec.gpus_per_host > 0 && spec.gpus_per_host != spec.gpus_per_node
                ? fmt::format(
                      " (scale_up.domain_gpus = {}: node<N> numbers the NVLink domains of {} hosts, "
                      "nic<K> a domain's {} NICs)",
                      spec.gpus_per_node, spec.gpus_per_node / spec.gpus_per_host, f.nics)
                : "";
        switch (n.kind) {
            case LinkName::Kind::node_nic:
                range(n.a, spec.nodes, "node", "nodes", domain);
                range(n.b, f.nics, "NIC", "NICs per node", domain);
                break;
            case LinkName::Kind::node_nvlink:
                range(n.a, spec.nodes, "node", "nodes", domain);
                break;
            case LinkName::Kind::gpu_nvlink:
                range(n.a, spec.gpus(), "GPU", "GPUs");
                break;
            case LinkName::Kind::leaf_uplink:
                range(n.a, f.groups * f.nics, "leaf", "leaf switches");
                break;
            case LinkName::Kind::rail:
                range(n.a, f.nics, "rail", "rails (NICs per node)");
                break;
        }
        r.names.push_back(n);
        if (p.down)
            for (int node = 0; node < spec.nodes; ++node)
                if (n.kind == LinkName::Kind::rail || node == n.a)
                    r.nic_down[static_cast<std::size_t>(node * f.nics +
                                                        (n.kind == LinkName::Kind::rail ? n.a : n.b))] = 1;
    }
    return r;
}

}  // namespace

/// Builds the cluster graph step by step (vertices, NIC assignment, node links, fabric links, perturbations)
/// into the Cluster's members.
class Cluster::Builder {
  public:
    Builder(const TopologySpec& spec, const GpuSpec& gpu, Impl& impl, std::vector<Link>& links,
            std::vector<PerturbedLinks>& perturbed)
        : spec_(spec), gpu_(gpu), impl_(impl), links_(links), perturbed_(perturbed), f_(fabric_shape(spec)) {}

    void build(const std::vector<LinkPerturbation>& perturbations, const ClusterOptions& options) {
        add_vertices();
        const ResolvedPerturbations resolved = resolve_perturbations(spec_, f_, perturbations);
        assign_nics(resolved.nic_down);
        add_node_links();
        add_fabric_links(resolved.names, perturbations, options);
        apply_perturbations(resolved.names, perturbations);
    }

  private:
    VertexId add_vertex(VertexKind k, int idx) { return boost::add_vertex(VertexProps{k, idx}, impl_.graph); }
    int add_link(VertexId a, VertexId b, LinkKind kind, Bandwidth bw, Time lat) {
        const int id = static_cast<int>(links_.size());
        links_.push_back(Link{static_cast<int>(a), static_cast<int>(b), kind, bw, lat});
        boost::add_edge(a, b, EdgeProps{id}, impl_.graph);
        return id;
    }

    void add_vertices() {
        // GPUs first, so that vertex id == GPU id.
        for (int i = 0; i < spec_.gpus(); ++i)
            add_vertex(VertexKind::gpu, i);
        for (int n = 0; n < spec_.nodes; ++n)
            impl_.nvswitch_of_node.push_back(add_vertex(VertexKind::nvswitch, n));
        for (int n = 0; n < spec_.nodes; ++n)
            for (int k = 0; k < f_.nics; ++k)
                impl_.nic_vertex.push_back(add_vertex(VertexKind::nic, n * f_.nics + k));
        for (int grp = 0; grp < f_.groups; ++grp)
            for (int r = 0; r < f_.nics; ++r)
                impl_.leaf_vertex.push_back(add_vertex(VertexKind::leaf, grp * f_.nics + r));
        // Adaptive routing: one logical spine (per pod), each leaf joined to it by a bundle of all its
        // uplinks.
        for (int s = 0; s < f_.spine_vertices; ++s)
            spines_.push_back(add_vertex(VertexKind::spine, s));
        // Three tiers: the cores, plane by plane (adaptive: one logical core).
        for (int c = 0; c < (f_.pods > 0 ? f_.spines_per_leaf * f_.cores : 0); ++c)
            cores_.push_back(add_vertex(VertexKind::core, c));
    }

    /// Each GPU's NIC: GPU l of a node uses NIC l * nics / gpn; NICs that are down (--link
    /// node<N>.nic<K>,down or rail<K>,down) are avoided, the GPU using the node's next working NIC.
    void assign_nics(const std::vector<char>& nic_down) {
        for (int l = 0; l < f_.gpn; ++l)
            impl_.nic_of_gpu_local.push_back(l * f_.nics / f_.gpn);
        impl_.nic_of_gpu.resize(static_cast<std::size_t>(spec_.gpus()));
        for (int i = 0; i < spec_.gpus(); ++i) {
            const int node = i / f_.gpn;
            int k = impl_.nic_of_gpu_local[static_cast<std::size_t>(i % f_.gpn)];
            for (int tries = 0; nic_down[static_cast<std::size_t>(node * f_.nics + k)]; ++tries) {
                if (tries == f_.nics)
                    throw InputError(fmt::format("--link: every NIC of node {} is down", node));
                k = (k + 1) % f_.nics;
            }
            impl_.nic_of_gpu[static_cast<std::size_t>(i)] = k;
        }
    }

    /// Inside each node: GPU <-> NVSwitch (NVLink) and GPU <-> NIC (PCIe).
    void add_node_links() {
        const Bandwidth nvlink{spec_.nvlink_bandwidth.bytes_per_s * gpu_.nvlink_efficiency};
        const Bandwidth pcie = spec_.pcie_bandwidth;
        const Time half_nvlink = Time::ps(spec_.nvlink_latency.picoseconds() / 2);
        const LinkKind up_kind = spec_.scale_up_kind == "pcie" ? LinkKind::pcie : LinkKind::nvlink;
        for (int i = 0; i < spec_.gpus(); ++i) {
            const int node = i / f_.gpn;
            const VertexId gv = static_cast<VertexId>(i);
            const VertexId nvs = impl_.nvswitch_of_node[static_cast<std::size_t>(node)];
            impl_.link_gpu_to_nvs.push_back(add_link(gv, nvs, up_kind, nvlink, half_nvlink));
            impl_.link_nvs_to_gpu.push_back(add_link(nvs, gv, up_kind, nvlink, half_nvlink));
            const VertexId nv = impl_.nic_vertex[static_cast<std::size_t>(
                node * f_.nics + impl_.nic_of_gpu[static_cast<std::size_t>(i)])];
            impl_.link_gpu_to_nic.push_back(add_link(gv, nv, LinkKind::pcie, pcie, spec_.nic_latency));
            impl_.link_nic_to_gpu.push_back(add_link(nv, gv, LinkKind::pcie, pcie, Time{}));
        }
    }

    /// NIC <-> leaf (one leaf per rail and group) and leaf <-> spine.
    void add_fabric_links(const std::vector<LinkName>& names,
                          const std::vector<LinkPerturbation>& perturbations, const ClusterOptions& options) {
        const Bandwidth nic{spec_.nic_bandwidth.bytes_per_s * kScaleOutEfficiency};
        for (int n = 0; n < spec_.nodes; ++n) {
            const int grp = n / spec_.nodes_per_leaf;
            for (int k = 0; k < f_.nics; ++k) {
                const VertexId nv = impl_.nic_vertex[static_cast<std::size_t>(n * f_.nics + k)];
                const VertexId leaf = impl_.leaf_vertex[static_cast<std::size_t>(grp * f_.nics + k)];
                impl_.link_nic_to_leaf.push_back(
                    add_link(nv, leaf, LinkKind::nic_to_leaf, nic, spec_.switch_latency));
                impl_.link_leaf_to_nic.push_back(add_link(leaf, nv, LinkKind::nic_to_leaf, nic, Time{}));
            }
        }
        impl_.spines = f_.spines_per_leaf;
        // A leaf's up bundle carries only flows that entered the leaf from its own NICs, each crossing of the
        // bundle matching one crossing of a NIC-to-leaf link, so its load is at most the leaf's NIC capacity;
        // with one uplink per node (no oversubscription) that is the bundle's capacity, and likewise for the
        // down bundle. Such a link never binds under max-min sharing, and leaving it out of the routes gives
        // the same rates while keeping the flow components small (the bundle would couple every flow crossing
        // the spines). A perturbation that lowers a bundle's capacity breaks that argument (a lower NIC
        // capacity, or a NIC down, only lowers the load); the routes then list the bundles.
        bool bundle_degraded = false, bundle_changed = false;
        for (std::size_t i = 0; i < names.size(); ++i) {
            const bool uplink = names[i].kind == LinkName::Kind::leaf_uplink;
            bundle_degraded = bundle_degraded || (uplink && perturbations[i].bandwidth_factor < 1.0);
            bundle_changed = bundle_changed || (uplink && perturbations[i].bandwidth_factor != 1.0);
        }
        impl_.bundles_never_bind = options.omit_unbinding_bundles && f_.adaptive &&
                                   f_.uplinks >= spec_.nodes_per_leaf && !bundle_degraded;
        const Bandwidth uplink{f_.adaptive ? nic.bytes_per_s * f_.uplinks : nic.bytes_per_s};
        for (std::size_t li = 0; li < impl_.leaf_vertex.size(); ++li)
            for (int s = 0; s < f_.spines_per_leaf; ++s) {
                // leaf li is on rail li % nics; a rail-only fabric joins it to that rail's spines only, a
                // three-tier one to its pod's spines
                const int group = static_cast<int>(li) / f_.nics;
                const int first = f_.rail_only  ? static_cast<int>(li) % f_.nics * f_.spines_per_leaf
                                  : f_.pods > 0 ? group / f_.groups_per_pod * f_.spines_per_leaf
                                                : 0;
                const VertexId leaf = impl_.leaf_vertex[li];
                const VertexId sp = spines_[static_cast<std::size_t>(first + s)];
                impl_.link_leaf_to_spine.push_back(
                    add_link(leaf, sp, LinkKind::leaf_to_spine, uplink, spec_.switch_latency));
                impl_.link_spine_to_leaf.push_back(
                    add_link(sp, leaf, LinkKind::leaf_to_spine, uplink, Time{}));
            }
        if (f_.pods > 0)
            add_core_links(nic, options.omit_unbinding_bundles && f_.adaptive && !bundle_changed &&
                                    spec_.spine_oversubscription == 1.0);
    }

    /// Three tiers: pod spine s (vertex pod * spines + s) <-> every core of plane s, one NIC-rate link each
    /// (adaptive: the pod's logical spine <-> the logical core, a bundle of all the pod's spine uplinks).
    /// `never_bind`: the spines are non-blocking and no leaf bundle's capacity was changed, so a pod bundle's
    /// capacity is at least the sum of its leaves' up bundles, one of which every flow through it crossed:
    /// its constraint is implied by theirs and routes leave it out.
    void add_core_links(const Bandwidth& nic, bool never_bind) {
        impl_.cores = f_.cores;
        impl_.pod_bundles_never_bind = never_bind;
        const double per_link = f_.adaptive ? static_cast<double>(f_.uplinks) * f_.spine_uplinks : 1.0;
        const Bandwidth up{nic.bytes_per_s * per_link};
        for (std::size_t v = 0; v < spines_.size(); ++v)
            for (int c = 0; c < f_.cores; ++c) {
                const int plane = static_cast<int>(v) % f_.spines_per_leaf;
                const VertexId core = cores_[static_cast<std::size_t>(plane * f_.cores + c)];
                impl_.link_spine_to_core.push_back(
                    add_link(spines_[v], core, LinkKind::spine_to_core, up, spec_.switch_latency));
                impl_.link_core_to_spine.push_back(
                    add_link(core, spines_[v], LinkKind::spine_to_core, up, Time{}));
            }
    }

    /// The links each perturbation names, their capacity and latency changed.
    void apply_perturbations(const std::vector<LinkName>& names,
                             const std::vector<LinkPerturbation>& perturbations) {
        for (std::size_t i = 0; i < names.size(); ++i) {
            const LinkPerturbation& p = perturbations[i];
            PerturbedLinks out;
            out.name = p.name;
            out.text = p.text.empty() ? p.name : p.text;
            out.links = links_named(names[i]);
            for (int l : out.links) {
                Link& link = links_[static_cast<std::size_t>(l)];
                link.bandwidth.bytes_per_s *= p.bandwidth_factor;
                // Several --link degradations of one link multiply: their product can underflow to 0 B/s
                // (1e-200 twice), which no single factor in (0, 1] can.
                if (!(link.bandwidth.bytes_per_s > 0))
                    throw InputError(
                        fmt::format("--link {}: the bandwidth factors given for this link multiply to 0 "
                                    "(use down for a link that is out)",
                                    clip_for_message(out.text)));
                link.latency += p.extra_latency;
            }
            perturbed_.push_back(std::move(out));
        }
    }

    /// The links (both directions) a link name covers.
    std::vector<int> links_named(const LinkName& n) const {
        std::vector<int> out;
        auto nic_wire = [&](int node, int k) {
            const auto j = static_cast<std::size_t>(node * f_.nics + k);
            out.push_back(impl_.link_nic_to_leaf[j]);
            out.push_back(impl_.link_leaf_to_nic[j]);
        };
        auto nvlink_port = [&](int gpu) {
            out.push_back(impl_.link_gpu_to_nvs[static_cast<std::size_t>(gpu)]);
            out.push_back(impl_.link_nvs_to_gpu[static_cast<std::size_t>(gpu)]);
        };
        switch (n.kind) {
            case LinkName::Kind::node_nic:
                nic_wire(n.a, n.b);
                break;
            case LinkName::Kind::rail:
                for (int node = 0; node < spec_.nodes; ++node)
                    nic_wire(node, n.a);
                break;
            case LinkName::Kind::node_nvlink:
                for (int l = 0; l < f_.gpn; ++l)
                    nvlink_port(n.a * f_.gpn + l);
                break;
            case LinkName::Kind::gpu_nvlink:
                nvlink_port(n.a);
                break;
            case LinkName::Kind::leaf_uplink:
                for (int sp = 0; sp < f_.spines_per_leaf; ++sp) {
                    const auto j = static_cast<std::size_t>(n.a * f_.spines_per_leaf + sp);
                    out.push_back(impl_.link_leaf_to_spine[j]);
                    out.push_back(impl_.link_spine_to_leaf[j]);
                }
                break;
        }
        return out;
    }

    const TopologySpec& spec_;
    const GpuSpec& gpu_;
    Impl& impl_;
    std::vector<Link>& links_;
    std::vector<PerturbedLinks>& perturbed_;
    const FabricShape f_;
    std::vector<VertexId> spines_;
    std::vector<VertexId> cores_;
};

Cluster::Cluster(const TopologySpec& spec, const std::vector<LinkPerturbation>& perturbations,
                 const ClusterOptions& options)
    : spec_(spec), gpu_(topology_gpu(spec)) {
    check_topology(spec);
    impl_ = std::make_unique<Impl>();
    Builder(spec_, gpu_, *impl_, links_, perturbed_).build(perturbations, options);
}

bool Cluster::bundles_omitted() const {
    return impl_->bundles_never_bind;
}

int Cluster::num_vertices() const {
    return static_cast<int>(boost::num_vertices(impl_->graph));
}

VertexKind Cluster::vertex_kind(int v) const {
    return impl_->graph[static_cast<VertexId>(v)].kind;
}

void count_link_uses(Route& route) {
    auto uses = std::make_shared<LinkUses>();
    constexpr std::size_t kShortRoute = 32;  // a scan of the links found so far beats an index by link id
    if (route.links.size() <= kShortRoute) {
        for (int l : route.links) {
            const auto it = std::find(uses->links.begin(), uses->links.end(), l);
            if (it == uses->links.end()) {
                uses->links.push_back(l);
                uses->uses.push_back(1);
            } else {
                ++uses->uses[static_cast<std::size_t>(it - uses->links.begin())];
            }
        }
        route.link_uses = std::move(uses);
        return;
    }
    int most = -1;
    for (int l : route.links)
        most = std::max(most, l);
    std::vector<int> index(static_cast<std::size_t>(most + 1), -1);  // link -> position in uses->links
    for (int l : route.links) {
        int& j = index[static_cast<std::size_t>(l)];
        if (j < 0) {
            j = static_cast<int>(uses->links.size());
            uses->links.push_back(l);
            uses->uses.push_back(0);
        }
        ++uses->uses[static_cast<std::size_t>(j)];
    }
    route.link_uses = std::move(uses);
}

Route Cluster::route(int src, int dst) const {
    if (src == dst || src < 0 || dst < 0 || src >= gpus() || dst >= gpus())
        throw InternalError(fmt::format("route({}, {}) requested on a cluster of {} GPUs", src, dst, gpus()));
    Route r;
    auto push = [&](int link) {
        r.links.push_back(link);
        r.latency += links_[static_cast<std::size_t>(link)].latency;
    };
    const auto s = static_cast<std::size_t>(src);
    const auto d = static_cast<std::size_t>(dst);
    if (node_of(src) == node_of(dst)) {
        push(impl_->link_gpu_to_nvs[s]);
        push(impl_->link_nvs_to_gpu[d]);
        return r;
    }
    if (spec_.fabric == ScaleOutTopology::rail_only && impl_->nic_of_gpu[s] != impl_->nic_of_gpu[d])
        return rail_relay_route(src, dst);
    const bool pcie_node = spec_.scale_up_kind == "pcie";
    if (pcie_node) push(impl_->link_gpu_to_nvs[s]);  // the GPU's PCIe link up to the node's switch
    push(impl_->link_gpu_to_nic[s]);
    const int src_local_nic = impl_->nic_of_gpu[s];
    push(
        impl_
            ->link_nic_to_leaf[static_cast<std::size_t>(node_of(src) * spec_.nics_per_node + src_local_nic)]);
    const int src_leaf_index = (node_of(src) / spec_.nodes_per_leaf) * spec_.nics_per_node + src_local_nic;
    const int dst_local_nic = impl_->nic_of_gpu[d];
    const int dst_nic_index = node_of(dst) * spec_.nics_per_node + dst_local_nic;
    const int dst_leaf_index = (node_of(dst) / spec_.nodes_per_leaf) * spec_.nics_per_node + dst_local_nic;
    if (src_leaf_index != dst_leaf_index) {
        // Equal-cost paths: one per spine, in spine order (the leaf's uplinks); ECMP picks one by a
        // deterministic hash of the endpoints, then the spine's one link down to the destination leaf.
        // With adaptive routing there is one logical spine (the hash picks it). Three tiers, between pods:
        // from that spine (plane) up to one of the plane's cores, picked by a second hash, and down to the
        // destination pod's spine of the same plane.
        const int spines = impl_->spines;
        if (spines <= 0) throw InternalError(fmt::format("no route from GPU {} to GPU {}", src, dst));
        const std::uint64_t h =
            mix(static_cast<std::uint64_t>(src) * 0x100000001b3ULL + static_cast<std::uint64_t>(dst));
        const int spine = static_cast<int>(h % static_cast<std::uint64_t>(spines));
        auto use = [&](int link, bool never_binds) {
            if (never_binds)
                r.latency += links_[static_cast<std::size_t>(link)].latency;
            else
                push(link);
        };
        use(impl_->link_leaf_to_spine[static_cast<std::size_t>(src_leaf_index * spines + spine)],
            impl_->bundles_never_bind);
        const int src_pod = impl_->cores > 0 ? node_of(src) / spec_.nodes_per_pod : 0;
        const int dst_pod = impl_->cores > 0 ? node_of(dst) / spec_.nodes_per_pod : 0;
        if (src_pod != dst_pod) {
            const int core = static_cast<int>(mix(h) % static_cast<std::uint64_t>(impl_->cores));
            const auto up = static_cast<std::size_t>((src_pod * spines + spine) * impl_->cores + core);
            const auto down = static_cast<std::size_t>((dst_pod * spines + spine) * impl_->cores + core);
            use(impl_->link_spine_to_core[up], impl_->pod_bundles_never_bind);
            use(impl_->link_core_to_spine[down], impl_->pod_bundles_never_bind);
        }
        use(impl_->link_spine_to_leaf[static_cast<std::size_t>(dst_leaf_index * spines + spine)],
            impl_->bundles_never_bind);
    }
    push(impl_->link_leaf_to_nic[static_cast<std::size_t>(dst_nic_index)]);
    push(impl_->link_nic_to_gpu[d]);
    if (pcie_node) push(impl_->link_nvs_to_gpu[d]);
    return r;
}

Route Cluster::rail_relay_route(int src, int dst) const {
    // The GPU of src's node on dst's rail (NVLink first, then the rail), or failing that (that NIC is down),
    // the GPU of dst's node on src's rail (the rail first, then NVLink).
    const int gpn = spec_.gpus_per_node;
    auto on_rail = [&](int node, int rail) {
        for (int g = node * gpn; g < (node + 1) * gpn; ++g)
            if (impl_->nic_of_gpu[static_cast<std::size_t>(g)] == rail) return g;
        return -1;
    };
    int relay = on_rail(node_of(src), impl_->nic_of_gpu[static_cast<std::size_t>(dst)]);
    if (relay < 0) relay = on_rail(node_of(dst), impl_->nic_of_gpu[static_cast<std::size_t>(src)]);
    if (relay < 0)
        throw InternalError(fmt::format("rail-only fabric: no rail from GPU {} to GPU {}", src, dst));
    Route r = route(src, relay);
    const Route second = route(relay, dst);
    r.links.insert(r.links.end(), second.links.begin(), second.links.end());
    r.latency += second.latency;
    return r;
}

}  // namespace trainsim
