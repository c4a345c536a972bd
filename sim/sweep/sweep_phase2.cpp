// Phase 2 of a sweep (sweep_internal.hpp run_phase2): the groups of points with identical programs walked
// against memory and simulated once each.
//
// With pruning (SweepOptions::prune_beyond_top = N) the groups are taken by lower bound ascending, and a
// group whose bound exceeds the N-th best step time simulated so far on its cluster size (its size's bar) is
// skipped. The bar only falls, so how much is done beyond it depends on the schedule: on one process the
// threads take the next group as soon as they are free (no core waits for a round to end), and over
// processes the groups go in rounds of kPruneRoundSize. What is kept does not: once every group is decided,
// every group whose bound exceeds its size's final bar T is pruned, whatever was done of it. Any schedule
// that skips only groups above the current bar (never below T) simulates every group with bound <= T, and
// the groups beyond it have step times >= their bounds > T, so they never move the N-th best: every
// schedule ends with the same T and keeps the same groups (two schedules ending at T1 < T2: the second
// simulated the N members at or under T1, whose bounds are <= T1, so its N-th best is <= T1).
#include <algorithm>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>

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
    void add(std::size_t size, double step_s, std::size_t count) {
        auto& v = best_[size];
        v.insert(std::upper_bound(v.begin(), v.end(), step_s), count, step_s);
        if (v.size() > top_) v.resize(top_);
    }

  private:
    std::vector<std::vector<double>> best_;  ///< [size]
    std::size_t top_;
};

/// One round of phase 2 over the groups at `ks` (positions in todo): every member's memory walk, then the
/// simulation of each group's first member that fits, which the group's other fitting members take. Returns
/// the fitting members per group.
std::vector<std::size_t> run_round(Phase2& p2, const std::vector<std::size_t>& ks, const Points& pts,
                                   const std::vector<PointCheck>& checks, const ModelSpec& model,
                                   const std::string& workload_name, const SweepOptions& options,
                                   const std::function<void()>& simulated) {
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
    }
    std::vector<std::size_t> runners, fitting(ks.size(), 0);
    for (std::size_t q = 0; q < ks.size(); ++q)
        for (std::size_t i : p2.members[ks[q]]) {
            if (p2.memory[i].status != SweepStatus::simulated) continue;
            if (fitting[q]++ == 0) runners.push_back(i);
            p2.runner[i] = runners.back();
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
    std::vector<std::size_t> position(n, todo.size());
    for (std::size_t k = 0; k < todo.size(); ++k)
        position[todo[k]] = k;
    for (std::size_t i = 0; i < n; ++i)
        if (checks[i].status == SweepStatus::simulated)
            p2.members[position[copy_of[i] != n ? copy_of[i] : i]].push_back(i);
    return p2;
}

/// The group at todo position `k` into `best`: its `fitting` members at its runner's step time (none when
/// its simulation failed or rejected it).
void record(const Phase2& p2, std::size_t k, std::size_t fitting, const Points& pts, TopTimes& best) {
    if (fitting == 0) return;
    const std::size_t n = pts.entries.size();
    std::size_t runner = n;  // the group's first fitting member
    for (std::size_t m : p2.members[k])
        if (runner == n) runner = p2.runner[m];
    const PointRun& run = p2.runs.at(runner);
    if (run.error || run.status != SweepStatus::simulated) return;
    best.add(pts.cluster_of[runner], run.report.step_time_s, fitting);
}

/// Over processes: rounds of kPruneRoundSize groups in `order`, each skipping the groups above their bar.
void run_rounds(Phase2& p2, const std::vector<std::size_t>& order, const std::vector<std::size_t>& todo,
                const Points& pts, const std::vector<PointCheck>& checks, const ModelSpec& model,
                const std::string& workload_name, const SweepOptions& options,
                const std::function<void()>& simulated, TopTimes& best) {
    for (std::size_t pos = 0; pos < order.size();) {
        std::vector<std::size_t> batch;
        for (; pos < order.size() && batch.size() < kPruneRoundSize; ++pos) {
            const std::size_t i = todo[order[pos]];
            if (checks[i].lower_bound_s > best.bar(pts.cluster_of[i]))
                p2.pruned[order[pos]] = true;
            else
                batch.push_back(order[pos]);
        }
        const std::vector<std::size_t> fitting =
            run_round(p2, batch, pts, checks, model, workload_name, options, simulated);
        for (std::size_t q = 0; q < batch.size(); ++q)
            record(p2, batch[q], fitting[q], pts, best);
    }
}

/// One group's phase 2 on one thread: every member's memory walk, then the simulation of the first that fits.
struct GroupOutcome {
    std::vector<PointCheck> memory;  ///< [member]
    std::size_t runner = 0;          ///< the first fitting member (a point index; none: no run)
    std::size_t fitting = 0;         ///< members that fit
    std::optional<PointRun> run;
    std::exception_ptr error;  ///< what a memory walk threw (not an InputError: check_memory keeps those)
};

GroupOutcome run_group(const std::vector<std::size_t>& members, const Points& pts,
                       const std::vector<PointCheck>& checks, const ModelSpec& model,
                       const std::string& workload_name, const SweepOptions& options) {
    GroupOutcome o;
    try {
        for (std::size_t i : members) {
            o.memory.push_back(check_memory(pts.entries[i].layout, *pts.clusters[pts.cluster_of[i]], model,
                                            options.min_headroom, checks[i]));
            if (o.memory.back().status == SweepStatus::simulated && o.fitting++ == 0) o.runner = i;
        }
    } catch (...) {
        o.error = std::current_exception();
        return o;
    }
    if (o.fitting > 0)
        o.run = simulate_point(pts.entries[o.runner].layout, *pts.clusters[pts.cluster_of[o.runner]], model,
                               workload_name, options);
    return o;
}

/// On this process's threads: each takes the next group in `order` when it is free, skipping those above
/// their bar, and records what it did under one mutex. A walk's exception is kept at its group (`errors`).
void run_by_bound(Phase2& p2, const std::vector<std::size_t>& order, const std::vector<std::size_t>& todo,
                  const Points& pts, const std::vector<PointCheck>& checks, const ModelSpec& model,
                  const std::string& workload_name, const SweepOptions& options,
                  const std::function<void()>& simulated, TopTimes& best,
                  std::vector<std::exception_ptr>& errors) {
    std::mutex mutex;
    std::size_t next = 0;  // position in order
    const auto workers = static_cast<std::size_t>(std::max(options.jobs, 1));
    parallel_for(workers, options.jobs, [&](std::size_t) {
        for (;;) {
            std::size_t k = 0;
            {
                const std::lock_guard<std::mutex> lock(mutex);
                for (; next < order.size(); ++next) {
                    const std::size_t i = todo[order[next]];
                    if (checks[i].lower_bound_s <= best.bar(pts.cluster_of[i])) break;
                    p2.pruned[order[next]] = true;
                }
                if (next == order.size()) return;
                k = order[next++];
            }
            GroupOutcome o = run_group(p2.members[k], pts, checks, model, workload_name, options);
            const bool ran = o.run.has_value();
            {
                const std::lock_guard<std::mutex> lock(mutex);
                if (o.error) {
                    errors[k] = o.error;
                    continue;
                }
                const auto& g = p2.members[k];
                for (std::size_t m = 0; m < g.size(); ++m) {
                    p2.memory[g[m]] = std::move(o.memory[m]);
                    p2.walked[g[m]] = true;
                    if (p2.memory[g[m]].status == SweepStatus::simulated) p2.runner[g[m]] = o.runner;
                }
                if (ran) p2.runs.emplace(o.runner, std::move(*o.run));
                record(p2, k, o.fitting, pts, best);
            }
            if (ran) simulated();
        }
    });
}

/// Every group whose bound exceeds its size's final bar becomes pruned, whatever was done of it (its walks,
/// its run and a walk's exception dropped): what is kept is then the same for every schedule.
void prune_beyond_bar(Phase2& p2, const std::vector<std::size_t>& todo, const Points& pts,
                      const std::vector<PointCheck>& checks, const TopTimes& best,
                      std::vector<std::exception_ptr>& errors) {
    const std::size_t n = pts.entries.size();
    for (std::size_t k = 0; k < todo.size(); ++k) {
        const std::size_t i = todo[k];
        if (p2.pruned[k] || checks[i].lower_bound_s <= best.bar(pts.cluster_of[i])) continue;
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
    std::vector<std::exception_ptr> errors(todo.size());
    if (options.processes && options.processes->size() > 1)
        run_rounds(p2, order, todo, pts, checks, model, workload_name, options, simulated, best);
    else
        run_by_bound(p2, order, todo, pts, checks, model, workload_name, options, simulated, best, errors);
    prune_beyond_bar(p2, todo, pts, checks, best, errors);
    std::size_t first = todo.size();  // the failed group first in enumeration order
    for (std::size_t k = 0; k < todo.size(); ++k)
        if (errors[k] && (first == todo.size() || todo[k] < todo[first])) first = k;
    if (first < todo.size()) std::rethrow_exception(errors[first]);
    return p2;
}

}  // namespace trainsim::sweep_detail
