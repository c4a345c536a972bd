// The node-spanning all-reduce algorithms of NCCL's tuner: the double binary tree and SHARP (CollNet), as
// coupled routes over the cluster's links (include/trainsim/collectives.hpp, kNcclTree* and kSharp*).
#include <algorithm>
#include <cmath>

#include "coupled_route.hpp"
#include "trainsim/collectives.hpp"

namespace trainsim {

namespace {

/// The lowest set bit of i > 0.
int lowbit(int i) {
    return i & -i;
}

/// Tree 0 over nodes 1..n (1-based, in-order): node i of lowest bit b hangs below i - b or i + b (the one
/// whose bit 2b is clear), climbing further while that is beyond n; the root is the largest power of two <=
/// n. Leaves are the odd i (0-based: even nodes), so the mirror or shift of tree 1 makes them interior.
std::vector<std::pair<int, int>> in_order_tree(int n) {
    std::vector<std::pair<int, int>> edges;
    int root = 1;
    while (root * 2 <= n)
        root *= 2;
    for (int i = 1; i <= n; ++i) {
        if (i == root) continue;
        int p = i;
        do {
            const int b = lowbit(p);
            p = (p & (2 * b)) ? p - b : p + b;
        } while (p > n);
        edges.emplace_back(p - 1, i - 1);
    }
    return edges;
}

}  // namespace

std::vector<std::pair<int, int>> Collectives::tree_edges(int nodes, int tree) {
    auto edges = in_order_tree(nodes);
    if (tree == 0) return edges;
    auto map = [&](int r) { return nodes % 2 == 0 ? nodes - 1 - r : (r + 1) % nodes; };
    for (auto& [p, c] : edges) {
        p = map(p);
        c = map(c);
    }
    return edges;
}

double nccl_tree_correction(int protocol, double bytes) {
    if (protocol < 0 || protocol > 2 || bytes < 64) return 1.0;
    const int k = static_cast<int>(std::floor(std::log2(bytes / 64.0)));
    return k < 24 ? kNcclTreeCorrection[protocol][k] : 1.0;
}

void Collectives::append_tree(Route& r, Time& wire, const std::vector<std::vector<int>>& nodes, int c,
                              int tree) {
    const int n_nodes = static_cast<int>(nodes.size());
    auto head = [&](int k) { return nodes[static_cast<std::size_t>(k)][static_cast<std::size_t>(c)]; };
    for (auto [p, ch] : tree_edges(n_nodes, tree))
        for (const Route* e : {&route(head(ch), head(p)), &route(head(p), head(ch))}) {
            detail::append_edge(r, *e);
            wire = std::max(wire, e->latency);
        }
}

void Collectives::add_tree(Communicator& comm, const std::vector<std::vector<int>>& nodes) {
    const int n_nodes = static_cast<int>(nodes.size());
    const int g = static_cast<int>(nodes.front().size());
    comm.tree_depth = static_cast<int>(std::floor(std::log2(n_nodes)));
    for (int c = 0; c < g; ++c) {
        Route r;
        for (int t = 0; t < 2; ++t) {
            append_tree(r, comm.tree_inter_wire, nodes, c, t);
            for (const auto& members : nodes)  // the chain inside each node, from its head, up and down
                for (int j = 0; j + 1 < g; ++j) {
                    const int a = members[static_cast<std::size_t>((c + j) % g)];
                    const int b = members[static_cast<std::size_t>((c + j + 1) % g)];
                    for (const Route* e : {&route(a, b), &route(b, a)}) {
                        detail::append_edge(r, *e);
                        comm.tree_intra_wire = std::max(comm.tree_intra_wire, e->latency);
                    }
                }
        }
        count_link_uses(r);  // counted once here, not per flow (FlowNetwork::set_distinct_links)
        comm.tree_routes.push_back(std::move(r));
    }
    comm.tree_bandwidth = detail::joint_rate(comm.tree_routes, cluster_.links());
}

void Collectives::add_sharp(Communicator& comm, const std::vector<std::vector<int>>& nodes) {
    const auto n_nodes = nodes.size();
    const auto g = nodes.front().size();
    // Inside the node, per rail c: with NVLS every member's NVLink up and down once (a ring through the
    // members: each carries S in all, as NVLS's reduce and multicast move each member's data once); without
    // it NCCL's reduce-scatter and all-gather, each a chain of g - 1 edges from member c (over the g rails
    // each member sends (g - 1) / g of S per pass).
    const bool nvls = cluster_.gpu().nvlink_sharp && cluster_.spec().scale_up_kind == "nvswitch";
    const std::size_t edges = nvls ? g : g - 1;
    const int passes = nvls ? 1 : 2;
    for (std::size_t c = 0; c < g; ++c) {
        Route r;
        for (std::size_t k = 0; k < n_nodes; ++k)  // each node's rail-c NIC path up and down, once
            detail::append_edge(r, route(nodes[k][c], nodes[(k + 1) % n_nodes][c]));
        for (const auto& members : nodes)
            for (int pass = 0; pass < passes; ++pass)
                for (std::size_t j = 0; j < edges && g > 1; ++j) {
                    const Route& e = route(members[(c + j) % g], members[(c + j + 1) % g]);
                    r.links.insert(r.links.end(), e.links.begin(), e.links.end());
                    comm.sharp_intra_wire = std::max(comm.sharp_intra_wire, e.latency);
                }
        const double rate = detail::coupled_rate(r, cluster_.links());
        comm.sharp_bandwidth = c == 0 ? rate : std::min(comm.sharp_bandwidth, rate);
        count_link_uses(r);
        comm.sharp_routes.push_back(std::move(r));
    }
}

}  // namespace trainsim

namespace trainsim {

void Collectives::add_nvls_tree(Communicator& comm, const std::vector<std::vector<int>>& nodes) {
    const int g = static_cast<int>(nodes.front().size());
    Time wire;  // the tree edges' wire latency, as comm.tree_inter_wire
    for (int c = 0; c < g; ++c) {
        Route r;
        for (int t = 0; t < 2; ++t)
            append_tree(r, wire, nodes, c, t);
        count_link_uses(r);
        comm.nvls_tree_routes.push_back(std::move(r));
    }
    comm.nvls_tree_bandwidth = detail::joint_rate(comm.nvls_tree_routes, cluster_.links());
    // NVLS inside every node: each member's NVLink up and down once (a ring through the node's members, as
    // the one-node NVLS route).
    for (const auto& members : nodes)
        for (int j = 0; j < g; ++j)
            detail::append_edge(comm.nvls_tree_nvlink, route(members[static_cast<std::size_t>(j)],
                                                             members[static_cast<std::size_t>((j + 1) % g)]));
    comm.nvls_tree_nvlink_bandwidth = detail::coupled_rate(comm.nvls_tree_nvlink, cluster_.links());
    count_link_uses(comm.nvls_tree_nvlink);
}

}  // namespace trainsim
