#include <doctest/doctest.h>

#include <vector>

#include "test_helpers.hpp"
#include "trainsim/collectives.hpp"

using namespace trainsim;
using trainsim::test::rel_diff;
using trainsim::test::small_topology;

namespace {

double time_of(const TopologySpec& t, CollectiveKind kind, const std::vector<int>& ranks, double bytes) {
    return isolated_collective_seconds(Cluster(t), kind, ranks, bytes);
}

TopologySpec h100_node() {
    TopologySpec t = small_topology(1);
    t.gpu = "H100-SXM5-80GB";
    t.nvlink_bandwidth = Bandwidth::GBps(450);
    return t;
}

const std::vector<int> kNode = {0, 1, 2, 3, 4, 5, 6, 7};

}  // namespace

TEST_CASE("collective tuner: small all-reduce uses LL (half bandwidth, lowest latency)") {
    const TopologySpec t = small_topology(1);
    const Cluster c(t);
    const double B = 300e9 * c.gpu().nvlink_efficiency;
    const double S = 64e3;
    const auto& ll = kNcclProtocols[0];
    CHECK(std::string(ll.name) == "LL");
    const double expected =
        ll.launch_s + 14 * (1e-6 + ll.step_s) + 2.0 * 7 / 8 * S / (B * ll.bandwidth_factor);
    CHECK(rel_diff(time_of(t, CollectiveKind::all_reduce, kNode, S), expected) < 0.01);
}

TEST_CASE("collective tuner: large all-reduce on A100 is a Simple ring, on H100 NVLS") {
    const double S = 4e9;
    {
        const TopologySpec t = small_topology(1);
        const double B = 300e9 * Cluster(t).gpu().nvlink_efficiency;
        const double ring = kNcclLaunchLatencyS + 14 * (1e-6 + kNcclStepLatencyS) + 2.0 * 7 / 8 * S / B;
        CHECK(rel_diff(time_of(t, CollectiveKind::all_reduce, kNode, S), ring) < 0.01);
    }
    {
        const TopologySpec t = h100_node();
        const double B = 450e9 * Cluster(t).gpu().nvlink_efficiency;
        const double nvls = kNvlsLatencyS + 1e-6 + S / (B * kNvlsEfficiency);
        const double t_sim = time_of(t, CollectiveKind::all_reduce, kNode, S);
        CHECK(rel_diff(t_sim, nvls) < 0.01);
        // busbw = 2(n-1)/n · S / t: NVIDIA's ~480 GB/s for NVLS on DGX H100.
        CHECK(busbw_factor(CollectiveKind::all_reduce, 8) * S / t_sim / 1e9 ==
              doctest::Approx(478).epsilon(0.02));
        // All-gather has no NVLS path here: it stays a ring.
        const double ag = kNcclLaunchLatencyS + 7 * (1e-6 + kNcclStepLatencyS) + 7.0 / 8 * S / B;
        CHECK(rel_diff(time_of(t, CollectiveKind::all_gather, kNode, S), ag) < 0.01);
    }
}

TEST_CASE("collective tuner: NVLS is not used across nodes or for two GPUs") {
    TopologySpec t = h100_node();
    t.nodes = 2;
    const double S = 4e9;
    const double ring_bw_bound = 2.0 * 1 / 2 * S / (450e9 * 0.8);  // 2 GPUs in one node: a 2-rank ring
    CHECK(time_of(t, CollectiveKind::all_reduce, {0, 1}, S) >= ring_bw_bound);
    // 16 GPUs over 2 nodes: bounded by the NICs, far slower than NVLS would be.
    std::vector<int> all;
    for (int i = 0; i < 16; ++i)
        all.push_back(i);
    // (NCCL's NVLS_TREE wins here: on 2 nodes its trees send S / 8 per NIC each way, the least any algorithm
    // can, instead of the ring's 2(n-1)/n S / 8; the NICs, 8 x 25 GB/s x 0.92, bind.)
    const double nvls_if_allowed = S / (450e9 * 0.8 * kNvlsEfficiency);
    const double nic_bound = S / 8 / (25e9 * kScaleOutEfficiency);
    CHECK(nic_bound > 1.4 * nvls_if_allowed);
    CHECK(time_of(t, CollectiveKind::all_reduce, all, S) >= nic_bound);
}
