// Topology options: rail-only fabrics and PCIe-only nodes (cluster.hpp ScaleOutTopology, scale_up_kind).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;
using trainsim::test::rel_diff;
using trainsim::test::small_topology;

namespace {

std::vector<LinkKind> kinds(const Cluster& c, const Route& r) {
    std::vector<LinkKind> k;
    for (int l : r.links)
        k.push_back(c.links()[static_cast<std::size_t>(l)].kind);
    return k;
}

double send_seconds(const Cluster& c, int src, int dst, double bytes) {
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    Collectives coll(sim, net, c);
    Time end;
    coll.send(src, dst, bytes, [&] { end = sim.now(); });
    sim.run();
    return end.to_seconds();
}

const std::string kSrc = TRAINSIM_SOURCE_DIR;

}  // namespace

TEST_CASE("rail-only: a cross-rail flow crosses NVLink in the source node, then the destination's rail") {
    TopologySpec t = small_topology(4, 8, 8, 2);  // 2 leaf groups per rail
    t.oversubscription = 2;                       // the spine bundles stay in the routes
    t.fabric = ScaleOutTopology::rail_only;
    const Cluster c(t);
    using K = LinkKind;
    // GPU 0 (node 0, rail 0) -> GPU 11 (node 1, rail 3): NVLink to GPU 3, then rail 3 (same leaf group).
    const Route r = c.route(0, 11);
    CHECK(kinds(c, r) ==
          std::vector<K>{K::nvlink, K::nvlink, K::pcie, K::nic_to_leaf, K::nic_to_leaf, K::pcie});
    CHECK(c.links()[static_cast<std::size_t>(r.links[1])].to == 3);
    // By hand: launch + NVLink 1 us + NIC 2 us + leaf 0.5 us + S / (25 GB/s x 0.92).
    const double S = 1e9;
    CHECK(rel_diff(send_seconds(c, 0, 11, S),
                   kNcclLaunchLatencyS + 3.5e-6 + S / (25e9 * kScaleOutEfficiency)) < 0.01);
    // Across leaf groups each rail has its own spine: rail 0's and rail 1's flows meet no common switch.
    const Route r0 = c.route(0, 16), r1 = c.route(1, 17);
    auto spine_of = [&](const Route& x) {
        for (int l : x.links)
            if (c.links()[static_cast<std::size_t>(l)].kind == K::leaf_to_spine)
                return c.links()[static_cast<std::size_t>(l)].to;
        return -1;
    };
    CHECK(spine_of(r0) >= 0);
    CHECK(spine_of(r1) >= 0);
    CHECK(spine_of(r0) != spine_of(r1));
    // The fat-tree's route of the same pair goes straight over the NICs (rail 0 to rail 3's NIC).
    t.fabric = ScaleOutTopology::fat_tree;
    CHECK(kinds(Cluster(t), Cluster(t).route(0, 11)).front() == K::pcie);
}

TEST_CASE("pcie-only nodes: GPU <-> GPU over each GPU's PCIe link, no NVLS, NIC traffic on the same link") {
    TopologySpec t = small_topology(2);
    t.gpu = "H100-SXM5-80GB";  // NVLink SHARP capable, yet without NVSwitches no NVLS
    t.scale_up_kind = "pcie";
    t.nvlink_bandwidth = Bandwidth::GBps(32);  // PCIe Gen4 x16 per direction
    const Cluster c(t);
    using K = LinkKind;
    CHECK(kinds(c, c.route(0, 1)) == std::vector<K>{K::pcie, K::pcie});
    CHECK(kinds(c, c.route(0, 8)) ==
          std::vector<K>{K::pcie, K::pcie, K::nic_to_leaf, K::nic_to_leaf, K::pcie, K::pcie});
    // A one-node all-reduce is a ring (no NVLS): by hand 2 (7/8) S / (32 GB/s x 0.8) + 14 steps of 2 us.
    const double S = 1e9;
    const std::vector<int> node = {0, 1, 2, 3, 4, 5, 6, 7};
    const double B = 32e9 * c.gpu().nvlink_efficiency;
    const double hand = kNcclLaunchLatencyS + 14 * (1e-6 + kNcclStepLatencyS) + 2.0 * 7 / 8 * S / B;
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, node, S), hand) < 0.01);
}

TEST_CASE("topology options: read from the file, bad values refused naming the field") {
    nlohmann::json j = read_json_file(kSrc + "/topologies/dgx-h100.json");
    CHECK(parse_topology(j, "t.json").fabric == ScaleOutTopology::fat_tree);
    j["scale_out"]["topology"] = "rail-only";
    CHECK(parse_topology(j, "t.json").fabric == ScaleOutTopology::rail_only);
    j["scale_out"]["topology"] = "torus";
    CHECK_THROWS_WITH_AS(parse_topology(j, "t.json"), doctest::Contains("scale_out.topology"), InputError);
    j = read_json_file(kSrc + "/topologies/pcie-h100.json");
    CHECK(parse_topology(j, "t.json").scale_up_kind == "pcie");
    j["scale_up"]["bandwidth_per_gpu"] = "200GBps";
    CHECK_THROWS_WITH_AS(parse_topology(j, "t.json"), doctest::Contains("128 GB/s"), InputError);
    j = read_json_file(kSrc + "/topologies/gb200-nvl72.json");
    j["scale_up"]["kind"] = "pcie";
    j["scale_up"]["bandwidth_per_gpu"] = "64GBps";
    CHECK_THROWS_WITH_AS(parse_topology(j, "t.json"), doctest::Contains("cannot span hosts"), InputError);
    j = read_json_file(kSrc + "/topologies/dgx-h100-rail-only.json");
    CHECK(Cluster(parse_topology(j, "t.json")).gpus() > 0);
}
