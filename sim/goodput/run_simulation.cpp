// One simulated training run: failures, checkpoints and recoveries as events on a small dedicated loop (the
// next failure of each component class, the next checkpoint boundary, the end of a blocking phase, the end
// of an asynchronous write). A run of 54 days on 16,384 GPUs is a few thousand events.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// A run stops (unfinished) after this many events: a failure rate so high that no checkpoint interval
/// completes would otherwise loop for ever.
constexpr std::int64_t kMaxEvents = 50'000'000;
/// check_goodput_config refuses runs expected to see more failures than this (each is a few events).
constexpr double kMaxExpectedFailures = 1e6;
/// At most this many units per Weibull class (their first lifetimes are drawn lazily, their replacements kept
/// one clock each).
constexpr double kMaxWeibullUnits = 1e7;

/// SplitMix64's finalizer (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014): a bijective 64-bit mix.
std::uint64_t mix64(std::uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/// Counter-based uniform draw in (0, 1) keyed by (seed, stream, counter).
double uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t counter) {
    const std::uint64_t x = mix64(mix64(mix64(seed) ^ stream) ^ counter);
    return (static_cast<double>(x >> 11) + 0.5) * 0x1.0p-53;
}

/// The failure clock of one component class. Exponential lifetimes: the class is one Poisson process of
/// rate count / MTBF. Weibull lifetimes (shape k, scale L = MTBF / Gamma(1 + 1/k)), every unit new at t = 0
/// and replaced by a new one when it fails: the units still on their first lifetime are drawn lazily in the
/// order they fail (the minimum of m such units that survived to t0 fails at t with (t/L)^k = (t0/L)^k +
/// E/m, E ~ Exp(1): their cumulative hazards add; Ross, Simulation, 5th ed., Sec. 5.3 on order statistics
/// of exponentials), so a run costs its failures rather than one draw per unit (51,764 units in a 16,384-GPU
/// job); the replacements keep one clock each, in a heap.
class ClassClock {
  public:
    ClassClock(const ComponentReliability& r, double shape, int index, std::uint64_t seed)
        : seed_(seed), stream_(static_cast<std::uint64_t>(index + 1) << 40) {
        if (r.mtbf_h <= 0 || r.count <= 0) return;  // never fails
        const double mean_s = r.mtbf_h * 3600.0;
        if (shape == 1.0) {
            mean_gap_s_ = mean_s / r.count;
            next_ = draw_exponential(0.0);
            return;
        }
        weibull_ = true;
        inv_shape_ = 1.0 / shape;
        scale_s_ = mean_s / std::tgamma(1.0 + 1.0 / shape);
        fresh_left_ = static_cast<std::uint64_t>(std::llround(r.count));
        draw_fresh();
        next_ = fresh_next_;
    }
    double next() const { return next_; }
    /// The unit that failed at next() is replaced by a new one; draws the class's next failure.
    void advance() {
        if (!weibull_) {
            next_ = draw_exponential(next_);
            return;
        }
        if (fresh_left_ > 0 && (heap_.empty() || fresh_next_ <= heap_.top().first)) {
            const double t = fresh_next_;
            --fresh_left_;
            const auto unit = static_cast<std::uint32_t>(counters_.size());
            counters_.push_back(0);
            heap_.emplace(draw_weibull(t, unit), unit);
            draw_fresh();
        } else {
            const auto [t, u] = heap_.top();
            heap_.pop();
            heap_.emplace(draw_weibull(t, u), u);
        }
        next_ = std::min(fresh_left_ > 0 ? fresh_next_ : kInf, heap_.top().first);
    }

  private:
    using Heap = std::priority_queue<std::pair<double, std::uint32_t>,
                                     std::vector<std::pair<double, std::uint32_t>>, std::greater<>>;
    /// Stream bit of the units' first lifetimes (the replacement units' streams are stream_ | unit, unit
    /// < 2^32 failures).
    static constexpr std::uint64_t kFreshStream = std::uint64_t{1} << 39;
    double draw_exponential(double from) {
        return from - mean_gap_s_ * std::log(uniform(seed_, stream_, counter_++));
    }
    /// The next failure among the fresh_left_ units still on their first lifetime.
    void draw_fresh() {
        if (fresh_left_ == 0) return;
        fresh_hazard_ +=
            -std::log(uniform(seed_, stream_ | kFreshStream, counter_++)) / static_cast<double>(fresh_left_);
        fresh_next_ = scale_s_ * std::pow(fresh_hazard_, inv_shape_);
    }
    double draw_weibull(double from, std::uint32_t unit) {
        const double u = uniform(seed_, stream_ | unit, counters_[unit]++);
        return from + scale_s_ * std::pow(-std::log(u), inv_shape_);
    }
    std::uint64_t seed_, stream_;
    std::uint64_t counter_ = 0;
    double next_ = kInf;
    double mean_gap_s_ = 0;
    bool weibull_ = false;
    double inv_shape_ = 1, scale_s_ = 0;
    std::uint64_t fresh_left_ = 0;         ///< units still on their first lifetime
    double fresh_hazard_ = 0;              ///< (t/L)^k at the last of them to fail
    double fresh_next_ = kInf;             ///< when the next of them fails
    std::vector<std::uint32_t> counters_;  ///< per replacement unit: draws so far
    Heap heap_;                            ///< replacement units: (failure time, unit)
};

bool node_local(int cls) {
    const auto c = static_cast<FailureComponent>(cls);
    return c == FailureComponent::gpu || c == FailureComponent::node || c == FailureComponent::nic;
}

/// The wall time a run is expected to last: the horizon, or (target only) Daly's expected run time, which
/// grows as e^(R/M) when a recovery R rarely completes within the MTBF M (`rate` > 0: failures per second).
double expected_span_s(const GoodputConfig& c, double rate) {
    if (c.horizon_s > 0) return c.horizon_s;
    const double block = c.mode == CheckpointMode::sync ? c.save_s : c.copy_s;
    const double recovery = c.detection_s + c.restart_s + c.load_s;
    return expected_run_time_s(c.target_work_s, static_cast<double>(c.interval_steps) * c.step_s, block,
                               1.0 / rate, recovery);
}

}  // namespace

double expected_run_events(const GoodputConfig& c) {
    const double rate = c.failures.rate_per_s();
    const double span =
        rate > 0 ? expected_span_s(c, rate) : (c.horizon_s > 0 ? c.horizon_s : c.target_work_s);
    double failures = rate * span;
    const double k = c.failures.weibull_shape;
    if (k < 1.0 && k > 0) {
        // Weibull units with k < 1 (infant mortality) are replaced by new ones, which again fail early: per
        // unit, about 1/p - 1 fresh units fail within the span (a geometric count; p = exp(-(span /
        // scale)^k), scale = MTBF / Gamma(1 + 1/k)), at most the renewal function's asymptote span / MTBF +
        // (CV^2 - 1) / 2 (Cox, Renewal Theory, 1962, Sec. 4.2). Both are far above span / MTBF for small k.
        const double g1 = std::tgamma(1.0 + 1.0 / k);
        const double cv2 = std::tgamma(1.0 + 2.0 / k) / (g1 * g1) - 1.0;
        double weibull = 0;
        for (const auto& cls : c.failures.components) {
            if (!(cls.mtbf_h > 0) || !(cls.count > 0)) continue;
            const double mean_s = cls.mtbf_h * 3600.0;
            const double p = std::exp(-std::pow(span * g1 / mean_s, k));
            const double asymptote = span / mean_s + (cv2 - 1.0) / 2.0;
            weibull += cls.count * (p > 0 ? std::min(1.0 / p - 1.0, asymptote) : asymptote);
        }
        failures = std::max(failures, weibull);
    }
    return limits::kGoodputFailureWorkEvents * failures +
           span / (static_cast<double>(c.interval_steps) * c.step_s);
}

void check_goodput_config(const GoodputConfig& c) {
    auto finite_nonneg = [](double v, const char* name) {
        if (!(v >= 0) || !std::isfinite(v))
            throw InputError(fmt::format("{} = {} must be a finite number >= 0", name, v));
    };
    if (!(c.step_s > 0) || !std::isfinite(c.step_s))
        throw InputError(fmt::format("step time = {} s must be > 0", c.step_s));
    if (c.interval_steps < 1)
        throw InputError(fmt::format("checkpoint interval = {} steps must be >= 1", c.interval_steps));
    finite_nonneg(c.save_s, "checkpoint save time");
    finite_nonneg(c.copy_s, "checkpoint copy time");
    finite_nonneg(c.load_s, "checkpoint load time");
    finite_nonneg(c.detection_s, "detection time");
    finite_nonneg(c.restart_s, "restart time");
    finite_nonneg(c.spare_restart_s, "spare restart time");
    finite_nonneg(c.repair_s, "repair time");
    finite_nonneg(c.horizon_s, "horizon");
    finite_nonneg(c.target_work_s, "target work");
    if (c.hot_spares < 0) throw InputError(fmt::format("hot spares = {} must be >= 0", c.hot_spares));
    if (c.horizon_s <= 0 && c.target_work_s <= 0)
        throw InputError("the run needs a stop condition: a horizon (days) or a target (tokens)");
    if (!(c.failures.weibull_shape > 0) || !std::isfinite(c.failures.weibull_shape))
        throw InputError(fmt::format("Weibull shape = {} must be > 0", c.failures.weibull_shape));
    // Expected failures per run: over the horizon, or (target only) over Daly's expected run time, which
    // grows as e^(R/M) when a recovery R rarely completes within the MTBF M.
    const double rate = c.failures.rate_per_s();
    if (rate > 0) {
        const double recovery = c.detection_s + c.restart_s + c.load_s;
        const double expected = rate * expected_span_s(c, rate);
        if (!(expected <= kMaxExpectedFailures)) {
            // The class with the most failures, named with its MTBF: "the MTBFs" alone left the user to find
            // which of five options was off (a 5e-324 h MTBF gave "inf expected failures", round 13).
            std::size_t worst = 0;
            for (std::size_t i = 1; i < c.failures.components.size(); ++i)
                if (c.failures.components[i].rate_per_s() > c.failures.components[worst].rate_per_s())
                    worst = i;
            const auto& w = c.failures.components[worst];
            throw InputError(fmt::format(
                "the MTBFs give {:.3g} expected failures per run, most from the {} class's MTBF of {:.3g} h "
                "({:.0f} {}; system MTBF {:.3g} s against a recovery of {:.3g} s); at most {:.0e} are "
                "simulated",
                std::isfinite(expected) ? expected : std::numeric_limits<double>::infinity(),  // nan: inf x 0
                to_string(static_cast<FailureComponent>(worst)), w.mtbf_h, w.count,
                w.count == 1 ? "unit" : "units", 1.0 / rate, recovery, kMaxExpectedFailures));
        }
    }
    for (int i = 0; i < kFailureComponents; ++i) {
        const auto& r = c.failures.components[static_cast<std::size_t>(i)];
        const std::string name = to_string(static_cast<FailureComponent>(i));
        finite_nonneg(r.count, (name + " count").c_str());
        finite_nonneg(r.mtbf_h, (name + " MTBF").c_str());
        if (c.failures.weibull_shape != 1.0 && r.count > kMaxWeibullUnits)
            throw InputError(fmt::format("{} count = {} exceeds the {} units of a Weibull class", name,
                                         r.count, kMaxWeibullUnits));
    }
}

namespace {

/// The state of one simulated run and its event handlers: the loop in simulate_run picks the next event
/// (the earliest failure of any class, the end of the running stretch at the next checkpoint boundary or the
/// target, the end of a blocking or recovering phase, an asynchronous write becoming durable, the horizon).
class RunSimulator {
  public:
    RunSimulator(const GoodputConfig& c, std::uint64_t seed)
        : c_(c),
          interval_work_(static_cast<double>(c.interval_steps) * c.step_s),
          target_(c.target_work_s > 0 ? c.target_work_s : kInf),
          horizon_(c.horizon_s > 0 ? c.horizon_s : kInf),
          async_(c.mode == CheckpointMode::async),
          next_ckpt_(interval_work_),
          spares_free_(c.hot_spares) {
        clocks_.reserve(kFailureComponents);
        for (int i = 0; i < kFailureComponents; ++i)
            clocks_.emplace_back(c.failures.components[static_cast<std::size_t>(i)], c.failures.weibull_shape,
                                 i, seed);
    }

    RunOutcome run() {
        for (std::int64_t events = 0; events < kMaxEvents && !o_.finished; ++events)
            if (!step()) break;
        o_.wall_s = t_;
        o_.useful_s = work_;
        return o_;
    }

  private:
    enum class Phase { running, blocking, recovering };
    enum class Ev { work, phase_end, write_done };

    /// Handles the next event; false when the horizon is reached.
    bool step() {
        int cls = 0;
        for (int i = 1; i < kFailureComponents; ++i)
            if (clocks_[static_cast<std::size_t>(i)].next() < clocks_[static_cast<std::size_t>(cls)].next())
                cls = i;
        const double tf = clocks_[static_cast<std::size_t>(cls)].next();
        Ev ev = Ev::phase_end;
        double te = phase_end_;
        if (phase_ == Phase::running) {
            te = t_ + (std::min(next_ckpt_, target_) - work_);
            ev = Ev::work;
        }
        if (pending_ && pending_end_ < te) {
            te = pending_end_;
            ev = Ev::write_done;
        }
        if (horizon_ <= te && horizon_ <= tf) {
            advance(horizon_);
            return false;
        }
        if (tf < te) {
            advance(tf);
            on_failure(cls);
            return true;
        }
        advance(te);
        if (ev == Ev::work)
            on_work_boundary();
        else if (ev == Ev::write_done)
            on_write_done();
        else
            on_phase_end();
        return true;
    }

    void advance(double to) {
        const double dt = to - t_;
        if (phase_ == Phase::running)
            work_ += dt;
        else if (phase_ == Phase::blocking)
            o_.checkpoint_blocked_s += dt;
        else
            o_.recovery_s += dt;
        t_ = to;
    }

    /// Starts the blocking part of the checkpoint at `work` (now): the copy (async) or the write (sync),
    /// after the previous asynchronous write if one is in flight.
    void start_checkpoint(bool final) {
        phase_ = Phase::blocking;
        ckpt_work_ = work_;
        final_ckpt_ = final;
        waiting_write_ = async_ && pending_;
        const double block = !async_ ? c_.save_s : final ? c_.copy_s + c_.save_s : c_.copy_s;
        phase_end_ = waiting_write_ ? kInf : t_ + block;
    }

    /// A component of class `cls` fails now: the work since the last durable checkpoint is lost (and the
    /// checkpoint being taken or written), then detection, relaunch (on a hot spare when one is free and
    /// the failure is node-local) and the checkpoint load.
    void on_failure(int cls) {
        clocks_[static_cast<std::size_t>(cls)].advance();
        ++o_.failures[static_cast<std::size_t>(cls)];
        if (phase_ != Phase::recovering) {
            o_.lost_work_s += work_ - durable_;
            work_ = durable_;
            if (phase_ == Phase::blocking) ++o_.checkpoints_lost;
        }
        if (pending_) {
            pending_ = false;
            ++o_.checkpoints_lost;
        }
        waiting_write_ = false;
        final_ckpt_ = false;
        next_ckpt_ = durable_ + interval_work_;
        while (!repaired_at_.empty() && repaired_at_.top() <= t_) {
            repaired_at_.pop();
            ++spares_free_;
        }
        double relaunch = c_.restart_s;
        if (spares_free_ > 0 && node_local(cls)) {
            --spares_free_;
            repaired_at_.push(t_ + c_.repair_s);
            relaunch = c_.spare_restart_s;
            ++o_.spare_swaps;
        }
        phase_ = Phase::recovering;
        phase_end_ = t_ + c_.detection_s + relaunch + c_.load_s;
    }

    /// The running stretch reached a checkpoint boundary or the target.
    void on_work_boundary() {
        if (next_ckpt_ < target_) {
            work_ = next_ckpt_;  // exact boundary (no rounding drift)
            start_checkpoint(false);
        } else {
            work_ = target_;
            start_checkpoint(true);
        }
    }

    void on_write_done() {
        pending_ = false;
        durable_ = pending_work_;
        ++o_.checkpoints_durable;
        if (phase_ == Phase::blocking && waiting_write_) {
            waiting_write_ = false;
            phase_end_ = t_ + (final_ckpt_ ? c_.copy_s + c_.save_s : c_.copy_s);
        }
    }

    void on_phase_end() {
        if (phase_ == Phase::recovering) {
            phase_ = Phase::running;
            return;
        }
        // blocking phase over
        if (final_ckpt_ || !async_) {
            durable_ = ckpt_work_;
            ++o_.checkpoints_durable;
        } else {
            pending_ = true;
            pending_end_ = t_ + c_.save_s;
            pending_work_ = ckpt_work_;
        }
        if (final_ckpt_) {
            o_.finished = true;
            return;
        }
        next_ckpt_ += interval_work_;
        phase_ = Phase::running;
    }

    const GoodputConfig& c_;
    const double interval_work_, target_, horizon_;
    const bool async_;
    std::vector<ClassClock> clocks_;
    RunOutcome o_;
    Phase phase_ = Phase::running;
    double t_ = 0, work_ = 0, durable_ = 0, next_ckpt_;
    double phase_end_ = 0;        ///< end of the blocking or recovering phase
    double ckpt_work_ = 0;        ///< the work the checkpoint being taken holds
    bool final_ckpt_ = false;     ///< the blocking phase is the run's last checkpoint
    bool waiting_write_ = false;  ///< blocked until the previous asynchronous write is durable
    bool pending_ = false;        ///< an asynchronous write in flight
    double pending_end_ = 0, pending_work_ = 0;
    int spares_free_;
    std::priority_queue<double, std::vector<double>, std::greater<>> repaired_at_;
};

}  // namespace

RunOutcome simulate_run(const GoodputConfig& c, std::uint64_t seed) {
    return RunSimulator(c, seed).run();
}

}  // namespace trainsim
