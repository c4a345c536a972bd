// Helpers shared by the collective algorithms of sim/collectives (private to the module).
#pragma once

#include <vector>

#include "trainsim/cluster.hpp"

namespace trainsim::detail {

/// The members of `ranks` grouped by node, nodes in order of first appearance, members in the order given.
std::vector<std::vector<int>> members_by_node(const std::vector<int>& ranks, int gpus_per_node);

/// True when every node of `nodes` holds the same number of members.
bool regular(const std::vector<std::vector<int>>& nodes);

/// Appends `r`'s links to `into` and raises its latency to r's when larger (a coupled route's latency is its
/// slowest edge's).
void append_edge(Route& into, const Route& r);

/// The idle rate of one coupled flow on `route`, bytes/s: the least of each link's bandwidth divided by the
/// number of times the route lists it (max-min sharing counts a link once per edge that uses it).
double coupled_rate(const Route& route, const std::vector<Link>& links);

/// The idle rate of each of the coupled flows on `routes` when they all run at once at one rate (the channels
/// of one collective), bytes/s: coupled_rate of their links counted over all routes together (channels that
/// share a link, such as the tree's intra-node chains, each get their share of it).
double joint_rate(const std::vector<Route>& routes, const std::vector<Link>& links);

}  // namespace trainsim::detail
