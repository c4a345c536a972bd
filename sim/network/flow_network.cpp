#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>
#include <span>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/network.hpp"

namespace trainsim {

namespace {
/// The last index freed in `free` (taken from it), else the index of a new default item appended to `items`.
template <class T>
int reuse_or_append(std::vector<int>& free, std::vector<T>& items) {
    if (!free.empty()) {
        const int id = free.back();
        free.pop_back();
        return id;
    }
    items.emplace_back();
    return static_cast<int>(items.size()) - 1;
}
}  // namespace

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
    owner_drain_end_.assign(n, Time{});
    use_count_.assign(n, 0);
    distinct_index_.assign(n, -1);
    capacity_left_.assign(n, 0.0);
    unfrozen_on_link_.assign(n, 0);
    share_.assign(n, 0.0);
    position_of_link_.assign(n, -1);
    left_load_.assign(n, 0.0);
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

void FlowNetwork::start_flows_after(Time delay, const std::vector<const Route*>& routes,
                                    const std::vector<double>& bytes,
                                    std::vector<Simulator::Callback>& on_done) {
    const std::size_t n = routes.size();
    if (bytes.size() != n || on_done.size() != n)
        throw InternalError("start_flows_after: routes, bytes and callbacks differ in number");
    bool batch = n > 1 && n <= kMaxBatchedStarts;
    for (std::size_t i = 0; i < n && batch; ++i)
        batch = bytes[i] > 0 && !routes[i]->links.empty();
    if (!batch) {
        for (std::size_t i = 0; i < n; ++i)
            start_flow_after(delay, *routes[i], bytes[i], std::move(on_done[i]));
        return;
    }
    std::array<int, kMaxBatchedStarts> ids{};
    for (std::size_t i = 0; i < n; ++i)
        ids[i] = new_flow(*routes[i], bytes[i], std::move(on_done[i]));
    schedule_starts(delay, ids.data(), n);
}

void FlowNetwork::schedule_starts(Time delay, const int* ids, std::size_t n) {
    struct Starts {  // fits EventCallback's inline buffer (48 bytes)
        FlowNetwork* self;
        std::uint32_t count;
        std::array<int, kMaxBatchedStarts> ids;
        void operator()() const {
            self->in_starts_ = true;
            self->open_groups_.clear();
            for (std::uint32_t i = 0; i < count; ++i) {
                ++self->flows_started_;
                self->activate(ids[i]);
            }
            self->in_starts_ = false;
        }
    };
    Starts starts{this, static_cast<std::uint32_t>(n), {}};
    std::copy(ids, ids + n, starts.ids.begin());
    sim_.schedule_in(delay, Priority::kDefault, starts);
}

void FlowNetwork::start_joined_flows_after(Time delay, const std::vector<const Route*>& routes,
                                           const std::vector<double>& bytes, Simulator::Callback on_done) {
    const std::size_t n = routes.size();
    if (n == 0 || bytes.size() != n)
        throw InternalError("start_joined_flows_after: no flows, or bytes differ");
    if (n == 1) {
        start_flow_after(delay, *routes[0], bytes[0], std::move(on_done));
        return;
    }
    bool joined = n <= kMaxBatchedStarts;
    for (std::size_t i = 0; i < n && joined; ++i)
        joined = bytes[i] > 0 && !routes[i]->links.empty() && routes[i]->latency == routes[0]->latency;
    if (!joined) {
        // A counting callback per flow, each arriving in its own event.
        struct Count {
            int left;
            Simulator::Callback done;
        };
        auto count = std::make_shared<Count>(Count{static_cast<int>(n), std::move(on_done)});
        join_done_.clear();
        for (std::size_t i = 0; i < n; ++i)
            join_done_.emplace_back([count] {
                if (--count->left == 0) count->done();
            });
        start_flows_after(delay, routes, bytes, join_done_);
        return;
    }
    const int jid = reuse_or_append(free_joins_, joins_);
    std::array<int, kMaxBatchedStarts> ids{};
    for (std::size_t i = 0; i < n; ++i) {
        ids[i] = new_flow(*routes[i], bytes[i], Simulator::Callback{});
        Flow& f = flows_[static_cast<std::size_t>(ids[i])];
        f.join = jid;
        f.join_slot = static_cast<int>(i);
    }
    Join& j = joins_[static_cast<std::size_t>(jid)];
    j.on_done = std::move(on_done);
    j.remaining = static_cast<int>(n);
    j.count = static_cast<std::uint32_t>(n);
    j.finished = 0;
    std::copy(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), j.flows.begin());
    schedule_starts(delay, ids.data(), n);
}

bool FlowNetwork::others_drained(const Join& j, int fid) const {
    for (std::uint32_t i = 0; i < j.count; ++i) {
        if ((j.finished >> i) & 1u) continue;
        const int id = j.flows[i];
        if (id == fid) continue;
        const Flow& g = flows_[static_cast<std::size_t>(id)];
        // Listed: its drain ends in its own finish(), not yet run. Alone: it ended at drain_end.
        if (g.listed || g.drain_end > sim_.now()) return false;
    }
    return true;
}

void FlowNetwork::join_arrived(int jid) {
    Join& j = joins_[static_cast<std::size_t>(jid)];
    if (--j.remaining > 0) return;
    Simulator::Callback done = std::move(j.on_done);  // on_done may start a transfer that takes this join
    free_joins_.push_back(jid);
    done();
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
    std::vector<int>& free =
        route.links.size() >= kLongRouteLinks && !free_long_ids_.empty() ? free_long_ids_ : free_ids_;
    const int id = reuse_or_append(free, flows_);
    Flow& f = flows_[static_cast<std::size_t>(id)];
    set_distinct_links(f, route);
    f.remaining = bytes;
    f.rate = 0;
    f.latency = route.latency;
    f.on_done = std::move(on_done);
    f.join = -1;
    f.join_slot = -1;
    return id;
}

void FlowNetwork::set_distinct_links(Flow& f, const Route& route) {
    // Everything after works on the distinct links (a coupled all-to-all's route lists every pair's links:
    // tens of thousands of entries over a few hundred links). A route's are counted once (most routes are
    // cached by Collectives and carry many flows: P2P messages, a communicator's channels), and so are its
    // solo shares.
    const auto fill_solo = [this](const LinkUses& u) {
        u.solo_share.clear();
        for (std::size_t j = 0; j < u.links.size(); ++j)  // as bound_shares computes a solo link's share
            u.solo_share.push_back(capacity_[static_cast<std::size_t>(u.links[j])] / u.uses[j]);
        u.solo_share_owner = this;
    };
    if (route.link_uses &&
        (route.link_uses->solo_share_owner == this || route.link_uses->solo_share_owner == nullptr)) {
        if (route.link_uses->solo_share_owner == nullptr) {
            fill_solo(*route.link_uses);
            kept_uses_.push_back(route.link_uses);
        }
        f.links = route.link_uses.get();
        return;
    }
    if (!f.own_links) f.own_links = std::make_unique<LinkUses>();
    LinkUses& own = *f.own_links;
    if (route.link_uses) {  // counted, with another network's shares
        own.links = route.link_uses->links;
        own.uses = route.link_uses->uses;
    } else {
        own.links.clear();
        own.uses.clear();
        for (int l : route.links) {
            int& j = distinct_index_[static_cast<std::size_t>(l)];
            if (j < 0) {
                j = static_cast<int>(own.links.size());
                own.links.push_back(l);
                own.uses.push_back(0);
            }
            ++own.uses[static_cast<std::size_t>(j)];
        }
        for (int l : own.links)
            distinct_index_[static_cast<std::size_t>(l)] = -1;
    }
    fill_solo(own);
    f.links = f.own_links.get();
}

void FlowNetwork::activate(int id) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    const double bytes = f.remaining;
    f.last_update = sim_.now();
    ++f.version;
    f.active = true;
    ++active_count_;
    bool alone = true;
    const LinkUses& rl = *f.links;
    for (std::size_t j = 0; j < rl.links.size(); ++j) {
        const auto lu = static_cast<std::size_t>(rl.links[j]);
        link_bytes_[lu] += bytes * rl.uses[j];  // the flow's bytes once per use
        if (!flows_on_link_[lu].empty() || owner_live(rl.links[j])) alone = false;
    }
    if (alone) {
        // No other flow on its links: its component is itself, and progressive filling gives it the smallest
        // capacity / (times the route uses the link). Computed now, as update_rates would at the end of the
        // instant (the same arithmetic). The flow is not entered in the per-link lists but recorded as the
        // links' owner; a flow that joins one of its links later enters it in the lists first (as if it had
        // been entered now: it was the first on each of its links), then marks the links dirty, and the
        // batched update recomputes both.
        double rate = std::numeric_limits<double>::infinity();
        for (double share : rl.solo_share)
            rate = std::min(rate, share);
        f.listed = false;
        f.rate = rate;
        f.drain_end = sim_.now() + Time::seconds_up(bytes / rate);  // as schedule_completion computes it
        for (int l : rl.links) {
            link_owner_[static_cast<std::size_t>(l)] = id;
            owner_drain_end_[static_cast<std::size_t>(l)] = f.drain_end;
        }
        schedule_finish_alone(id);
        return;
    }
    // One pass over the links (a data-parallel ring's flow has thousands): an owner still alone on the link
    // enters the lists first, then the flow, then the link is marked dirty. The same lists, flags and dirty
    // order as three passes (every owner, then the flow on every link, then the marks): an owner shares no
    // link with another owner, so it enters before the flow reaches any link of its, and entering marks
    // nothing.
    joined_.push_back(id);
    prepare_lists(f);
    for (std::size_t j = 0; j < rl.links.size(); ++j) {
        const int l = rl.links[j];
        const int owner = link_owner_[static_cast<std::size_t>(l)];
        if (owner >= 0 && owner_live(l)) {
            enter_in_lists(owner);
            owner_entered_ = true;
        }
        push_on_link(l, id, static_cast<int>(j));
        mark_dirty(l);
    }
    f.listed = true;
    request_update();
}

[[gnu::always_inline]] inline bool FlowNetwork::owner_live(int link) {
    int& owner = link_owner_[static_cast<std::size_t>(link)];
    if (owner < 0) return false;
    if (owner_drain_end_[static_cast<std::size_t>(link)] > sim_.now()) return true;
    owner = -1;
    return false;
}

void FlowNetwork::enter_in_lists(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    prepare_lists(f);
    const LinkUses& rl = *f.links;
    for (std::size_t j = 0; j < rl.links.size(); ++j) {
        push_on_link(rl.links[j], fid, static_cast<int>(j));
        link_owner_[static_cast<std::size_t>(rl.links[j])] = -1;
    }
    f.listed = true;
}

void FlowNetwork::prepare_lists(Flow& f) {
    // The distinct links, their uses and solo shares were set with the flow (set_distinct_links).
    f.shared_distinct.clear();
    f.shared_stale = false;
    f.distinct_is_shared.assign(f.links->links.size(), 0);
    f.distinct_slot.assign(f.links->links.size(), -1);
}

[[gnu::always_inline]] inline void FlowNetwork::set_shared(int fid, int j, bool shared) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    char& flag = f.distinct_is_shared[static_cast<std::size_t>(j)];
    if ((flag != 0) == shared) return;
    flag = shared ? 1 : 0;
    f.shared_stale = true;  // a flow on thousands of links is toggled many times between two reads
}

[[gnu::always_inline]] inline const FlowNetwork::SmallInts& FlowNetwork::shared_links(Flow& f) {
    if (f.shared_stale) {
        f.shared_distinct.clear();
        for (std::size_t j = 0; j < f.distinct_is_shared.size(); ++j)
            if (f.distinct_is_shared[j]) f.shared_distinct.push_back(static_cast<int>(j));
        f.shared_stale = false;
    }
    return f.shared_distinct;
}

[[gnu::always_inline]] inline void FlowNetwork::push_on_link(int link, int fid, int j) {
    // One entry per flow and link, however many times its route uses the link (LinkUses::uses).
    auto& v = flows_on_link_[static_cast<std::size_t>(link)];
    if (v.size() == 1) set_shared(v.front().flow, v.front().index, true);  // it had the link to itself
    if (!v.empty()) set_shared(fid, j, true);
    flows_[static_cast<std::size_t>(fid)].distinct_slot[static_cast<std::size_t>(j)] =
        static_cast<int>(v.size());
    v.push_back(LinkEntry{fid, j});
}

void FlowNetwork::schedule_completion(int fid) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    const double secs = f.rate > 0 ? f.remaining / f.rate : 0.0;
    const Time at = sim_.now() + Time::seconds_up(secs);
    const std::uint64_t v = f.version;
    sim_.schedule(at, Priority::kFlowCompletion, [this, fid, v] { finish(fid, v); });
}

[[gnu::always_inline]] inline void FlowNetwork::mark_dirty(int link) {
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
    component_flows_.push_back(fid);
    // The search pushes the flow's links not yet seen, in route order (first uses). The links it has to
    // itself can only have been seen as dirty links (dirty_solo_links_); the others form runs that are
    // pushed, and so popped, as blocks: nothing but their positions and smallest share is needed from them.
    const SmallInts& shared = shared_links(f);
    std::span<const int> splits(shared.data(), shared.size());
    if (!dirty_solo_links_.empty()) {
        // dirty_solo_links_ is sorted by (flow, index) (find_component): this flow's entries, ascending.
        solo_splits_.clear();
        const auto [lo, hi] =
            std::equal_range(dirty_solo_links_.begin(), dirty_solo_links_.end(), std::pair<int, int>{fid, 0},
                             [](const auto& a, const auto& b) { return a.first < b.first; });
        for (auto it = lo; it != hi; ++it)
            solo_splits_.push_back(it->second);
        if (!solo_splits_.empty()) {
            // Both ascending, disjoint (a link the flow has to itself is not shared): merged, as one sort.
            splits_.clear();
            std::merge(solo_splits_.begin(), solo_splits_.end(), shared.begin(), shared.end(),
                       std::back_inserter(splits_));
            splits = splits_;
        }
    }
    int run_start = 0;
    for (int j : splits) {
        if (j > run_start) search_stack_.push_back(SearchItem{fid, run_start, j, 0});
        if (f.distinct_is_shared[static_cast<std::size_t>(j)]) {
            const int l = f.links->links[static_cast<std::size_t>(j)];
            if (!link_seen_[static_cast<std::size_t>(l)]) {
                link_seen_[static_cast<std::size_t>(l)] = 1;
                search_stack_.push_back(SearchItem{l, 0, -1, 0});
            }
        }
        run_start = j + 1;
    }
    const int n = static_cast<int>(f.links->links.size());
    if (run_start < n) search_stack_.push_back(SearchItem{fid, run_start, n, 0});
}

namespace {
/// Relative margins of update_locally's checks: a link whose spare capacity is within kSaturatedMargin of its
/// capacity counts as saturated, and rates within kRateMargin of each other as equal; either way the check
/// fails and the component is recomputed, so rounding never passes a check that exact arithmetic would not.
constexpr double kSaturatedMargin = 1e-9;
constexpr double kRateMargin = 1e-9;
}  // namespace

[[gnu::always_inline]] inline double FlowNetwork::link_load(int link, int except) const {
    double load = 0;
    for (const LinkEntry& e : flows_on_link_[static_cast<std::size_t>(link)]) {
        if (e.flow == except) continue;
        const Flow& g = flows_[static_cast<std::size_t>(e.flow)];
        load += g.rate * g.links->uses[static_cast<std::size_t>(e.index)];
    }
    return load;
}

bool FlowNetwork::update_locally() {
    if (owner_entered_ || !local_updates_) return false;
    // Joined flows not yet given a rate carry none.
    for (int fid : joined_)
        flows_[static_cast<std::size_t>(fid)].rate = 0;
    // The flows that left: none of their links was another flow's bottleneck. A link's load before the
    // instant: the flows on it now and every flow that left it (left_load_).
    for (std::size_t i = 0; i < left_rate_.size(); ++i)
        for (std::size_t k = left_begin_[i]; k < left_begin_[i + 1]; ++k)
            left_load_[static_cast<std::size_t>(left_links_[k].first)] +=
                left_rate_[i] * left_links_[k].second;
    bool quiet = true;
    for (std::size_t i = 0; i < left_rate_.size() && quiet; ++i) {
        const double r = left_rate_[i];
        for (std::size_t k = left_begin_[i]; k < left_begin_[i + 1] && quiet; ++k) {
            const auto lu = static_cast<std::size_t>(left_links_[k].first);
            ++rate_update_work_;
            const double before = link_load(left_links_[k].first, -1) + left_load_[lu];
            if (capacity_[lu] - before > kSaturatedMargin * capacity_[lu]) continue;  // unsaturated
            for (const LinkEntry& e : flows_on_link_[lu]) {
                ++rate_update_work_;
                if (flows_[static_cast<std::size_t>(e.flow)].rate >= r * (1 - kRateMargin)) quiet = false;
            }
        }
    }
    for (const auto& [l, uses] : left_links_)
        left_load_[static_cast<std::size_t>(l)] = 0;
    if (!quiet) return false;
    // The flows that joined, one after the other: each on links with spare capacity, bottlenecked at the
    // link of the smallest spare / uses, where no flow is faster.
    for (int fid : joined_) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        double rate = std::numeric_limits<double>::infinity();
        int at = -1;
        const LinkUses& rl = *f.links;
        for (std::size_t j = 0; j < rl.links.size(); ++j) {
            const int l = rl.links[j];
            const auto lu = static_cast<std::size_t>(l);
            ++rate_update_work_;
            const double spare = capacity_[lu] - (f.distinct_is_shared[j] ? link_load(l, fid) : 0.0);
            if (!(spare > kSaturatedMargin * capacity_[lu])) return false;
            const double share = spare / rl.uses[j];
            if (share < rate) {
                rate = share;
                at = l;
            }
        }
        for (const LinkEntry& e : flows_on_link_[static_cast<std::size_t>(at)]) {
            ++rate_update_work_;
            if (e.flow != fid && flows_[static_cast<std::size_t>(e.flow)].rate > rate * (1 + kRateMargin))
                return false;
        }
        f.rate = rate;
    }
    for (int fid : joined_) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        ++f.version;
        schedule_completion(fid);
    }
    rate_update_flows_ += joined_.size();
    return true;
}

void FlowNetwork::update_rates() {
    update_pending_ = false;
    const bool local = update_locally();
    joined_.clear();
    left_rate_.clear();
    left_begin_.assign(1, 0);
    left_links_.clear();
    owner_entered_ = false;
    if (local) {
        for (int l : dirty_links_)
            link_dirty_[static_cast<std::size_t>(l)] = 0;
        dirty_links_.clear();
        return;
    }
    find_component();
    rate_update_flows_ += component_flows_.size();
    rate_update_work_ += component_items_.size();
    drain_to_now();
    bound_shares();
    fill_progressively();
    // Reschedule the completions.
    for (int fid : component_flows_) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.frozen = false;
        ++f.version;
        schedule_completion(fid);
    }
}

void FlowNetwork::find_component() {
    // The component: flows reachable from the dirty links through shared links, found by a depth-first
    // search over links. The visiting order of the links (their positions) breaks ties in
    // fill_progressively; a flow's links that no other flow uses are visited as runs (SearchItem) with the
    // same positions as one by one. Each flow found is marked frozen (as "visited") until drain_to_now.
    component_flows_.clear();
    search_stack_.clear();
    component_items_.clear();
    dirty_solo_links_.clear();
    for (int l : dirty_links_) {
        const auto lu = static_cast<std::size_t>(l);
        link_dirty_[lu] = 0;
        if (!link_seen_[lu]) {
            link_seen_[lu] = 1;
            search_stack_.push_back(SearchItem{l, 0, -1, 0});
            const auto& v = flows_on_link_[lu];
            if (v.size() == 1) dirty_solo_links_.emplace_back(v.front().flow, v.front().index);
        }
    }
    dirty_links_.clear();
    // By flow, then distinct index: visit() looks up a flow's entries by binary search (a scan of every
    // entry per visited flow was quadratic on large components).
    // They are mostly in order already (a flow's links are marked in route order): sorted only if not.
    if (!std::is_sorted(dirty_solo_links_.begin(), dirty_solo_links_.end()))
        std::sort(dirty_solo_links_.begin(), dirty_solo_links_.end());
    int next_position = 0;
    while (!search_stack_.empty()) {
        SearchItem item = search_stack_.back();
        search_stack_.pop_back();
        item.position = next_position;
        component_items_.push_back(item);
        if (item.is_run()) {
            next_position += item.hi - item.lo;
            continue;
        }
        ++next_position;
        for (const LinkEntry& e : flows_on_link_[static_cast<std::size_t>(item.link_or_flow)])
            visit(e.flow);
    }
}

void FlowNetwork::drain_to_now() {
    // The discovery order is itself deterministic (it follows the order of events and of the per-link flow
    // lists), so the floating-point sums of the filling are reproducible without sorting.
    const Time now = sim_.now();
    for (int fid : component_flows_) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.remaining -= f.rate * (now - f.last_update).to_seconds();
        if (f.remaining < 0) f.remaining = 0;
        f.last_update = now;
        f.frozen = false;
    }
}

void FlowNetwork::bound_by_solo_link(int fid, double share, int position) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (f.solo_position < 0) solo_flows_.push_back(fid);
    if (f.solo_position < 0 || share < f.solo_share) {
        f.solo_share = share;
        f.solo_position = position;
    }
}

void FlowNetwork::bound_shares() {
    // A link that carries a single flow (a ring's coupled flow crosses hundreds of links no other flow uses)
    // keeps the share capacity / uses until that flow is frozen, so each flow's smallest such share (and
    // the first such link's position) is taken once here; the shared links and those bounds go to the
    // candidate heap with their first share.
    candidates_.clear();
    solo_flows_.clear();
    for (int fid : component_flows_) {
        Flow& f = flows_[static_cast<std::size_t>(fid)];
        f.solo_share = std::numeric_limits<double>::infinity();
        f.solo_position = -1;
    }
    for (const SearchItem& item : component_items_) {
        if (item.is_run()) {
            // A run, visited from hi-1 down to lo: its smallest share, at its first link in that order.
            const Flow& f = flows_[static_cast<std::size_t>(item.link_or_flow)];
            int smallest = item.hi - 1;
            const std::vector<double>& solo = f.links->solo_share;
            double share = solo[static_cast<std::size_t>(smallest)];
            for (int j = item.hi - 2; j >= item.lo; --j)
                if (solo[static_cast<std::size_t>(j)] < share) {
                    share = solo[static_cast<std::size_t>(j)];
                    smallest = j;
                }
            bound_by_solo_link(item.link_or_flow, share, item.position + (item.hi - 1 - smallest));
            continue;
        }
        const auto lu = static_cast<std::size_t>(item.link_or_flow);
        link_seen_[lu] = 0;
        capacity_left_[lu] = capacity_[lu];
        const auto& on_link = flows_on_link_[lu];
        int uses = 0;
        for (const LinkEntry& e : on_link)
            uses += flows_[static_cast<std::size_t>(e.flow)].links->uses[static_cast<std::size_t>(e.index)];
        unfrozen_on_link_[lu] = uses;
        if (on_link.empty()) continue;
        const int first = on_link.front().flow;
        const bool one_flow = on_link.size() == 1;
        if (!one_flow) {
            share_[lu] = capacity_left_[lu] / unfrozen_on_link_[lu];
            position_of_link_[lu] = item.position;
            push_candidate(Bottleneck{share_[lu], item.position, item.link_or_flow, -1});
            continue;
        }
        bound_by_solo_link(first, capacity_left_[lu] / unfrozen_on_link_[lu], item.position);
    }
    for (int fid : solo_flows_) {
        const Flow& f = flows_[static_cast<std::size_t>(fid)];
        push_candidate(Bottleneck{f.solo_share, f.solo_position, -1, fid});
    }
}

[[gnu::always_inline]] inline void FlowNetwork::push_candidate(const Bottleneck& b) {
    candidates_.push_back(b);
    // Through a lambda, so that the sifts inline the comparison (a function pointer was called through).
    std::push_heap(candidates_.begin(), candidates_.end(),
                   [](const Bottleneck& x, const Bottleneck& y) { return later_candidate(x, y); });
}

void FlowNetwork::freeze(int fid, double rate, std::size_t& unfrozen) {
    // The links the flow shares lose its rate once per use (its own links are no longer looked at: no other
    // flow has a share there).
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (f.frozen) return;
    f.frozen = true;
    f.rate = rate;
    --unfrozen;
    const SmallInts& shared = shared_links(f);
    rate_update_work_ += shared.size();
    for (int j : shared) {
        const auto l2 = static_cast<std::size_t>(f.links->links[static_cast<std::size_t>(j)]);
        for (int m = f.links->uses[static_cast<std::size_t>(j)]; m > 0; --m) {
            capacity_left_[l2] -= rate;
            --unfrozen_on_link_[l2];
        }
        // The share the next rounds compare (computed from the same values as at the time they look). The
        // flow froze at the smallest share, so the link's share does not fall and its entry in the heap
        // stays a lower bound: next_bottleneck enters the new share when that entry comes up (a flow with
        // thousands of shared links would otherwise push thousands of entries per freeze). Only a share
        // that fell (by rounding) is entered now, so the heap always holds a lower bound of every share.
        if (unfrozen_on_link_[l2] > 0) {
            const double before = share_[l2];
            share_[l2] = capacity_left_[l2] / unfrozen_on_link_[l2];
            if (share_[l2] < before)
                push_candidate(Bottleneck{share_[l2], position_of_link_[l2], static_cast<int>(l2), -1});
        }
    }
}

[[gnu::always_inline]] inline bool FlowNetwork::later_candidate(const Bottleneck& a, const Bottleneck& b) {
    return a.share > b.share || (a.share == b.share && a.position > b.position);
}

FlowNetwork::Bottleneck FlowNetwork::next_bottleneck() {
    // The smallest (share, position) among the shared links still carrying unfrozen flows and the unfrozen
    // flows' own-link bounds. Every such link has an entry in the heap at most its share (freeze), so an
    // entry equal to its link's share at the top is the smallest of all; an entry below its link's share is
    // entered anew at that share; entries that no longer hold (a link whose flows are all frozen, a share
    // above the link's, a frozen flow) are dropped. Positions are unique, so the pick is the one a scan of
    // every candidate in visiting order makes (smallest share, first among equals).
    while (!candidates_.empty()) {
        ++rate_update_work_;
        const Bottleneck top = candidates_.front();
        std::pop_heap(candidates_.begin(), candidates_.end(),
                      [](const Bottleneck& x, const Bottleneck& y) { return later_candidate(x, y); });
        candidates_.pop_back();
        if (top.flow >= 0) {
            if (!flows_[static_cast<std::size_t>(top.flow)].frozen) return top;
            continue;
        }
        const auto lu = static_cast<std::size_t>(top.link);
        if (unfrozen_on_link_[lu] <= 0) continue;
        if (share_[lu] == top.share) return top;
        if (top.share < share_[lu]) push_candidate(Bottleneck{share_[lu], top.position, top.link, -1});
    }
    return Bottleneck{};
}

void FlowNetwork::fill_progressively() {
    // Progressive filling: repeatedly saturate the link with the smallest fair share (the first in visiting
    // order among equal shares) and freeze its flows at that share. Each round scans only the shared links
    // still carrying unfrozen flows and the unfrozen flows' own-link bounds (bound_shares); the picks, and so
    // the arithmetic, are the same as scanning every link every round.
    std::size_t unfrozen = component_flows_.size();
    while (unfrozen > 0) {
        const Bottleneck b = next_bottleneck();
        if (b.position < 0) throw InternalError("max-min fairness: flows left without a link");
        const double rate = b.share < 0 ? 0 : b.share;
        if (b.flow >= 0) {
            freeze(b.flow, rate, unfrozen);
        } else {
            for (const LinkEntry& e : flows_on_link_[static_cast<std::size_t>(b.link)])
                freeze(e.flow, rate, unfrozen);
        }
    }
}

[[gnu::always_inline]] inline void FlowNetwork::release_id(int fid) {
    const Flow& f = flows_[static_cast<std::size_t>(fid)];
    (f.distinct_slot.capacity() >= kLongRouteLinks ? free_long_ids_ : free_ids_).push_back(fid);
}

void FlowNetwork::finish_alone(int fid, std::uint64_t version) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (!f.active || f.version != version) return;  // it entered the lists: finish() ends it
    f.active = false;
    --active_count_;
    for (int l : f.links->links)
        if (link_owner_[static_cast<std::size_t>(l)] == fid) link_owner_[static_cast<std::size_t>(l)] = -1;
    release_id(fid);
    if (f.join >= 0) {
        const int jid = f.join;
        f.join = -1;
        joins_[static_cast<std::size_t>(jid)].finished |= 1u << f.join_slot;
        join_arrived(jid);
        return;
    }
    Simulator::Callback done = std::move(f.on_done);  // on_done may start flows that take this id
    done();
}

void FlowNetwork::schedule_finish_alone(int fid) {
    const Flow& f = flows_[static_cast<std::size_t>(fid)];
    const Time end = f.drain_end + f.latency;
    const std::uint64_t v = f.version;
    if (f.join < 0 || !in_starts_) {
        sim_.schedule(end, Priority::kFlowCompletion, [this, fid, v] { finish_alone(fid, v); });
        return;
    }
    // Within one schedule_starts event nothing else is scheduled at `end` (> now) with this priority: the
    // flows' events would be consecutive in the order at `end`, so a group stands for them.
    for (int g : open_groups_) {
        AloneGroup& group = alone_groups_[static_cast<std::size_t>(g)];
        if (group.join == f.join && group.end == end) {
            group.flows[group.count] = fid;
            group.versions[group.count] = v;
            ++group.count;
            return;
        }
    }
    const int g = reuse_or_append(free_alone_groups_, alone_groups_);
    AloneGroup& group = alone_groups_[static_cast<std::size_t>(g)];
    group.end = end;
    group.join = f.join;
    group.count = 1;
    group.flows[0] = fid;
    group.versions[0] = v;
    open_groups_.push_back(g);
    sim_.schedule(end, Priority::kFlowCompletion, [this, g] { finish_alone_group(g); });
}

void FlowNetwork::finish_alone_group(int g) {
    const AloneGroup group = alone_groups_[static_cast<std::size_t>(g)];  // the last may start a transfer
    free_alone_groups_.push_back(g);
    for (std::uint32_t i = 0; i < group.count; ++i)
        finish_alone(group.flows[i], group.versions[i]);
}

void FlowNetwork::finish(int fid, std::uint64_t version) {
    Flow& f = flows_[static_cast<std::size_t>(fid)];
    if (!f.active || f.version != version) return;  // superseded by a rate change
    f.active = false;
    --active_count_;
    // A listed flow (one alone on its links until the end is ended by finish_alone): it leaves its lists.
    bool changed = false;
    const LinkUses& rl = *f.links;
    for (std::size_t j = 0; j < rl.links.size(); ++j) {
        const int l = rl.links[j];
        auto& v = flows_on_link_[static_cast<std::size_t>(l)];
        const auto slot = static_cast<std::size_t>(f.distinct_slot[j]);
        if (slot >= v.size() || v[slot].flow != fid) throw InternalError("flow missing from its link");
        // The last entry takes the flow's place (the order a search and swap would leave).
        const LinkEntry last = v.back();
        v[slot] = last;
        flows_[static_cast<std::size_t>(last.flow)].distinct_slot[static_cast<std::size_t>(last.index)] =
            static_cast<int>(slot);
        v.pop_back();
        // A link left without flows changes no rate: only links still carrying flows need a
        // recomputation.
        if (!v.empty()) {
            mark_dirty(l);
            changed = true;
            left_links_.emplace_back(l, rl.uses[j]);
            if (v.size() == 1) set_shared(v.front().flow, v.front().index, false);  // it has it to itself
        }
    }
    if (changed) {
        left_rate_.push_back(f.rate);
        left_begin_.push_back(left_links_.size());
        request_update();
    }
    release_id(fid);
    if (f.join >= 0) {
        // One flow of a joined transfer (start_joined_flows_after): while another of its flows still drains,
        // that one arrives after this one (equal latencies; at equal times its event comes later), so this
        // arrival is counted now and needs no event; the last to drain arrives in its event, as it would.
        const int jid = f.join;
        f.join = -1;
        Join& j = joins_[static_cast<std::size_t>(jid)];
        j.finished |= 1u << f.join_slot;
        if (!others_drained(j, fid)) {
            --j.remaining;
            return;
        }
        sim_.schedule_in(f.latency, Priority::kFlowCompletion, [this, jid] { join_arrived(jid); });
        return;
    }
    sim_.schedule_in(f.latency, Priority::kFlowCompletion, std::move(f.on_done));
}

}  // namespace trainsim
