#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/network.hpp"

using namespace trainsim;
using trainsim::test::rel_diff;
using trainsim::test::small_topology;

namespace {

std::vector<double> capacities(const Cluster& c) {
    std::vector<double> caps;
    for (const auto& l : c.links())
        caps.push_back(l.bandwidth.bytes_per_s);
    return caps;
}

/// An idle fabric: cluster, engine, flow network and collectives.
struct Fabric {
    explicit Fabric(const TopologySpec& spec)
        : cluster(spec), net(sim, capacities(cluster)), coll(sim, net, cluster) {}
    Cluster cluster;
    Simulator sim;
    FlowNetwork net;
    Collectives coll;
};

/// Slowest link of a route, bytes/s.
double route_bandwidth(const Cluster& c, const Route& r) {
    double b = std::numeric_limits<double>::infinity();
    for (int l : r.links)
        b = std::min(b, c.links()[static_cast<std::size_t>(l)].bandwidth.bytes_per_s);
    return b;
}

/// The alpha-beta closed form of collectives.hpp for a ring collective on an idle fabric; `share` is the
/// fraction of the edge bandwidth this collective gets (1/2 when two identical collectives run at once).
double closed_form(const Cluster& c, CollectiveKind kind, const std::vector<int>& ranks, double S,
                   double share = 1.0) {
    const int n = static_cast<int>(ranks.size());
    const int gpn = c.spec().gpus_per_node;
    const int channels = Collectives::channels_for(ranks, gpn);
    double max_latency = 0;
    double min_bw = std::numeric_limits<double>::infinity();
    for (int ch = 0; ch < channels; ++ch)
        for (auto [a, b] : Collectives::ring_edges(ranks, gpn, ch, channels)) {
            const Route r = c.route(a, b);
            max_latency = std::max(max_latency, r.latency.to_seconds());
            min_bw = std::min(min_bw, route_bandwidth(c, r));
        }
    const double alpha = max_latency + kNcclStepLatencyS;
    const bool ar = kind == CollectiveKind::all_reduce;
    const double steps = ar ? 2.0 * (n - 1) : n - 1.0;
    const double factor = (ar ? 2.0 : 1.0) * (n - 1) / n;
    return kNcclLaunchLatencyS + steps * alpha + factor * S / (channels * min_bw * share);
}

/// Runs one collective on an idle fabric and returns its duration, seconds.
double run_one(Fabric& f, CollectiveKind kind, const std::vector<int>& ranks, double S) {
    const Time start = f.sim.now();
    Time end = Time::max();
    f.coll.run(kind, ranks, S, [&] { end = f.sim.now(); });
    f.sim.run();
    REQUIRE(end != Time::max());
    return (end - start).to_seconds();
}

const char* name(CollectiveKind k) {
    return k == CollectiveKind::all_reduce   ? "all_reduce"
           : k == CollectiveKind::all_gather ? "all_gather"
                                             : "reduce_scatter";
}

const CollectiveKind kKinds[] = {CollectiveKind::all_reduce, CollectiveKind::all_gather,
                                 CollectiveKind::reduce_scatter};

}  // namespace

TEST_CASE("collectives: ring collectives over the 8 GPUs of one node match the alpha-beta closed form") {
    const std::vector<int> ranks = {0, 1, 2, 3, 4, 5, 6, 7};
    // 8 MB: latency and bandwidth terms are of the same order, so both are checked; 256 MB: bandwidth-bound.
    for (double S : {8e6, 256e6})
        for (auto kind : kKinds) {
            Fabric f(small_topology(2));
            CAPTURE(name(kind));
            CAPTURE(S);
            const double t = run_one(f, kind, ranks, S);
            const double expected = closed_form(f.cluster, kind, ranks, S);
            CHECK(rel_diff(t, expected) < 0.01);
            // Hand-computed for the NVLink ring: B = 300 GB/s x NVLink efficiency, alpha = 1 us + step
            // latency.
            const double B = 300e9 * f.cluster.gpu().nvlink_efficiency;
            const double alpha = 1e-6 + kNcclStepLatencyS;
            const bool ar = kind == CollectiveKind::all_reduce;
            const double hand =
                kNcclLaunchLatencyS + (ar ? 14 : 7) * alpha + (ar ? 2.0 : 1.0) * 7.0 / 8.0 * S / B;
            CHECK(rel_diff(t, hand) < 0.01);
        }
}

TEST_CASE("collectives: rail-aligned ring over 4 nodes (one GPU per node) matches the closed form") {
    const std::vector<int> ranks = {3, 8 + 3, 16 + 3, 24 + 3};  // same local index: same NIC rail
    CHECK(Collectives::channels_for(ranks, 8) == 1);
    for (double S : {4e6, 128e6})
        for (auto kind : kKinds) {
            Fabric f(small_topology(4));
            CAPTURE(name(kind));
            CAPTURE(S);
            const double t = run_one(f, kind, ranks, S);
            CHECK(rel_diff(t, closed_form(f.cluster, kind, ranks, S)) < 0.01);
            // By hand: the NIC (200 Gb/s x scale-out efficiency) is slower than PCIe (32 GB/s); wire latency
            // is NIC latency + one leaf switch.
            const double B = 25e9 * kScaleOutEfficiency;
            const double alpha = 2e-6 + 0.5e-6 + kNcclStepLatencyS;
            const bool ar = kind == CollectiveKind::all_reduce;
            const double hand =
                kNcclLaunchLatencyS + (ar ? 6 : 3) * alpha + (ar ? 2.0 : 1.0) * 3.0 / 4.0 * S / B;
            CHECK(rel_diff(t, hand) < 0.01);
        }
}

TEST_CASE("collectives: a multi-node group with 2 GPUs per node runs 2 channels, each carrying half") {
    const std::vector<int> ranks = {0, 1, 8, 9};
    REQUIRE(Collectives::channels_for(ranks, 8) == 2);
    // (An all-reduce over 2 nodes is NCCL's tree, which halves the NIC traffic: test_tree_sharp.cpp.)
    for (auto kind : {CollectiveKind::all_gather, CollectiveKind::reduce_scatter}) {
        Fabric f(small_topology(2));
        CAPTURE(name(kind));
        const double S = 64e6;
        const double t = run_one(f, kind, ranks, S);
        CHECK(rel_diff(t, closed_form(f.cluster, kind, ranks, S)) < 0.01);
    }
}

TEST_CASE("collectives: send matches alpha + S / B") {
    // collectives.hpp: T = alpha + S / B with alpha = route latency + step latency, plus the launch latency.
    for (auto endpoints : {std::pair{0, 5}, std::pair{2, 8 + 2}}) {
        // Not a structured binding: CAPTURE's lambda cannot capture one under clang 14 (the sanitizer build).
        const int src = endpoints.first, dst = endpoints.second;
        Fabric f(small_topology(2));
        CAPTURE(src);
        CAPTURE(dst);
        const double S = 64e6;
        Time end = Time::max();
        f.coll.send(src, dst, S, [&] { end = f.sim.now(); });
        f.sim.run();
        const Route r = f.cluster.route(src, dst);
        const double B = route_bandwidth(f.cluster, r);
        const double expected = kNcclLaunchLatencyS + r.latency.to_seconds() + kNcclStepLatencyS + S / B;
        CHECK(rel_diff(end.to_seconds(), expected) < 0.01);
        // Never faster than launch + wire latency + S / B.
        CHECK(end.to_seconds() >= kNcclLaunchLatencyS + r.latency.to_seconds() + S / B - 1e-12);
    }
    Fabric f(small_topology(1));
    CHECK_THROWS_AS(f.coll.send(3, 3, 1e6, [] {}), InternalError);
}

TEST_CASE("collectives: a group of one rank completes at once") {
    Fabric f(small_topology(1));
    CHECK(run_one(f, CollectiveKind::all_reduce, {4}, 1e9) == 0.0);
}

TEST_CASE(
    "collectives: two all-reduces over the same 8 GPUs at once each take the time of half the bandwidth") {
    const std::vector<int> ranks = {0, 1, 2, 3, 4, 5, 6, 7};
    const double S = 128e6;
    Fabric f(small_topology(1));
    Time end_a = Time::max(), end_b = Time::max();
    f.coll.run(CollectiveKind::all_reduce, ranks, S, [&] { end_a = f.sim.now(); });
    f.coll.run(CollectiveKind::all_reduce, ranks, S, [&] { end_b = f.sim.now(); });
    f.sim.run();
    const double half = closed_form(f.cluster, CollectiveKind::all_reduce, ranks, S, 0.5);
    CHECK(rel_diff(end_a.to_seconds(), half) < 0.01);
    CHECK(rel_diff(end_b.to_seconds(), half) < 0.01);
    // And clearly slower than one alone.
    Fabric g(small_topology(1));
    const double alone = run_one(g, CollectiveKind::all_reduce, ranks, S);
    CHECK(end_a.to_seconds() > 1.8 * alone);
}

TEST_CASE("collectives: two 2-node rings whose GPUs share a NIC split its bandwidth") {
    // 4 NICs per node: GPUs 0 and 1 of a node share NIC 0. Rings {0, 8} and {1, 9} both cross on rail 0.
    const double S = 64e6;
    Fabric f(small_topology(2, 8, /*nics_per_node=*/4));
    Time end_a = Time::max(), end_b = Time::max();
    f.coll.run(CollectiveKind::all_reduce, {0, 8}, S, [&] { end_a = f.sim.now(); });
    f.coll.run(CollectiveKind::all_reduce, {1, 9}, S, [&] { end_b = f.sim.now(); });
    f.sim.run();
    const double half = closed_form(f.cluster, CollectiveKind::all_reduce, {0, 8}, S, 0.5);
    CHECK(rel_diff(end_a.to_seconds(), half) < 0.01);
    CHECK(rel_diff(end_b.to_seconds(), half) < 0.01);
    // Rings on different NICs do not interfere.
    Fabric g(small_topology(2, 8, /*nics_per_node=*/4));
    Time end_c = Time::max(), end_d = Time::max();
    g.coll.run(CollectiveKind::all_reduce, {0, 8}, S, [&] { end_c = g.sim.now(); });
    g.coll.run(CollectiveKind::all_reduce, {2, 10}, S, [&] { end_d = g.sim.now(); });
    g.sim.run();
    const double alone = closed_form(g.cluster, CollectiveKind::all_reduce, {0, 8}, S);
    CHECK(rel_diff(end_c.to_seconds(), alone) < 0.01);
    CHECK(rel_diff(end_d.to_seconds(), alone) < 0.01);
}

TEST_CASE("collectives: channels_for") {
    CHECK(Collectives::channels_for({0, 1, 2, 3, 4, 5, 6, 7}, 8) == 1);  // one node
    CHECK(Collectives::channels_for({0, 8, 16, 24}, 8) == 1);            // one GPU per node
    CHECK(Collectives::channels_for({0, 1, 8, 9, 16, 17}, 8) == 2);
    CHECK(Collectives::channels_for({0, 1, 2, 3, 8, 9, 10, 11}, 8) == 4);
    CHECK(Collectives::channels_for({0, 1, 8}, 8) == 1);  // irregular: one ring
    // 36 members on each of two 72-GPU NVLink domains: NCCL's ring search stops at kMaxRingChannels rings,
    // each still a ring through every member, entering each node at its own rotation.
    std::vector<int> wide;
    for (int node = 0; node < 2; ++node)
        for (int j = 0; j < 36; ++j)
            wide.push_back(node * 72 + 2 * j);
    REQUIRE(Collectives::channels_for(wide, 72) == kMaxRingChannels);
    for (int c : {0, kMaxRingChannels - 1}) {
        const auto edges = Collectives::ring_edges(wide, 72, c, kMaxRingChannels);
        REQUIRE(edges.size() == wide.size());
        std::vector<int> out(144, 0), in(144, 0);
        for (const auto& e : edges) {
            ++out[static_cast<std::size_t>(e.first)];
            ++in[static_cast<std::size_t>(e.second)];
        }
        for (int r : wide) {
            CHECK(out[static_cast<std::size_t>(r)] == 1);
            CHECK(in[static_cast<std::size_t>(r)] == 1);
        }
        // Node 0 is entered at member c (the wrap-around edge's destination), node 1 at member c - 1 mod 36.
        CHECK(edges.back().second == wide[static_cast<std::size_t>(c)]);
    }
}

TEST_CASE("collectives: ring edges of a multi-node group with 2 GPUs per node") {
    // Local indices 2 and 5 on each of 3 nodes.
    const int gpn = 8;
    const std::vector<int> ranks = {2, 5, 8 + 2, 8 + 5, 16 + 2, 16 + 5};
    const int channels = Collectives::channels_for(ranks, gpn);
    REQUIRE(channels == 2);
    std::vector<int> rail_out_of_node0(static_cast<std::size_t>(channels), -1);
    for (int c = 0; c < channels; ++c) {
        CAPTURE(c);
        const auto edges = Collectives::ring_edges(ranks, gpn, c, channels);
        REQUIRE(edges.size() == ranks.size());
        std::multiset<int> srcs, dsts;
        for (auto [a, b] : edges) {
            srcs.insert(a);
            dsts.insert(b);
            CHECK(a != b);
        }
        // Each GPU once as a source and once as a destination: a single ring through all members.
        CHECK(srcs == std::multiset<int>(ranks.begin(), ranks.end()));
        CHECK(dsts == std::multiset<int>(ranks.begin(), ranks.end()));
        // Following the edges from the first source visits every member before returning.
        int at = edges.front().first;
        std::set<int> seen;
        for (std::size_t i = 0; i < edges.size(); ++i) {
            seen.insert(at);
            auto it = std::find_if(edges.begin(), edges.end(), [&](const auto& e) { return e.first == at; });
            REQUIRE(it != edges.end());
            at = it->second;
        }
        CHECK(at == edges.front().first);
        CHECK(seen.size() == ranks.size());
        // Node-crossing edges keep the local index (same NIC rail), except possibly the wrap-around edge.
        for (std::size_t i = 0; i + 1 < edges.size(); ++i) {
            auto [a, b] = edges[i];
            if (a / gpn != b / gpn) {
                CHECK(a % gpn == b % gpn);
                if (a / gpn == 0) rail_out_of_node0[static_cast<std::size_t>(c)] = a % gpn;
            }
        }
        // Each node is entered once and left once: 3 node-crossing edges in total.
        int crossings = 0;
        for (auto [a, b] : edges)
            crossings += a / gpn != b / gpn ? 1 : 0;
        CHECK(crossings == 3);
    }
    // The two channels leave node 0 on different rails (so both NICs of the pair carry traffic).
    CHECK(rail_out_of_node0[0] != -1);
    CHECK(rail_out_of_node0[1] != -1);
    CHECK(rail_out_of_node0[0] != rail_out_of_node0[1]);
    // Degenerate groups.
    CHECK(Collectives::ring_edges({4}, gpn, 0, 1).empty());
    CHECK(Collectives::ring_edges({0, 1, 2}, gpn, 0, 1) ==
          std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 0}});
}

TEST_CASE("collectives: busbw_factor") {
    CHECK(busbw_factor(CollectiveKind::all_reduce, 8) == doctest::Approx(2.0 * 7 / 8));
    CHECK(busbw_factor(CollectiveKind::all_gather, 8) == doctest::Approx(7.0 / 8));
    CHECK(busbw_factor(CollectiveKind::reduce_scatter, 4) == doctest::Approx(3.0 / 4));
    CHECK(busbw_factor(CollectiveKind::all_reduce, 1) == 0.0);
}

TEST_CASE("collectives: all-to-all sends S / n from every member to every other (closed-form volumes)") {
    const std::vector<int> ranks = {0, 1, 2, 3, 8, 9, 10, 11};
    const double S = 64e6;
    const auto flows = Collectives::all_to_all_flows(ranks, S);
    REQUIRE(flows.size() == 8 * 7);
    for (int r : ranks) {
        double out = 0, in = 0;
        for (const auto& f : flows) {
            CHECK(f.src != f.dst);
            if (f.src == r) out += f.bytes;
            if (f.dst == r) in += f.bytes;
        }
        CHECK(out == doctest::Approx(7.0 / 8.0 * S));  // (n - 1) / n of its bytes leave each rank
        CHECK(in == doctest::Approx(7.0 / 8.0 * S));
    }
    CHECK(Collectives::all_to_all_flows({5}, S).empty());
    CHECK(busbw_factor(CollectiveKind::all_to_all, 8) == doctest::Approx(7.0 / 8));
}

TEST_CASE(
    "collectives: all-to-all inside one node is bound by each GPU's NVLink: T = launch + alpha + (n-1)/n S / "
    "B") {
    // 8 GPUs on one NVSwitch: each GPU's NVLink up carries 7 flows of S / 8; the switch is not a bottleneck.
    const std::vector<int> ranks = {0, 1, 2, 3, 4, 5, 6, 7};
    const double S = 256e6;
    Fabric f(small_topology(2));
    const double t = run_one(f, CollectiveKind::all_to_all, ranks, S);
    const double B = 300e9 * f.cluster.gpu().nvlink_efficiency;
    const double hand = kNcclLaunchLatencyS + f.cluster.route(0, 1).latency.to_seconds() + 7.0 / 8.0 * S / B;
    CHECK(rel_diff(t, hand) < 0.01);
    // Across two nodes (4 + 4 GPUs): half of each rank's bytes (4 flows of S / 8) leave its node through its
    // one NIC, so it takes at least (S / 2) / (NIC bandwidth x efficiency), longer than the NVLink bound.
    Fabric g(small_topology(2));
    const double t2 = run_one(g, CollectiveKind::all_to_all, {0, 1, 2, 3, 8, 9, 10, 11}, S);
    const double nic = 25e9 * kScaleOutEfficiency;
    CHECK(t2 >= 0.5 * S / nic);
    CHECK(t2 > t);
}
