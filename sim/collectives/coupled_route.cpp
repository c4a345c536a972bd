#include "coupled_route.hpp"

#include <algorithm>
#include <limits>

namespace trainsim::detail {

std::vector<std::vector<int>> members_by_node(const std::vector<int>& ranks, int gpus_per_node) {
    std::vector<std::vector<int>> nodes;
    std::vector<int> node_ids;
    for (int r : ranks) {
        const int node = r / gpus_per_node;
        auto it = std::find(node_ids.begin(), node_ids.end(), node);
        if (it == node_ids.end()) {
            node_ids.push_back(node);
            nodes.push_back({r});
        } else {
            nodes[static_cast<std::size_t>(it - node_ids.begin())].push_back(r);
        }
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

double coupled_rate(const Route& route, const std::vector<Link>& links) {
    std::vector<int> sorted = route.links;
    std::sort(sorted.begin(), sorted.end());
    double bw = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < sorted.size();) {
        std::size_t e = k;
        while (e < sorted.size() && sorted[e] == sorted[k])
            ++e;
        bw = std::min(bw, links[static_cast<std::size_t>(sorted[k])].bandwidth.bytes_per_s /
                              static_cast<double>(e - k));
        k = e;
    }
    return bw;
}

double joint_rate(const std::vector<Route>& routes, const std::vector<Link>& links) {
    Route all;
    for (const Route& r : routes)
        all.links.insert(all.links.end(), r.links.begin(), r.links.end());
    return coupled_rate(all, links);
}

}  // namespace trainsim::detail
