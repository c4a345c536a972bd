// The three-tier fat-tree (cluster.hpp: scale_out.tiers = 3, pods of nodes_per_pod nodes, per-tier
// oversubscription): routes, tier capacities, a cross-pod ring, the topology fields and the shipped 64K file.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "collective_test_helpers.hpp"
#include "test_helpers.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;
using trainsim::test::iota;
using trainsim::test::rel_diff;
using trainsim::test::small_topology;

namespace {

const std::string kSrc = TRAINSIM_SOURCE_DIR;

/// small_topology (A100 node, 200 Gb/s NICs, 0.5 us switches, 2 us NIC) on three tiers.
TopologySpec three_tier(int nodes, int gpn, int nics, int per_leaf, int per_pod, double leaf_os = 1,
                        double spine_os = 1, ScaleOutRouting routing = ScaleOutRouting::ecmp) {
    TopologySpec t = small_topology(nodes, gpn, nics, per_leaf);
    t.tiers = 3;
    t.nodes_per_pod = per_pod;
    t.oversubscription = leaf_os;
    t.spine_oversubscription = spine_os;
    t.routing = routing;
    return t;
}

/// The vertex kinds a route visits, from its source GPU to its destination GPU.
std::vector<VertexKind> path(const Cluster& c, const Route& r) {
    std::vector<VertexKind> v;
    for (int l : r.links) {
        const Link& link = c.links()[static_cast<std::size_t>(l)];
        if (v.empty()) v.push_back(c.vertex_kind(link.from));
        v.push_back(c.vertex_kind(link.to));
    }
    return v;
}

/// Aggregate rate, bytes/s, of one flow of `bytes` from every src[i] to dst[i] started together on an idle
/// fabric (bytes large enough that the route latencies are negligible).
double aggregate_rate(const Cluster& c, const std::vector<int>& src, const std::vector<int>& dst) {
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    const double bytes = 1e9;
    Time end;
    for (std::size_t i = 0; i < src.size(); ++i)
        net.start_flow(c.route(src[i], dst[i]), bytes, [&] { end = std::max(end, sim.now()); });
    sim.run();
    return static_cast<double>(src.size()) * bytes / end.to_seconds();
}

}  // namespace

TEST_CASE("three tiers: same-leaf, same-pod and cross-pod routes climb 1, 2 and 3 tiers") {
    // 8 nodes of 2 GPUs and 2 NICs; leaf groups of 2 nodes, pods of 4 nodes (2 groups): 2 pods. ECMP, so
    // every switch link is in the routes: per pod 2 spines (a leaf's 2 uplinks), each with ceil(4 leaves / 1)
    // = 4 links up, one to each core of its plane: 2 planes x 4 cores.
    const Cluster c(three_tier(8, 2, 2, 2, 4));
    std::map<VertexKind, int> n;
    for (int v = 0; v < c.num_vertices(); ++v)
        ++n[c.vertex_kind(v)];
    CHECK(n[VertexKind::leaf] == 8);   // 4 groups x 2 rails
    CHECK(n[VertexKind::spine] == 4);  // 2 pods x 2
    CHECK(n[VertexKind::core] == 8);   // 2 planes x 4
    using K = VertexKind;
    const double nic = 2e-6, sw = 0.5e-6;  // a link up carries the switch it enters; a link down none
    SUBCASE("same leaf: GPU 0 (node 0, rail 0) -> GPU 2 (node 1, rail 0)") {
        const Route r = c.route(0, 2);
        CHECK(path(c, r) == std::vector<K>{K::gpu, K::nic, K::leaf, K::nic, K::gpu});
        CHECK(rel_diff(r.latency.to_seconds(), nic + sw) < 1e-9);
    }
    SUBCASE("same pod, other leaf: GPU 0 -> GPU 4 (node 2, group 1, pod 0)") {
        const Route r = c.route(0, 4);
        CHECK(path(c, r) == std::vector<K>{K::gpu, K::nic, K::leaf, K::spine, K::leaf, K::nic, K::gpu});
        CHECK(rel_diff(r.latency.to_seconds(), nic + 2 * sw) < 1e-9);
    }
    SUBCASE("other pod: GPU 0 -> GPU 8 (node 4, pod 1), and every cross-pod pair keeps its plane") {
        const Route r = c.route(0, 8);
        CHECK(path(c, r) ==
              std::vector<K>{K::gpu, K::nic, K::leaf, K::spine, K::core, K::spine, K::leaf, K::nic, K::gpu});
        CHECK(rel_diff(r.latency.to_seconds(), nic + 3 * sw) < 1e-9);
        for (int src = 0; src < 8; ++src)
            for (int dst = 8; dst < 16; ++dst) {
                const Route q = c.route(src, dst);
                const Link& up = c.links()[static_cast<std::size_t>(q.links[2])];    // leaf -> spine
                const Link& down = c.links()[static_cast<std::size_t>(q.links[5])];  // spine -> leaf
                REQUIRE(up.kind == LinkKind::leaf_to_spine);
                REQUIRE(c.links()[static_cast<std::size_t>(q.links[3])].kind == LinkKind::spine_to_core);
                // spine vertex ids run pod by pod, 2 per pod: the same plane is a multiple of 2 apart
                CHECK(down.from != up.to);
                CHECK((down.from - up.to) % 2 == 0);
                const Link& to_core = c.links()[static_cast<std::size_t>(q.links[3])];
                const Link& from_core = c.links()[static_cast<std::size_t>(q.links[4])];
                CHECK(to_core.to == from_core.from);  // the same core up and down
                CHECK(to_core.from == up.to);
                CHECK(from_core.to == down.from);
            }
    }
}

TEST_CASE("three tiers: bisection bandwidth per tier with oversubscription, hand-computed") {
    // 16 nodes of 1 GPU / 1 NIC; leaf groups of 4 nodes, leaf 2:1 (ceil(4 / 2) = 2 uplinks); pods of 8 nodes
    // (2 leaves), spine 2:1 (ceil(2 leaves / 2) = 1 link up per pod spine). NIC B = 25 GB/s x 0.92.
    // Adaptive routing (fluid: no hash collisions). By hand:
    //   leaf tier:  a group's 4 nodes -> the other group of its pod: 4 B of NICs through 2 B of leaf uplinks.
    //   spine tier: a pod's 8 nodes -> the other pod: 2 leaves x 2 B = 4 B of leaf uplinks, then the pod's
    //               2 spines x 1 link = 2 B up to the cores: 2 B (= 8 nodes x B / (2 x 2)).
    const double B = 25e9 * kScaleOutEfficiency;
    const Cluster c(three_tier(16, 1, 1, 4, 8, 2, 2, ScaleOutRouting::adaptive));
    CHECK(rel_diff(aggregate_rate(c, iota(4), iota(4, 4)), 2 * B) < 1e-3);
    CHECK(rel_diff(aggregate_rate(c, iota(8), iota(8, 8)), 2 * B) < 1e-3);
    // Both ways at once: each direction has its own links.
    std::vector<int> src = iota(8), dst = iota(8, 8);
    for (int i = 0; i < 8; ++i) {
        src.push_back(8 + i);
        dst.push_back(i);
    }
    CHECK(rel_diff(aggregate_rate(c, src, dst), 4 * B) < 1e-3);
    // Non-blocking spines: the cross-pod traffic gets the leaf tier's 4 B.
    const Cluster open(three_tier(16, 1, 1, 4, 8, 2, 1, ScaleOutRouting::adaptive));
    CHECK(rel_diff(aggregate_rate(open, iota(8), iota(8, 8)), 4 * B) < 1e-3);
    // Non-blocking throughout: the NICs' 8 B (the bundles then never bind and are left out of routes).
    const Cluster full(three_tier(16, 1, 1, 4, 8, 1, 1, ScaleOutRouting::adaptive));
    CHECK(full.bundles_omitted());
    CHECK(rel_diff(aggregate_rate(full, iota(8), iota(8, 8)), 8 * B) < 1e-3);
    // ECMP: the same capacities as links of one NIC rate: per tier, sum of the links up.
    const Cluster e(three_tier(16, 1, 1, 4, 8, 2, 2));
    std::map<LinkKind, double> up;  // links leaving a leaf up, and a spine up
    for (const Link& l : e.links())
        if ((l.kind == LinkKind::leaf_to_spine && e.vertex_kind(l.from) == VertexKind::leaf) ||
            (l.kind == LinkKind::spine_to_core && e.vertex_kind(l.from) == VertexKind::spine))
            up[l.kind] += l.bandwidth.bytes_per_s;
    CHECK(rel_diff(up[LinkKind::leaf_to_spine], 4 * 2 * B) < 1e-9);  // 4 leaves x 2 uplinks
    CHECK(rel_diff(up[LinkKind::spine_to_core], 4 * 1 * B) < 1e-9);  // 2 pods x 2 spines x 1 link up
}

TEST_CASE("three tiers: a cross-pod ring all-reduce is bound by the spines' uplinks, hand-computed") {
    // 16 nodes of 2 GPUs / 2 NICs (2 rails); leaf groups of 4 nodes, leaf 4:1 (1 uplink per leaf); pods of 8
    // nodes (2 groups x 2 rails = 4 leaves), spine 4:1 (ceil(4 / 4) = 1 link up per spine): a pod reaches
    // the cores through 1 x 1 x B. The all-reduce over all 32 GPUs runs 2 rings (channels), each crossing
    // out of pod 0 once (node 7 -> 8) and into it once (15 -> 0), each on its own rail's leaves (1 crossing
    // per leaf uplink: B). By hand the two channels share the pod's B up: B / 2 each, below the NIC's B.
    // Time (Simple): launch 8 us + 62 steps x (3.5 us cross-pod wire: NIC 2 + 3 switches up x 0.5, + 1 us
    // step) + 2 x 31/32 x S / 2 (per channel) / (B / 2).
    const double B = 25e9 * kScaleOutEfficiency;
    const Cluster c(three_tier(16, 2, 2, 4, 8, 4, 4, ScaleOutRouting::adaptive));
    const auto ranks = iota(32);
    const double S = 1e9;
    {
        Simulator sim;
        FlowNetwork net(sim, link_capacities(c));
        Collectives coll(sim, net, c);
        REQUIRE(Collectives::plan(CollectiveKind::all_reduce, coll.communicator(ranks), S).algorithm ==
                Collectives::Algorithm::ring);
    }
    const double hand = 8e-6 + 62 * (3.5e-6 + 1e-6) + 2.0 * 31 / 32 * S / 2 / (B / 2);
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, ranks, S), hand) < 1e-3);
    // The same ring inside one pod (16 GPUs of pod 0) is NIC-bound: B per channel.
    const double in_pod = 8e-6 + 30 * (3e-6 + 1e-6) + 2.0 * 15 / 16 * S / 2 / B;
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, iota(16), S), in_pod) < 1e-3);
}

TEST_CASE("three tiers: the topology fields, refused values named in one line") {
    nlohmann::json j = read_json_file(kSrc + "/topologies/dgx-h100.json");
    CHECK(parse_topology(j, "t.json").tiers == 2);
    auto refused = [&](const nlohmann::json& bad, const std::string& what) {
        CAPTURE(bad.dump());
        CHECK_THROWS_WITH_AS(parse_topology(bad, "t.json"), doctest::Contains(what.c_str()), InputError);
    };
    nlohmann::json t3 = j;
    t3["scale_out"]["tiers"] = 3;
    refused(t3, "topology.scale_out.nodes_per_pod = 0 must be a positive multiple");
    t3["scale_out"]["nodes_per_pod"] = 64;
    CHECK(parse_topology(t3, "t.json").nodes_per_pod == 64);
    nlohmann::json bad = t3;
    bad["scale_out"]["tiers"] = 4;
    refused(bad, "scale_out.tiers");
    bad = t3;
    bad["scale_out"]["nodes_per_pod"] = 48;
    refused(bad, "nodes_per_pod = 48 must be a positive multiple of topology.scale_out.nodes_per_leaf = 32");
    bad = t3;
    bad["scale_out"]["spine_oversubscription"] = 0.5;
    refused(bad, "scale_out.spine_oversubscription");
    bad = t3;
    bad["scale_out"]["topology"] = "rail-only";
    refused(bad, "scale_out.tiers = 3 needs topology.scale_out.topology = rail-optimized-fat-tree");
    bad = j;
    bad["scale_out"]["nodes_per_pod"] = 64;
    refused(bad, "nodes_per_pod = 64 needs topology.scale_out.tiers = 3");
    bad = t3;
    bad["scale_out"]["pods"] = 2;
    refused(bad, "pods");
    // A multi-host NVLink domain counts pods in domains, as leaf groups.
    nlohmann::json nvl = read_json_file(kSrc + "/topologies/gb200-nvl72.json");
    nvl["scale_out"]["tiers"] = 3;
    nvl["scale_out"]["nodes_per_pod"] = 288;  // trays: 2 leaf groups of 144
    CHECK(parse_topology(nvl, "t.json").nodes_per_pod == 16);
}

TEST_CASE("three tiers: the shipped 65,536-GPU file is the k = 64 fat-tree") {
    nlohmann::json j = read_json_file(kSrc + "/topologies/dgx-h100-3tier-64k.json");
    const TopologySpec t = parse_topology(j, "dgx-h100-3tier-64k.json");
    CHECK(t.gpus() == 65536);
    CHECK(t.tiers == 3);
    // Under ECMP every switch is a vertex: 64 pods x 32 leaves, 64 pods x 32 spines, 32 planes x 32 cores =
    // 5 k^2 / 4 = 5,120 switches of a k = 64 fat-tree.
    TopologySpec e = t;
    e.routing = ScaleOutRouting::ecmp;
    const Cluster c(e);
    std::map<VertexKind, int> n;
    for (int v = 0; v < c.num_vertices(); ++v)
        ++n[c.vertex_kind(v)];
    CHECK(n[VertexKind::leaf] == 2048);
    CHECK(n[VertexKind::spine] == 2048);
    CHECK(n[VertexKind::core] == 1024);
    // GPU 0 to the last GPU: another pod, 5 switches.
    CHECK(path(c, c.route(0, 65535)).size() == 9);
}
