#include "trainsim/collectives.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <memory>

#include <fmt/format.h>

#include "coupled_route.hpp"
#include "trainsim/errors.hpp"

namespace trainsim {

namespace {
/// Time::seconds(kNcclLaunchLatencyS), converted once (a P2P message converted it on each send).
const Time kLaunchLatency = Time::seconds(kNcclLaunchLatencyS);
}  // namespace

Collectives::Collectives(Simulator& sim, FlowNetwork& net, const Cluster& cluster)
    : sim_(sim), net_(net), cluster_(cluster), route_cache_(static_cast<std::size_t>(cluster.gpus())) {}

const Route& Collectives::route(int src, int dst) {
    auto& row = route_cache_[static_cast<std::size_t>(src)];
    for (auto& [d, r] : row)
        if (d == dst) return r;
    row.emplace_back(dst, cluster_.route(src, dst));
    count_link_uses(row.back().second);  // counted once here, not per flow (FlowNetwork::set_distinct_links)
    return row.back().second;
}

int Collectives::channels_for(const std::vector<int>& ranks, int gpus_per_node) {
    std::map<int, int> per_node;
    for (int r : ranks)
        ++per_node[r / gpus_per_node];
    if (per_node.size() <= 1) return 1;
    int g = per_node.begin()->second;
    for (auto& [node, count] : per_node)
        if (count != g) return 1;  // irregular group: one ring
    return std::min(g, kMaxRingChannels);
}

std::vector<std::pair<int, int>> Collectives::ring_edges(const std::vector<int>& ranks, int gpus_per_node,
                                                         int channel, int channels) {
    std::vector<std::pair<int, int>> edges;
    const int n = static_cast<int>(ranks.size());
    if (n < 2) return edges;
    std::vector<int> order;
    if (channels <= 1) {
        order = ranks;
    } else {
        const auto nodes = detail::members_by_node(ranks, gpus_per_node);
        const int g = static_cast<int>(nodes.front().size());  // members per node (channels_for: regular)
        for (std::size_t k = 0; k < nodes.size(); ++k) {
            const int start = ((channel - static_cast<int>(k)) % g + g) % g;
            for (int j = 0; j < g; ++j)
                order.push_back(nodes[k][static_cast<std::size_t>((start + j) % g)]);
        }
    }
    for (int i = 0; i < n; ++i)
        edges.emplace_back(order[static_cast<std::size_t>(i)], order[static_cast<std::size_t>((i + 1) % n)]);
    return edges;
}

const Collectives::Communicator& Collectives::communicator(const std::vector<int>& ranks) {
    auto it = communicators_.find(ranks);
    if (it != communicators_.end()) return it->second;
    Communicator comm;
    const int n = static_cast<int>(ranks.size());
    comm.size = n;
    comm.ranks = ranks;
    const int gpn = cluster_.spec().gpus_per_node;
    const auto& links = cluster_.links();
    comm.channels = channels_for(ranks, gpn);
    // NCCL's ring moves in lockstep: a chunk advances one hop per step on every edge at once, so a channel
    // progresses at the pace of its slowest edge. Each channel is therefore one coupled flow over the links
    // of all its edges (a link used by two edges counts twice in the max-min sharing); bandwidth an edge
    // cannot use because of the slowest one is left to other flows.
    for (int c = 0; c < comm.channels; ++c) {
        Route combined;
        // Straight from the cluster, not cached: a channel's edges are its own (each channel enters a
        // node's members at another one), so the cache would hold every edge of every channel of every
        // communicator, used once (Mixtral 8x7B on 130,896 GB200: DP rings of 65,448 ranks x 32 channels).
        for (auto [a, b] : ring_edges(ranks, gpn, c, comm.channels))
            detail::append_edge(combined, cluster_.route(a, b));
        comm.wire = std::max(comm.wire, combined.latency);
        const double bw = detail::coupled_rate(combined, links);
        comm.ring_bandwidth = c == 0 ? bw : std::min(comm.ring_bandwidth, bw);
        count_link_uses(combined);  // every flow of this channel is on it
        comm.channel_routes.push_back(std::move(combined));
    }
    const bool one_node = n > 2 && std::all_of(ranks.begin(), ranks.end(), [&](int r) {
                              return cluster_.node_of(r) == cluster_.node_of(ranks.front());
                          });
    if (one_node && cluster_.gpu().nvlink_sharp && cluster_.spec().scale_up_kind == "nvswitch") {
        comm.nvls_bandwidth = std::numeric_limits<double>::infinity();
        for (int k = 0; k < n; ++k) {
            const Route& r =
                route(ranks[static_cast<std::size_t>(k)], ranks[static_cast<std::size_t>((k + 1) % n)]);
            comm.nvls_route.links.insert(comm.nvls_route.links.end(), r.links.begin(), r.links.end());
            comm.nvls_route.latency = std::max(comm.nvls_route.latency, r.latency);
            for (int l : r.links)
                comm.nvls_bandwidth =
                    std::min(comm.nvls_bandwidth, links[static_cast<std::size_t>(l)].bandwidth.bytes_per_s);
        }
        count_link_uses(comm.nvls_route);  // counted once here, not per flow
    }
    const auto nodes = detail::members_by_node(ranks, gpn);
    if (nodes.size() > 1 && detail::regular(nodes)) {
        add_tree(comm, nodes);
        if (cluster_.spec().sharp) add_sharp(comm, nodes);
        // NVLS_TREE: NVLS support needs NVLink SHARP and at least 2 GPUs of the group per node (nvls.cc).
        if (nodes.front().size() > 1 && cluster_.gpu().nvlink_sharp &&
            cluster_.spec().scale_up_kind == "nvswitch")
            add_nvls_tree(comm, nodes);
    }
    return communicators_.emplace(ranks, std::move(comm)).first->second;
}

void Collectives::run(CollectiveKind kind, const std::vector<int>& ranks, double bytes,
                      Simulator::Callback done) {
    const int n = static_cast<int>(ranks.size());
    if (n == 0) throw InternalError("collective over an empty group");
    if (n == 1 || bytes <= 0) {
        sim_.schedule_in(Time{}, Priority::kDefault, std::move(done));
        return;
    }
    run(kind, communicator(ranks), bytes, std::move(done));
}

void Collectives::run(CollectiveKind kind, const Communicator& comm, double bytes, Simulator::Callback done,
                      bool private_links) {
    const int n = comm.size;
    if (n == 0) throw InternalError("collective over an empty group");
    if (n == 1 || bytes <= 0) {
        sim_.schedule_in(Time{}, Priority::kDefault, std::move(done));
        return;
    }
    if (kind == CollectiveKind::all_to_all) {
        run_all_to_all(comm, bytes, std::move(done));
        return;
    }
    const FlowPlan p = planned(kind, comm, bytes);
    if (p.route && !p.side_route) {
        if (private_links)
            net_.start_private_flow_after(p.delay, *p.route, p.flow_bytes, std::move(done));
        else
            net_.start_flow_after(p.delay, *p.route, p.flow_bytes, std::move(done));
        return;
    }
    // Several channels: `done` runs when the last one has finished.
    batch_routes_.clear();
    batch_bytes_.clear();
    auto add = [&](const Route& r, double b) {
        batch_routes_.push_back(&r);
        batch_bytes_.push_back(b);
    };
    if (p.routes)
        for (const auto& r : *p.routes)
            add(r, p.flow_bytes);
    else
        add(*p.route, p.flow_bytes);
    if (p.side_route) add(*p.side_route, p.side_bytes);
    net_.start_joined_flows_after(p.delay, batch_routes_, batch_bytes_, std::move(done));
}

std::vector<Collectives::PairFlow> Collectives::all_to_all_flows(const std::vector<int>& ranks,
                                                                 double bytes) {
    std::vector<PairFlow> flows;
    const auto n = ranks.size();
    if (n < 2 || bytes <= 0) return flows;
    flows.reserve(n * (n - 1));
    const double per_peer = bytes / static_cast<double>(n);
    for (int src : ranks)
        for (int dst : ranks)
            if (src != dst) flows.push_back({src, dst, per_peer});
    return flows;
}

const Route& Collectives::all_to_all_route(const Communicator& comm) {
    auto it = all_to_all_routes_.find(&comm);
    if (it != all_to_all_routes_.end()) return it->second;
    // The pairs' routes straight from the cluster: n(n-1) of them are used here once, not worth caching
    // (EP 64 over 131,072 GPUs: 8.3 M routes).
    Route coupled;
    for (const auto& f : all_to_all_flows(comm.ranks, 1.0))
        detail::append_edge(coupled, cluster_.route(f.src, f.dst));
    count_link_uses(coupled);  // every flow of this group's all-to-all is on it
    return all_to_all_routes_.emplace(&comm, std::move(coupled)).first->second;
}

void Collectives::run_all_to_all(const Communicator& comm, double bytes, Simulator::Callback done) {
    // ncclGroupStart; ncclSend / ncclRecv per peer; ncclGroupEnd: one launch, then every pair's S / n bytes,
    // as one coupled flow over every pair's route (see the header: the pairs advance at one rate).
    const double per_peer = bytes / static_cast<double>(comm.size);
    net_.start_flow_after(Time::seconds(kNcclLaunchLatencyS), all_to_all_route(comm), per_peer,
                          std::move(done));
}

void Collectives::send(int src, int dst, double bytes, Simulator::Callback done) {
    if (src == dst) throw InternalError(fmt::format("send from GPU {} to itself", src));
    net_.start_flow_after(kLaunchLatency, route(src, dst), bytes, std::move(done));
}

void Collectives::send_all(const std::vector<std::pair<int, int>>& pairs, double bytes,
                           Simulator::Callback done) {
    batch_routes_.clear();
    batch_bytes_.assign(pairs.size(), bytes);
    bool inserted = false;  // a route cached now: a later insertion in the same row moves the earlier routes
    for (const auto& [src, dst] : pairs) {
        if (src == dst) throw InternalError(fmt::format("send from GPU {} to itself", src));
        const std::size_t cached = route_cache_[static_cast<std::size_t>(src)].size();
        batch_routes_.push_back(&route(src, dst));
        inserted = inserted || route_cache_[static_cast<std::size_t>(src)].size() != cached;
    }
    if (inserted) {  // looked up again, every one cached now (most messages find their routes cached)
        batch_routes_.clear();
        for (const auto& [src, dst] : pairs)
            batch_routes_.push_back(&route(src, dst));
    }
    net_.start_joined_flows_after(kLaunchLatency, batch_routes_, batch_bytes_, std::move(done));
}

std::vector<double> link_capacities(const Cluster& cluster) {
    std::vector<double> caps;
    caps.reserve(cluster.links().size());
    for (const auto& l : cluster.links())
        caps.push_back(l.bandwidth.bytes_per_s);
    return caps;
}

double isolated_collective_seconds(const Cluster& cluster, CollectiveKind kind, const std::vector<int>& ranks,
                                   double bytes) {
    Simulator sim;
    FlowNetwork net(sim, link_capacities(cluster));
    Collectives coll(sim, net, cluster);
    Time done;
    coll.run(kind, ranks, bytes, [&] { done = sim.now(); });
    sim.run();
    return done.to_seconds();
}

double busbw_factor(CollectiveKind kind, int n) {
    if (n <= 1) return 0.0;
    return kind == CollectiveKind::all_reduce ? 2.0 * (n - 1) / n : static_cast<double>(n - 1) / n;
}

}  // namespace trainsim
