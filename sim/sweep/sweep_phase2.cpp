// Phase 2 of a sweep (sweep_internal.hpp run_phase2): the groups of points with identical programs walked
// against memory and simulated once each.
//
// With pruning (SweepOptions::prune_beyond_top = N) the groups are taken by lower bound ascending, and a
// group whose bound exceeds the N-th best step time simulated so far on its cluster size (its size's bar) is
// skipped. The bar only falls, so how much is done beyond it depends on the schedule: on one process the
// threads take the next group as soon as they are free, and simulate a group only once it is known to be
// kept (ByBound: every simulation is one the final rule keeps), and over processes the groups go in rounds
// of kPruneRoundSize. What is kept does not: once every group is decided,
// every group whose bound exceeds its size's final bar T is pruned, whatever was done of it. Any schedule
// that skips only groups above the current bar (never below T) simulates every group with bound <= T, and
// the groups beyond it have step times >= their bounds > T, so they never move the N-th best: every
// schedule ends with the same T and keeps the same groups (two schedules ending at T1 < T2: the second
// simulated the N members at or under T1, whose bounds are <= T1, so its N-th best is <= T1).
//
// Keeping the Pareto front as well (SweepOptions::prune_keeps_pareto_front, the HTML page's chart of step
// time against peak memory): every group is walked, and a group above its bar is still simulated unless each
// of its fitting points is dominated by a point simulated so far (a step time below the group's bound, a peak
// memory at most its own). Such a point is on no Pareto front: it is slower (its step time is at least its
// bound) and no smaller. So whatever the schedule skips, it simulates every point of the front F of all
// fitting points, and every point it simulates is matched or beaten in both by a point of F. Once every group
// is decided, a group above its size's final bar T whose fitting points are each dominated by a simulated
// point (equivalently: by a point of F) is pruned, whatever was done of it; the others are kept: the same
// groups for any schedule, F among them, and the top N as above. A group above T without a fitting point
// keeps its walk (out of memory, as the exhaustive sweep finds it).
#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <utility>

#include "sweep_internal.hpp"
#include "trainsim/parallel_map.hpp"
#include "trainsim/process_group.hpp"

namespace trainsim::sweep_detail {

namespace {

/// The step times of the fitting members of the groups simulated so far, per cluster size, the N best
/// ascending: a size's bar is its N-th best.
class TopTimes {
  public:
    TopTimes(std::size_t sizes, std::size_t top) : best_(sizes), top_(top) {}
    /// The N-th best step time on cluster size `size` (s); infinity while fewer than N members fit.
    double bar(std::size_t size) const {
        const auto& v = best_[size];
        return v.size() < top_ ? std::numeric_limits<double>::infinity() : v[top_ - 1];
    }
    /// `count` fitting members of one group at their runner's step time.
    /// The N least step times of cluster size `size` so far, ascending (fewer while fewer members fit).
    const std::vector<double>& least(std::size_t size) const { return best_[size]; }
    std::size_t top() const { return top_; }
    void add(std::size_t size, double step_s, std::size_t count) {
        auto& v = best_[size];
        v.insert(std::upper_bound(v.begin(), v.end(), step_s), count, step_s);
        if (v.size() > top_) v.resize(top_);
    }

  private:
    std::vector<std::vector<double>> best_;  ///< [size]
    std::size_t top_;
};

/// The (step time, peak memory) of every fitting point simulated so far, all sizes together as the HTML
/// page's Pareto front takes them (sweep_pareto_front).
class SimulatedPoints {
  public:
    void add(double step_s, double peak_bytes) { points_.emplace_back(step_s, peak_bytes); }
    /// Whether a point simulated so far is faster than `bound_s` and needs at most `peak_bytes`.
    bool dominate(double bound_s, double peak_bytes) const {
        return std::any_of(points_.begin(), points_.end(),
                           [&](const auto& p) { return p.first < bound_s && p.second <= peak_bytes; });
    }

  private:
    std::vector<std::pair<double, double>> points_;
};

/// Whether the group at todo position `k` has a fitting point (walked) and each is dominated by `points`
/// at the group's bound `bound_s`.
bool group_dominated(const Phase2& p2, std::size_t k, double bound_s, const SimulatedPoints& points) {
    bool fitting = false;
    for (std::size_t m : p2.members[k]) {
        const PointCheck& c = p2.memory[m];
        if (c.status != SweepStatus::simulated) continue;
        fitting = true;
        if (!points.dominate(bound_s, c.peak_memory_bytes)) return false;
    }
    return fitting;
}

/// Whether every member of the group at todo position `k` is dominated by `points` at the group's bound
/// `bound_s` with its memory floor (Phase2::floor, at most its walk's peak): then so is
/// every fitting member with its peak, whatever its walk finds, and the group is neither walked nor
/// simulated.
bool group_floor_dominated(const Phase2& p2, std::size_t k, double bound_s, const SimulatedPoints& points) {
    const auto& g = p2.members[k];
    return !g.empty() && std::all_of(g.begin(), g.end(),
                                     [&](std::size_t m) { return points.dominate(bound_s, p2.floor[m]); });
}

/// A walked point's floor: its walk's early peak (check_memory), if higher than what was known.
void raise_floor(Phase2& p2, std::size_t m) {
    p2.floor[m] = std::max(p2.floor[m], p2.memory[m].memory_floor_bytes);
}

/// One round of phase 2 over the groups at `ks` (positions in todo): every member's memory walk, then the
/// simulation of each group's first member that fits, which the group's other fitting members take, unless
/// `skip(k)` says after the walks that the group is not simulated (it is then marked pruned). Returns the
/// fitting members per group (0 for a skipped one).
std::vector<std::size_t> run_round(Phase2& p2, const std::vector<std::size_t>& ks, const Points& pts,
                                   const std::vector<PointCheck>& checks, const ModelSpec& model,
                                   const std::string& workload_name, const SweepOptions& options,
                                   const std::function<void()>& simulated,
                                   const std::function<bool(std::size_t)>& skip = {}) {
    std::vector<std::size_t> walk;
    for (std::size_t k : ks)
        walk.insert(walk.end(), p2.members[k].begin(), p2.members[k].end());
    std::vector<PointCheck> walked = spread_map(
        walk.size(), options.jobs, options.processes,
        [&](std::size_t j) {
            const std::size_t i = walk[j];
            return check_memory(pts.entries[i].layout, *pts.clusters[pts.cluster_of[i]], model,
                                options.min_headroom, checks[i]);
        },
        encode_check, [](const std::string& bytes, std::size_t) { return decode_check(bytes); });
    for (std::size_t j = 0; j < walk.size(); ++j) {
        p2.memory[walk[j]] = std::move(walked[j]);
        p2.walked[walk[j]] = true;
        raise_floor(p2, walk[j]);
    }
    std::vector<std::size_t> runners, fitting(ks.size(), 0);
    for (std::size_t q = 0; q < ks.size(); ++q) {
        if (skip && skip(ks[q])) {
            p2.pruned[ks[q]] = true;
            continue;
        }
        for (std::size_t i : p2.members[ks[q]]) {
            if (p2.memory[i].status != SweepStatus::simulated) continue;
            if (fitting[q]++ == 0) runners.push_back(i);
            p2.runner[i] = runners.back();
        }
    }
    std::vector<PointRun> done = spread_map(
        runners.size(), options.jobs, options.processes,
        [&](std::size_t j) {
            const std::size_t i = runners[j];
            PointRun run = simulate_point(pts.entries[i].layout, *pts.clusters[pts.cluster_of[i]], model,
                                          workload_name, options);
            simulated();
            return run;
        },
        encode_run,
        [&](const std::string& bytes, std::size_t j) {
            return decode_run(bytes, model, pts.entries[runners[j]].layout);
        });
    for (std::size_t j = 0; j < runners.size(); ++j)
        p2.runs.emplace(runners[j], std::move(done[j]));
    return fitting;
}

/// Phase 2's state before its rounds: nothing walked or run; each group's members in enumeration order.
Phase2 start_phase2(std::size_t n, const std::vector<PointCheck>& checks,
                    const std::vector<std::size_t>& todo, const std::vector<std::size_t>& copy_of) {
    Phase2 p2;
    p2.memory.resize(n);
    p2.walked.assign(n, false);
    p2.runner.assign(n, n);
    p2.pruned.assign(todo.size(), false);
    p2.members.resize(todo.size());
    p2.floor.resize(n);
    for (std::size_t i = 0; i < n; ++i)
        p2.floor[i] = checks[i].memory_floor_bytes;
    std::vector<std::size_t> position(n, todo.size());
    for (std::size_t k = 0; k < todo.size(); ++k)
        position[todo[k]] = k;
    for (std::size_t i = 0; i < n; ++i)
        if (checks[i].status == SweepStatus::simulated)
            p2.members[position[copy_of[i] != n ? copy_of[i] : i]].push_back(i);
    return p2;
}

/// The group at todo position `k` into `best`: its `fitting` members at its runner's step time (none when
/// its simulation failed or rejected it); and each of them, with its own peak memory, into `points`.
void record(const Phase2& p2, std::size_t k, std::size_t fitting, const Points& pts, TopTimes& best,
            SimulatedPoints& points) {
    if (fitting == 0) return;
    const std::size_t n = pts.entries.size();
    std::size_t runner = n;  // the group's first fitting member
    for (std::size_t m : p2.members[k])
        if (runner == n) runner = p2.runner[m];
    const PointRun& run = p2.runs.at(runner);
    if (run.error || run.status != SweepStatus::simulated) return;
    best.add(pts.cluster_of[runner], run.report.step_time_s, fitting);
    for (std::size_t m : p2.members[k])
        if (p2.runner[m] == runner) points.add(run.report.step_time_s, p2.memory[m].peak_memory_bytes);
}

/// Over processes: rounds of kPruneRoundSize groups in `order`, each skipping the groups above their bar.
void run_rounds(Phase2& p2, const std::vector<std::size_t>& order, const std::vector<std::size_t>& todo,
                const Points& pts, const std::vector<PointCheck>& checks, const ModelSpec& model,
                const std::string& workload_name, const SweepOptions& options,
                const std::function<void()>& simulated, TopTimes& best, SimulatedPoints& points) {
    const bool keep_front = options.prune_keeps_pareto_front;
    // Keeping the front: a group above its bar is walked, and skipped when dominated by the points of the
    // rounds before (the same on every process).
    const auto dominated = [&](std::size_t k) {
        const std::size_t i = todo[k];
        return checks[i].lower_bound_s > best.bar(pts.cluster_of[i]) &&
               group_dominated(p2, k, checks[i].lower_bound_s, points);
    };
    for (std::size_t pos = 0; pos < order.size();) {
        std::vector<std::size_t> batch;
        for (; pos < order.size() && batch.size() < kPruneRoundSize; ++pos) {
            const std::size_t i = todo[order[pos]];
            const bool beyond = checks[i].lower_bound_s > best.bar(pts.cluster_of[i]);
            if (beyond &&
                (!keep_front || group_floor_dominated(p2, order[pos], checks[i].lower_bound_s, points)))
                p2.pruned[order[pos]] = true;
            else
                batch.push_back(order[pos]);
        }
        const std::vector<std::size_t> fitting =
            keep_front
                ? run_round(p2, batch, pts, checks, model, workload_name, options, simulated, dominated)
                : run_round(p2, batch, pts, checks, model, workload_name, options, simulated);
        for (std::size_t q = 0; q < batch.size(); ++q)
            record(p2, batch[q], fitting[q], pts, best, points);
    }
}

/// One group's memory walks on one thread; the first fitting member is the one simulated.
struct GroupOutcome {
    std::vector<PointCheck> memory;  ///< [member]
    std::size_t runner = 0;          ///< the first fitting member (a point index; none: no run)
    std::size_t fitting = 0;         ///< members that fit
    std::exception_ptr error;  ///< what a memory walk threw (not an InputError: check_memory keeps those)
};

/// Every member's memory walk.
GroupOutcome walk_group(const std::vector<std::size_t>& members, const Points& pts,
                        const std::vector<PointCheck>& checks, const ModelSpec& model,
                        const SweepOptions& options) {
    GroupOutcome o;
    try {
        for (std::size_t i : members) {
            o.memory.push_back(check_memory(pts.entries[i].layout, *pts.clusters[pts.cluster_of[i]], model,
                                            options.min_headroom, checks[i]));
            if (o.memory.back().status == SweepStatus::simulated && o.fitting++ == 0) o.runner = i;
        }
    } catch (...) {
        o.error = std::current_exception();
    }
    return o;
}

/// What run_by_bound's threads know of a group (its todo position).
enum class GroupState : std::uint8_t {
    unvisited,  ///< not taken yet from the order
    walking,    ///< taken: its memory walks under way
    deferred,   ///< walked, with fitting members; neither pruned nor known to be kept yet
    running,    ///< its simulation under way
    decided,    ///< simulated, pruned, without a fitting member, or its walk threw
};

/// Phase 2 on this process's threads (run_by_bound). Each thread, when free, takes under one mutex the first
/// of: a deferred group that is now known to be kept (simulated) or pruned; the next group in `order` (by
/// bound ascending), walked against memory; or, when nothing is under way on another thread, the deferred
/// group of least bound. A walked group is pruned when it is above its size's bar (and, keeping the front,
/// each fitting member is dominated by a simulated point), simulated when it is known to be kept, and
/// deferred otherwise, so that no thread simulates a group that the final rule (prune_beyond_bar) may drop:
///
/// - Known kept (`kept`): its bound is at most a floor under its size's final bar (`floor_bar`: the N-th
///   least of the step times simulated and the bounds of the members of every group not decided yet, each
///   at most its step time), or, keeping the front, some fitting member is dominated neither by a simulated
///   point nor possibly by a group under way or deferred (bound below the group's, a member no larger).
///   A point dominating it at the end has a step time, hence a bound, below the group's, so its group was
///   visited before it and is either simulated already or under way.
/// - The deferred group of least bound, once nothing is under way and the order is done, is kept: were its
///   bound above the final bar T, N fitting members at or under T would be simulated (every other group not
///   decided has a larger bound, so a larger step time), putting the bar under its bound, and it would
///   have been pruned.
///
/// A single thread thus simulates exactly the groups kept; several threads may wait for one another
/// instead. The final rule keeps the same groups whatever is done here.
class ByBound {
  public:
    ByBound(Phase2& p2, const std::vector<std::size_t>& order, const std::vector<std::size_t>& todo,
            const Points& pts, const std::vector<PointCheck>& checks, const ModelSpec& model,
            const std::string& workload_name, const SweepOptions& options,
            const std::function<void()>& simulated, TopTimes& best, SimulatedPoints& points,
            std::vector<std::exception_ptr>& errors)
        : p2_(p2),
          order_(order),
          todo_(todo),
          pts_(pts),
          checks_(checks),
          model_(model),
          workload_name_(workload_name),
          options_(options),
          simulated_(simulated),
          best_(best),
          points_(points),
          errors_(errors),
          keep_front_(options.prune_keeps_pareto_front),
          state_(todo.size(), GroupState::unvisited),
          runner_(todo.size()),
          fitting_(todo.size(), 0) {}

    /// One thread's work, until every group is decided.
    void work() {
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            std::size_t k = 0;
            if (take_deferred(k)) {
                run(k, lock);
            } else if (take_next(k)) {
                visit(k, lock);
            } else if (under_way_ > 0) {
                wake_.wait(lock);
            } else if (!deferred_.empty()) {
                k = deferred_.front();
                deferred_.erase(deferred_.begin());
                run(k, lock);
            } else {
                return;
            }
        }
    }

  private:
    double bound(std::size_t k) const { return checks_[todo_[k]].lower_bound_s; }
    std::size_t size_of(std::size_t k) const { return pts_.cluster_of[todo_[k]]; }
    bool beyond(std::size_t k) const { return bound(k) > best_.bar(size_of(k)); }
    bool fits(std::size_t m) const { return p2_.walked[m] && p2_.memory[m].status == SweepStatus::simulated; }
    void decide(std::size_t k, bool pruned) {
        state_[k] = GroupState::decided;
        if (pruned) p2_.pruned[k] = true;
    }

    /// A walked group that cannot be kept: above its bar and, keeping the front, dominated.
    bool prunable(std::size_t k) const {
        return beyond(k) && (!keep_front_ || group_dominated(p2_, k, bound(k), points_));
    }

    /// A floor under the final bar of cluster size `size`: the N-th least of the fitting step times
    /// simulated (TopTimes keeps the N least) and the bounds of the members of every group not decided
    /// (a walked one's fitting members, another's all); infinity when fewer.
    double floor_bar(std::size_t size) const {
        std::vector<double> v = best_.least(size);
        const std::size_t top = best_.top();
        for (std::size_t pos = 0; pos < order_.size(); ++pos) {
            const std::size_t k = order_[pos];
            if (state_[k] == GroupState::decided || size_of(k) != size) continue;
            if (state_[k] == GroupState::unvisited && v.size() >= top && bound(k) >= v.back()) break;
            for (std::size_t m : p2_.members[k])
                if (state_[k] == GroupState::unvisited || state_[k] == GroupState::walking || fits(m))
                    v.insert(std::upper_bound(v.begin(), v.end(), bound(k)), bound(k));
            if (v.size() > top) v.resize(top);
        }
        return v.size() < top ? std::numeric_limits<double>::infinity() : v[top - 1];
    }

    /// Whether group `j`, not decided, may yet hold a point faster than `bound_s` and no larger than
    /// `peak_bytes`: its bound is below it and a member (fitting, once walked) needs at most that, its
    /// memory floor before its walk.
    bool may_dominate(std::size_t j, double bound_s, double peak_bytes) const {
        if (!(bound(j) < bound_s)) return false;
        const bool walked = state_[j] == GroupState::deferred || state_[j] == GroupState::running;
        return std::any_of(p2_.members[j].begin(), p2_.members[j].end(), [&](std::size_t m) {
            return walked ? fits(m) && p2_.memory[m].peak_memory_bytes <= peak_bytes
                          : p2_.floor[m] <= peak_bytes;
        });
    }

    /// Whether the walked group `k` is kept by the final rule whatever comes (see the class).
    bool kept(std::size_t k) const {
        if (bound(k) <= floor_bar(size_of(k))) return true;
        if (!keep_front_) return false;
        for (std::size_t m : p2_.members[k]) {
            if (!fits(m)) continue;
            const double peak = p2_.memory[m].peak_memory_bytes;
            if (points_.dominate(bound(k), peak)) continue;
            bool open = false;
            for (std::size_t j = 0; j < state_.size() && !open; ++j)
                open = j != k && state_[j] != GroupState::unvisited && state_[j] != GroupState::decided &&
                       may_dominate(j, bound(k), peak);
            if (!open) return true;
        }
        return false;
    }

    /// The deferred groups now prunable are pruned; the first now known kept is taken out (`k`).
    bool take_deferred(std::size_t& k) {
        for (auto it = deferred_.begin(); it != deferred_.end();) {
            if (prunable(*it)) {
                decide(*it, true);
                it = deferred_.erase(it);
            } else if (kept(*it)) {
                k = *it;
                deferred_.erase(it);
                return true;
            } else {
                ++it;
            }
        }
        return false;
    }

    /// The next group of the order to walk (`k`), those above their bar pruned on the way (keeping the
    /// front, only those whose memory floors are dominated).
    bool take_next(std::size_t& k) {
        for (; next_ < order_.size(); ++next_) {
            const std::size_t g = order_[next_];
            if (!beyond(g)) break;
            if (keep_front_ && !group_floor_dominated(p2_, g, bound(g), points_)) break;
            decide(g, true);
        }
        if (next_ == order_.size()) return false;
        k = order_[next_++];
        return true;
    }

    /// Walks group `k` (the lock released meanwhile), then prunes, simulates or defers it.
    void visit(std::size_t k, std::unique_lock<std::mutex>& lock) {
        state_[k] = GroupState::walking;
        ++under_way_;
        const bool early = keep_front_ && beyond(k);
        lock.unlock();
        std::vector<double> floors;  // above the bar, the early part of each member's walk first
        if (early)
            for (std::size_t m : p2_.members[k])
                floors.push_back(
                    early_memory_floor(pts_.entries[m].layout, *pts_.clusters[pts_.cluster_of[m]], model_));
        lock.lock();
        for (std::size_t q = 0; q < floors.size(); ++q)
            p2_.floor[p2_.members[k][q]] = std::max(p2_.floor[p2_.members[k][q]], floors[q]);
        GroupOutcome o;
        if (!early || !group_floor_dominated(p2_, k, bound(k), points_)) {
            lock.unlock();
            o = walk_group(p2_.members[k], pts_, checks_, model_, options_);
            lock.lock();
        } else {
            p2_.pruned[k] = true;
        }
        --under_way_;
        wake_.notify_all();
        if (p2_.pruned[k]) return decide(k, true);
        if (o.error) {
            errors_[k] = o.error;
            return decide(k, false);
        }
        const auto& g = p2_.members[k];
        for (std::size_t m = 0; m < g.size(); ++m) {
            p2_.memory[g[m]] = std::move(o.memory[m]);
            p2_.walked[g[m]] = true;
            raise_floor(p2_, g[m]);
            if (p2_.memory[g[m]].status == SweepStatus::simulated) p2_.runner[g[m]] = o.runner;
        }
        runner_[k] = o.runner;
        fitting_[k] = o.fitting;
        if (o.fitting == 0) return decide(k, false);
        if (prunable(k)) return decide(k, true);
        if (kept(k)) return run(k, lock);
        state_[k] = GroupState::deferred;
        deferred_.push_back(k);  // visited by bound ascending, so deferred_ stays in that order
    }

    /// Simulates group `k`'s runner (the lock released meanwhile) and records it.
    void run(std::size_t k, std::unique_lock<std::mutex>& lock) {
        state_[k] = GroupState::running;
        ++under_way_;
        const std::size_t i = runner_[k];
        lock.unlock();
        PointRun r = simulate_point(pts_.entries[i].layout, *pts_.clusters[pts_.cluster_of[i]], model_,
                                    workload_name_, options_);
        simulated_();
        lock.lock();
        p2_.runs.emplace(i, std::move(r));
        record(p2_, k, fitting_[k], pts_, best_, points_);
        decide(k, false);
        --under_way_;
        wake_.notify_all();
    }

    Phase2& p2_;
    const std::vector<std::size_t>& order_;
    const std::vector<std::size_t>& todo_;
    const Points& pts_;
    const std::vector<PointCheck>& checks_;
    const ModelSpec& model_;
    const std::string& workload_name_;
    const SweepOptions& options_;
    const std::function<void()>& simulated_;
    TopTimes& best_;
    SimulatedPoints& points_;
    std::vector<std::exception_ptr>& errors_;
    const bool keep_front_;
    std::mutex mutex_;
    std::condition_variable wake_;  ///< a walk or a simulation ended
    std::size_t next_ = 0;          ///< the next position in order_ to visit
    std::size_t under_way_ = 0;     ///< groups walking or running
    std::vector<GroupState> state_;
    std::vector<std::size_t> runner_, fitting_;  ///< [k] a walked group's first fitting member and count
    std::vector<std::size_t> deferred_;          ///< by bound ascending
};

/// On this process's threads (ByBound). A walk's exception is kept at its group (`errors`).
void run_by_bound(Phase2& p2, const std::vector<std::size_t>& order, const std::vector<std::size_t>& todo,
                  const Points& pts, const std::vector<PointCheck>& checks, const ModelSpec& model,
                  const std::string& workload_name, const SweepOptions& options,
                  const std::function<void()>& simulated, TopTimes& best, SimulatedPoints& points,
                  std::vector<std::exception_ptr>& errors) {
    ByBound by_bound(p2, order, todo, pts, checks, model, workload_name, options, simulated, best, points,
                     errors);
    const auto workers = static_cast<std::size_t>(std::max(options.jobs, 1));
    parallel_for(workers, options.jobs, [&](std::size_t) { by_bound.work(); });
}

/// The fitting points of every group simulated (each at its runner's step time, with its own peak).
SimulatedPoints simulated_points(const Phase2& p2) {
    SimulatedPoints points;
    for (const auto& g : p2.members)
        for (std::size_t m : g) {
            const auto run = p2.runs.find(p2.runner[m]);
            if (run == p2.runs.end() || run->second.error || run->second.status != SweepStatus::simulated)
                continue;
            points.add(run->second.report.step_time_s, p2.memory[m].peak_memory_bytes);
        }
    return points;
}

/// Every group whose bound exceeds its size's final bar becomes pruned, whatever was done of it (its walks,
/// its run and a walk's exception dropped): what is kept is then the same for every schedule. Keeping the
/// front (SweepOptions::prune_keeps_pareto_front), only those whose fitting points are each dominated by a
/// simulated point; a group skipped as dominated is among them (else the argument above is broken: an
/// InternalError).
void prune_beyond_bar(Phase2& p2, const std::vector<std::size_t>& todo, const Points& pts,
                      const std::vector<PointCheck>& checks, const TopTimes& best, bool keep_front,
                      std::vector<std::exception_ptr>& errors) {
    const std::size_t n = pts.entries.size();
    const SimulatedPoints points = keep_front ? simulated_points(p2) : SimulatedPoints{};
    for (std::size_t k = 0; k < todo.size(); ++k) {
        const std::size_t i = todo[k];
        const bool beyond = checks[i].lower_bound_s > best.bar(pts.cluster_of[i]);
        if (keep_front) {
            // Dominated with its floors (then it may not have been walked), or walked and each fitting
            // point dominated with its peak.
            const bool floor_dominated =
                beyond && group_floor_dominated(p2, k, checks[i].lower_bound_s, points);
            const bool walked = std::all_of(p2.members[k].begin(), p2.members[k].end(),
                                            [&](std::size_t m) { return p2.walked[m]; });
            if (!floor_dominated && !walked && !errors[k])
                throw InternalError("sweep: a group not dominated by its floors was not walked");
            const bool dominated =
                floor_dominated ||
                (beyond && walked && !errors[k] && group_dominated(p2, k, checks[i].lower_bound_s, points));
            if (p2.pruned[k] && !dominated)
                throw InternalError("sweep: a group skipped as dominated is not dominated at the end");
            if (!dominated) continue;
        } else if (!beyond) {  // a group pruned is beyond: its walk, if any, dropped
            continue;
        }
        p2.pruned[k] = true;
        errors[k] = nullptr;
        for (std::size_t m : p2.members[k]) {
            if (p2.runner[m] == m) p2.runs.erase(m);
            p2.runner[m] = n;
            p2.walked[m] = false;
            p2.memory[m] = PointCheck{};
        }
    }
}

}  // namespace

Phase2 run_phase2(const Points& pts, const std::vector<PointCheck>& checks,
                  const std::vector<std::size_t>& todo, const std::vector<std::size_t>& copy_of,
                  const ModelSpec& model, const std::string& workload_name, const SweepOptions& options,
                  const std::function<void()>& simulated) {
    Phase2 p2 = start_phase2(pts.entries.size(), checks, todo, copy_of);
    std::vector<std::size_t> order(todo.size());
    for (std::size_t k = 0; k < todo.size(); ++k)
        order[k] = k;
    const std::size_t top = options.perturbations.empty() ? options.prune_beyond_top : 0;
    if (top == 0) {
        run_round(p2, order, pts, checks, model, workload_name, options, simulated);
        return p2;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        return checks[todo[a]].lower_bound_s < checks[todo[b]].lower_bound_s;
    });
    TopTimes best(pts.sizes.size(), top);
    SimulatedPoints points;
    std::vector<std::exception_ptr> errors(todo.size());
    if (options.processes && options.processes->size() > 1)
        run_rounds(p2, order, todo, pts, checks, model, workload_name, options, simulated, best, points);
    else
        run_by_bound(p2, order, todo, pts, checks, model, workload_name, options, simulated, best, points,
                     errors);
    prune_beyond_bar(p2, todo, pts, checks, best, options.prune_keeps_pareto_front, errors);
    std::size_t first = todo.size();  // the failed group first in enumeration order
    for (std::size_t k = 0; k < todo.size(); ++k)
        if (errors[k] && (first == todo.size() || todo[k] < todo[first])) first = k;
    if (first < todo.size()) std::rethrow_exception(errors[first]);
    return p2;
}

}  // namespace trainsim::sweep_detail
