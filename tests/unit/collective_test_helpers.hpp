// Helpers shared by the collective-algorithm unit tests (test_tree_sharp, test_nvls_tree, test_three_tier).
#pragma once

#include <numeric>
#include <vector>

#include "trainsim/collectives.hpp"

namespace trainsim::test {

/// Ranks from, from + 1, ..., from + n - 1 (n >= 0).
inline std::vector<int> iota(int n, int from = 0) {
    std::vector<int> r(static_cast<std::size_t>(n));
    std::iota(r.begin(), r.end(), from);
    return r;
}

/// The algorithm the tuner plans for an all-reduce of `bytes` over `ranks` of `c` (a fresh engine and
/// network).
inline Collectives::Algorithm algorithm_of(const Cluster& c, const std::vector<int>& ranks, double bytes) {
    Simulator sim;
    FlowNetwork net(sim, link_capacities(c));
    Collectives coll(sim, net, c);
    return Collectives::plan(CollectiveKind::all_reduce, coll.communicator(ranks), bytes).algorithm;
}

}  // namespace trainsim::test
