// Flow-level network: transfers are fluid flows on routed links; concurrent flows share each link's bandwidth
// max-min fairly (progressive filling, as SimGrid's LMM model), recomputed whenever a flow starts or ends.
//
// Timing of one flow of S bytes on route R: its bytes drain at the max-min rate of the moment (rates change
// as other flows come and go); once drained, completion is signalled after R.latency (sum of hop latencies),
// so an isolated flow takes latency + S / min(link bandwidth) — the alpha-beta model. All changes at one
// instant are batched: rates are recomputed once, in an event of Priority::kRateUpdate, and only for the
// flows connected (through shared links) to a link that changed.
//
// Most changes leave every other flow's rate as it was, and the batched update first tries to show that
// (update_locally): max-min rates are the unique allocation in which every flow has a bottleneck, a saturated
// link where no other flow has a higher rate (Bertsekas & Gallager, Data Networks, 2nd ed., section 6.5.2).
// A flow that left does not move another flow's rate when none of its links was the bottleneck of another
// flow: each was either unsaturated, or saturated with every other flow on it strictly slower than the one
// that left. A flow that joined does not move another's when none of its links was saturated before it
// came: it then takes the smallest of its links' spare capacity / uses, and that link is its bottleneck if no
// flow there is faster. When every change of the instant passes these checks (in that order: the flows that
// left, then the flows that joined, each against the rates of the ones before), only the joined flows get
// rates; otherwise the component is recomputed as below. The rates agree up to rounding with the
// recomputation's.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include <boost/container/small_vector.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/engine.hpp"

namespace trainsim {

class FlowNetwork {
  public:
    /// `link_bandwidth[i]` is link i's capacity in bytes/s. The simulator outlives the network.
    FlowNetwork(Simulator& sim, std::vector<double> link_bandwidth);

    /// Starts a flow of `bytes` (> 0) along `route`; `on_done` runs when its last byte has arrived.
    /// A flow of 0 bytes completes after the route latency. A link may appear several times in a route (a
    /// coupled flow such as a ring collective's channel): it then takes that many times the flow's rate on
    /// that link.
    void start_flow(const Route& route, double bytes, Simulator::Callback on_done);
    /// The same as scheduling start_flow(route, bytes, on_done) after `delay` (an event of Priority::kDefault
    /// scheduled now), without nesting the callback in another: the route is copied now.
    void start_flow_after(Time delay, const Route& route, double bytes, Simulator::Callback on_done);
    /// start_flow_after(delay, *routes[i], bytes[i], std::move(on_done[i])) for each i in order, as one
    /// event: the same calls at the same instant in the same order (their start events would have run one
    /// after the other: consecutive sequence numbers at one time and priority), so the same results with
    /// fewer events. Empty routes and flows of 0 bytes, or more than kMaxBatchedStarts flows, take
    /// start_flow_after one by one. `on_done` is moved from.
    void start_flows_after(Time delay, const std::vector<const Route*>& routes,
                           const std::vector<double>& bytes, std::vector<Simulator::Callback>& on_done);
    static constexpr std::size_t kMaxBatchedStarts = 8;
    /// The flows of one transfer (a P2P message's flows, one per member GPU of the sender; a collective's
    /// channels), started as start_flows_after starts them, with one `on_done` for all of them: it runs when
    /// the last one has arrived, in the event and at the place in the order where the last of per-flow
    /// callbacks that count down (and act at zero) would have run, so the simulation is the same. What is
    /// saved: the completion events of the flows that are not the last. A flow that shares a link ends its
    /// drain in one event (finish) and arrives in another, after the route latency; when its drain ends while
    /// another flow of the transfer is still draining (or in the lists, or alone with its drain ahead), that
    /// one arrives later (the flows have equal latencies), so its own arrival would only have counted down:
    /// it is counted at once and gets no event. A flow alone on its links arrives in its one event
    /// (finish_alone) as before. With routes of different latencies, an empty flow or route, or more than
    /// kMaxBatchedStarts flows, each flow keeps its arrival event (start_flows_after with counting
    /// callbacks).
    void start_joined_flows_after(Time delay, const std::vector<const Route*>& routes,
                                  const std::vector<double>& bytes, Simulator::Callback on_done);

    /// A flow on links that no other flow uses while it runs (the caller guarantees it, e.g. the NVLink links
    /// of a TP group that fills its node): the completion times of start_flow_after for a flow alone on its
    /// links (rate = the smallest capacity / uses of a link on the route; done after the drain, rounded up to
    /// the picosecond, plus the route latency), computed at once and scheduled as one event instead of two
    /// (its start, then its end: finish_alone).
    void start_private_flow_after(Time delay, const Route& route, double bytes, Simulator::Callback on_done);
    /// The parts of start_private_flow_after, for a caller that times private flows itself (the executor
    /// runs a GPU's compute and private TP collectives ahead without events): private_flow_time is the time
    /// from the flow's start to its completion (the drain, rounded up to the picosecond, plus the route
    /// latency; the latency alone for an empty flow); count_private_flow records the flow's bytes on its
    /// links and counts it among the flows started. start_private_flow_after(delay, ...) at now is count,
    /// then one event at now + delay + private_flow_time.
    Time private_flow_time(const Route& route, double bytes);
    void count_private_flow(const Route& route, double bytes);
    /// For a caller that sums the bytes of private flows whose routes all cross the same links once each
    /// (each of those links then gets the same additions, from the same count): sets each of `links`' byte
    /// count to `bytes`, the sum, and counts `flows` more flows started.
    void set_private_link_bytes(const std::vector<int>& links, double bytes, std::uint64_t flows);

    /// Bytes that have crossed each link so far (for utilization reports).
    const std::vector<double>& link_bytes() const { return link_bytes_; }
    std::uint64_t flows_started() const { return flows_started_; }
    /// The flows whose max-min rates were recomputed so far, summed over the rate updates (each update
    /// recomputes one component: the flows reachable from the links that changed through shared links).
    /// The network's share of a simulation's CPU work grows with it (progressive filling over a component
    /// costs about its flows times its rounds); deterministic, unlike a timer.
    std::uint64_t rate_update_flows() const { return rate_update_flows_; }
    /// The steps of the rate updates so far: the links and runs of each component searched, the candidate
    /// picks of progressive filling and the shared links each frozen flow updates. Deterministic; about
    /// proportional to the CPU time the updates take.
    std::uint64_t rate_update_work() const { return rate_update_work_; }
    std::size_t active_flows() const { return active_count_; }
    /// For tests: false makes every batched update recompute the component (update_locally is not tried),
    /// the reference the local updates are checked against.
    void set_local_updates_for_testing(bool on) { local_updates_ = on; }

  private:
    static constexpr std::size_t kInlineLinks = 6;
    using SmallInts = boost::container::small_vector<int, kInlineLinks>;
    struct Flow {
        double remaining = 0;  ///< bytes
        double rate = 0;       ///< bytes/s
        Time last_update;
        Time latency;
        /// While alone on its links (not listed): when its last byte leaves, the drain's end. Its links are
        /// its own until then (owner_live); one event at drain_end + latency ends it (finish_alone).
        Time drain_end;
        std::uint64_t version = 0;  ///< bumps when the completion event is rescheduled
        Simulator::Callback on_done;
        bool active = false;
        bool frozen = false;     ///< scratch for progressive filling
        bool listed = false;     ///< entered in flows_on_link_ (else alone on its links: their owner)
        double solo_share = 0;   ///< scratch: smallest share among the links it has to itself
        int solo_position = -1;  ///< scratch: position of that link in the component (-1: none)
        /// Set with the flow (set_distinct_links): its route's distinct links in order of first use, how
        /// many times the route uses each, and their solo shares (LinkUses::solo_share): the route's
        /// link_uses, shared by its flows, or, for a route without them, own_links, counted.
        const LinkUses* links = nullptr;      ///< alive while the network is (kept_uses_, own_links)
        std::unique_ptr<LinkUses> own_links;  ///< kept for the id's next flow
        // Set when the flow enters the per-link lists (prepare_lists): distinct_is_shared[j]: another flow
        // also uses link j, kept up to date as flows join and leave; shared_distinct: those indices,
        // ascending, rebuilt from the flags when read after a change (shared_stale; shared_links()).
        SmallInts shared_distinct;
        boost::container::small_vector<char, kInlineLinks> distinct_is_shared;
        /// distinct_slot[j]: the flow's entry's index in the list of its distinct link j (flows_on_link_),
        /// so that leaving the list is a swap with the last entry, not a search
        SmallInts distinct_slot;
        bool shared_stale = false;
        int join = -1;       ///< its transfer's entry in joins_ (start_joined_flows_after), or -1
        int join_slot = -1;  ///< its index among that transfer's flows
    };
    /// A transfer of start_joined_flows_after: its callback, the arrivals still to count, and its flows.
    struct Join {
        Simulator::Callback on_done;
        int remaining = 0;  ///< flows not yet arrived (counted down as per-flow callbacks would)
        std::uint32_t count = 0;
        std::uint32_t finished = 0;  ///< bit i: flow i has left its links (finish or finish_alone ran)
        std::array<int, kMaxBatchedStarts> flows{};
    };
    /// Flows of one joined transfer, started in one event and alone on their links with the same end
    /// (drain_end + latency): their finish_alone events would have run one after the other (same time and
    /// priority, consecutive sequence numbers, as schedule_starts activates them in order), and the first
    /// ones only count down, so one event runs them in that order (finish_alone_group).
    struct AloneGroup {
        Time end;
        std::uint32_t count = 0;
        int join = -1;
        std::array<int, kMaxBatchedStarts> flows{};
        std::array<std::uint64_t, kMaxBatchedStarts> versions{};
    };
    /// An entry of a link's flow list: the flow and the link's distinct index in that flow's route. A flow
    /// has one entry per link however many times its route uses the link (the uses: LinkUses::uses).
    struct LinkEntry {
        int flow;
        int index;
    };
    /// An item of find_component's depth-first search: a link (hi < 0: link_or_flow is the link), or a run
    /// of links that flow link_or_flow has to itself (its distinct links lo .. hi-1, visited from hi-1 down
    /// to lo); position: the position of the (first) link in the component's visiting order.
    struct SearchItem {
        int link_or_flow;
        int lo;
        int hi;
        int position;
        bool is_run() const { return hi >= 0; }
    };
    /// A round of progressive filling's pick: the smallest share and where (a shared link, or the own link
    /// of a flow), at the first position in visiting order among equal shares.
    struct Bottleneck {
        double share = std::numeric_limits<double>::infinity();  ///< bytes/s
        int position = -1;                                       ///< -1: nothing left to fill
        int link = -1;                                           ///< a shared link, or
        int flow = -1;                                           ///< a flow alone on its link
    };

    int new_flow(const Route& route, double bytes, Simulator::Callback on_done);
    /// Schedules the start of flows ids[0 .. n-1] (n <= kMaxBatchedStarts), in that order, as one event.
    void schedule_starts(Time delay, const int* ids, std::size_t n);
    /// Whether every flow of join `j` but `fid` has ended its drain by now: it left its links (finish,
    /// finish_alone), or it is alone on them with its drain ended (its arrival event is still ahead).
    bool others_drained(const Join& j, int fid) const;
    /// Counts one arrival of join `jid`; at the last, frees the join and runs its on_done.
    void join_arrived(int jid);
    /// The flow's distinct links, their uses and solo shares: the route's link_uses (its solo shares
    /// computed at its first flow), else counted into the flow's own_links.
    void set_distinct_links(Flow& f, const Route& route);
    void activate(int flow_id);
    void enter_in_lists(int flow_id);
    void prepare_lists(Flow& f);
    void push_on_link(int link, int flow_id, int index);
    void set_shared(int flow_id, int index, bool shared);
    /// The flow's shared_distinct, rebuilt from distinct_is_shared if a set_shared changed it since.
    const SmallInts& shared_links(Flow& f);
    void visit(int flow_id);
    void mark_dirty(int link);
    void request_update();
    /// Max-min fair rates of the flows reachable from the dirty links (the batched update at the end of an
    /// instant): find_component, drain_to_now, bound_shares, fill_progressively, then the completions
    /// rescheduled.
    void update_rates();
    /// The check above, and the joined flows' rates when it holds; false (nothing changed but the rates of
    /// joined flows, which the recomputation sets again) when it does not.
    bool update_locally();
    /// Sum of rate x uses of the flows on `link` other than `except` (bytes/s; a joined flow not yet given
    /// its rate by update_locally carries 0).
    double link_load(int link, int except) const;
    void find_component();
    void drain_to_now();
    void bound_shares();
    void bound_by_solo_link(int flow_id, double share, int position);
    void fill_progressively();
    Bottleneck next_bottleneck();
    void push_candidate(const Bottleneck& b);
    /// The heap order of candidates_: true when `a` comes after `b` (larger share, or equal and later).
    static bool later_candidate(const Bottleneck& a, const Bottleneck& b);
    void freeze(int flow_id, double rate, std::size_t& unfrozen);
    void finish(int flow_id, std::uint64_t version);
    /// Returns a finished flow's id for reuse: to free_long_ids_ if its lists hold room for kLongRouteLinks
    /// links or more, else to free_ids_.
    void release_id(int flow_id);
    /// The end of a flow that stayed alone on its links: at drain_end + latency it gives up the links it
    /// still owns and runs on_done, one event where a listed flow takes two (the drain's end, then the
    /// completion after the latency). Nothing if the flow has entered the lists since (version).
    void finish_alone(int flow_id, std::uint64_t version);
    /// finish_alone(flow, version) of each flow of alone_groups_[group], in order, as their events would.
    void finish_alone_group(int group);
    /// Schedules finish_alone of flow `fid` (alone on its links) at drain_end + latency: in a group of its
    /// transfer's flows started in the same event (AloneGroup) when one ends at the same time, else its own.
    void schedule_finish_alone(int fid);
    /// Whether link `link`'s owner (a flow alone on it) still holds it: a flow whose drain has ended by now
    /// has left it (its bytes are gone; only the latency is left), as if its end had been an event then,
    /// and the link's owner is cleared.
    bool owner_live(int link);
    void schedule_completion(int flow_id);

    Simulator& sim_;
    std::vector<double> capacity_;
    /// [link]: the listed flows on it; most links carry one or two, kept inline (no allocation to reach).
    std::vector<boost::container::small_vector<LinkEntry, 2>> flows_on_link_;
    std::vector<int> link_owner_;        ///< the flow alone on the link and not in its list, or -1
    std::vector<Time> owner_drain_end_;  ///< [link]: its owner's drain_end (fixed while it is alone)
    /// The routes' LinkUses whose solo shares this network computed, held so that flows may point to them.
    std::vector<std::shared_ptr<const LinkUses>> kept_uses_;
    std::vector<int> use_count_;  ///< scratch
    std::vector<double> link_bytes_;
    std::vector<Flow> flows_;
    /// Ids of finished flows, for reuse: those whose lists hold room for kLongRouteLinks links or more
    /// (free_long_ids_) go to long routes only, so that the room of a DP ring's flow (tens of thousands of
    /// links) is not held by a short flow while the next ring's flow allocates its own.
    std::vector<int> free_ids_, free_long_ids_;
    std::vector<Join> joins_;
    std::vector<int> free_joins_;
    std::vector<AloneGroup> alone_groups_;
    std::vector<int> free_alone_groups_;
    /// While schedule_starts' event activates its flows: the alone groups it opened (alone_groups_ ids).
    bool in_starts_ = false;
    boost::container::small_vector<int, kMaxBatchedStarts> open_groups_;
    std::vector<Simulator::Callback> join_done_;  ///< scratch: counting callbacks (start_joined_flows_after)
    static constexpr std::size_t kLongRouteLinks = 4096;
    std::vector<int> dirty_links_;
    std::vector<char> link_dirty_;
    std::vector<char> link_seen_;        ///< scratch
    std::vector<double> capacity_left_;  ///< scratch: capacity not yet given to frozen flows, bytes/s
    std::vector<int> unfrozen_on_link_;  ///< scratch: uses of the link by flows not yet frozen
    std::vector<double> share_;          ///< scratch: capacity_left_ / unfrozen_on_link_ of a shared link
    std::vector<int> distinct_index_;    ///< scratch, -1
    std::vector<int> component_flows_;   ///< scratch: the flows of the component, in discovery order
    std::vector<int> solo_flows_;        ///< scratch: the component's flows with a link of their own
    std::vector<int> splits_;            ///< scratch
    std::vector<int> solo_splits_;       ///< scratch: a flow's dirty links it has to itself
    std::vector<SearchItem> search_stack_, component_items_;  ///< scratch
    /// scratch: progressive filling's candidates, a binary min-heap on (share, position) (later_candidate):
    /// the shared links at their share when last computed and the flows' own-link bounds; entries that no
    /// longer hold are dropped as they come up (next_bottleneck). A round costs O(log n) instead of a scan of
    /// every live candidate, which made a component of n flows cost O(n^2) (an all-to-all or a data-parallel
    /// ring across thousands of GPUs).
    std::vector<Bottleneck> candidates_;
    std::vector<int> position_of_link_;  ///< scratch: a shared link's position in the component
    std::vector<std::pair<int, int>>
        dirty_solo_links_;  ///< scratch: (flow, distinct index) of dirty solo links
    /// The changes of the instant, for update_locally: flows that joined (listed), flows that left (their
    /// rate and their distinct links that still carry flows, with their uses: left_links_ from
    /// left_begin_[i] to left_begin_[i + 1]), and whether a flow alone on its links entered the lists
    /// (then the update recomputes: its completion event is that of a flow alone).
    std::vector<int> joined_;
    std::vector<double> left_rate_;
    std::vector<std::size_t> left_begin_{0};
    std::vector<std::pair<int, int>> left_links_;  ///< (link, uses)
    bool owner_entered_ = false;
    bool local_updates_ = true;      ///< set_local_updates_for_testing
    std::vector<double> left_load_;  ///< scratch, by link: rate x uses of the flows that left it
    bool update_pending_ = false;
    std::uint64_t flows_started_ = 0;
    std::uint64_t rate_update_flows_ = 0;  ///< rate_update_flows()
    std::uint64_t rate_update_work_ = 0;   ///< rate_update_work()
    std::size_t active_count_ = 0;
};

}  // namespace trainsim
