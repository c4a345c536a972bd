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
    link_owner_.assign(n, -1);
    use_count_.assign(n, 0);
    cap_left_.assign(n, 0.0);
    unfrozen_on_link_.assign(n, 0);
}

void FlowNetwork::start_flow(const Route& route, double bytes, Simulator::Callback on_done) {
    ++flows_started_;
    if (!(bytes > 0) || route.links.empty()) {
        sim_.schedule_in(route.latency, Priority::kFlowCompletion, std::move(on_done));
        return;
    }
    const int id = new_flow(route, bytes, std::move(on_done));
    activate(id);
}

void FlowNetwork::start_flow_after(Time delay, const Route& route, double bytes,
                                   Simulator::Callback on_done) {
    if (!(bytes > 0) || route.links.empty()) {
        sim_.schedule_in(delay, Priority::kDefault,
                         [this, latency = route.latency, cb = std::move(on_done)]() mutable {
                             ++flows_started_;
                             sim_.schedule_in(latency, Priority::kFlowCompletion, std::move(cb));
                         });
        return;
    }
    const int id = new_flow(route, bytes, std::move(on_done));
    sim_.schedule_in(delay, Priority::kDefault, [this, id] {
        ++flows_started_;
        activate(id);
    });
}

void FlowNetwork::start_private_flow_after(Time delay, const Route& route, double bytes,
                                           Simulator::Callback on_done) {
    count_private_flow(route, bytes);
    sim_.schedule(sim_.now() + delay + private_flow_time(route, bytes), Priority::kFlowCompletion,
                  std::move(on_done));
}

void FlowNetwork::count_private_flow(const Route& route, double bytes) {
    ++flows_started_;
    if (!(bytes > 0) || route.links.empty()) return;
    for (int l : route.links)
        link_bytes_[static_cast<std::size_t>(l)] += bytes;
}

Time FlowNetwork::private_flow_time(const Route& route, double bytes) {
    if (!(bytes > 0) || route.links.empty()) return route.latency;
    // Rate = the smallest capacity / uses of a link on the route (a flow alone on its links gets it from
    // progressive filling, the same arithmetic).
    for (int l : route.links)
        ++use_count_[static_cast<std::size_t>(l)];
    double rate = std::numeric_limits<double>::infinity();
    for (int l : route.links)
        rate =
            std::min(rate, capacity_[static_cast<std::size_t>(l)] / use_count_[static_cast<std::size_t>(l)]);
    for (int l : route.links)
        use_count_[static_cast<std::size_t>(l)] = 0;
    const double secs = bytes / rate;
    return Time::ps(static_cast<std::int64_t>(std::ceil(secs * 1e12))) + route.latency;
}

int FlowNetwork::new_flow(const Route& route, double bytes, Simulator::Callback on_done) {
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
    f.latency = route.latency;
    f.on_done = std::move(on_done);
    return id;
}

void FlowNetwork::activate(int id) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    const double bytes = f.remaining;
    f.last_update = sim_.now();
    ++f.version;
    f.active = true;
    ++active_count_;
    bool alone = true;
    for (int l : f.links) {
        const auto lu = static_cast<std::size_t>(l);
        link_bytes_[lu] += bytes;
        if (!flows_on_link_[lu].empty() || link_owner_[lu] >= 0) alone = false;
    }
    if (alone) {
        // No other flow on its links: its component is itself, and progressive filling gives it the smallest
        // capacity / (times the route uses the link). Computed now, as update_rates would at the end of the
        // instant (the same arithmetic). The flow is not entered in the per-link lists but recorded as the
        // links' owner; a flow that joins one of its links later enters it in the lists first (as if it had
        // been entered now: it was the first on each of its links), then marks the links dirty, and the
        // batched update recomputes both.
        for (int l : f.links)
            ++use_count_[static_cast<std::size_t>(l)];
        double rate = std::numeric_limits<double>::infinity();
        for (int l : f.links)
            rate = std::min(rate,
                            capacity_[static_cast<std::size_t>(l)] / use_count_[static_cast<std::size_t>(l)]);
        for (int l : f.links) {
            use_count_[static_cast<std::size_t>(l)] = 0;
            link_owner_[static_cast<std::size_t>(l)] = id;
        }
        f.listed = false;
        f.rate = rate;
        schedule_completion(id);
        return;
    }
    for (int l : f.links) {
        const int owner = link_owner_[static_cast<std::size_t>(l)];
        if (owner >= 0) enter_in_lists(owner);
    }
    for (int l : f.links)
        flows_on_link_[static_cast<std::size_t>(l)].push_back(id);
    f.listed = true;
    for (int l : f.links)
        mark_dirty(l);
    request_update();
}

void FlowNetwork::enter_in_lists(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    for (int l : f.links) {
        flows_on_link_[static_cast<std::size_t>(l)].push_back(fid);
        link_owner_[static_cast<std::size_t>(l)] = -1;
    }
    f.listed = true;
}

void FlowNetwork::schedule_completion(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    const double secs = f.rate > 0 ? f.remaining / f.rate : 0.0;
    const Time at = sim_.now() + Time::ps(static_cast<std::int64_t>(std::ceil(secs * 1e12)));
    const std::uint64_t v = f.version;
    sim_.schedule(at, Priority::kFlowCompletion, [this, fid, v] { finish(fid, v); });
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
    std::vector<int>& comp_links = comp_links_;
    std::vector<int>& comp_flows = comp_flows_;
    std::vector<int>& stack = stack_;
    comp_links.clear();
    comp_flows.clear();
    stack.clear();
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
    // 2. Progressive filling: repeatedly saturate the link with the smallest fair share (the first in
    // discovery order among equal shares). A link that carries a single flow (a ring's coupled flow crosses
    // hundreds of links no other flow uses) keeps the share capacity / uses until that flow is frozen, so
    // each flow's smallest such share (and the first such link's position) is taken once; the scan of every
    // round covers the shared links still carrying unfrozen flows, in discovery order, and those flows'
    // bounds. The picks, and so the arithmetic, are the same as scanning every link every round.
    std::vector<int>& live = live_links_;  // positions in comp_links
    std::vector<int>& solo = solo_flows_;  // flows with a link of their own
    live.clear();
    solo.clear();
    for (int fid : comp_flows) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.solo_share = std::numeric_limits<double>::infinity();
        f.solo_pos = -1;
    }
    for (std::size_t i = 0; i < comp_links.size(); ++i) {
        const auto lu = static_cast<std::size_t>(comp_links[i]);
        link_seen_[lu] = 0;
        cap_left_[lu] = capacity_[lu];
        const auto& on_link = flows_on_link_[lu];
        unfrozen_on_link_[lu] = static_cast<int>(on_link.size());
        if (on_link.empty()) continue;
        const bool one_flow =
            std::all_of(on_link.begin() + 1, on_link.end(), [&](int fid) { return fid == on_link.front(); });
        if (!one_flow) {
            live.push_back(static_cast<int>(i));
            continue;
        }
        Flow& f = flows_[static_cast<std::size_t>(on_link.front())];
        const double share = cap_left_[lu] / unfrozen_on_link_[lu];
        if (f.solo_pos < 0) solo.push_back(on_link.front());
        if (f.solo_pos < 0 || share < f.solo_share) {
            f.solo_share = share;
            f.solo_pos = static_cast<int>(i);
        }
    }
    std::size_t left = comp_flows.size();
    while (left > 0) {
        double best = std::numeric_limits<double>::infinity();
        int best_pos = -1;
        std::size_t kept = 0;
        for (int pos : live) {
            const auto lu = static_cast<std::size_t>(comp_links[static_cast<std::size_t>(pos)]);
            const int n = unfrozen_on_link_[lu];
            if (n == 0) continue;
            live[kept++] = pos;
            const double share = cap_left_[lu] / n;
            if (share < best) {
                best = share;
                best_pos = pos;
            }
        }
        live.resize(kept);
        kept = 0;
        for (int fid : solo) {
            const Flow& f = flows_[static_cast<std::size_t>(fid)];
            if (f.frozen) continue;
            solo[kept++] = fid;
            if (f.solo_share < best || (f.solo_share == best && f.solo_pos < best_pos)) {
                best = f.solo_share;
                best_pos = f.solo_pos;
            }
        }
        solo.resize(kept);
        if (best_pos < 0) throw InternalError("max-min fairness: flows left without a link");
        if (best < 0) best = 0;
        for (int fid :
             flows_on_link_[static_cast<std::size_t>(comp_links[static_cast<std::size_t>(best_pos)])]) {
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
        schedule_completion(fid);
    }
}

void FlowNetwork::finish(int fid, std::uint64_t version) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (!f.active || f.version != version) return;  // superseded by a rate change
    f.active = false;
    --active_count_;
    bool changed = false;
    if (!f.listed) {
        // Alone on its links until the end: no list to leave, nothing to recompute.
        for (int l : f.links)
            link_owner_[static_cast<std::size_t>(l)] = -1;
    } else {
        for (int l : f.links) {
            auto& v = flows_on_link_[static_cast<std::size_t>(l)];
            auto it = std::find(v.begin(), v.end(), fid);
            if (it == v.end()) throw InternalError("flow missing from its link");
            *it = v.back();
            v.pop_back();
            // A link left without flows changes no rate: only links still carrying flows need a
            // recomputation.
            if (!v.empty()) {
                mark_dirty(l);
                changed = true;
            }
        }
    }
    if (changed) request_update();
    free_ids_.push_back(fid);
    sim_.schedule_in(f.latency, Priority::kFlowCompletion, std::move(f.on_done));
}

}  // namespace trainsim
