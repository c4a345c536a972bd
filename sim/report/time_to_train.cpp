// Time to train a number of tokens from one simulated iteration, and counts written with decimal suffixes
// (include/trainsim/report.hpp).
#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/report.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

TimeToTrain time_to_train(const Report& r, double tokens, std::optional<double> gpu_hour_price_usd) {
    TimeToTrain t;
    t.tokens = tokens;
    t.tokens_per_step = static_cast<double>(r.layout.global_batch) * static_cast<double>(r.model.seq_len);
    t.steps = std::ceil(tokens / t.tokens_per_step);
    t.seconds = t.steps * r.step_time_s;
    t.days = t.seconds / kSecondsPerDay;
    t.gpu_hours = t.seconds / 3600.0 * r.gpus;
    if (gpu_hour_price_usd) {
        t.gpu_hour_price_usd = gpu_hour_price_usd;
        t.cost_usd = t.gpu_hours * *gpu_hour_price_usd;
    }
    return t;
}

std::string count_text(double n) {
    const std::pair<double, const char*> suffixes[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
    for (const auto& [scale, suffix] : suffixes)
        if (std::fabs(n) >= scale) return fmt::format("{:.1f}{}", n / scale, suffix);
    return fmt::format("{:.0f}", n);
}

nlohmann::json to_json(const TimeToTrain& t) {
    nlohmann::json j = {{"tokens", t.tokens},
                        {"tokens_per_step", t.tokens_per_step},
                        {"steps", t.steps},
                        {"days", t.days},
                        {"gpu_hours", t.gpu_hours}};
    if (t.gpu_hour_price_usd) {
        j["gpu_hour_price_usd"] = *t.gpu_hour_price_usd;
        j["cost_usd"] = *t.cost_usd;
    }
    return j;
}

std::string time_to_train_text(const TimeToTrain& t) {
    std::string o =
        fmt::format("{:<34}{:>16}\n", fmt::format("time to train {} tokens", count_text(t.tokens)),
                    fmt::format("{:.1f} days", t.days));
    o += fmt::format("{:<34}{:>16}   ({:.0f} steps of {} tokens)\n", "GPU-hours", count_text(t.gpu_hours),
                     t.steps, count_text(t.tokens_per_step));
    if (t.cost_usd)
        o += fmt::format("{:<34}{:>16}   (at ${:.2f} per GPU-hour)\n", "cost",
                         fmt::format("${}", count_text(*t.cost_usd)), *t.gpu_hour_price_usd);
    return o;
}

}  // namespace trainsim
