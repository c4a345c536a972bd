// Many seeds in parallel, their statistics, and the checkpoint-interval formulas.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/parallel_map.hpp"

namespace trainsim {

SeedStats seed_stats(std::vector<double> v) {
    SeedStats s;
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    const double n = static_cast<double>(v.size());
    double sum = 0;
    for (double x : v)
        sum += x;
    s.mean = sum / n;
    if (v.size() > 1) {
        double ss = 0;
        for (double x : v)
            ss += (x - s.mean) * (x - s.mean);
        s.ci95 = 1.96 * std::sqrt(ss / (n - 1) / n);
    }
    auto pct = [&](double p) {
        const double pos = p * (n - 1);
        const auto lo = static_cast<std::size_t>(std::floor(pos));
        const auto hi = std::min(lo + 1, v.size() - 1);
        return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
    };
    s.p10 = pct(0.10);
    s.p50 = pct(0.50);
    s.p90 = pct(0.90);
    s.min = v.front();
    s.max = v.back();
    return s;
}

GoodputSummary simulate_goodput(const GoodputConfig& c, std::uint64_t first_seed, int seeds, int jobs) {
    check_goodput_config(c);
    if (seeds < 1) throw InputError(fmt::format("seeds = {} must be >= 1", seeds));
    if (jobs < 1) throw InputError(fmt::format("jobs = {} must be >= 1", jobs));
    const double events = std::max(expected_run_events(c), 1.0);
    if (const double allowed = std::floor(static_cast<double>(limits::kMaxGoodputStudyEvents) / events);
        static_cast<double>(seeds) * events > static_cast<double>(limits::kMaxGoodputStudyEvents))
        throw InputError(fmt::format(
            "--seeds = {}: {} runs of about {:.3g} failures and checkpoints each pass the limit of {} for a "
            "goodput study (limits.hpp); {}",
            seeds, seeds, events, limits::kMaxGoodputStudyEvents,
            allowed >= 1 ? fmt::format("at most {:.0f} seeds here", allowed) : "not one seed fits here"));
    const std::vector<RunOutcome> runs = parallel_map(
        static_cast<std::size_t>(seeds), jobs,
        [&](std::size_t i) { return simulate_run(c, first_seed + static_cast<std::uint64_t>(i)); });

    GoodputSummary s;
    s.interval_steps = c.interval_steps;
    s.seeds = seeds;
    auto stats = [&](auto get) {
        std::vector<double> v;
        v.reserve(runs.size());
        for (const auto& r : runs)
            v.push_back(static_cast<double>(get(r)));
        return seed_stats(std::move(v));
    };
    s.goodput = stats([](const RunOutcome& r) { return r.goodput(); });
    s.wall_s = stats([](const RunOutcome& r) { return r.wall_s; });
    s.useful_s = stats([](const RunOutcome& r) { return r.useful_s; });
    s.lost_work_s = stats([](const RunOutcome& r) { return r.lost_work_s; });
    s.checkpoint_blocked_s = stats([](const RunOutcome& r) { return r.checkpoint_blocked_s; });
    s.recovery_s = stats([](const RunOutcome& r) { return r.recovery_s; });
    s.checkpoints_lost = stats([](const RunOutcome& r) { return r.checkpoints_lost; });
    for (std::size_t k = 0; k < s.failures.size(); ++k)
        s.failures[k] = stats([k](const RunOutcome& r) { return r.failures[k]; });
    double finished = 0;
    for (const auto& r : runs)
        finished += r.finished ? 1.0 : 0.0;
    s.finished_fraction = finished / seeds;
    return s;
}

double expected_run_time_s(double work_s, double tau_s, double delta_s, double mtbf_s, double restart_s) {
    const double m = mtbf_s;
    return work_s / tau_s * std::exp(restart_s / m) * m * std::expm1((tau_s + delta_s) / m);
}

IntervalFormulas interval_formulas(double delta_s, double mtbf_s, double restart_s) {
    IntervalFormulas f;
    if (!(delta_s > 0) || !(mtbf_s > 0) || !std::isfinite(mtbf_s)) return f;
    const double d = delta_s, m = mtbf_s;
    f.young_s = std::sqrt(2.0 * d * m);
    const double x = d / (2.0 * m);
    f.daly_s = d < 2.0 * m ? f.young_s * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - d : m;
    f.restart_aware_s = d + std::sqrt(2.0 * (m + restart_s) * d + d * d);
    // Golden-section search of the expected time per unit of work (restart_s scales it, not its minimum),
    // in log(tau) over [1e-6 M, 10 M].
    auto cost = [&](double log_tau) {
        const double tau = std::exp(log_tau);
        return std::expm1((tau + d) / m) / tau;
    };
    double a = std::log(1e-6 * m), b = std::log(10.0 * m);
    const double g = (std::sqrt(5.0) - 1.0) / 2.0;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = cost(x1), f2 = cost(x2);
    for (int i = 0; i < 200 && b - a > 1e-12; ++i) {
        if (f1 < f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - g * (b - a);
            f1 = cost(x1);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + g * (b - a);
            f2 = cost(x2);
        }
    }
    f.exact_s = std::exp((a + b) / 2.0);
    return f;
}

std::vector<std::int64_t> interval_sweep(double center_s, double step_s) {
    std::vector<std::int64_t> out;
    const double center = std::max(center_s, step_s);
    for (int k = -12; k <= 12; ++k) {
        const double steps = center * std::exp2(k / 4.0) / step_s;
        out.push_back(std::max<std::int64_t>(1, std::llround(steps)));
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

}  // namespace trainsim
