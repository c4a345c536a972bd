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
    distinct_index_.assign(n, -1);
    cap_left_.assign(n, 0.0);
    unfrozen_on_link_.assign(n, 0);
    share_.assign(n, 0.0);
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

void FlowNetwork::set_private_link_bytes(const std::vector<int>& links, double bytes, std::uint64_t flows) {
    flows_started_ += flows;
    for (int l : links)
        link_bytes_[static_cast<std::size_t>(l)] = bytes;
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
    return Time::seconds_up(secs) + route.latency;
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
    prepare_lists(f);
    for (std::size_t k = 0; k < f.links.size(); ++k)
        push_on_link(f.links[k], id, f.occ[k]);
    f.listed = true;
    for (int l : f.links)
        mark_dirty(l);
    request_update();
}

void FlowNetwork::enter_in_lists(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    prepare_lists(f);
    for (std::size_t k = 0; k < f.links.size(); ++k) {
        push_on_link(f.links[k], fid, f.occ[k]);
        link_owner_[static_cast<std::size_t>(f.links[k])] = -1;
    }
    f.listed = true;
}

void FlowNetwork::prepare_lists(Flow& f) {
    f.occ.clear();
    f.dlinks.clear();
    f.dmult.clear();
    f.dshare.clear();
    f.shared.clear();
    for (int l : f.links) {
        int& j = distinct_index_[static_cast<std::size_t>(l)];
        if (j < 0) {
            j = static_cast<int>(f.dlinks.size());
            f.dlinks.push_back(l);
            f.dmult.push_back(0);
        }
        ++f.dmult[static_cast<std::size_t>(j)];
        f.occ.push_back(j);
    }
    for (std::size_t j = 0; j < f.dlinks.size(); ++j) {
        const auto lu = static_cast<std::size_t>(f.dlinks[j]);
        distinct_index_[lu] = -1;
        // As update_rates computes the share of a link that carries this flow alone: capacity / uses.
        f.dshare.push_back(capacity_[lu] / f.dmult[j]);
    }
    f.is_shared.assign(f.dlinks.size(), 0);
}

void FlowNetwork::set_shared(int fid, int j, bool shared) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    char& flag = f.is_shared[static_cast<std::size_t>(j)];
    if ((flag != 0) == shared) return;
    flag = shared ? 1 : 0;
    const auto it = std::lower_bound(f.shared.begin(), f.shared.end(), j);
    if (shared)
        f.shared.insert(it, j);
    else
        f.shared.erase(it);
}

void FlowNetwork::push_on_link(int link, int fid, int j) {
    auto& v = flows_on_link_[static_cast<std::size_t>(link)];
    if (!v.empty()) {
        const int h = v.front().flow;
        const bool single =
            std::all_of(v.begin() + 1, v.end(), [&](const LinkEntry& e) { return e.flow == h; });
        if (single && h != fid) set_shared(h, v.front().index, true);  // h had the link to itself
        if (!single || h != fid) set_shared(fid, j, true);
    }
    v.push_back(LinkEntry{fid, j});
}

void FlowNetwork::schedule_completion(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    const double secs = f.rate > 0 ? f.remaining / f.rate : 0.0;
    const Time at = sim_.now() + Time::seconds_up(secs);
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

void FlowNetwork::visit(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (f.frozen) return;  // reused as "visited" marker in this phase
    f.frozen = true;
    comp_flows_.push_back(fid);
    // The search pushes the flow's links not yet seen, in route order (first uses). The links it has to
    // itself can only have been seen as dirty links (pre_seen_); the others form runs that are pushed, and
    // so popped, as blocks: nothing but their positions and smallest share is needed from them.
    const std::vector<int>* splits = &f.shared;
    if (!pre_seen_.empty()) {
        splits_.clear();
        for (const auto& [pf, j] : pre_seen_)
            if (pf == fid) splits_.push_back(j);
        if (!splits_.empty()) {
            splits_.insert(splits_.end(), f.shared.begin(), f.shared.end());
            std::sort(splits_.begin(), splits_.end());
            splits = &splits_;
        }
    }
    int prev = 0;
    for (int j : *splits) {
        if (j > prev) stack_.push_back(SearchItem{fid, prev, j, 0});
        if (f.is_shared[static_cast<std::size_t>(j)]) {
            const int l = f.dlinks[static_cast<std::size_t>(j)];
            if (!link_seen_[static_cast<std::size_t>(l)]) {
                link_seen_[static_cast<std::size_t>(l)] = 1;
                stack_.push_back(SearchItem{l, 0, -1, 0});
            }
        }
        prev = j + 1;
    }
    const int n = static_cast<int>(f.dlinks.size());
    if (prev < n) stack_.push_back(SearchItem{fid, prev, n, 0});
}

void FlowNetwork::update_rates() {
    update_pending_ = false;
    // 1. The component: flows reachable from the dirty links through shared links, found by a depth-first
    // search over links. The visiting order of the links (their positions) breaks ties below; a flow's links
    // that no other flow uses are visited as runs (SearchItem) with the same positions as one by one.
    std::vector<int>& comp_flows = comp_flows_;
    comp_flows.clear();
    stack_.clear();
    items_.clear();
    pre_seen_.clear();
    for (int l : dirty_links_) {
        const auto lu = static_cast<std::size_t>(l);
        link_dirty_[lu] = 0;
        if (!link_seen_[lu]) {
            link_seen_[lu] = 1;
            stack_.push_back(SearchItem{l, 0, -1, 0});
            const auto& v = flows_on_link_[lu];
            if (!v.empty() && std::all_of(v.begin() + 1, v.end(),
                                          [&](const LinkEntry& e) { return e.flow == v.front().flow; }))
                pre_seen_.emplace_back(v.front().flow, v.front().index);
        }
    }
    dirty_links_.clear();
    int npos = 0;
    while (!stack_.empty()) {
        SearchItem it = stack_.back();
        stack_.pop_back();
        it.pos = npos;
        items_.push_back(it);
        if (it.hi >= 0) {
            npos += it.hi - it.lo;
            continue;
        }
        ++npos;
        for (const LinkEntry& e : flows_on_link_[static_cast<std::size_t>(it.a)])
            visit(e.flow);
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
    // visiting order among equal shares). A link that carries a single flow (a ring's coupled flow crosses
    // hundreds of links no other flow uses) keeps the share capacity / uses until that flow is frozen, so
    // each flow's smallest such share (and the first such link's position) is taken once; the scan of every
    // round covers the shared links still carrying unfrozen flows, in visiting order, and those flows'
    // bounds. The picks, and so the arithmetic, are the same as scanning every link every round.
    auto& live = live_links_;              // (position, link)
    std::vector<int>& solo = solo_flows_;  // flows with a link of their own
    live.clear();
    solo.clear();
    for (int fid : comp_flows) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.solo_share = std::numeric_limits<double>::infinity();
        f.solo_pos = -1;
    }
    auto solo_bound = [&](int fid, double share, int pos) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        if (f.solo_pos < 0) solo.push_back(fid);
        if (f.solo_pos < 0 || share < f.solo_share) {
            f.solo_share = share;
            f.solo_pos = pos;
        }
    };
    for (const SearchItem& it : items_) {
        if (it.hi >= 0) {
            // A run, visited from hi-1 down to lo: its smallest share, at its first link in that order.
            const Flow& f = flows_[static_cast<std::size_t>(it.a)];
            int bj = it.hi - 1;
            double share = f.dshare[static_cast<std::size_t>(bj)];
            for (int j = it.hi - 2; j >= it.lo; --j)
                if (f.dshare[static_cast<std::size_t>(j)] < share) {
                    share = f.dshare[static_cast<std::size_t>(j)];
                    bj = j;
                }
            solo_bound(it.a, share, it.pos + (it.hi - 1 - bj));
            continue;
        }
        const auto lu = static_cast<std::size_t>(it.a);
        link_seen_[lu] = 0;
        cap_left_[lu] = capacity_[lu];
        const auto& on_link = flows_on_link_[lu];
        unfrozen_on_link_[lu] = static_cast<int>(on_link.size());
        if (on_link.empty()) continue;
        const int first = on_link.front().flow;
        const bool one_flow = std::all_of(on_link.begin() + 1, on_link.end(),
                                          [&](const LinkEntry& e) { return e.flow == first; });
        if (!one_flow) {
            live.emplace_back(it.pos, it.a);
            share_[lu] = cap_left_[lu] / unfrozen_on_link_[lu];
            continue;
        }
        solo_bound(first, cap_left_[lu] / unfrozen_on_link_[lu], it.pos);
    }
    std::size_t left = comp_flows.size();
    double best = 0;
    // Freezes a flow at rate `best`: the links it shares lose that rate once per use (its own links are no
    // longer looked at: no other flow has a share there).
    auto freeze = [&](int fid) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        if (f.frozen) return;
        f.frozen = true;
        f.rate = best;
        --left;
        for (int j : f.shared) {
            const auto l2 = static_cast<std::size_t>(f.dlinks[static_cast<std::size_t>(j)]);
            for (int m = f.dmult[static_cast<std::size_t>(j)]; m > 0; --m) {
                cap_left_[l2] -= best;
                --unfrozen_on_link_[l2];
            }
            // The share the next rounds compare (computed from the same values as at the time they look).
            if (unfrozen_on_link_[l2] > 0) share_[l2] = cap_left_[l2] / unfrozen_on_link_[l2];
        }
    };
    while (left > 0) {
        best = std::numeric_limits<double>::infinity();
        int best_pos = -1;
        int best_link = -1;  // a shared link, or
        int best_flow = -1;  // a flow's own link
        std::size_t kept = 0;
        for (const auto& [pos, l] : live) {
            const auto lu = static_cast<std::size_t>(l);
            const int n = unfrozen_on_link_[lu];
            if (n == 0) continue;
            live[kept++] = {pos, l};
            const double share = share_[lu];
            if (share < best) {
                best = share;
                best_pos = pos;
                best_link = l;
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
                best_flow = fid;
            }
        }
        solo.resize(kept);
        if (best_pos < 0) throw InternalError("max-min fairness: flows left without a link");
        if (best < 0) best = 0;
        if (best_flow >= 0) {
            freeze(best_flow);
        } else {
            for (const LinkEntry& e : flows_on_link_[static_cast<std::size_t>(best_link)])
                freeze(e.flow);
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
            auto it = std::find_if(v.begin(), v.end(), [&](const LinkEntry& e) { return e.flow == fid; });
            if (it == v.end()) throw InternalError("flow missing from its link");
            *it = v.back();
            v.pop_back();
            // A link left without flows changes no rate: only links still carrying flows need a
            // recomputation.
            if (!v.empty()) {
                mark_dirty(l);
                changed = true;
                const int h = v.front().flow;
                if (h != fid &&
                    std::all_of(v.begin() + 1, v.end(), [&](const LinkEntry& e) { return e.flow == h; }))
                    set_shared(h, v.front().index, false);  // h now has the link to itself
            }
        }
    }
    if (changed) request_update();
    free_ids_.push_back(fid);
    sim_.schedule_in(f.latency, Priority::kFlowCompletion, std::move(f.on_done));
}

}  // namespace trainsim
