// The sweep's outputs (include/trainsim/sweep.hpp): the text summary, the CSV of every layout, the JSON.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sweep_internal.hpp"
#include "trainsim/schema_json.hpp"
#include "trainsim/sweep.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

namespace sweep_detail {

/// "best", "2nd best", "3rd best", "10th best", "21st best", ...
std::string ordinal_best(std::size_t n) {
    if (n == 1) return "best";
    const std::size_t tens = n % 100, ones = n % 10;
    const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                         : ones == 1                ? "st"
                         : ones == 2                ? "nd"
                         : ones == 3                ? "rd"
                                                    : "th";
    return fmt::format("{}{} best", n, suffix);
}

}  // namespace sweep_detail

namespace {

using namespace sweep_detail;

bool several_sizes(const SweepResult& r) {
    return r.sizes.size() > 1;
}

/// True when a layout of the grid has expert parallelism (an MoE model): the top table gets an "ep" column.
bool expert_parallel(const SweepResult& r) {
    return std::any_of(r.entries.begin(), r.entries.end(),
                       [](const SweepEntry& e) { return e.layout.ep > 1; });
}

/// The time to train of a simulated entry (with SweepResult::train_tokens).
std::optional<TimeToTrain> training(const SweepResult& r, const SweepEntry& e) {
    if (!r.train_tokens || e.status != SweepStatus::simulated) return std::nullopt;
    return time_to_train(e.report, *r.train_tokens, r.gpu_hour_price_usd);
}

/// The title, the counts, and the what-if line.
std::string text_title(const SweepResult& r) {
    const std::string sizes =
        several_sizes(r) ? fmt::format("{}", fmt::join(r.sizes, ", ")) : fmt::format("{}", r.gpus);
    std::string o = fmt::format("trainsim sweep: {} on {} x {} ({}), global batch {}\n", r.workload_name,
                                sizes, r.gpu_name, r.topology_name, r.global_batch);
    const std::string margin =
        r.min_headroom > 0 ? fmt::format(", {:g}% headroom kept", 100.0 * r.min_headroom) : "";
    o += fmt::format(
        "layouts: {} in the grid: {} simulated, {} out of memory ({:.1f} GiB of HBM per GPU{}), {} "
        "rejected\n\n",
        r.entries.size(), r.simulated, r.out_of_memory, r.hbm_bytes / kGiB, margin, r.rejected);
    if (r.pruned > 0) {
        o.pop_back();
        if (r.pruned_keeps_pareto_front)
            o += fmt::format(
                "pruned: {} more not simulated: a lower bound on their step time (the busiest GPU's compute, "
                "the pipeline's fill and drain, every collective as if alone on the fabric) exceeds the step "
                "time of the {} layout of their size, so none of them is in the top {}, and a simulated "
                "layout is faster and needs no more memory, so none is on the Pareto front (--exhaustive "
                "simulates them)\n\n",
                r.pruned, ordinal_best(r.pruned_beyond_top), r.pruned_beyond_top);
        else
            o += fmt::format(
                "pruned: {} more neither simulated nor checked against memory: a lower bound on their step "
                "time (the busiest GPU's compute, the "
                "pipeline's fill and drain, every collective as if alone on the fabric) exceeds the step "
                "time of the {} layout "
                "of their size, so none of them is in the top {} (--exhaustive simulates them)\n\n",
                r.pruned, ordinal_best(r.pruned_beyond_top), r.pruned_beyond_top);
    }
    if (!r.perturbations.empty()) {
        o.pop_back();
        o += "what-if: every layout under";
        for (const auto& p : r.perturbations)
            o += " " + p;
        o +=
            r.seeds > 1
                ? fmt::format("; ranked by the median step time over {} seeds (the median seed's report)\n\n",
                              r.seeds)
                : std::string("\n\n");
    }
    return o;
}

/// The columns of the top table after the layout's: time-to-train (with train_tokens), peak, limit.
std::string table_tail_header(const SweepResult& r) {
    std::string o;
    if (r.train_tokens) o += fmt::format(" {:>8} {:>9}", "days", "GPU-hours");
    if (r.train_tokens && r.gpu_hour_price_usd) o += fmt::format(" {:>9}", "cost");
    return o + fmt::format(" {:>9} {:>9}  {}\n", "peak GiB", "headroom", "limited by");
}

std::string table_row(const SweepResult& r, std::size_t i) {
    const auto& e = r.entries[i];
    const auto& l = e.layout;
    const auto& p = e.report;
    std::string o = fmt::format("{:>4}", i + 1);
    if (several_sizes(r)) o += fmt::format(" {:>6}", e.gpus);
    o += fmt::format(" {:>3} {:>3} {:>5} {:>3}", l.tp, l.pp, l.dp, l.cp);
    if (expert_parallel(r)) o += fmt::format(" {:>3}", l.ep);
    o += fmt::format(
        " {:>3} {:>3} {:>9} {:>3} {:>3} {:>10.4f} {:>11.0f} {:>9.0f} {:>10} "
        "{:>5.1f}% "
        "{:>5.1f}% {:>8.3f} {:>8.3f} {:>8.3f}",
        l.micro_batch, l.vpp, to_string(l.recompute), l.sequence_parallel ? "on" : "off",
        l.distributed_optimizer ? "on" : "off", p.step_time_s, p.tokens_per_s, p.tokens_per_s_per_gpu,
        count_text(p.tokens_per_day), 100.0 * p.mfu, 100.0 * p.bubble_s / p.step_time_s, p.tp_exposed_s,
        p.pp_exposed_s, p.dp_exposed_s);
    if (const auto t = training(r, e)) {
        o += fmt::format(" {:>8.1f} {:>9}", t->days, count_text(t->gpu_hours));
        if (t->cost_usd) o += fmt::format(" {:>9}", fmt::format("${}", count_text(*t->cost_usd)));
    }
    return o + fmt::format(" {:>9.1f} {:>9.1f}  {}\n", e.peak_memory_bytes / kGiB,
                           (r.hbm_bytes - e.peak_memory_bytes) / kGiB, e.limit);
}

/// The top `k` simulated layouts.
std::string text_top(const SweepResult& r, std::size_t k) {
    std::string o =
        fmt::format("top {} of {} by step time (exposed communication: mean over GPUs)\n", k, r.simulated);
    o += "rank";
    if (several_sizes(r)) o += fmt::format(" {:>6}", "gpus");
    o += fmt::format(" {:>3} {:>3} {:>5} {:>3}", "tp", "pp", "dp", "cp");
    if (expert_parallel(r)) o += fmt::format(" {:>3}", "ep");
    o += fmt::format(
        " {:>3} {:>3} {:>9} {:>3} {:>3} {:>10} {:>11} {:>9} {:>10} {:>6} {:>6} {:>8} "
        "{:>8} {:>8}",
        "mb", "vpp", "recompute", "sp", "do", "step (s)", "tokens/s", "tok/s/GPU", "tokens/day", "MFU",
        "bubble", "TP (s)", "PP (s)", "DP (s)");
    o += table_tail_header(r);
    for (std::size_t i = 0; i < k; ++i)
        o += table_row(r, i);
    return o + "\n";
}

/// With several sizes: the best layout of each size.
std::string text_best_per_size(const SweepResult& r) {
    std::string o = "best layout per cluster size\n";
    for (int g : r.sizes) {
        const auto it = std::find_if(r.entries.begin(), r.entries.begin() + static_cast<long>(r.simulated),
                                     [g](const SweepEntry& e) { return e.gpus == g; });
        if (it == r.entries.begin() + static_cast<long>(r.simulated)) {
            o += fmt::format("{:>8}  no layout simulated\n", g);
            continue;
        }
        std::string train;
        if (const auto t = training(r, *it))
            train = fmt::format(", {:.1f} days, {} GPU-hours{}", t->days, count_text(t->gpu_hours),
                                t->cost_usd ? fmt::format(", ${}", count_text(*t->cost_usd)) : "");
        o += fmt::format("{:>8}  rank {}: {}, step {:.4f} s, {} tokens/day{}\n", g,
                         it - r.entries.begin() + 1, canonical_string(it->layout), it->report.step_time_s,
                         count_text(it->report.tokens_per_day), train);
    }
    return o + "\n";
}

}  // namespace

std::string format_sweep_text(const SweepResult& r, std::size_t top_k) {
    std::string o = text_title(r);
    const std::size_t k = std::min(top_k, r.simulated);
    if (r.simulated == 0)
        o += "no layout of the grid was simulated\n\n";
    else if (k > 0)
        o += text_top(r, k);
    if (!r.reject_counts.empty()) {
        o += "rejected layouts by reason\n";
        for (const auto& [reason, count] : r.reject_counts)
            o += fmt::format("{:>8}  {}\n", count, reason);
        o += "\n";
    }
    if (several_sizes(r)) o += text_best_per_size(r);
    if (r.simulated > 0) {
        const auto& best = r.entries.front();
        o += fmt::format("best layout: {}{}\n\n", several_sizes(r) ? fmt::format("{} GPUs, ", best.gpus) : "",
                         canonical_string(best.layout));
        const auto t = training(r, best);
        o += format_text(best.report, nullptr, t ? &*t : nullptr);
    }
    return o;
}

namespace {

std::string csv_header(const SweepResult& r, bool with_ep) {
    std::string o = "rank,";
    if (several_sizes(r)) o += "gpus,";
    for (const auto& key : sweep_keys())
        o += key + ",";
    if (with_ep) o += "ep,";
    o += "micro_batches,status,reason,step_time_s,tokens_per_s,tokens_per_s_per_gpu,tokens_per_day,";
    if (r.train_tokens) o += "time_to_train_days,gpu_hours,";
    if (r.train_tokens && r.gpu_hour_price_usd) o += "cost_usd,";
    return o +
           "mfu,compute_s,bubble_s,tp_exposed_s,pp_exposed_s,dp_exposed_s,idle_s,peak_memory_gib,headroom_"
           "gib,"
           "limit\n";
}

/// The figures of a simulated row (empty fields for the others), from step_time_s to idle_s.
std::string csv_figures(const SweepResult& r, const SweepEntry& e) {
    const std::size_t train_columns = r.train_tokens ? (r.gpu_hour_price_usd ? 3 : 2) : 0;
    if (e.status != SweepStatus::simulated) return std::string(11 + train_columns, ',');
    const auto& p = e.report;
    std::string o = fmt::format("{:.6f},{:.1f},{:.1f},{:.0f},", p.step_time_s, p.tokens_per_s,
                                p.tokens_per_s_per_gpu, p.tokens_per_day);
    if (const auto t = training(r, e)) {
        o += fmt::format("{:.3f},{:.1f},", t->days, t->gpu_hours);
        if (t->cost_usd) o += fmt::format("{:.2f},", *t->cost_usd);
    }
    return o + fmt::format("{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},", p.mfu, p.compute_s,
                           p.bubble_s, p.tp_exposed_s, p.pp_exposed_s, p.dp_exposed_s, p.idle_s);
}

}  // namespace

std::string sweep_csv(const SweepResult& r) {
    const bool with_ep =
        std::any_of(r.entries.begin(), r.entries.end(), [](const SweepEntry& e) { return e.layout.ep > 1; });
    std::string o = csv_header(r, with_ep);
    for (std::size_t i = 0; i < r.entries.size(); ++i) {
        const auto& e = r.entries[i];
        const auto& l = e.layout;
        const bool passed = e.status != SweepStatus::rejected;
        const bool has_memory = passed && e.status != SweepStatus::pruned;  // a pruned layout is not walked
        o += e.status == SweepStatus::simulated ? fmt::format("{},", i + 1) : std::string(",");
        if (several_sizes(r)) o += fmt::format("{},", e.gpus);
        for (const auto& key : sweep_keys())
            o += csv_field(schema::text(axis_field(key).get(l))) + ",";
        if (with_ep) o += fmt::format("{},", l.ep);
        o += fmt::format("{},{},{},", passed ? fmt::format("{}", l.micro_batches()) : "",
                         status_name(e.status), csv_field(e.reason));
        o += csv_figures(r, e);
        if (has_memory)
            o += fmt::format("{:.3f},{:.3f},", e.peak_memory_bytes / kGiB,
                             (r.hbm_bytes - e.peak_memory_bytes) / kGiB);
        else
            o += ",,";
        o += csv_field(e.limit) + "\n";
    }
    return o;
}

namespace {

nlohmann::json json_row(const SweepResult& r, std::size_t i) {
    const auto& e = r.entries[i];
    const auto& l = e.layout;
    nlohmann::json row = {{"layout", canonical_string(l)}, {"status", status_name(e.status)}};
    if (several_sizes(r)) row["gpus"] = e.gpus;
    for (const auto& key : sweep_keys())
        row[key] = schema::to_json(axis_field(key).get(l));
    if (l.ep > 1) row["ep"] = l.ep;
    if (e.status == SweepStatus::simulated) {
        const auto& p = e.report;
        row["rank"] = i + 1;
        row["micro_batches"] = l.micro_batches();
        row["step_time_s"] = p.step_time_s;
        row["tokens_per_s"] = p.tokens_per_s;
        row["tokens_per_s_per_gpu"] = p.tokens_per_s_per_gpu;
        row["tokens_per_day"] = p.tokens_per_day;
        if (const auto t = training(r, e)) row["time_to_train"] = to_json(*t);
        row["mfu"] = p.mfu;
        row["breakdown_s"] = {{"compute", p.compute_s},       {"bubble", p.bubble_s},
                              {"tp_exposed", p.tp_exposed_s}, {"pp_exposed", p.pp_exposed_s},
                              {"dp_exposed", p.dp_exposed_s}, {"idle", p.idle_s}};
        row["limit"] = e.limit;
    } else {
        row["reason"] = e.reason;
        if (!e.detail.empty()) row["detail"] = e.detail;
    }
    if (e.status != SweepStatus::rejected && e.status != SweepStatus::pruned) {  // a pruned one is not walked
        row["peak_memory_bytes"] = e.peak_memory_bytes;
        row["peak_memory_stage"] = e.peak_stage;
        row["headroom_bytes"] = r.hbm_bytes - e.peak_memory_bytes;
    }
    return row;
}

}  // namespace

nlohmann::json sweep_json(const SweepResult& r) {
    using nlohmann::json;
    json j;
    j["format"] = "trainsim-sweep/1";
    j["topology"] = r.topology_name;
    j["workload"] = r.workload_name;
    j["gpu"] = r.gpu_name;
    j["gpus"] = several_sizes(r) ? json(r.sizes) : json(r.gpus);
    j["global_batch"] = r.global_batch;
    j["hbm_bytes"] = r.hbm_bytes;
    if (r.min_headroom > 0) j["min_headroom"] = r.min_headroom;
    if (!r.perturbations.empty()) j["what_if"] = {{"perturbations", r.perturbations}, {"seeds", r.seeds}};
    j["counts"] = {{"layouts", r.entries.size()},
                   {"simulated", r.simulated},
                   {"out_of_memory", r.out_of_memory},
                   {"rejected", r.rejected}};
    if (r.pruned > 0) j["counts"]["pruned"] = r.pruned;
    json reasons = json::array();
    for (const auto& [reason, count] : r.reject_counts)
        reasons.push_back({{"reason", reason}, {"count", count}});
    j["reject_reasons"] = reasons;
    json rows = json::array();
    for (std::size_t i = 0; i < r.entries.size(); ++i)
        rows.push_back(json_row(r, i));
    j["layouts"] = rows;
    j["best"] = r.simulated > 0 ? to_json(r.entries.front().report, nullptr) : json();
    if (r.simulated > 0 && r.train_tokens)
        j["best"]["time_to_train"] = to_json(*training(r, r.entries.front()));
    return j;
}

}  // namespace trainsim
