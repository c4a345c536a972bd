// The executor. A "unit" is what runs one main stream: a single GPU, or, with TP folding, the `tp` GPUs of
// one TP group, which execute the same ops in lockstep. Every GPU's transfers are still started on the
// network: a unit's send starts one flow per member GPU, its DP collective runs the DP group of every
// member's TP index, its TP collective runs over all the group's GPUs.
#include "trainsim/executor.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <boost/container/small_vector.hpp>

#include "trainsim/errors.hpp"
#include "trainsim/network.hpp"

namespace trainsim {

namespace {

enum class Block { none, tp, dp, p2p, compute, done };

/// Which collective a unit waited for on its TP stream (for the wait split of RankTimes).
enum class StreamWait { tp, cp, ep, pipeline };

/// One P2P message between two units. Its transfer starts when both sides have posted (NCCL send/recv pair
/// up: the data moves once the receiver's kernel runs), as Megatron-LM's p2p_communication.py batches them.
struct Message {
    bool sent = false;    ///< the sender posted its send
    bool posted = false;  ///< the receiver posted its recv
    bool started = false;
    bool arrived = false;
    int sender = -1;
    double bytes = 0;
    const Op* op = nullptr;
    Time started_at;
};

/// The P2P messages in flight by key (Executor::message_key), as an unordered_map would hold them (found,
/// default-made by get, erased) without a node allocation per message: a pool with stable addresses and, per
/// destination unit, the keys of its messages (a unit has a few in flight), searched in turn.
class MessageTable {
  public:
    void resize(std::size_t units) { by_unit_.resize(units); }
    /// The message of `key` to unit `dst`, default-made if there is none.
    Message& get(int dst, std::uint64_t key) {
        if (Message* m = find(dst, key)) return *m;
        int index;
        if (!free_.empty()) {
            index = free_.back();
            free_.pop_back();
            at(index) = Message{};
        } else {
            index = size_;
            if ((static_cast<std::size_t>(size_) & (kPageSize - 1)) == 0)
                pages_.push_back(std::make_unique<Message[]>(kPageSize));
            ++size_;
        }
        by_unit_[static_cast<std::size_t>(dst)].emplace_back(key, index);
        return at(index);
    }
    Message* find(int dst, std::uint64_t key) {
        for (const auto& [k, index] : by_unit_[static_cast<std::size_t>(dst)])
            if (k == key) return &at(index);
        return nullptr;
    }
    const Message* find(int dst, std::uint64_t key) const {
        return const_cast<MessageTable*>(this)->find(dst, key);
    }
    void erase(int dst, std::uint64_t key) {
        auto& keys = by_unit_[static_cast<std::size_t>(dst)];
        for (auto& entry : keys)
            if (entry.first == key) {
                free_.push_back(entry.second);
                entry = keys.back();
                keys.pop_back();
                return;
            }
    }

  private:
    /// The pool: pages of kPageSize messages that never move (a message is referred to while others are
    /// added), indexed with a shift and a mask (std::deque's indexing took a few branches and a division).
    static constexpr std::size_t kPageBits = 8;
    static constexpr std::size_t kPageSize = std::size_t{1} << kPageBits;
    Message& at(int index) {
        const auto i = static_cast<std::size_t>(index);
        return pages_[i >> kPageBits][i & (kPageSize - 1)];
    }
    std::vector<std::unique_ptr<Message[]>> pages_;
    int size_ = 0;  ///< messages made so far
    std::vector<int> free_;
    std::vector<boost::container::small_vector<std::pair<std::uint64_t, int>, 4>> by_unit_;
};

/// A private TP collective's time from its start to its completion (Collectives::plan's delay plus
/// FlowNetwork::private_flow_time), per (kind, bytes) of a group.
struct PrivateTiming {
    CollectiveKind kind = CollectiveKind::all_reduce;
    double bytes = 0;
    const Route* route = nullptr;
    double flow_bytes = 0;
    Time duration;
    bool pooled = false;  ///< its route crosses each link of the group's pool once (GroupCache::pool_links)
};

/// A group's communicator and the units that wait for its collectives, looked up once: the entry of the
/// communicator registry for one (GroupKind, group index) (include/trainsim/parallel_groups.hpp).
struct GroupCache {
    std::vector<int> ranks;                           ///< the group's GPUs, ascending; empty until looked up
    const Collectives::Communicator* comm = nullptr;  ///< set up on first use (ranks.size() > 1)
    std::vector<struct Unit*> units;                  ///< the distinct units of its ranks, in rank order
    /// [collective sequence number on the group] units arrived so far (a collective starts when every unit
    /// has arrived; NCCL semantics: the k-th collective on a communicator is the same on every member).
    /// A flat list (a group has one collective or two under way; a hash-map node per collective was
    /// allocated and freed): (sequence number, arrived), in no particular order.
    boost::container::small_vector<std::pair<std::uint32_t, int>, 2> arrivals;
    std::vector<PrivateTiming>
        private_timings;  ///< TP groups run ahead (ExecutionOptions::run_local_ops_ahead)
    // The bytes of the private TP collectives run ahead. Their routes (NVLS, or the ring of the node) cross
    // the same links once each, so every one of those links gets the same additions: they are summed once
    // here, from the links' common count, and written to the links when the simulation ends (or before a
    // route that does not fit, after which the links are counted one by one).
    std::vector<int> pool_links;  ///< sorted; empty: no pool (yet)
    double pool_bytes = 0;
    std::uint64_t pool_flows = 0;
    bool pool_off = false;
    int parked = 0;  ///< unfolded group running ahead: its units waiting at the start of a run of local ops
};

struct Unit {
    int id = 0;
    std::vector<int> members;  ///< GPU ids, ascending tp index
    RankCoord coord;           ///< of the first member
    const StageProgram* program = nullptr;
    const std::vector<char>* ahead_ok = nullptr;  ///< [pc]: the local ops from pc may run ahead
    bool group_ahead = false;               ///< unfolded: its TP group runs its local ops ahead together
    const Time* seg_time = nullptr;         ///< [segment] its time on this unit (compute factor)
    const double* seg_secs = nullptr;       ///< [segment] seg_time in seconds
    double factor = 1;                      ///< compute factor of its GPUs
    std::uint64_t kernels_run = 0;          ///< kernel index, for the jitter's draws
    std::uint64_t jitter_prefix = 0;        ///< counter_prefix(seed, kJitterStream, its GPU)
    Time tp_arrived;                        ///< when it reached the collective at the front of its TP stream
    Time dp_arrived;                        ///< when it reached the collective at the front of its DP stream
    struct GroupCache* tp_group = nullptr;  ///< its TP group's, once looked up
    std::size_t pc = 0;
    Block block = Block::none;
    Time block_start;
    bool waiting_recv = false;
    std::uint64_t waiting_key = 0;
    int outstanding_sends = 0;
    Time last_send_start;
    std::deque<std::size_t> tp_queue;  ///< op indices
    std::deque<std::size_t> dp_queue;
    /// [GroupKind] collectives this unit has reached on its group of that kind (the arrival sequence).
    std::array<std::uint32_t, kGroupKindCount> seq{};
    int dp_completed = 0;
    bool observed = false;  ///< an observer observes one of its members (ExecutorObserver::observes)
    RankTimes times;
};

class Executor {
  public:
    Executor(const Cluster& cluster, const Layout& layout, const Program& program,
             const std::vector<ExecutorObserver*>& observers, const ExecutionOptions& options,
             const ExecutionScenario& scenario)
        : layout_(layout),
          program_(program),
          parallel_(layout),
          observers_(observers),
          scenario_(scenario),
          net_(sim_, link_capacities(cluster)),
          coll_(sim_, net_, cluster) {
        set_scenario(scenario, layout, program);
        // A unit is a TP group; its members' groups of the expert decomposition are distinct (one per TP
        // index) only when expert TP equals TP: with etp != tp (tp > 1) folding cannot represent the EP and
        // EDP groups and declines.
        const bool experts_fold = parallel_.expert().size(Dim::tp) == layout.tp;
        fold_ = options.fold_tp_groups && experts_fold && fold_symmetric(layout, scenario) ? layout.tp : 1;
        tp_private_ = options.private_tp_links && layout.tp > 1 && layout.tp == cluster.spec().gpus_per_node;
        map_observers(observers, layout);
        make_units(layout, program, scenario);
        // Folded, a unit runs ahead alone while its DP queue is empty (advance); unfolded, its TP group runs
        // ahead together only from the ops where no DP collective is outstanding by the program's structure
        // (group_starts with dp_settled), so every member decides alike.
        tp_shared_ports_ = !tp_private_ && options.private_tp_links &&
                           (fold_ > 1 || options.run_local_ops_ahead) &&
                           tp_ports_private_between_engagements(cluster, layout);
        if (attribute_) caused_.assign(units_.size(), 0.0);
        max_events_ = options.max_events;
        plan_run_ahead(options, program);
    }

    /// The scenario's checks, its jitter and whether waits are attributed.
    void set_scenario(const ExecutionScenario& scenario, const Layout& layout, const Program& program) {
        if (!scenario.compute_factor.empty() &&
            scenario.compute_factor.size() != static_cast<std::size_t>(layout.gpus()))
            throw InternalError("a compute factor per GPU expected");
        jitter_ = scenario.jitter_sigma > 0;
        if (jitter_ && scenario.kernel_seconds.size() != program.segments.size())
            throw InternalError("the jitter needs every segment's kernel times");
        if (jitter_) lognormal_.emplace(scenario.jitter_sigma);
        attribute_ = scenario.attribute;
    }

    /// observed_by_: [GPU] the bit set of the observers that observe it (empty without observers).
    void map_observers(const std::vector<ExecutorObserver*>& observers, const Layout& layout) {
        if (observers.size() > 32) throw InternalError("at most 32 executor observers");
        if (!observers.empty()) {
            observed_by_.assign(static_cast<std::size_t>(layout.gpus()), 0);
            for (int r = 0; r < layout.gpus(); ++r)
                for (std::size_t i = 0; i < observers.size(); ++i)
                    if (observers[i]->observes(r)) observed_by_[static_cast<std::size_t>(r)] |= 1u << i;
        }
    }

    /// The units (fold_ GPUs each), their programs, and their segment times (per compute factor) and jitter.
    void make_units(const Layout& layout, const Program& program, const ExecutionScenario& scenario) {
        const int n = layout.gpus() / fold_;
        units_.resize(static_cast<std::size_t>(n));
        messages_.resize(static_cast<std::size_t>(n));
        for (int u = 0; u < n; ++u) {
            auto& s = units_[static_cast<std::size_t>(u)];
            s.id = u;
            for (int i = 0; i < fold_; ++i) {
                s.members.push_back(u * fold_ + i);
                if (!observed_by_.empty() && observed_by_[static_cast<std::size_t>(u * fold_ + i)] != 0)
                    s.observed = true;
            }
            s.coord = coord_of(layout, s.members.front());
            s.program = &program.stages[static_cast<std::size_t>(s.coord.pp)];
        }
        vs_count_ = static_cast<std::uint64_t>(layout.pp * layout.vpp);
        mb_count_ = static_cast<std::uint64_t>(std::max<std::int64_t>(1, layout.micro_batches()));
        for (const Segment& seg : program.segments) {
            seg_time_.push_back(Time::seconds(seg.seconds));
            seg_secs_.push_back(seg_time_.back().to_seconds());
        }
        // Per compute factor, the segments' times on a unit of that speed (the nominal table for 1).
        for (auto& s : units_) {
            s.factor = scenario.compute_factor.empty()
                           ? 1.0
                           : scenario.compute_factor[static_cast<std::size_t>(s.members.front())];
            if (s.factor == 1.0) {
                s.seg_time = seg_time_.data();
                s.seg_secs = seg_secs_.data();
                continue;
            }
            auto [it, added] = factor_tables_.try_emplace(s.factor);
            if (added)
                for (const Segment& seg : program.segments) {
                    it->second.first.push_back(Time::seconds(seg.seconds * s.factor));
                    it->second.second.push_back(it->second.first.back().to_seconds());
                }
            s.seg_time = it->second.first.data();
            s.seg_secs = it->second.second.data();
        }
        if (jitter_)
            for (auto& s : units_)
                s.jitter_prefix = counter_prefix(scenario.seed, kJitterStream,
                                                 static_cast<std::uint64_t>(s.members.front()));
    }

    /// Whether local ops run ahead: a folded unit runs them ahead alone; an unfolded TP group (folding
    /// declined: jitter, different compute factors, link perturbations, expert TP != TP) runs them ahead
    /// together (run_group_ahead) when none of its members is observed: with private TP links (TP fills the
    /// node), or with TP smaller than the node (tp_shared_ports_) from the ops where no DP collective is
    /// outstanding by the program's structure (group_starts).
    void plan_run_ahead(const ExecutionOptions& options, const Program& program) {
        ahead_ = options.run_local_ops_ahead && (tp_private_ || tp_shared_ports_);
        if (ahead_) {
            for (const StageProgram& st : program.stages) {
                ahead_ok_.push_back(ahead_ok(st.ops));
                group_starts_.push_back(group_starts(st.ops, ahead_ok_.back(), tp_shared_ports_));
            }
            for (auto& s : units_)
                s.ahead_ok = &ahead_ok_[static_cast<std::size_t>(s.coord.pp)];
            if (fold_ == 1) {
                bool any = false;
                for (auto& s : units_) {
                    s.group_ahead = true;
                    for (int m : group(GroupKind::tp, s.members.front()).ranks)
                        if (!observed_by_.empty() && observed_by_[static_cast<std::size_t>(m)] != 0)
                            s.group_ahead = false;
                    any = any || s.group_ahead;
                }
                bool starts = false;
                for (const auto& g : group_starts_)
                    starts = starts || std::find(g.begin(), g.end(), 1) != g.end();
                ahead_ = any && starts;
                if (ahead_ && attribute_) caused_later_.resize(units_.size());
            }
        }
    }

    /// Runs the events in rounds, counting each flow-rate update step (FlowNetwork::rate_update_work) as an
    /// event: a desynchronized fabric (jitter on a large DP group) spends its time there rather than in
    /// events. Throws EventLimitExceeded past max_events_; the rounds end at the same events whatever the
    /// machine, so the stop is deterministic.
    void run_bounded() {
        constexpr std::uint64_t kRound = 1 << 16;
        while (sim_.pending() > 0) {
            const std::uint64_t used = sim_.events_executed() + net_.rate_update_work();
            if (used >= max_events_)
                throw EventLimitExceeded(
                    fmt::format("the simulation passed its bound of {} events (flow-rate "
                                "update steps counted as events) and was stopped",
                                max_events_),
                    max_events_);
            sim_.run(std::min(kRound, max_events_ - used));
        }
    }

    ExecutionResult run() {
        for (auto& s : units_) {
            Unit* sp = &s;
            sim_.schedule(Time{}, Priority::kDefault, [this, sp] { advance(*sp); });
        }
        if (max_events_ == 0) {
            sim_.run();
        } else {
            run_bounded();
        }
        for (GroupCache& g : groups_[static_cast<std::size_t>(GroupKind::tp)])
            flush_pool(g);
        for (std::size_t u = 0; u < caused_later_.size(); ++u)
            flush_caused(static_cast<int>(u), Time::ps(std::numeric_limits<std::int64_t>::max()), true);
        ExecutionResult res;
        double step = 0;
        for (auto& s : units_) {
            if (s.block != Block::done)
                throw InternalError(fmt::format("GPU {} (stage {}) did not finish: stuck at op {} of {}",
                                                s.members.front(), s.coord.pp, s.pc, s.program->ops.size()));
            step = std::max(step, s.times.finish_s);
        }
        res.ranks.resize(static_cast<std::size_t>(layout_.gpus()));
        const Time step_time = Time::seconds(step);
        for (auto& s : units_) {
            s.times.idle_s = step - s.times.finish_s;
            // The wait after the unit's last op, as the accounts below charge it.
            const Time finish = Time::seconds(s.times.finish_s);
            if (s.observed && step_time > finish)
                whole_slice(s, Track::waits, layout_.pp > 1 ? "bubble" : "idle", finish, step_time);
            // With a pipeline, the wait after a stage's last pass (the drain: later stages finish first) is
            // part of the pipeline bubble as Narayanan et al. 2021 count it: (p-1) passes of idle per stage
            // in all.
            if (layout_.pp > 1) {
                s.times.bubble_s += s.times.idle_s;
                s.times.idle_s = 0;
            }
            for (int m : s.members)
                res.ranks[static_cast<std::size_t>(m)] = s.times;
        }
        res.step_time_s = step;
        res.tp_folded = fold_ > 1;
        res.ran_ahead = ahead_;
        if (attribute_) {
            res.caused_wait_s.assign(static_cast<std::size_t>(layout_.gpus()), 0.0);
            for (auto& s : units_)
                for (int m : s.members)
                    res.caused_wait_s[static_cast<std::size_t>(m)] =  // shared by the unit's GPUs
                        caused_[static_cast<std::size_t>(s.id)] / static_cast<double>(s.members.size());
            res.link_bytes = net_.link_bytes();
        }
        for (ExecutorObserver* o : observers_)
            o->finished(step_time);
        res.events = sim_.events_executed();
        res.flows = net_.flows_started();
        return res;
    }

  private:
    /// A TP group smaller than its node (tp < GPUs per node, e.g. TP 4 in a DGX of 8) shares its GPUs' NVLink
    /// ports with the other groups of its members: a DP or CP ring's hop between two GPUs of the node, an EP
    /// all-to-all. Every route on a GPU's own NVLink port links has that GPU as an endpoint (Cluster::route:
    /// no relay through a third GPU outside rail-only fabrics), so a flow there belongs to a collective of a
    /// group the GPU's unit is a member of, and it can only run between that unit's arrival at the collective
    /// and its completion, while the unit is engaged on it (its DP queue or TP stream holds it), or to a P2P
    /// transfer, whose receiver does not take part in starting it. So when no P2P route touches a TP group's
    /// links, a unit that is engaged on nothing but its TP collectives has its TP links to itself: its local
    /// ops may run ahead with private TP timings, exactly as when TP fills the node. Otherwise (engaged on a
    /// DP collective) its TP collectives are flows on the network, where they share the ports. A folded unit
    /// checks that as it goes (advance: its DP queue and TP stream empty). Unfolded (folding declined, e.g.
    /// expert TP != TP), the members of a TP group must all decide alike at a given op, or the ones that park
    /// wait for ones that do not: their DP collectives complete at different times (one DP group per TP
    /// index), so the check is the program's structure instead (group_starts with dp_settled): a run starts
    /// only where every DP collective launched before it has been waited for by a dp_wait (dp_target) and
    /// every TP-stream collective (EP, CP, ETP, tied embeddings) too, so every member's DP queue and TP
    /// stream are empty there whatever the timing; the run itself holds no DP, P2P or other-group op, and
    /// every private TP collective of it starts after its last member parked and ends before its members
    /// resume. The private flows' bytes are counted link by link (private_timing: pool_off), in the same
    /// order as the flows' would be: another flow on those links ends before a member parks or starts after
    /// it resumes. Checked here: every TP group within one node, no rail-only relay, no PCIe-only node (P2P
    /// and DP flows cross the GPU's PCIe link), and no P2P route on a TP group's links.
    /// ExecutionOptions::private_tp_links.
    bool tp_ports_private_between_engagements(const Cluster& cluster, const Layout& layout) {
        if (layout.tp <= 1 || cluster.spec().fabric == ScaleOutTopology::rail_only ||
            cluster.spec().scale_up_kind == "pcie")
            return false;
        std::vector<char> tp_link(cluster.links().size(), 0);
        for (Unit& s : units_) {
            GroupCache& g = tp_cache(s);
            if (!g.comm) return false;
            for (int r : g.ranks)
                if (cluster.node_of(r) != cluster.node_of(g.ranks.front())) return false;
            for (const Route& r : g.comm->channel_routes)
                for (int l : r.links)
                    tp_link[static_cast<std::size_t>(l)] = 1;
            for (int l : g.comm->nvls_route.links)
                tp_link[static_cast<std::size_t>(l)] = 1;
        }
        if (layout.pp == 1) return true;
        for (const Unit& s : units_)
            for (int m : s.members)
                for (int d : {1, -1}) {
                    const int peer = pp_peer(m, (s.coord.pp + d + layout.pp) % layout.pp);
                    if (peer == m) continue;
                    for (int l : cluster.route(m, peer).links)
                        if (tp_link[static_cast<std::size_t>(l)]) return false;
                }
        return true;
    }

    /// TP folding needs every member of a TP group to run alike: no jitter, no link perturbation (a NIC,
    /// rail or leaf uplink serves one member of a group), one compute factor per TP group.
    static bool fold_symmetric(const Layout& layout, const ExecutionScenario& sc) {
        if (sc.jitter_sigma > 0 || sc.links_perturbed) return false;
        const auto& f = sc.compute_factor;
        if (f.empty()) return true;
        for (int g = 0; g < layout.gpus(); g += layout.tp)
            for (int i = 1; i < layout.tp; ++i)
                if (f[static_cast<std::size_t>(g + i)] != f[static_cast<std::size_t>(g)]) return false;
        return true;
    }

    /// Seconds of one compute op's segment on unit s with jitter: each kernel's time times its factor
    /// exp(sigma·z - sigma²/2), drawn for (seed, GPU, the unit's kernel index) (ExecutionScenario,
    /// LognormalJitter), times the unit's compute factor.
    double jittered_seconds(Unit& s, std::size_t seg) {
        double secs = 0;
        for (double k : scenario_.kernel_seconds[seg])
            secs += k * lognormal_->factor(counter_hash_at(s.jitter_prefix, s.kernels_run++));
        return secs * s.factor;
    }

    // ---- Reporting slices to the observers (include/trainsim/executor_observer.hpp) ----
    static bool traced(const Unit& u) { return u.observed; }

    /// Calls f(observer, rank) for every observer of every member of u.
    template <class F>
    void for_observers(const Unit& u, F&& f) {
        for (int m : u.members) {
            std::uint32_t mask = observed_by_[static_cast<std::size_t>(m)];
            for (std::size_t i = 0; mask != 0; ++i, mask >>= 1)
                if (mask & 1u) f(*observers_[i], m);
        }
    }
    // The name is made a string_view only for an observed unit (a C string's length is a strlen; the TP and
    // DP streams report every collective's slices to each unit of the group).
    template <class Name>
    void begin_slice(const Unit& u, Track track, const Name& name, Time start) {
        if (!u.observed) return;
        const std::string_view view(name);
        for_observers(u, [&](ExecutorObserver& o, int m) { o.slice_begin(m, track, view, start); });
    }
    template <class Name>
    void add_slice(const Unit& u, Track track, const Name& name, Time start, Time end) {
        if (!u.observed) return;
        const std::string_view view(name);
        for_observers(u, [&](ExecutorObserver& o, int m) {
            o.slice_end(TimelineSlice{m, track, view, start, end});
        });
    }
    /// A slice reported whole (begin and end at once): a compute op, a wait.
    void whole_slice(const Unit& u, Track track, std::string_view name, Time start, Time end) {
        if (!u.observed) return;
        for_observers(u, [&](ExecutorObserver& o, int m) {
            o.slice_begin(m, track, name, start);
            o.slice_end(TimelineSlice{m, track, name, start, end});
        });
    }
    /// A wait of the main stream from `from` to now, charged to the account `name`; nothing when empty.
    void wait_slice(const Unit& u, const char* name, Time from) {
        if (u.observed && sim_.now() > from) whole_slice(u, Track::waits, name, from, sim_.now());
    }

    Unit& unit_of(int gpu) { return units_[static_cast<std::size_t>(gpu / fold_)]; }

    // ---- Running local ops ahead (ExecutionOptions::run_local_ops_ahead) ----
    // With TP folding and private TP links, compute, TP collectives and TP waits involve nothing but the unit
    // itself: the unit's state that other units read (block == p2p or dp, posted receives, DP arrivals) does
    // not change while it runs them. So a run of such ops is timed at once, with the arithmetic of the event
    // by event path (compute: t + the segment's time; a TP collective starts when the TP stream is free,
    // max(launch, previous completion), and completes after its private time; a wait that finds the stream
    // busy adds (completion - t) to tp_exposed and resumes at the completion), and one event is scheduled
    // where the event by event path would have its last one: at the same time, with the same priority
    // (kDefault after a compute, kFlowCompletion after a wait released by a TP completion).
    static bool local_op(const Op& op) {
        return op.kind == OpKind::compute || op.kind == OpKind::tp_wait ||
               (op.kind == OpKind::tp_launch && op.group == CommGroup::tp && op.bytes > 0);
    }
    /// [pc]: true when every TP collective launched in the run of local ops from pc is waited for within
    /// the run, so that the TP stream is idle where the run ends (the next op may use it, e.g. a CP
    /// collective).
    static std::vector<char> ahead_ok(const std::vector<Op>& ops) {
        std::vector<char> ok(ops.size(), 0);
        bool wait_after = false, launch_seen = false, run_ok = true;
        for (std::size_t i = ops.size(); i-- > 0;) {
            const Op& op = ops[i];
            if (!local_op(op)) {
                wait_after = launch_seen = false;
                run_ok = true;
                continue;
            }
            if (op.kind == OpKind::tp_wait) wait_after = true;
            if (op.kind == OpKind::tp_launch && !launch_seen) {
                launch_seen = true;  // the run's last launch
                run_ok = wait_after;
            }
            ok[i] = run_ok ? 1 : 0;
        }
        return ok;
    }
    const PrivateTiming& private_timing(GroupCache& g, const Op& op) {
        for (const PrivateTiming& p : g.private_timings)
            if (p.kind == op.collective && p.bytes == op.bytes) return p;
        PrivateTiming p;
        p.kind = op.collective;
        p.bytes = op.bytes;
        const Collectives::FlowPlan plan = Collectives::plan(op.collective, *g.comm, op.bytes);
        if (!plan.route || plan.side_route)
            throw InternalError("a private TP collective with several channels");
        p.route = plan.route;
        p.flow_bytes = plan.flow_bytes;
        p.duration = plan.delay + net_.private_flow_time(*plan.route, plan.flow_bytes);
        if (tp_shared_ports_) g.pool_off = true;  // other groups' flows add to some of the links' bytes
        if (!g.pool_off) {
            std::vector<int> links = plan.route->links;
            std::sort(links.begin(), links.end());
            const bool distinct = std::adjacent_find(links.begin(), links.end()) == links.end();
            if (distinct && g.pool_links.empty() && !links.empty()) {
                const auto& bytes = net_.link_bytes();
                const double common = bytes[static_cast<std::size_t>(links.front())];
                if (std::all_of(links.begin(), links.end(),
                                [&](int l) { return bytes[static_cast<std::size_t>(l)] == common; })) {
                    g.pool_links = links;
                    g.pool_bytes = common;
                }
            }
            p.pooled = distinct && !links.empty() && links == g.pool_links;
        }
        g.private_timings.push_back(p);
        return g.private_timings.back();
    }
    /// Runs the local ops from s.pc. Returns true if it scheduled the event that resumes the unit (the run
    /// takes time), false if the unit goes on at once.
    bool run_ahead(Unit& s) {
        const auto& ops = s.program->ops;
        Time t = sim_.now();
        Time tp_free = t;  // the TP stream is idle when the run starts
        Priority priority = Priority::kDefault;
        bool event = false;
        GroupCache& g = tp_cache(s);
        for (; s.pc < ops.size() && local_op(ops[s.pc]); ++s.pc) {
            const Op& op = ops[s.pc];
            if (op.kind == OpKind::compute) {
                const auto seg = static_cast<std::size_t>(op.segment);
                const double secs = s.seg_secs[seg];
                s.times.compute_s += secs;
                s.times.compute_by_phase_s[static_cast<std::size_t>(op.phase)] += secs;
                t += s.seg_time[seg];
                priority = Priority::kDefault;
                event = true;
            } else if (op.kind == OpKind::tp_launch) {
                const PrivateTiming& p = private_timing(g, op);
                count_ahead(g, p);
                tp_free = std::max(t, tp_free) + p.duration;
                ++s.seq[static_cast<std::size_t>(GroupKind::tp)];
            } else if (tp_free > t) {  // a wait that finds the TP stream busy
                s.times.tp_exposed_s += (tp_free - t).to_seconds();
                t = tp_free;
                priority = Priority::kFlowCompletion;
                event = true;
            }
        }
        if (!event) return false;
        s.block = Block::compute;
        Unit* sp = &s;
        sim_.schedule(t, priority, [this, sp] {
            sp->block = Block::none;
            advance(*sp);
        });
        return true;
    }

    // ---- Running an unfolded TP group's local ops ahead together ----
    // When folding declines (the members of a TP group do not run alike: jitter, different compute factors,
    // a link perturbation), the group's members still meet only at their TP collectives between two ops that
    // involve other units. With private TP links those collectives depend on nothing but the members' arrival
    // times, so once every member has reached the start of such a run (parked: the state other units read
    // does not change while it runs local ops), the whole run is timed for every member at once, with the
    // arithmetic of the event by event path: each member's compute on its own clock (its own segment times or
    // jitter draws, in its own kernel order); a TP collective starts at the latest arrival, a member arriving
    // when its stream is free (at its launch, or at the previous collective's completion), and completes
    // after its private time; a wait that finds the stream busy splits into the wait for the last member
    // (tp_wait_s, counted per collective completing while it waits, as finish_tp_stream does) and the
    // transfer, and resumes at the completion. Each member then gets one event where the event by event path
    // would have its last one. Same times and accounts (test_what_if.cpp checks on == off), and the waiting
    // caused summed in the same order (add_caused).

    /// [pc]: a TP group may run the local ops from pc ahead together: pc starts a run of local ops (the op
    /// before it involves other units, or is the TP wait for a collective of another group: an EP dispatch or
    /// combine, a CP or tied-embedding collective), the run launches a TP collective and waits for all it
    /// launches (`ok`), and every collective on the TP stream before pc (TP, CP, EP, ETP, tied embeddings)
    /// has been waited for, so that every member's TP stream is idle there whatever the timing. With
    /// `dp_settled` (TP smaller than the node: tp_ports_private_between_engagements) also every DP collective
    /// launched before pc has been waited for (a dp_wait before pc with dp_target >= their count), so that
    /// every member's DP queue is empty there.
    static std::vector<char> group_starts(const std::vector<Op>& ops, const std::vector<char>& ok,
                                          bool dp_settled) {
        std::vector<char> out(ops.size(), 0);
        std::vector<char> launches(ops.size(), 0);  // the run of local ops from i launches a TP collective
        char launch = 0;
        for (std::size_t i = ops.size(); i-- > 0;) {
            if (!local_op(ops[i]))
                launch = 0;
            else if (ops[i].kind == OpKind::tp_launch)
                launch = 1;
            launches[i] = launch;
        }
        bool pending = false;        // a TP-stream collective launched and not yet waited for
        bool other_pending = false;  // one of them over another group than TP (EP, CP, ETP, embedding)
        bool after_other = false;    // ops[i - 1] is a TP wait for such a collective
        int dp_launched = 0;         // DP collectives launched before i
        int dp_waited = 0;           // the most of them a dp_wait before i waited for (its dp_target)
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const bool start = i == 0 || !local_op(ops[i - 1]) || after_other;
            const bool dp_idle = !dp_settled || dp_launched <= dp_waited;
            out[i] = start && !pending && dp_idle && ok[i] && launches[i] ? 1 : 0;
            after_other = ops[i].kind == OpKind::tp_wait && other_pending;
            if (ops[i].kind == OpKind::tp_launch) {
                pending = true;
                if (!local_op(ops[i])) other_pending = true;
            }
            if (ops[i].kind == OpKind::tp_wait) pending = other_pending = false;
            if (ops[i].kind == OpKind::dp_launch) ++dp_launched;
            if (ops[i].kind == OpKind::dp_wait) dp_waited = std::max(dp_waited, ops[i].dp_target);
        }
        return out;
    }

    void park(Unit& s) {
        GroupCache& g = tp_cache(s);
        s.block = Block::compute;
        s.block_start = sim_.now();
        if (++g.parked < static_cast<int>(g.units.size())) return;
        g.parked = 0;
        run_group_ahead(g);
    }

    /// Counts a private TP collective run ahead on the group's links (see GroupCache::pool_links).
    void count_ahead(GroupCache& g, const PrivateTiming& p) {
        if (p.pooled && !g.pool_off) {
            g.pool_bytes += p.flow_bytes;
            ++g.pool_flows;
        } else {
            flush_pool(g);
            g.pool_off = true;
            net_.count_private_flow(*p.route, p.flow_bytes);
        }
    }

    // The waiting caused (attribution) is summed in the order of the event by event path: a contribution
    // found by running ahead is added when its collective completes, i.e. before any other contribution to
    // the same GPU at a later time (or at the same time: the completion first).
    void add_caused(int unit, double amount) {
        const auto u = static_cast<std::size_t>(unit);
        if (!caused_later_.empty()) flush_caused(unit, sim_.now(), true);
        caused_[u] += amount;
    }
    void flush_caused(int unit, Time upto, bool inclusive) {
        auto& q = caused_later_[static_cast<std::size_t>(unit)];
        while (!q.empty() && (q.front().due < upto || (inclusive && q.front().due == upto))) {
            caused_[static_cast<std::size_t>(unit)] += q.front().amount;
            q.pop_front();
        }
    }

    void run_group_ahead(GroupCache& g) {
        const std::vector<Unit*>& units = g.units;
        const std::size_t n = units.size();
        const std::vector<Op>& ops = units.front()->program->ops;
        const std::size_t pc0 = units.front()->pc;
        ga_t_.resize(n);
        ga_priority_.assign(n, Priority::kDefault);
        ga_pending_.clear();
        ga_arrival_.clear();
        for (std::size_t i = 0; i < n; ++i) {
            if (units[i]->pc != pc0) throw InternalError("a TP group's members at different ops");
            ga_t_[i] = units[i]->block_start;
            if (attribute_) flush_caused(units[i]->id, sim_.now(), false);
        }
        Time prev_done;  // the stream is idle when the run starts
        std::size_t pc = pc0;
        for (; pc < ops.size() && local_op(ops[pc]); ++pc) {
            const Op& op = ops[pc];
            if (op.kind == OpKind::compute)
                ahead_compute(units, op);
            else if (op.kind == OpKind::tp_launch)
                prev_done = ahead_tp_launch(g, op, prev_done);
            else  // tp_wait
                ahead_tp_wait(units);
        }
        if (!ga_pending_.empty()) throw InternalError("a TP collective run ahead and not waited for");
        for (std::size_t i = 0; i < n; ++i) {
            Unit* sp = units[i];
            sp->pc = pc;
            sim_.schedule(ga_t_[i], ga_priority_[i], [this, sp] {
                sp->block = Block::none;
                advance(*sp);
            });
        }
    }

    /// run_group_ahead's compute op: every member's stream runs it from its own time.
    void ahead_compute(const std::vector<Unit*>& units, const Op& op) {
        const auto seg = static_cast<std::size_t>(op.segment);
        const auto phase = static_cast<std::size_t>(op.phase);
        for (std::size_t i = 0; i < units.size(); ++i) {
            Unit& s = *units[i];
            const Time t = ga_t_[i];
            Time end = t + s.seg_time[seg];
            double secs = s.seg_secs[seg];
            if (jitter_) {
                end = t + Time::seconds(jittered_seconds(s, seg));
                secs = (end - t).to_seconds();
            }
            s.times.compute_s += secs;
            s.times.compute_by_phase_s[phase] += secs;
            ga_t_[i] = end;
            ga_priority_[i] = Priority::kDefault;
        }
    }

    /// run_group_ahead's TP collective launch, queued behind the one completing at `prev_done` on the TP
    /// stream; returns its completion.
    Time ahead_tp_launch(GroupCache& g, const Op& op, Time prev_done) {
        const PrivateTiming& p = private_timing(g, op);
        count_ahead(g, p);
        // Each member arrives when its stream is free; the last arrival starts the collective (the highest
        // member among equal arrivals, as finish_tp_stream re-arrives them in order).
        PendingTp c{prev_done, prev_done, 0};
        for (std::size_t i = 0; i < g.units.size(); ++i) {
            const Time a = std::max(ga_t_[i], prev_done);
            ga_arrival_.push_back(a);
            if (a >= c.start) {
                c.start = a;
                c.last = g.units[i]->id;
            }
            ++g.units[i]->seq[static_cast<std::size_t>(GroupKind::tp)];
        }
        c.done = c.start + p.duration;
        ga_pending_.push_back(c);
        return c.done;
    }

    /// run_group_ahead's TP wait: the members wait for every collective launched since the last wait.
    void ahead_tp_wait(const std::vector<Unit*>& units) {
        if (ga_pending_.empty()) return;
        const std::size_t n = units.size();
        // A member whose stream is still busy waits; for each collective completing while it waits, the part
        // before the collective started is its wait for the last member (by collective, then by member: the
        // order of finish_tp_stream).
        const Time done = ga_pending_.back().done;
        for (std::size_t k = 0; k < ga_pending_.size(); ++k) {
            const PendingTp& c = ga_pending_[k];
            for (std::size_t i = 0; i < n; ++i) {
                const Time t = ga_t_[i];
                if (!(c.done > t)) continue;  // completed before the member reached the wait
                const Time from = std::max(t, ga_arrival_[k * n + i]);
                if (!(c.start > from)) continue;
                const double wait = (c.start - from).to_seconds();
                units[i]->times.tp_wait_s += wait;
                if (attribute_)
                    caused_later_[static_cast<std::size_t>(c.last)].push_back(
                        {c.done, wait * static_cast<double>(units[i]->members.size())});
            }
        }
        for (std::size_t i = 0; i < n; ++i) {
            const Time t = ga_t_[i];
            if (!(done > t)) continue;  // the stream is idle already: it passes
            units[i]->times.tp_exposed_s += (done - t).to_seconds();
            ga_t_[i] = done;
            ga_priority_[i] = Priority::kFlowCompletion;
        }
        ga_pending_.clear();
        ga_arrival_.clear();
    }

    /// The rank of `rank`'s pipeline peer on stage `pp` (same tp, cp, dp).
    int pp_peer(int rank, int pp) const {
        const int stride = parallel_.dense().stride(Dim::pp);
        return rank + (pp - rank / stride) * stride;
    }

    // ---- The communicator registry: one GroupCache per (GroupKind, group index) ----
    GroupCache& group(GroupKind kind, int rank) {
        auto& caches = groups_[static_cast<std::size_t>(kind)];
        if (caches.empty()) caches.resize(static_cast<std::size_t>(parallel_.count(kind)));
        // The rank's group index, computed once (ParallelGroups::index: a division per grid dimension).
        auto& indices = group_index_[static_cast<std::size_t>(kind)];
        if (indices.empty()) indices.assign(static_cast<std::size_t>(parallel_.dense().world()), -1);
        int& cached = indices[static_cast<std::size_t>(rank)];
        if (cached < 0) cached = parallel_.index(kind, rank);
        const int index = cached;
        GroupCache& g = caches[static_cast<std::size_t>(index)];
        if (g.ranks.empty()) {
            g.ranks = parallel_.ranks(kind, index);
            for (int r : g.ranks) {
                Unit* u = &unit_of(r);
                if (g.units.empty() || g.units.back() != u) g.units.push_back(u);
            }
        }
        return g;
    }
    /// Runs a collective on group g (its communicator set up on first use).
    void run_on(GroupCache& g, CollectiveKind kind, double bytes, Simulator::Callback done,
                bool private_links = false) {
        if (g.ranks.size() < 2 || bytes <= 0) return coll_.run(kind, g.ranks, bytes, std::move(done));
        if (!g.comm) g.comm = &coll_.communicator(g.ranks);
        coll_.run(kind, *g.comm, bytes, std::move(done), private_links);
    }
    /// Counts unit s's arrival at its next collective on group g of kind `kind`; true when it was the last
    /// unit of the group to arrive (the collective starts).
    static bool arrive(Unit& s, GroupCache& g, GroupKind kind) {
        const std::uint32_t seq = s.seq[static_cast<std::size_t>(kind)]++;
        if (g.units.size() < 2) return true;
        auto it = std::find_if(g.arrivals.begin(), g.arrivals.end(),
                               [seq](const std::pair<std::uint32_t, int>& a) { return a.first == seq; });
        if (it == g.arrivals.end()) it = g.arrivals.emplace(g.arrivals.end(), seq, 0);
        if (++it->second < static_cast<int>(g.units.size())) return false;
        *it = g.arrivals.back();
        g.arrivals.pop_back();
        return true;
    }

    std::uint64_t message_key(int dst_unit, int direction, int vs, int mb) const {
        return ((static_cast<std::uint64_t>(dst_unit) * 2 + (direction > 0 ? 1 : 0)) * vs_count_ +
                static_cast<std::uint64_t>(vs)) *
                   mb_count_ +
               static_cast<std::uint64_t>(mb);
    }

    /// Ends a blocked wait, charged to `bucket` (the account named `name`: the waits track's slice).
    void unblock(Unit& s, double& bucket, const char* name) {
        wait_slice(s, name, s.block_start);
        bucket += (sim_.now() - s.block_start).to_seconds();
        s.block = Block::none;
        advance(s);
    }

    /// Blocks unit s on `b` from now.
    void block_on(Unit& s, Block b) {
        s.block = b;
        s.block_start = sim_.now();
    }

    /// Runs unit s's ops from s.pc until it blocks (on a collective, a P2P message or a compute run) or ends.
    void advance(Unit& s) {
        const auto& ops = s.program->ops;
        while (true) {
            if (s.pc >= ops.size() && s.outstanding_sends > 0) {
                block_on(s, Block::p2p);
                s.waiting_recv = false;
                return;
            }
            if (s.pc >= ops.size()) {
                s.block = Block::done;
                s.times.finish_s = sim_.now().to_seconds();
                return;
            }
            const Op& op = ops[s.pc];
            // Megatron-LM waits for its P2P requests right away, batching a send with the receive that
            // follows it (send_forward_recv_backward): outstanding sends are waited for before any other op.
            if (s.outstanding_sends > 0 && op.kind != OpKind::recv && op.kind != OpKind::send) {
                block_on(s, Block::p2p);
                s.waiting_recv = false;
                return;
            }
            if (ahead_ && fold_ > 1 && s.tp_queue.empty() && (*s.ahead_ok)[s.pc] && !traced(s) &&
                (!tp_shared_ports_ || s.dp_queue.empty())) {
                if (run_ahead(s)) return;
                continue;
            }
            if (s.group_ahead && group_starts_[static_cast<std::size_t>(s.coord.pp)][s.pc]) {
                park(s);
                return;
            }
            switch (op.kind) {
                case OpKind::compute:
                    return run_computes(s);
                case OpKind::tp_launch:
                    s.tp_queue.push_back(s.pc);
                    ++s.pc;
                    if (s.tp_queue.size() == 1) arrive_tp(s);
                    break;
                case OpKind::tp_wait:
                    if (s.tp_queue.empty()) {
                        ++s.pc;
                        break;
                    }
                    return block_on(s, Block::tp);
                case OpKind::dp_launch:
                    s.dp_queue.push_back(s.pc);
                    ++s.pc;
                    if (s.dp_queue.size() == 1) arrive_dp(s);
                    break;
                case OpKind::dp_wait:
                    if (s.dp_completed >= op.dp_target) {
                        ++s.pc;
                        break;
                    }
                    return block_on(s, Block::dp);
                case OpKind::send:
                    send(s, op);
                    ++s.pc;
                    break;
                case OpKind::recv:
                    if (!post_recv(s, op)) return block_on(s, Block::p2p);
                    break;
            }
        }
    }

    /// Runs unit s's consecutive compute ops from s.pc back to back: one event for the run.
    void run_computes(Unit& s) {
        const auto& ops = s.program->ops;
        Time t = sim_.now();
        const bool tr = traced(s);
        while (s.pc < ops.size() && ops[s.pc].kind == OpKind::compute) {
            const Op& c = ops[s.pc];
            const auto seg = static_cast<std::size_t>(c.segment);
            Time end = t + s.seg_time[seg];
            double secs = s.seg_secs[seg];  // (end - t).to_seconds()
            if (jitter_) {
                end = t + Time::seconds(jittered_seconds(s, seg));
                secs = (end - t).to_seconds();
            }
            s.times.compute_s += secs;
            s.times.compute_by_phase_s[static_cast<std::size_t>(c.phase)] += secs;
            if (tr) whole_slice(s, Track::compute, program_.segments[seg].name, t, end);
            t = end;
            ++s.pc;
        }
        s.block = Block::compute;
        Unit* sp = &s;
        sim_.schedule(t, Priority::kDefault, [this, sp] {
            sp->block = Block::none;
            advance(*sp);
        });
    }

    /// Posts unit s's receive `op` (its transfer starts if the sender posted already); true when the message
    /// is there and no send is outstanding (the receive is done and s.pc moved on), false when s must wait.
    bool post_recv(Unit& s, const Op& op) {
        const std::uint64_t key = message_key(s.id, op.direction, op.virtual_stage, op.micro_batch);
        Message& msg = messages_.get(s.id, key);
        msg.posted = true;
        if (msg.sent && !msg.started) start_transfer(key, msg);
        s.waiting_recv = true;
        s.waiting_key = key;
        if (!p2p_ready(s)) return false;
        finish_recv(s);
        return true;
    }

    bool p2p_ready(const Unit& s) const {
        if (s.outstanding_sends > 0) return false;
        if (!s.waiting_recv) return true;
        const Message* m = messages_.find(s.id, s.waiting_key);
        return m != nullptr && m->arrived;
    }

    void finish_recv(Unit& s) {
        if (s.waiting_recv) {
            messages_.erase(s.id, s.waiting_key);
            s.waiting_recv = false;
            ++s.pc;
        }
    }

    /// Wakes a unit blocked on P2P when everything it waits for is done. The wait is split: until the last
    /// awaited transfer started it is pipeline bubble (the peer was not ready), after that exposed PP
    /// communication.
    void maybe_wake(Unit& s) {
        if (s.block != Block::p2p || !p2p_ready(s)) return;
        const Time now = sim_.now();
        Time started = s.last_send_start;
        if (s.waiting_recv) {
            if (const Message* m = messages_.find(s.id, s.waiting_key))
                started = std::max(started, m->started_at);
        }
        const Time from = std::min(now, std::max(s.block_start, started));
        if (s.observed) {
            if (from > s.block_start) whole_slice(s, Track::waits, "bubble", s.block_start, from);
            wait_slice(s, "PP exposed", from);
        }
        s.times.bubble_s += (from - s.block_start).to_seconds();
        if (attribute_ && s.waiting_recv) {
            const Message* m = messages_.find(s.id, s.waiting_key);
            if (m != nullptr && m->sender >= 0)
                add_caused(m->sender,
                           (from - s.block_start).to_seconds() * static_cast<double>(s.members.size()));
        }
        s.times.pp_exposed_s += (now - from).to_seconds();
        finish_recv(s);
        s.block = Block::none;
        advance(s);
    }

    void send(Unit& s, const Op& op) {
        const int peer_pp = (s.coord.pp + op.direction + layout_.pp) % layout_.pp;
        const int dst_unit = unit_of(pp_peer(s.members.front(), peer_pp)).id;
        const std::uint64_t key = message_key(dst_unit, op.direction, op.virtual_stage, op.micro_batch);
        Message& msg = messages_.get(dst_unit, key);
        msg.sent = true;
        msg.sender = s.id;
        msg.op = &op;
        ++s.outstanding_sends;
        // Interleaved 1F1B posts the receives of the next passes ahead of time (Megatron-LM
        // send_forward_backward_recv_forward_backward), so there the transfer starts as soon as it is sent.
        if (msg.posted || layout_.vpp > 1) start_transfer(key, msg);
    }

    static std::string p2p_name(const Op& op) {
        return fmt::format("{} mb{}", op.direction > 0 ? "send_act" : "send_grad", op.micro_batch);
    }

    /// Starts one flow per member GPU of the sender; the message arrives when all of them have.
    void start_transfer(std::uint64_t key, Message& msg) {
        msg.started = true;
        msg.started_at = sim_.now();
        Unit& src = units_[static_cast<std::size_t>(msg.sender)];
        src.last_send_start = sim_.now();
        const Op& op = *msg.op;
        const int peer_pp = (src.coord.pp + op.direction + layout_.pp) % layout_.pp;
        const int dst_unit = unit_of(pp_peer(src.members.front(), peer_pp)).id;
        const Time start = sim_.now();
        if (src.observed) begin_slice(src, Track::p2p_sends, p2p_name(op), start);
        Unit* sp = &src;
        const Op* opp = &op;
        send_pairs_.clear();
        for (int m : src.members)
            send_pairs_.emplace_back(m, pp_peer(m, peer_pp));
        // One flow per member GPU, launched together; the message arrives with the last of them.
        coll_.send_all(send_pairs_, op.bytes, [this, key, dst_unit, sp, start, opp] {
            Message& arrived = messages_.get(dst_unit, key);
            if (sp->observed) add_slice(*sp, Track::p2p_sends, p2p_name(*opp), start, sim_.now());
            arrived.arrived = true;
            --sp->outstanding_sends;
            maybe_wake(*sp);
            maybe_wake(units_[static_cast<std::size_t>(dst_unit)]);
        });
    }

    // ---- TP stream: a collective starts when every unit of the TP group has reached it ----
    void arrive_tp(Unit& s) {
        s.tp_arrived = sim_.now();
        const Op& op = s.program->ops[s.tp_queue.front()];
        switch (group_kind_of(op)) {
            case GroupKind::cp:
                return arrive_members(s, op, GroupKind::cp, StreamWait::cp, "cp");
            case GroupKind::embedding:
                return arrive_members(s, op, GroupKind::embedding, StreamWait::pipeline, "embedding");
            case GroupKind::ep:
                return arrive_members(s, op, GroupKind::ep, StreamWait::ep, "ep");
            case GroupKind::etp:
                return arrive_members(s, op, GroupKind::etp, StreamWait::tp, "tp");
            default:
                break;
        }
        GroupCache& g = tp_cache(s);
        if (!arrive(s, g, GroupKind::tp)) return;
        // Counted one by one from now on (the collective's flow adds its bytes to the group's links).
        flush_pool(g);
        g.pool_off = true;
        const Time start = sim_.now();
        const char* name = collective_name(op.collective, "tp");
        for (const Unit* u : g.units)
            begin_slice(*u, Track::tp_stream, name, start);
        const GroupCache* gp = &g;
        const int last = s.id;
        run_on(
            g, op.collective, op.bytes,
            [this, gp, start, name, last] { finish_tp_stream(gp->units, name, start, StreamWait::tp, last); },
            tp_private_);
    }

    void flush_pool(GroupCache& g) {
        if (g.pool_links.empty() || g.pool_off) return;
        net_.set_private_link_bytes(g.pool_links, g.pool_bytes, g.pool_flows);
        g.pool_flows = 0;
    }

    GroupCache& tp_cache(Unit& s) {
        if (s.tp_group) return *s.tp_group;
        GroupCache& g = group(GroupKind::tp, s.members.front());
        if (!g.comm && g.ranks.size() > 1) g.comm = &coll_.communicator(g.ranks);
        s.tp_group = &g;
        return g;
    }

    /// `pipeline`: the collective couples the first and the last stage (tied embeddings): waiting for the
    /// peer stage to arrive is pipeline bubble (the drain), the transfer itself exposed PP communication.
    /// `last`: the unit whose arrival started the collective (it made the others wait).
    void finish_tp_stream(const std::vector<Unit*>& units, const char* name, Time start, StreamWait kind,
                          int last) {
        for (Unit* r : units) {
            add_slice(*r, Track::tp_stream, name, start, sim_.now());
            // The part of a blocked wait spent waiting for the collective's last member: from when this unit
            // was both blocked and at the collective until it started.
            if (r->block == Block::tp && kind != StreamWait::pipeline) {
                const Time from = std::max(r->block_start, r->tp_arrived);
                if (start > from) {
                    const double wait = (start - from).to_seconds();
                    (kind == StreamWait::cp   ? r->times.cp_wait_s
                     : kind == StreamWait::ep ? r->times.ep_wait_s
                                              : r->times.tp_wait_s) += wait;
                    if (attribute_) add_caused(last, wait * static_cast<double>(r->members.size()));
                }
            }
            r->tp_queue.pop_front();
            if (!r->tp_queue.empty()) arrive_tp(*r);
            if (r->tp_queue.empty() && r->block == Block::tp) {
                ++r->pc;
                if (kind == StreamWait::pipeline) {
                    const Time from = std::max(r->block_start, start);
                    const double wait = (from - r->block_start).to_seconds();
                    if (attribute_) add_caused(last, wait * static_cast<double>(r->members.size()));
                    r->times.bubble_s += wait;
                    if (r->observed && from > r->block_start)
                        whole_slice(*r, Track::waits, "bubble", r->block_start, from);
                    r->block_start = from;
                    unblock(*r, r->times.pp_exposed_s, "PP exposed");
                } else {
                    const double exposed = (sim_.now() - r->block_start).to_seconds();
                    if (kind == StreamWait::cp) r->times.cp_exposed_s += exposed;
                    if (kind == StreamWait::ep) r->times.ep_exposed_s += exposed;
                    unblock(*r, r->times.tp_exposed_s,
                            kind == StreamWait::cp   ? "CP exposed"
                            : kind == StreamWait::ep ? "EP exposed"
                                                     : "TP exposed");
                }
            }
        }
    }

    // A collective on the TP stream over another group than TP: CP (ring attention's K/V exchange), the tied
    // embeddings' all-reduce between the first and the last stage, EP (MoE token dispatch and combine
    // all-to-all). It starts when every unit of the group of the unit's first member has reached it; a folded
    // unit runs the collective of the group of each of its members (one per TP index) and the collective is
    // done when all of them are.
    void arrive_members(Unit& s, const Op& op, GroupKind kind, StreamWait wait, const char* group_name) {
        GroupCache& g = group(kind, s.members.front());
        if (!arrive(s, g, kind)) return;
        const std::vector<Unit*>* units = &g.units;
        const Time start = sim_.now();
        const char* name = kind == GroupKind::embedding ? "embedding all_reduce"
                                                        : collective_name(op.collective, group_name);
        for (const Unit* u : *units)
            begin_slice(*u, Track::tp_stream, name, start);
        auto remaining = std::make_shared<int>(fold_);
        const int last = s.id;
        for (int m : s.members)
            run_on(group(kind, m), op.collective, op.bytes,
                   [this, units, start, name, remaining, wait, last] {
                       if (--*remaining == 0) finish_tp_stream(*units, name, start, wait, last);
                   });
    }

    // ---- DP stream: a DP collective starts when every DP replica has reached it; a folded unit runs the DP
    // collectives of all its members' TP indices and completes when all of them are done. Dense gradients
    // and parameters go over DP x CP, routed-expert gradients (CommGroup::edp) over the expert-DP group ----
    void arrive_dp(Unit& s) {
        s.dp_arrived = sim_.now();
        const Op& op = s.program->ops[s.dp_queue.front()];
        const GroupKind kind = group_kind_of(op);  // a dp_launch: edp or dp_cp
        GroupCache& g = group(kind, s.members.front());
        if (!arrive(s, g, kind)) return;
        const std::vector<Unit*>* units = &g.units;
        const Time start = sim_.now();
        const char* name = collective_name(op.collective, kind == GroupKind::edp ? "edp" : "dp");
        for (const Unit* u : *units)
            begin_slice(*u, Track::dp_stream, name, start);
        auto remaining = std::make_shared<int>(fold_);
        const int last = s.id;
        for (int m : s.members) {
            run_on(group(kind, m), op.collective, op.bytes, [this, units, start, name, remaining, last] {
                if (--*remaining > 0) return;
                for (Unit* r : *units) {
                    add_slice(*r, Track::dp_stream, name, start, sim_.now());
                    if (r->block == Block::dp) {  // the wait for the last member, as on the TP stream
                        const Time from = std::max(r->block_start, r->dp_arrived);
                        if (start > from) {
                            const double wait = (start - from).to_seconds();
                            r->times.dp_wait_s += wait;
                            if (attribute_) add_caused(last, wait * static_cast<double>(r->members.size()));
                        }
                    }
                    r->dp_queue.pop_front();
                    ++r->dp_completed;
                    if (!r->dp_queue.empty()) arrive_dp(*r);
                    if (r->block == Block::dp && r->dp_completed >= r->program->ops[r->pc].dp_target) {
                        ++r->pc;
                        unblock(*r, r->times.dp_exposed_s, "DP exposed");
                    }
                }
            });
        }
    }

    static const char* collective_name(CollectiveKind k, std::string_view group) {
        static const char* names[5][4] = {
            {"tp all_reduce", "tp all_gather", "tp reduce_scatter", "tp all_to_all"},
            {"cp all_reduce", "cp all_gather", "cp reduce_scatter", "cp all_to_all"},
            {"dp all_reduce", "dp all_gather", "dp reduce_scatter", "dp all_to_all"},
            {"ep all_reduce", "ep all_gather", "ep reduce_scatter", "ep all_to_all"},
            {"edp all_reduce", "edp all_gather", "edp reduce_scatter", "edp all_to_all"}};
        const int g = group == "tp" ? 0 : group == "cp" ? 1 : group == "dp" ? 2 : group == "ep" ? 3 : 4;
        return names[g][static_cast<int>(k)];
    }

    const Layout& layout_;
    const Program& program_;
    ParallelGroups parallel_;  ///< the layout's groups (include/trainsim/parallel_groups.hpp)
    const std::vector<ExecutorObserver*>& observers_;
    std::vector<std::uint32_t> observed_by_;  ///< [GPU] bit i: observers_[i] observes it; empty: none
    const ExecutionScenario& scenario_;
    bool jitter_ = false;         ///< ExecutionScenario::jitter_sigma > 0
    bool attribute_ = false;      ///< ExecutionScenario::attribute
    std::vector<double> caused_;  ///< [unit] with attribute_: the waiting it caused (caused_wait_s)
    std::map<double, std::pair<std::vector<Time>, std::vector<double>>> factor_tables_;
    std::optional<LognormalJitter> lognormal_;  ///< with jitter_: the jitter's factors (its table)
    Simulator sim_;
    FlowNetwork net_;
    Collectives coll_;
    int fold_ = 1;
    bool tp_private_ = false;  ///< ExecutionOptions::private_tp_links applies to this layout
    /// TP smaller than the node: TP links private while a unit is engaged on no DP collective
    /// (tp_ports_private_between_engagements); folded, or unfolded running ahead per TP group
    bool tp_shared_ports_ = false;
    bool ahead_ = false;            ///< ExecutionOptions::run_local_ops_ahead applies to this layout
    std::uint64_t max_events_ = 0;  ///< ExecutionOptions::max_events (0: no bound)
    std::vector<std::vector<char>> ahead_ok_;      ///< [stage][pc], see ahead_ok()
    std::vector<std::vector<char>> group_starts_;  ///< [stage][pc], see group_starts()
    /// run_group_ahead's scratch: per member its clock and resume priority; per pending collective its
    /// start, completion, last member (unit id) and the members' arrivals.
    std::vector<Time> ga_t_;
    std::vector<Priority> ga_priority_;
    struct PendingTp {
        Time start, done;
        int last = 0;
    };
    std::vector<PendingTp> ga_pending_;
    std::vector<Time> ga_arrival_;  ///< [pending * members + member]
    struct Deferred {
        Time due;
        double amount = 0;
    };
    /// [unit] with attribute_ and TP groups running ahead: their contributions to caused_, due at their
    /// collective's completion (add_caused).
    std::vector<std::deque<Deferred>> caused_later_;
    std::vector<Time> seg_time_;    ///< [segment] Time::seconds(seconds)
    std::vector<double> seg_secs_;  ///< [segment] seg_time_ in seconds
    std::vector<Unit> units_;
    MessageTable messages_;
    std::vector<std::pair<int, int>> send_pairs_;  ///< scratch: start_transfer's (member, peer) pairs
    /// The communicator registry: [GroupKind][group index] (ParallelGroups::index), each kind's vector sized
    /// on first use and never resized (the units keep pointers into it).
    std::array<std::vector<GroupCache>, kGroupKindCount> groups_;
    std::array<std::vector<int>, kGroupKindCount> group_index_;  ///< [kind][rank]: its group's index, or -1
    std::uint64_t vs_count_ = 1;
    std::uint64_t mb_count_ = 1;
};

}  // namespace

ExecutionResult execute(const Cluster& cluster, const Layout& layout, const Program& program,
                        const std::vector<ExecutorObserver*>& observers, const ExecutionOptions& options,
                        const ExecutionScenario& scenario) {
    if (layout.gpus() != cluster.gpus())
        throw InternalError(fmt::format("layout has {} GPUs, cluster {}", layout.gpus(), cluster.gpus()));
    Executor ex(cluster, layout, program, observers, options, scenario);
    return ex.run();
}

}  // namespace trainsim
