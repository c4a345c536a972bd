#include <doctest/doctest.h>

#include <map>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;
using trainsim::test::small_topology;

namespace {

std::map<VertexKind, int> count_kinds(const Cluster& c) {
    std::map<VertexKind, int> n;
    for (int v = 0; v < c.num_vertices(); ++v)
        ++n[c.vertex_kind(v)];
    return n;
}

/// The vertices a route visits, from its source GPU to its destination GPU; checks the links are contiguous.
std::vector<int> path_vertices(const Cluster& c, const Route& r) {
    std::vector<int> v;
    const auto& links = c.links();
    for (std::size_t i = 0; i < r.links.size(); ++i) {
        const Link& l = links[static_cast<std::size_t>(r.links[i])];
        if (i == 0) v.push_back(l.from);
        CHECK(l.from == v.back());
        v.push_back(l.to);
    }
    return v;
}

std::vector<VertexKind> path_kinds(const Cluster& c, const Route& r) {
    std::vector<VertexKind> k;
    for (int v : path_vertices(c, r))
        k.push_back(c.vertex_kind(v));
    return k;
}

Time sum_latency(const Cluster& c, const Route& r) {
    Time t{};
    for (int l : r.links)
        t += c.links()[static_cast<std::size_t>(l)].latency;
    return t;
}

}  // namespace

TEST_CASE("cluster: 4 nodes x 8 GPUs, 2 leaf groups: vertex and link counts") {
    auto spec = small_topology(4, 8, 8, /*nodes_per_leaf=*/2);
    spec.routing = ScaleOutRouting::ecmp;  // one spine per uplink
    const Cluster c(spec);
    CHECK(c.gpus() == 32);
    CHECK(c.gpu().name == "A100-SXM4-80GB");
    auto n = count_kinds(c);
    CHECK(n[VertexKind::gpu] == 32);
    CHECK(n[VertexKind::nvswitch] == 4);
    CHECK(n[VertexKind::nic] == 32);
    CHECK(n[VertexKind::leaf] == 2 * 8);  // 2 groups x 8 rails
    CHECK(n[VertexKind::spine] == 2);     // ceil(nodes_per_leaf / oversubscription) uplinks per leaf
    CHECK(c.num_vertices() == 32 + 4 + 32 + 16 + 2);
    for (int g = 0; g < 32; ++g)
        CHECK(c.vertex_kind(g) == VertexKind::gpu);  // vertex id == GPU id

    std::map<LinkKind, int> links;
    for (const auto& l : c.links())
        ++links[l.kind];
    CHECK(links[LinkKind::nvlink] == 2 * 32);
    CHECK(links[LinkKind::pcie] == 2 * 32);
    CHECK(links[LinkKind::nic_to_leaf] == 2 * 32);
    CHECK(links[LinkKind::leaf_to_spine] == 2 * 16 * 2);
    CHECK(c.node_of(7) == 0);
    CHECK(c.node_of(8) == 1);
    CHECK(c.node_of(31) == 3);

    // Effective capacities: NVLink scaled by the GPU's NCCL efficiency, NICs by the scale-out efficiency.
    for (const auto& l : c.links()) {
        switch (l.kind) {
            case LinkKind::nvlink:
                CHECK(l.bandwidth.bytes_per_s == doctest::Approx(300e9 * c.gpu().nvlink_efficiency));
                break;
            case LinkKind::pcie:
                CHECK(l.bandwidth.bytes_per_s == doctest::Approx(32e9));
                break;
            case LinkKind::nic_to_leaf:
            case LinkKind::leaf_to_spine:
            case LinkKind::spine_to_core:
                CHECK(l.bandwidth.bytes_per_s == doctest::Approx(25e9 * kScaleOutEfficiency));
                break;
        }
    }
}

TEST_CASE("cluster: adaptive routing joins each leaf to one logical spine by a bundle of all its uplinks") {
    for (double oversubscription : {1.0, 2.0}) {
        auto spec = small_topology(4, 8, 8, /*nodes_per_leaf=*/2);
        spec.routing = ScaleOutRouting::adaptive;
        spec.oversubscription = oversubscription;
        const Cluster c(spec);
        auto n = count_kinds(c);
        CHECK(n[VertexKind::spine] == 1);
        const int uplinks = oversubscription == 1.0 ? 2 : 1;  // ceil(nodes_per_leaf / oversubscription)
        int bundles = 0;
        for (const auto& l : c.links())
            if (l.kind == LinkKind::leaf_to_spine) {
                ++bundles;
                CHECK(l.bandwidth.bytes_per_s == doctest::Approx(uplinks * 25e9 * kScaleOutEfficiency));
            }
        CHECK(bundles == 2 * 16);  // up and down for each of the 16 leaves
        const Route a = c.route(2, 16 + 2);
        const Route b = c.route(10, 24 + 2);
        CHECK(a.latency == Time::seconds(2e-6 + 0.5e-6 + 0.5e-6));  // NIC + leaf + spine, as with ECMP
        if (oversubscription == 1.0) {
            // Non-blocking: the bundles can never bind, so the route lists only GPU-NIC-leaf links.
            CHECK(a.links.size() == 4);
            for (int l : a.links)
                CHECK(c.links()[static_cast<std::size_t>(l)].kind != LinkKind::leaf_to_spine);
        } else {
            // Every flow between two given leaves takes the same bundles, whatever its endpoints.
            REQUIRE(a.links.size() == 6);
            REQUIRE(b.links.size() == 6);
            CHECK(a.links[2] == b.links[2]);
            CHECK(a.links[3] == b.links[3]);
            CHECK(a.latency == sum_latency(c, a));
        }
    }
}

TEST_CASE("cluster: routes inside a node, on one rail, across rails and across leaf groups") {
    auto spec = small_topology(4, 8, 8, /*nodes_per_leaf=*/2);
    spec.routing = ScaleOutRouting::ecmp;  // routes name their spine links
    const Cluster c(spec);
    const auto& links = c.links();

    SUBCASE("intra-node: GPU -> NVSwitch -> GPU") {
        const Route r = c.route(0, 5);
        REQUIRE(r.links.size() == 2);
        CHECK(path_kinds(c, r) ==
              std::vector<VertexKind>{VertexKind::gpu, VertexKind::nvswitch, VertexKind::gpu});
        CHECK(path_vertices(c, r).front() == 0);
        CHECK(path_vertices(c, r).back() == 5);
        for (int l : r.links)
            CHECK(links[static_cast<std::size_t>(l)].kind == LinkKind::nvlink);
        CHECK(r.latency == sum_latency(c, r));
        CHECK(r.latency == Time::seconds(1e-6));  // the two half-hops of nvlink_latency
    }
    SUBCASE("inter-node, same rail, same leaf group: GPU -> NIC -> leaf -> NIC -> GPU") {
        const Route r = c.route(3, 8 + 3);  // node 0 -> node 1, both local GPU 3
        REQUIRE(r.links.size() == 4);
        CHECK(path_kinds(c, r) == std::vector<VertexKind>{VertexKind::gpu, VertexKind::nic, VertexKind::leaf,
                                                          VertexKind::nic, VertexKind::gpu});
        CHECK(path_vertices(c, r).front() == 3);
        CHECK(path_vertices(c, r).back() == 11);
        CHECK(links[static_cast<std::size_t>(r.links[0])].kind == LinkKind::pcie);
        CHECK(links[static_cast<std::size_t>(r.links[1])].kind == LinkKind::nic_to_leaf);
        CHECK(links[static_cast<std::size_t>(r.links[2])].kind == LinkKind::nic_to_leaf);
        CHECK(links[static_cast<std::size_t>(r.links[3])].kind == LinkKind::pcie);
        CHECK(r.latency == sum_latency(c, r));
        CHECK(r.latency == Time::seconds(2e-6 + 0.5e-6));  // NIC + one switch traversal
    }
    SUBCASE("inter-node, other rail, same leaf group: through a spine") {
        const Route r = c.route(0, 8 + 1);
        REQUIRE(r.links.size() == 6);
        CHECK(path_kinds(c, r) == std::vector<VertexKind>{VertexKind::gpu, VertexKind::nic, VertexKind::leaf,
                                                          VertexKind::spine, VertexKind::leaf,
                                                          VertexKind::nic, VertexKind::gpu});
        CHECK(r.latency == sum_latency(c, r));
    }
    SUBCASE("across leaf groups: GPU -> NIC -> leaf -> spine -> leaf -> NIC -> GPU") {
        const Route r = c.route(2, 16 + 2);  // node 0 (group 0) -> node 2 (group 1)
        REQUIRE(r.links.size() == 6);
        const auto kinds = path_kinds(c, r);
        CHECK(kinds == std::vector<VertexKind>{VertexKind::gpu, VertexKind::nic, VertexKind::leaf,
                                               VertexKind::spine, VertexKind::leaf, VertexKind::nic,
                                               VertexKind::gpu});
        CHECK(path_vertices(c, r).front() == 2);
        CHECK(path_vertices(c, r).back() == 18);
        CHECK(links[static_cast<std::size_t>(r.links[2])].kind == LinkKind::leaf_to_spine);
        CHECK(links[static_cast<std::size_t>(r.links[3])].kind == LinkKind::leaf_to_spine);
        CHECK(r.latency == sum_latency(c, r));
        CHECK(r.latency == Time::seconds(2e-6 + 0.5e-6 + 0.5e-6));  // NIC + leaf + spine
    }
}

TEST_CASE("cluster: every route is contiguous, has the latency sum, and is deterministic") {
    auto spec = small_topology(4, 8, 8, /*nodes_per_leaf=*/2);
    spec.routing = ScaleOutRouting::ecmp;
    const Cluster a(spec);
    const Cluster b(spec);
    for (int s = 0; s < a.gpus(); ++s)
        for (int d = 0; d < a.gpus(); ++d) {
            if (s == d) continue;
            const Route r1 = a.route(s, d);
            const Route r2 = a.route(s, d);
            const Route r3 = b.route(s, d);
            CHECK(r1.links == r2.links);
            CHECK(r1.links == r3.links);
            CHECK(r1.latency == r3.latency);
            CHECK(r1.latency == sum_latency(a, r1));
            const auto v = path_vertices(a, r1);
            CHECK(v.front() == s);
            CHECK(v.back() == d);
        }
    CHECK_THROWS_AS(a.route(3, 3), InternalError);
    CHECK_THROWS_AS(a.route(0, 32), InternalError);
}

TEST_CASE("cluster: GPUs share NICs when there are fewer NICs than GPUs") {
    const Cluster c(small_topology(2, 8, /*nics_per_node=*/4));
    auto first_nic = [&](int src, int dst) {
        return c.links()[static_cast<std::size_t>(c.route(src, dst).links[0])].to;
    };
    // GPU i uses NIC floor(i * 4 / 8).
    CHECK(first_nic(0, 8) == first_nic(1, 9));
    CHECK(first_nic(2, 10) == first_nic(3, 11));
    CHECK(first_nic(0, 8) != first_nic(2, 10));
    CHECK(c.vertex_kind(first_nic(0, 8)) == VertexKind::nic);
}

TEST_CASE("cluster: inconsistent parameters are InputErrors") {
    auto spec = small_topology(4);
    SUBCASE("more NICs than GPUs") {
        spec.nics_per_node = 9;
        CHECK_THROWS_AS(Cluster{spec}, InputError);
        CHECK(contains(message_of<InputError>([&] { Cluster c(spec); }), "nics_per_node"));
    }
    SUBCASE("no nodes") {
        spec.nodes = 0;
        CHECK_THROWS_AS(Cluster{spec}, InputError);
    }
    SUBCASE("oversubscription below 1") {
        spec.oversubscription = 0.5;
        CHECK_THROWS_AS(Cluster{spec}, InputError);
    }
    SUBCASE("unknown GPU") {
        spec.gpu = "A200";
        CHECK_THROWS_AS(Cluster{spec}, InputError);
        CHECK(contains(message_of<InputError>([&] { Cluster c(spec); }), "topology.gpu"));
    }
}
