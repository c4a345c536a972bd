// The topology file's fields, declared once (include/trainsim/schema.hpp): the topology loader, --set
// topology.* and docs/inputs.md read them from here.
#include "trainsim/config.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {

using schema::Field;
using schema::Range;
using schema::Value;

constexpr const char* kLimits = "trainsim/limits.hpp";

/// A required quantity field held as a unit type Q (Bandwidth, Time): `to_si` gives its value in the SI unit
/// of `dim` (B/s, s), `from_si` makes it from one.
template <class Q, class ToSi, class FromSi>
Field<TopologySpec> unit_field(std::string name, Q TopologySpec::*member, Dimension dim, std::string doc,
                               ToSi to_si, FromSi from_si) {
    Field<TopologySpec> f;
    f.name = std::move(name);
    f.kind = schema::Kind::quantity;
    f.dimension = dim;
    f.unit = std::string(dim == Dimension::time ? "s" : "B/s");
    f.doc = std::move(doc);
    f.required = true;
    f.get = [member, to_si](const TopologySpec& t) { return Value{to_si(t.*member)}; };
    f.set = [member, from_si](TopologySpec& t, const Value& v) { t.*member = from_si(std::get<double>(v)); };
    return f;
}

Field<TopologySpec> bandwidth(std::string name, Bandwidth TopologySpec::*member, std::string doc) {
    return unit_field(
        std::move(name), member, Dimension::bandwidth, std::move(doc),
        [](Bandwidth b) { return b.bytes_per_s; }, [](double v) { return Bandwidth{v}; });
}

Field<TopologySpec> latency(std::string name, Time TopologySpec::*member, std::string doc) {
    Field<TopologySpec> f = unit_field(
        std::move(name), member, Dimension::time, std::move(doc), [](Time t) { return t.to_seconds(); },
        [](double v) { return Time::seconds(v); });
    f.allow_zero = true;
    return f;
}

schema::Table<TopologySpec> make_topology_fields() {
    using schema::integer_field;
    schema::Table<TopologySpec> t;
    t.push_back(schema::string_field("name", &TopologySpec::name, "the cluster's name in reports", true));
    {
        Field<TopologySpec> f;
        f.name = "description";
        f.kind = schema::Kind::string;
        f.doc = "free text (not read)";
        f.get = [](const TopologySpec&) { return Value{std::string()}; };
        f.set = [](TopologySpec&, const Value&) {};
        t.push_back(std::move(f));
    }
    {
        auto f =
            schema::string_field("gpu", &TopologySpec::gpu,
                                 "the GPU, a name of the catalog (include/trainsim/gpu_catalog.hpp)", true);
        f.check = [](const Value& v, const std::string& field) { find_gpu(std::get<std::string>(v), field); };
        // An alias (H200, H800, ...) is read as the catalog name.
        f.set = [](TopologySpec& s, const Value& v) {
            const auto& name = std::get<std::string>(v);
            s.gpu = name;  // an unknown name is refused by `check`, naming the field
            for (const auto& [alias, catalog_name] : gpu_aliases())
                if (alias == name) s.gpu = catalog_name;
        };
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("nodes", &TopologySpec::nodes, Range{1, double(limits::kMaxGpus), kLimits},
                              "nodes", "nodes; nodes * gpus_per_node at most 131072 (limits.hpp)", true));
    t.push_back(integer_field("gpus_per_node", &TopologySpec::gpus_per_node,
                              Range{1, double(limits::kMaxGpusPerNode), kLimits}, "GPUs",
                              "GPUs per node, i.e. per NVSwitch scale-up domain", true));
    {
        Field<TopologySpec> f;
        f.name = "scale_up.kind";
        f.kind = schema::Kind::choice;
        f.choices = {"nvswitch", "pcie"};
        f.doc =
            "scale-up fabric: every GPU of a node on NVSwitches, or PCIe only (no NVLink: GPU <-> GPU and "
            "GPU <-> NIC through the node's PCIe switches, bandwidth_per_gpu <= 128 GB/s, no NVLS)";
        f.required = true;
        f.get = [](const TopologySpec& s) { return Value{s.scale_up_kind}; };
        f.set = [](TopologySpec& s, const Value& v) { s.scale_up_kind = std::get<std::string>(v); };
        t.push_back(std::move(f));
    }
    t.push_back(bandwidth("scale_up.bandwidth_per_gpu", &TopologySpec::nvlink_bandwidth,
                          "NVLink bandwidth per GPU, per direction"));
    t.push_back(latency("scale_up.latency", &TopologySpec::nvlink_latency, "GPU -> NVSwitch hop latency"));
    t.push_back(
        integer_field("scale_up.domain_gpus", &TopologySpec::scale_up_domain_gpus,
                      Range{1, double(limits::kMaxGpus), kLimits}, "GPUs",
                      "GPUs of one NVLink domain spanning several hosts of gpus_per_node GPUs each (GB200 "
                      "NVL72: 72 over 18 trays of 4; apply_scale_up_domain in cluster.hpp); not stated (0): "
                      "gpus_per_node",
                      false));
    {
        Field<TopologySpec> f;
        f.name = "scale_out.kind";
        f.kind = schema::Kind::choice;
        f.choices = {"infiniband", "roce"};
        f.doc = "scale-out network";
        f.required = true;
        f.get = [](const TopologySpec& s) { return Value{s.scale_out_kind}; };
        f.set = [](TopologySpec& s, const Value& v) { s.scale_out_kind = std::get<std::string>(v); };
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("scale_out.nics_per_node", &TopologySpec::nics_per_node,
                              Range{1, double(limits::kMaxGpusPerNode), kLimits}, "NICs",
                              "NICs per node, at most gpus_per_node (one rail each)", true));
    t.push_back(
        bandwidth("scale_out.nic_rate", &TopologySpec::nic_bandwidth, "line rate of one NIC, per direction"));
    t.push_back(
        bandwidth("scale_out.pcie_bandwidth", &TopologySpec::pcie_bandwidth, "GPU <-> NIC, per direction"));
    t.push_back(latency("scale_out.nic_latency", &TopologySpec::nic_latency, "GPU -> NIC -> wire latency"));
    t.push_back(
        latency("scale_out.switch_latency", &TopologySpec::switch_latency, "latency per switch traversal"));
    {
        Field<TopologySpec> f;
        f.name = "scale_out.topology";
        f.kind = schema::Kind::choice;
        f.choices = {"rail-optimized-fat-tree", "rail-only"};
        f.doc =
            "fat tree (two or three tiers: scale_out.tiers), NIC k of every node on rail k; or rail-only (no "
            "spine joins the rails: "
            "cross-rail traffic crosses NVLink in the node first; Wang et al. 2023, arXiv:2307.12169)";
        f.required = true;
        f.get = [](const TopologySpec& s) {
            return Value{std::string(s.fabric == ScaleOutTopology::rail_only ? "rail-only"
                                                                             : "rail-optimized-fat-tree")};
        };
        f.set = [](TopologySpec& s, const Value& v) {
            s.fabric = std::get<std::string>(v) == "rail-only" ? ScaleOutTopology::rail_only
                                                               : ScaleOutTopology::fat_tree;
        };
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("scale_out.nodes_per_leaf", &TopologySpec::nodes_per_leaf,
                              Range{1, double(limits::kMaxNodesPerLeaf), kLimits}, "nodes",
                              "nodes under one leaf switch", true));
    {
        Field<TopologySpec> f;
        f.name = "scale_out.oversubscription";
        f.kind = schema::Kind::number;
        f.range = Range{1, limits::kMaxOversubscription, kLimits};
        f.doc = "leaf down:up bandwidth ratio (1 = non-blocking)";
        f.required = true;
        f.get = [](const TopologySpec& s) { return Value{s.oversubscription}; };
        f.set = [](TopologySpec& s, const Value& v) { s.oversubscription = std::get<double>(v); };
        t.push_back(std::move(f));
    }
    t.push_back(
        integer_field("scale_out.tiers", &TopologySpec::tiers, Range{2, 3, ""}, "tiers",
                      "switch tiers of the fat-tree: 2 (leaf, spine) or 3 (leaf, spine, core: pods of "
                      "nodes_per_pod nodes; cluster.hpp)",
                      false));
    t.push_back(
        integer_field("scale_out.nodes_per_pod", &TopologySpec::nodes_per_pod,
                      Range{1, double(limits::kMaxGpus), kLimits}, "nodes",
                      "tiers 3: nodes under one pod's spines, a multiple of nodes_per_leaf; not stated "
                      "(0) with 2 tiers",
                      false));
    {
        Field<TopologySpec> f;
        f.name = "scale_out.spine_oversubscription";
        f.kind = schema::Kind::number;
        f.range = Range{1, limits::kMaxOversubscription, kLimits};
        f.doc = "tiers 3: a pod spine's down:up bandwidth ratio toward the cores (1 = non-blocking)";
        f.get = [](const TopologySpec& s) { return Value{s.spine_oversubscription}; };
        f.set = [](TopologySpec& s, const Value& v) { s.spine_oversubscription = std::get<double>(v); };
        t.push_back(std::move(f));
    }
    {
        Field<TopologySpec> f;
        f.name = "scale_out.routing";
        f.kind = schema::Kind::choice;
        f.choices = {"adaptive", "ecmp"};
        f.doc = "spine-layer routing: adaptive, or flows hashed over the spines (ECMP)";
        f.get = [](const TopologySpec& s) {
            return Value{std::string(s.routing == ScaleOutRouting::ecmp ? "ecmp" : "adaptive")};
        };
        f.set = [](TopologySpec& s, const Value& v) {
            s.routing =
                std::get<std::string>(v) == "ecmp" ? ScaleOutRouting::ecmp : ScaleOutRouting::adaptive;
        };
        f.derive_default = [](TopologySpec& s) {
            s.routing = s.scale_out_kind == "roce" ? ScaleOutRouting::ecmp : ScaleOutRouting::adaptive;
        };
        f.default_doc = "`\"adaptive\"` for infiniband, `\"ecmp\"` for roce";
        t.push_back(std::move(f));
    }
    t.push_back(schema::boolean_field(
        "scale_out.sharp", &TopologySpec::sharp,
        "InfiniBand SHARP in-network all-reduce in the leaf/spine switches (NCCL CollNet, NVLS+SHARP); "
        "infiniband only"));
    {
        auto f = bandwidth("host.memory_bandwidth", &TopologySpec::host_memory_bandwidth,
                           "host DRAM bandwidth per node (optimizer offload); host absent: not described");
        f.optional_section = true;
        t.push_back(std::move(f));
        f = bandwidth("host.nvme_bandwidth", &TopologySpec::nvme_bandwidth,
                      "NVMe bandwidth per node (offload)");
        f.optional_section = true;
        t.push_back(std::move(f));
    }
    {
        auto f = bandwidth("storage.read_bandwidth_per_node", &TopologySpec::storage_read_bandwidth_per_node,
                           "shared storage read bandwidth per node (checkpoint load, trainsim goodput)");
        f.optional_section = true;
        f.required = false;
        t.push_back(std::move(f));
        f = bandwidth("storage.write_bandwidth_per_node", &TopologySpec::storage_write_bandwidth_per_node,
                      "shared storage write bandwidth per node (checkpoint save)");
        f.optional_section = true;
        f.required = false;
        t.push_back(std::move(f));
    }
    return t;
}

}  // namespace

const schema::Table<TopologySpec>& topology_fields() {
    static const schema::Table<TopologySpec> table = make_topology_fields();
    return table;
}

}  // namespace trainsim
