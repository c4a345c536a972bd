// NCCL's tree and SHARP all-reduce across nodes, and NVLS inside a multi-node NVLink domain
// (collectives.hpp).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "collective_test_helpers.hpp"
#include "test_helpers.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;
using trainsim::test::algorithm_of;
using trainsim::test::iota;
using trainsim::test::rel_diff;
using trainsim::test::small_topology;

namespace {

/// One GPU of every node: local index `local` of nodes 0..nodes-1.
std::vector<int> one_per_node(int nodes, int local, int gpn = 8) {
    std::vector<int> r;
    for (int k = 0; k < nodes; ++k)
        r.push_back(k * gpn + local);
    return r;
}

/// Every link kind the all-reduce's flows cross.
std::set<LinkKind> link_kinds(const Cluster& c, const std::vector<int>& ranks, double bytes) {
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    Collectives coll(sim, net, c);
    const auto& comm = coll.communicator(ranks);
    const auto plan = Collectives::plan(CollectiveKind::all_reduce, comm, bytes);
    std::set<LinkKind> kinds;
    auto add = [&](const Route& r) {
        for (int l : r.links)
            kinds.insert(c.links()[static_cast<std::size_t>(l)].kind);
    };
    if (plan.route) add(*plan.route);
    if (!plan.route)
        for (const Route& r : *plan.routes)
            add(r);
    return kinds;
}

}  // namespace

TEST_CASE("tree: the double binary tree's two trees span the nodes, interior in one, leaf in the other") {
    // Hand-built for 4 nodes: tree 0 (in-order, 1-based 4 -> 2 -> {1, 3}) and its mirror.
    using E = std::vector<std::pair<int, int>>;
    CHECK(Collectives::tree_edges(4, 0) == E{{1, 0}, {3, 1}, {1, 2}});
    CHECK(Collectives::tree_edges(4, 1) == E{{2, 3}, {0, 2}, {2, 1}});
    for (int n = 2; n <= 40; ++n)
        for (int t = 0; t < 2; ++t) {
            CAPTURE(n);
            CAPTURE(t);
            const auto edges = Collectives::tree_edges(n, t);
            REQUIRE(edges.size() == static_cast<std::size_t>(n - 1));
            std::map<int, int> parent, children;
            for (auto [p, c] : edges) {
                CHECK(!parent.count(c));
                parent[c] = p;
                ++children[p];
            }
            for (auto [p, k] : children)
                CHECK(k <= 2);
            for (int v = 0; v < n; ++v) {  // depth <= floor(log2 n): NCCL's log2i(nNodes) tree hops
                int d = 0;
                for (int u = v; parent.count(u); u = parent[u])
                    REQUIRE(++d <= n);
                CHECK(d <= static_cast<int>(std::floor(std::log2(n))));
            }
        }
    for (int n = 2; n <= 40; n += 2) {  // even: no node is interior in both trees
        std::set<int> interior0;
        for (auto [p, c] : Collectives::tree_edges(n, 0))
            interior0.insert(p);
        for (auto [p, c] : Collectives::tree_edges(n, 1))
            CHECK(!interior0.count(p));
    }
}

TEST_CASE("tree: nccl_tree_correction reads NCCL's table by floor(log2(bytes / 64))") {
    CHECK(nccl_tree_correction(2, 32) == 1.0);
    CHECK(nccl_tree_correction(2, 64) == 0.9);
    CHECK(nccl_tree_correction(1, 1e6) == 0.6);  // log2(15625) = 13.9
    CHECK(nccl_tree_correction(2, 1e12) == 1.0);
}

TEST_CASE("tree: a 1 MB all-reduce over 32 nodes is NCCL's tree (LL128), hand-computed") {
    const Cluster c(small_topology(32));
    const auto ranks = one_per_node(32, 3);
    const double S = 1e6;
    REQUIRE(algorithm_of(c, ranks, S) == Collectives::Algorithm::tree);
    // By hand: NIC B = 25 GB/s x 0.92; a node's NIC carries 4 edge streams (interior in one tree: up to its
    // parent, down to two children; leaf in the other: up); each stream S / 2. Latency: LL128 launch 14 us +
    // 2 x floor(log2 32) = 10 tree hops of (NIC 2 us + leaf 0.5 us + LL128 step 0.6 us). Bandwidth x 120/128
    // (LL128) x 0.92 (NCCL tree) x 0.6 (NCCL's correction for LL128 at 1 MB).
    const double B = 25e9 * kScaleOutEfficiency;
    const double hand = 14e-6 + 10 * (2.5e-6 + 0.6e-6) + S / 2 / (120.0 / 128 * 0.92 * 0.6) / (B / 4);
    const double t = isolated_collective_seconds(c, CollectiveKind::all_reduce, ranks, S);
    CHECK(rel_diff(t, hand) < 0.01);
    // The ring it replaces (LL128, 62 steps) is slower.
    const double ring = 14e-6 + 62 * (2.5e-6 + 0.6e-6) + 2.0 * 31 / 32 * S / (B * 120 / 128);
    CHECK(t < ring);
}

TEST_CASE("tree: bandwidth-bound all-reduces stay rings; one-node groups have no tree") {
    const Cluster c(small_topology(4));
    CHECK(algorithm_of(c, iota(32), 1e9) == Collectives::Algorithm::ring);
    CHECK(algorithm_of(c, one_per_node(4, 0), 128e6) == Collectives::Algorithm::ring);
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    Collectives coll(sim, net, c);
    CHECK(coll.communicator(iota(8)).tree_routes.empty());
    CHECK(coll.communicator({0, 1, 8}).tree_routes.empty());  // irregular: ring only
    CHECK(coll.communicator(iota(16)).tree_routes.size() == 8);
}

TEST_CASE("sharp: in-network all-reduce sends each node's share once up, hand-computed") {
    TopologySpec t = small_topology(4);
    t.nvlink_bandwidth = Bandwidth::GBps(3000);  // the NICs bind
    const double S = 256e6;
    CHECK(algorithm_of(Cluster(t), iota(32), S) == Collectives::Algorithm::ring);
    t.sharp = true;
    const Cluster c(t);
    REQUIRE(algorithm_of(c, iota(32), S) == Collectives::Algorithm::sharp);
    // By hand: 8 rails, each node's NIC carries S / 8 once each way at 25 GB/s x 0.92, x 0.85 (NCCL CollNet);
    // latency: Simple launch 8 us + 2 x (NVLink 1 us + step 1 us) + 31 us + NIC route 2.5 us.
    const double B = 25e9 * kScaleOutEfficiency;
    const double hand = 8e-6 + 4e-6 + 31e-6 + 2.5e-6 + S / 8 / 0.85 / B;
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, iota(32), S), hand) < 0.01);
    // Against the ring's 2 (n-1)/n S / (8 B): nearly twice as fast.
    const double ring = 2.0 * 31 / 32 * S / 8 / B;
    CHECK(hand < 0.65 * ring);
}

TEST_CASE("sharp: only on InfiniBand; the topology field is read") {
    TopologySpec t = small_topology(2);
    t.sharp = true;
    t.scale_out_kind = "roce";
    CHECK_THROWS_WITH_AS(check_topology(t), doctest::Contains("topology.scale_out.sharp = true"), InputError);
    const std::string src = TRAINSIM_SOURCE_DIR;
    nlohmann::json j = read_json_file(src + "/topologies/dgx-h100.json");
    CHECK_FALSE(parse_topology(j, "t.json").sharp);
    j["scale_out"]["sharp"] = true;
    CHECK(parse_topology(j, "t.json").sharp);
    j["scale_out"]["sharp"] = "yes";
    CHECK_THROWS_AS(parse_topology(j, "t.json"), InputError);
}

TEST_CASE("nvl72: an all-reduce inside the 72-GPU NVLink domain is NVLS and never leaves the domain") {
    const std::string src = TRAINSIM_SOURCE_DIR;
    const TopologySpec t = parse_topology(read_json_file(src + "/topologies/gb200-nvl72.json"), "nvl72");
    const Cluster c(t);
    REQUIRE(c.gpu().nvlink_sharp);
    for (const auto& group : {iota(72), iota(16, 72), one_per_node(18, 1, 4)})  // whole, 4 trays, 1 per tray
        for (double S : {64e3, 16e6, 1e9}) {
            CAPTURE(group.size());
            CAPTURE(S);
            CHECK(link_kinds(c, group, S) == std::set<LinkKind>{LinkKind::nvlink});
        }
    CHECK(algorithm_of(c, iota(72), 1e9) == Collectives::Algorithm::nvls);
    // Two domains: the all-reduce crosses the NICs.
    CHECK(link_kinds(c, iota(144), 1e9).count(LinkKind::nic_to_leaf) == 1);
}

TEST_CASE("tree: over 2 nodes the tree sends S per node across, half the ring's 2(n-1)/n S") {
    TopologySpec t = small_topology(2);
    t.nvlink_bandwidth = Bandwidth::GBps(3000);  // the NICs bind
    const Cluster c(t);
    const double S = 4e9;  // bandwidth-bound: NCCL's tree correction is 1 above 256 MB x 4
    REQUIRE(algorithm_of(c, iota(16), S) == Collectives::Algorithm::tree);
    // By hand: 8 channels, a node's NIC carries 2 streams of S / 16 (up in one tree, down in the other),
    // at 25 GB/s x 0.92 (scale-out) x 0.92 (NCCL tree). Latency (Simple): 8 us + 2 x (7 x (NVLink 1 us + 1
    // us) + 1 x (2.5 us + 1 us)).
    const double B = 25e9 * kScaleOutEfficiency;
    const double hand = 8e-6 + 2 * (7 * 2e-6 + 3.5e-6) + S / 16 / 0.92 / (B / 2);
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, iota(16), S), hand) < 0.01);
    const double ring = 2.0 * 15 / 16 * S / 8 / B;
    CHECK(hand < 0.6 * ring);
}
