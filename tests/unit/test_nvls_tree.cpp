// NCCL's NVLS_TREE all-reduce (collectives.hpp kNvlsTreeIntraLatencyS): NVLS inside the node, the double
// binary tree across nodes.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "collective_test_helpers.hpp"
#include "test_helpers.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/config.hpp"

using namespace trainsim;
using trainsim::test::algorithm_of;
using trainsim::test::iota;
using trainsim::test::rel_diff;
using trainsim::test::small_topology;

namespace {

const std::string kSrc = TRAINSIM_SOURCE_DIR;

TopologySpec dgx_h100(int nodes) {
    TopologySpec t = parse_topology(read_json_file(kSrc + "/topologies/dgx-h100.json"), "dgx-h100.json");
    t.nodes = nodes;
    return t;
}

bool has_nvls_tree(const Cluster& c, const std::vector<int>& ranks) {
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    Collectives coll(sim, net, c);
    return !coll.communicator(ranks).nvls_tree_routes.empty();
}

}  // namespace

TEST_CASE("nvls_tree: a 64 MB all-reduce over 4 DGX H100 nodes, hand-computed") {
    const Cluster c(dgx_h100(4));
    const auto ranks = iota(32);
    const double S = 64e6;
    REQUIRE(algorithm_of(c, ranks, S) == Collectives::Algorithm::nvls_tree);
    // By hand: 8 rails (channels); over 4 nodes the trees put 4 streams of S / 16 on an interior node's NIC
    // (tree 0: node 1 up to 3, down to 0 and 2; tree 1: node 1 up to 2), at B = 50 GB/s x 0.92; no tree
    // factor (NCCL applies none to NVLS_TREE on Hopper). NVLS beside it: every NVLink up and down carries
    // S / kNvlsEfficiency at 450 GB/s x 0.80 (NVLink efficiency) = 274 GB/s of S: 234 us, under the trees'
    // 348 us. Latency: 25 us (NCCL's NVLS_TREE intra latency) + 2 x floor(log2 4) x (NIC 2 us + leaf 0.5 us +
    // Simple step 1 us).
    const double B = 50e9 * kScaleOutEfficiency;
    const double trees = S / 16 / (B / 4);
    const double nvls = S / kNvlsEfficiency / (450e9 * 0.80);
    REQUIRE(nvls < trees);
    const double hand = 25e-6 + 4 * 3.5e-6 + trees;
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, ranks, S), hand) < 1e-3);
    // The ring it replaces: 62 steps of 3.5 us and 2 x 31/32 x S / (8 B).
    const double ring = 8e-6 + 62 * 3.5e-6 + 2.0 * 31 / 32 * S / 8 / B;
    CHECK(hand < ring);
}

TEST_CASE("nvls_tree: over 2 nodes the NICs carry S / g each way and NVLS binds, hand-computed") {
    const Cluster c(dgx_h100(2));
    const double S = 1e9;
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    Collectives coll(sim, net, c);
    const auto& comm = coll.communicator(iota(16));
    REQUIRE(comm.nvls_tree_routes.size() == 8);
    // NVLS_TREE's flows by hand: the trees' one edge per tree puts 2 streams of S / 16 on each node's NIC
    // (up in one tree, down in the other): S / 16 / (B / 2) = 1.36 ms; the NVLS flow carries S /
    // kNvlsEfficiency over 450 GB/s x 0.80 = 3.65 ms and binds (+ its NVLink latency 1 us).
    const double B = 50e9 * kScaleOutEfficiency;
    CHECK(rel_diff(comm.nvls_tree_bandwidth, B / 2) < 1e-9);
    CHECK(rel_diff(comm.nvls_tree_nvlink_bandwidth, 450e9 * 0.80) < 1e-9);
    Time end;
    for (const Route& r : comm.nvls_tree_routes)
        net.start_flow(r, S / 16, [&] { end = std::max(end, sim.now()); });
    net.start_flow(comm.nvls_tree_nvlink, S / kNvlsEfficiency, [&] { end = std::max(end, sim.now()); });
    sim.run();
    const double nvls = 1e-6 + S / kNvlsEfficiency / (450e9 * 0.80);
    CHECK(rel_diff(end.to_seconds(), nvls) < 1e-3);
    // The tuner takes it (as NCCL's does over 2 nodes): the tree's chains move about 2 S per NVLink direction
    // (each GPU sends up the chain and back down it, over the 8 channels) at 360 GB/s, ~5.5 ms. Its time:
    // the delay (25 us + 2 x 1 x 3.5 us, less the trees' 2.5 us route latency, which the tree flows add),
    // then the NVLS flow.
    REQUIRE(Collectives::plan(CollectiveKind::all_reduce, comm, S).algorithm ==
            Collectives::Algorithm::nvls_tree);
    const double hand = 25e-6 + 2 * 3.5e-6 - 2.5e-6 + nvls;
    CHECK(rel_diff(isolated_collective_seconds(c, CollectiveKind::all_reduce, iota(16), S), hand) < 1e-3);
    CHECK(comm.tree_bandwidth < comm.nvls_tree_bandwidth);
}

TEST_CASE("nvls_tree: only across nodes, with 2+ GPUs per node, on NVLink SHARP GPUs and NVSwitch nodes") {
    const Cluster h100(dgx_h100(4));
    CHECK(has_nvls_tree(h100, iota(32)));
    CHECK(has_nvls_tree(h100, {0, 1, 8, 9, 16, 17}));
    CHECK_FALSE(has_nvls_tree(h100, iota(8)));         // one node: NVLS
    CHECK_FALSE(has_nvls_tree(h100, {0, 8, 16, 24}));  // one GPU per node: NCCL has no NVLS (gpuCount < 2)
    CHECK_FALSE(has_nvls_tree(h100, {0, 1, 8}));       // irregular: ring only
    CHECK_FALSE(has_nvls_tree(Cluster(small_topology(4)), iota(32)));  // A100: no NVLink SHARP
    TopologySpec pcie = parse_topology(read_json_file(kSrc + "/topologies/pcie-h100.json"), "pcie-h100.json");
    pcie.nodes = 4;
    const Cluster p(pcie);
    CHECK_FALSE(has_nvls_tree(p, iota(2 * p.spec().gpus_per_node)));
    // Small all-reduces stay with the low-latency protocols (LL ring or tree): NVLS_TREE is Simple only.
    CHECK(algorithm_of(h100, iota(32), 4096) != Collectives::Algorithm::nvls_tree);
}
