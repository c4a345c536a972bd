#include "coupled_route.hpp"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace trainsim::detail {

std::vector<std::vector<int>> members_by_node(const std::vector<int>& ranks, int gpus_per_node) {
    // A node's index in `nodes`, by node id (a group of 14,544 ranks spans 3,636 nodes: a scan of the nodes
    // seen so far for every rank was quadratic).
    std::vector<std::vector<int>> nodes;
    std::unordered_map<int, std::size_t> index_of_node;
    index_of_node.reserve(ranks.size());
    for (int r : ranks) {
        const auto [it, added] = index_of_node.try_emplace(r / gpus_per_node, nodes.size());
        if (added) nodes.emplace_back();
        nodes[it->second].push_back(r);
    }
    return nodes;
}

bool regular(const std::vector<std::vector<int>>& nodes) {
    return std::all_of(nodes.begin(), nodes.end(),
                       [&](const std::vector<int>& n) { return n.size() == nodes.front().size(); });
}

void append_edge(Route& into, const Route& r) {
    into.links.insert(into.links.end(), r.links.begin(), r.links.end());
    into.latency = std::max(into.latency, r.latency);
}

namespace {

/// The least of each link's bandwidth divided by its uses over all of `routes`' links: the uses counted in a
/// per-thread table indexed by link, zeroed again after, so the cost is linear in the routes (sorting a DP
/// ring's concatenated routes, a million link ids per communicator, took a fifth of a 130,896-GPU run). The
/// least of the same shares as by sorting, so the same value.
double least_share(const std::vector<const Route*>& routes, const std::vector<Link>& links) {
    thread_local std::vector<int> uses;
    if (uses.size() < links.size()) uses.resize(links.size(), 0);
    for (const Route* r : routes)
        for (int l : r->links)
            ++uses[static_cast<std::size_t>(l)];
    double bw = std::numeric_limits<double>::infinity();
    for (const Route* r : routes)
        for (int l : r->links) {
            int& n = uses[static_cast<std::size_t>(l)];
            if (n == 0) continue;  // counted at its first use
            bw = std::min(bw,
                          links[static_cast<std::size_t>(l)].bandwidth.bytes_per_s / static_cast<double>(n));
            n = 0;
        }
    return bw;
}

}  // namespace

double coupled_rate(const Route& route, const std::vector<Link>& links) {
    return least_share({&route}, links);
}

double joint_rate(const std::vector<Route>& routes, const std::vector<Link>& links) {
    std::vector<const Route*> all;
    all.reserve(routes.size());
    for (const Route& r : routes)
        all.push_back(&r);
    return least_share(all, links);
}

}  // namespace trainsim::detail
