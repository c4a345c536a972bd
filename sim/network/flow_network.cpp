#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/network.hpp"

namespace trainsim {

FlowNetwork::FlowNetwork(Simulator& sim, std::vector<double> link_bandwidth)
    : sim_(sim), capacity_(std::move(link_bandwidth)) {
    const auto n = capacity_.size();
    for (std::size_t i = 0; i < n; ++i)
        if (!(capacity_[i] > 0)) throw InternalError(fmt::format("link {} has capacity {}", i, capacity_[i]));
    flows_on_link_.resize(n);
    link_bytes_.assign(n, 0.0);
    link_dirty_.assign(n, 0);
    link_seen_.assign(n, 0);
    cap_left_.assign(n, 0.0);
    unfrozen_on_link_.assign(n, 0);
}

void FlowNetwork::start_flow(const Route& route, double bytes, std::function<void()> on_done) {
    ++flows_started_;
    if (!(bytes > 0) || route.links.empty()) {
        sim_.schedule_in(route.latency, Priority::kFlowCompletion, std::move(on_done));
        return;
    }
    int id;
    if (!free_ids_.empty()) {
        id = free_ids_.back();
        free_ids_.pop_back();
    } else {
        id = static_cast<int>(flows_.size());
        flows_.emplace_back();
    }
    Flow& f = flows_[static_cast<std::size_t>(id)];
    f.links = route.links;
    f.remaining = bytes;
    f.rate = 0;
    f.last_update = sim_.now();
    f.latency = route.latency;
    ++f.version;
    f.on_done = std::move(on_done);
    f.active = true;
    ++active_count_;
    for (int l : f.links) {
        flows_on_link_[static_cast<std::size_t>(l)].push_back(id);
        link_bytes_[static_cast<std::size_t>(l)] += bytes;
        mark_dirty(l);
    }
    request_update();
}

void FlowNetwork::mark_dirty(int link) {
    if (!link_dirty_[static_cast<std::size_t>(link)]) {
        link_dirty_[static_cast<std::size_t>(link)] = 1;
        dirty_links_.push_back(link);
    }
}

void FlowNetwork::request_update() {
    if (update_pending_) return;
    update_pending_ = true;
    sim_.schedule(sim_.now(), Priority::kRateUpdate, [this] { update_rates(); });
}

void FlowNetwork::update_rates() {
    update_pending_ = false;
    // 1. The component: flows reachable from the dirty links through shared links.
    std::vector<int> comp_links;
    std::vector<int> comp_flows;
    std::vector<int> stack;
    for (int l : dirty_links_) {
        link_dirty_[static_cast<std::size_t>(l)] = 0;
        if (!link_seen_[static_cast<std::size_t>(l)]) {
            link_seen_[static_cast<std::size_t>(l)] = 1;
            stack.push_back(l);
        }
    }
    dirty_links_.clear();
    while (!stack.empty()) {
        const int l = stack.back();
        stack.pop_back();
        comp_links.push_back(l);
        for (int fid : flows_on_link_[static_cast<std::size_t>(l)]) {
            Flow& f = flows_[static_cast<std::size_t>(fid)];
            if (f.frozen) continue;  // reused as "visited" marker in this phase
            f.frozen = true;
            comp_flows.push_back(fid);
            for (int l2 : f.links)
                if (!link_seen_[static_cast<std::size_t>(l2)]) {
                    link_seen_[static_cast<std::size_t>(l2)] = 1;
                    stack.push_back(l2);
                }
        }
    }
    // The discovery order is itself deterministic (it follows the order of events and of the per-link flow
    // lists), so the floating-point sums below are reproducible without sorting.
    const Time now = sim_.now();
    for (int fid : comp_flows) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.remaining -= f.rate * (now - f.last_update).to_seconds();
        if (f.remaining < 0) f.remaining = 0;
        f.last_update = now;
        f.frozen = false;
    }
    for (int l : comp_links) {
        link_seen_[static_cast<std::size_t>(l)] = 0;
        cap_left_[static_cast<std::size_t>(l)] = capacity_[static_cast<std::size_t>(l)];
        unfrozen_on_link_[static_cast<std::size_t>(l)] =
            static_cast<int>(flows_on_link_[static_cast<std::size_t>(l)].size());
    }
    // 2. Progressive filling: repeatedly saturate the link with the smallest fair share.
    std::size_t left = comp_flows.size();
    while (left > 0) {
        double best = std::numeric_limits<double>::infinity();
        int best_link = -1;
        for (int l : comp_links) {
            const int n = unfrozen_on_link_[static_cast<std::size_t>(l)];
            if (n == 0) continue;
            const double share = cap_left_[static_cast<std::size_t>(l)] / n;
            if (share < best) {
                best = share;
                best_link = l;
            }
        }
        if (best_link < 0) throw InternalError("max-min fairness: flows left without a link");
        if (best < 0) best = 0;
        for (int fid : flows_on_link_[static_cast<std::size_t>(best_link)]) {
            Flow& f = flows_[static_cast<std::size_t>(fid)];
            if (f.frozen) continue;
            f.frozen = true;
            f.rate = best;
            --left;
            for (int l2 : f.links) {
                cap_left_[static_cast<std::size_t>(l2)] -= best;
                --unfrozen_on_link_[static_cast<std::size_t>(l2)];
            }
        }
    }
    // 3. Reschedule completions.
    for (int fid : comp_flows) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.frozen = false;
        ++f.version;
        const double secs = f.rate > 0 ? f.remaining / f.rate : 0.0;
        const Time at = now + Time::ps(static_cast<std::int64_t>(std::ceil(secs * 1e12)));
        const std::uint64_t v = f.version;
        sim_.schedule(at, Priority::kFlowCompletion, [this, fid, v] { finish(fid, v); });
    }
}

void FlowNetwork::finish(int fid, std::uint64_t version) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (!f.active || f.version != version) return;  // superseded by a rate change
    f.active = false;
    --active_count_;
    for (int l : f.links) {
        auto& v = flows_on_link_[static_cast<std::size_t>(l)];
        auto it = std::find(v.begin(), v.end(), fid);
        if (it == v.end()) throw InternalError("flow missing from its link");
        *it = v.back();
        v.pop_back();
        mark_dirty(l);
    }
    request_update();
    auto cb = std::move(f.on_done);
    f.on_done = nullptr;
    free_ids_.push_back(fid);
    sim_.schedule_in(f.latency, Priority::kFlowCompletion, std::move(cb));
}

}  // namespace trainsim
