// Topology presets of issue 15 and NVLink domains that span hosts (scale_up.domain_gpus, GB200 NVL72).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;
using nlohmann::json;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {
const std::string kSrc = TRAINSIM_SOURCE_DIR;

TopologySpec preset(const std::string& name) {
    const std::string file = kSrc + "/topologies/" + name + ".json";
    return parse_topology(read_json_file(file), file);
}

std::string domain_error(TopologySpec t, int domain_gpus) {
    return message_of<InputError>([&] { apply_scale_up_domain(t, domain_gpus); });
}
}  // namespace

TEST_CASE("topologies: the issue-15 presets parse, cite their sources and name catalog GPUs") {
    struct Case {
        const char* name;
        const char* gpu;
        int gpus_per_node;
        double nvlink_GBps;
    };
    for (const Case& c : {Case{"dgx-h200", "H200-SXM-141GB", 8, 450}, Case{"dgx-b200", "B200", 8, 900},
                          Case{"mi300x", "MI300X", 8, 448}, Case{"gb200-nvl72", "GB200", 72, 900}}) {
        CAPTURE(c.name);
        const std::string file = kSrc + "/topologies/" + c.name + ".json";
        const json j = read_json_file(file);
        CHECK(j.at("description").get<std::string>().find("https://") != std::string::npos);
        TopologySpec t;
        REQUIRE_NOTHROW(t = parse_topology(j, file));
        CHECK(t.name == c.name);
        CHECK(t.gpu == c.gpu);
        CHECK(t.gpus_per_node == c.gpus_per_node);
        CHECK(t.nvlink_bandwidth.bytes_per_s == doctest::Approx(c.nvlink_GBps * 1e9));
        CHECK(t.nic_bandwidth.bytes_per_s == doctest::Approx(50e9));  // 400 Gb/s
        CHECK(t.nics_per_node == t.gpus_per_node);                    // one NIC per GPU
        CHECK_NOTHROW(Cluster{t});
    }
}

TEST_CASE("topologies: GB200 NVL72 is one NVLink domain of 18 trays of 4 GPUs") {
    const TopologySpec t = preset("gb200-nvl72");
    CHECK(t.gpus_per_host == 4);
    CHECK(t.host_gpus() == 4);
    CHECK(t.nodes == 8);  // 144 trays = 8 racks
    CHECK(t.gpus() == 576);
    CHECK(t.nics_per_node == 72);
    CHECK(t.nodes_per_leaf == 8);  // a leaf group of 144 trays = 8 domains
    const Cluster cl(t);
    // GPUs 0 and 5 sit on trays 0 and 1 of rack 0: NVLink through the rack's NVSwitch, no NIC.
    const Route in_rack = cl.route(0, 5);
    REQUIRE(in_rack.links.size() == 2);
    for (int l : in_rack.links)
        CHECK(cl.links()[static_cast<std::size_t>(l)].kind == LinkKind::nvlink);
    CHECK(cl.node_of(71) == 0);
    CHECK(cl.node_of(72) == 1);
    // GPU 5 to GPU 77 (rack 1): over GPU 5's own NIC (its tray's second) and the fabric.
    const Route across = cl.route(5, 77);
    bool nic = false;
    for (int l : across.links)
        nic = nic || cl.links()[static_cast<std::size_t>(l)].kind == LinkKind::nic_to_leaf;
    CHECK(nic);
    CHECK(cl.links()[static_cast<std::size_t>(across.links.front())].kind == LinkKind::pcie);
}

TEST_CASE("topologies: domain_gpus equal to gpus_per_node changes nothing; bad domains are refused") {
    const std::string file = kSrc + "/topologies/dgx-h100.json";
    json j = read_json_file(file);
    const TopologySpec plain = parse_topology(j, file);
    j["scale_up"]["domain_gpus"] = 8;
    const TopologySpec same = parse_topology(j, file);
    CHECK(same.gpus_per_node == plain.gpus_per_node);
    CHECK(same.nodes == plain.nodes);
    CHECK(same.nics_per_node == plain.nics_per_node);
    CHECK(same.gpus_per_host == 0);
    CHECK(same.host_memory_bandwidth == plain.host_memory_bandwidth);

    // Two DGX-style hosts per domain: NICs, host and storage bandwidth follow the hosts.
    TopologySpec two = plain;
    apply_scale_up_domain(two, 16);
    CHECK(two.gpus_per_node == 16);
    CHECK(two.nodes == plain.nodes / 2);
    CHECK(two.nics_per_node == 16);
    CHECK(two.nodes_per_leaf == 16);
    CHECK(two.gpus() == plain.gpus());
    CHECK(two.host_memory_bandwidth.bytes_per_s ==
          doctest::Approx(2 * plain.host_memory_bandwidth.bytes_per_s));
    CHECK(two.storage_write_bandwidth_per_node.bytes_per_s ==
          doctest::Approx(2 * plain.storage_write_bandwidth_per_node.bytes_per_s));

    CHECK(
        contains(domain_error(plain, 12), "topology.scale_up.domain_gpus = 12 must be a positive multiple"));
    TopologySpec odd = plain;
    odd.nodes = 3;
    CHECK(contains(domain_error(odd, 16), "nodes = 3 must be a multiple"));
    TopologySpec leaf = plain;
    leaf.nodes_per_leaf = 3;
    CHECK(contains(domain_error(leaf, 16), "nodes_per_leaf = 3 must be a multiple"));
    j["scale_up"]["domain_gpus"] = 12;
    CHECK(contains(message_of<InputError>([&] { parse_topology(j, file); }), "dgx-h100.json"));
}

TEST_CASE("topologies: GB200 NVL72 at 130,896 GPUs is inside the GPUs x GPUs-per-node limit (4 per tray)") {
    // limits::kMaxGpusTimesGpusPerNode counts the GPUs of a host (a tray of 4), not of the 72-GPU domain:
    // 1,818 racks = 130,896 GPUs simulate (the limit refused them at 72 per node: 9,424,512 > 2^23).
    TopologySpec t = preset("gb200-nvl72");
    t.nodes = 1818;
    CHECK(t.gpus() == 130896);
    CHECK_NOTHROW(check_topology(t));
    TopologySpec dgx = preset("dgx-h100");
    dgx.nodes = 256;
    dgx.gpus_per_node = 512;  // 131,072 GPUs at 512 per node, one host each: refused
    dgx.nics_per_node = 8;
    CHECK(contains(message_of<InputError>([&] { check_topology(dgx); }), "GPUs x GPUs per node = 67108864"));
}
