// `trainsim goodput`: failures, checkpoints and goodput over a whole training run
// (include/trainsim/goodput.hpp, docs/goodput.md). The step time comes from simulate(), the checkpoint size
// from the memory model's quantities, the storage bandwidth from the topology.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/simulate.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

constexpr double kHour = 3600.0, kDay = 86400.0;

struct Options {
    int seeds = 100;
    std::uint64_t first_seed = 1;
    int jobs = static_cast<int>(std::thread::hardware_concurrency());
    double days = 54.0;
    double tokens = 0;
    std::string interval = "auto", mode = "sync", distribution = "exponential";
    double weibull_shape = 1.0;
    std::array<double, kFailureComponents> mtbf_h{kDefaultGpuMtbfH, kDefaultNodeMtbfH, kDefaultNicMtbfH,
                                                  kDefaultSwitchMtbfH, kDefaultSoftwareMtbfH};
    double detection_s = kDefaultDetectionS, restart_s = kDefaultRestartS;
    double spare_restart_s = kDefaultSpareRestartS, repair_h = kDefaultRepairS / kHour;
    int hot_spares = 0;
};

[[noreturn]] void bad(const std::string& option, const std::string& value, const std::string& why) {
    throw InputError(fmt::format("goodput: --{} = \"{}\" {}", option, value, why));
}

void check_range(const po::variables_map& vm, const std::string& option, double v, double lo, double hi,
                 bool lo_open) {
    if (!vm.count(option)) return;
    if (!std::isfinite(v) || (lo_open ? !(v > lo) : !(v >= lo)) || v > hi)
        bad(option, fmt::format("{}", v),
            fmt::format("must be {} {} and <= {}", lo_open ? ">" : ">=", lo, hi));
}

nlohmann::json stats_json(const SeedStats& s, double scale = 1.0) {
    return {{"mean", s.mean / scale}, {"ci95", s.ci95 / scale}, {"p10", s.p10 / scale},
            {"p50", s.p50 / scale},   {"p90", s.p90 / scale},   {"min", s.min / scale},
            {"max", s.max / scale}};
}

nlohmann::json summary_json(const GoodputSummary& s, const GoodputConfig& c) {
    nlohmann::json j = {{"interval_steps", s.interval_steps},
                        {"interval_s", static_cast<double>(s.interval_steps) * c.step_s},
                        {"seeds", s.seeds},
                        {"goodput", stats_json(s.goodput)},
                        {"wall_days", stats_json(s.wall_s, kDay)},
                        {"useful_days", stats_json(s.useful_s, kDay)},
                        {"lost_work_h", stats_json(s.lost_work_s, kHour)},
                        {"checkpoint_blocked_h", stats_json(s.checkpoint_blocked_s, kHour)},
                        {"recovery_h", stats_json(s.recovery_s, kHour)},
                        {"checkpoints_lost", stats_json(s.checkpoints_lost)},
                        {"finished_fraction", s.finished_fraction}};
    nlohmann::json f = nlohmann::json::object();
    for (int i = 0; i < kFailureComponents; ++i)
        f[to_string(static_cast<FailureComponent>(i))] = stats_json(s.failures[static_cast<std::size_t>(i)]);
    j["failures"] = f;
    return j;
}

std::string pct3(const SeedStats& s, double scale, const char* fmt_spec) {
    return fmt::format(fmt::runtime(fmt::format("{{:>10{0}}} {{:>10{0}}} {{:>10{0}}}", fmt_spec)),
                       s.p50 / scale, s.p10 / scale, s.p90 / scale);
}

}  // namespace

int goodput_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim goodput [options]\n\n"
        "Simulates a whole training run (days to months) as events: failures of GPUs, nodes, NICs, switches\n"
        "and software from per-unit MTBFs, each losing the work since the last durable checkpoint and "
        "costing\n"
        "detection + relaunch + checkpoint load; checkpoints every N steps (sync or async). The step time "
        "is\n"
        "simulated, the checkpoint size comes from the memory model, the storage bandwidth from the "
        "topology\n"
        "(\"storage\"). Prints goodput (useful training time / wall time), lost work, failures by component\n"
        "and (--tokens) the time to train, as median, p10 and p90 over --seeds seeds. docs/goodput.md.\n\n"
        "options");
    Options o;
    InputOptions in_opts;
    std::string tokens_text;
    desc.add_options()("help,h", "this help")("json", "print the result as JSON")(
        "seeds", po::value(&o.seeds), "runs simulated, seeds --seed .. --seed + N - 1 (default 100)")(
        "seed", po::value(&o.first_seed), "first seed (default 1)")(
        "jobs,j", po::value(&o.jobs),
        "threads (default: the hardware threads); the output does not depend on it")(
        "days", po::value(&o.days),
        "wall-clock length of the run, days (default 54; with --tokens: a limit)")(
        "tokens", po::value(&tokens_text),
        "train this many tokens (e.g. 15.6e12) and report the time it takes (the run ends with a "
        "checkpoint)")(
        "checkpoint-interval", po::value(&o.interval),
        "steps between checkpoints, or auto (default): sweep intervals around Young/Daly's and mark the "
        "simulated optimum")(
        "checkpoint-mode", po::value(&o.mode),
        "sync (the write blocks; default) or async (only the copy to host memory blocks)")(
        "distribution", po::value(&o.distribution), "unit lifetimes: exponential (default) or weibull")(
        "weibull-shape", po::value(&o.weibull_shape),
        "shape k of the Weibull lifetimes (< 1: infant mortality)")(
        "mtbf-gpu-h", po::value(&o.mtbf_h[0]), "MTBF of one GPU, hours (default 79,230: Llama 3; 0: never)")(
        "mtbf-node-h", po::value(&o.mtbf_h[1]), "MTBF of one node's host, hours (default 57,700)")(
        "mtbf-nic-h", po::value(&o.mtbf_h[2]), "MTBF of one NIC, hours (default 3,032,000)")(
        "mtbf-switch-h", po::value(&o.mtbf_h[3]),
        "MTBF of one switch (and its cables), hours (default 20,140)")(
        "mtbf-software-h", po::value(&o.mtbf_h[4]),
        "software failures (bugs, NCCL timeouts), MTBF per GPU, hours (default 337,000)")(
        "detection-s", po::value(&o.detection_s), "time to detect a failure, s (default 600: NCCL timeout)")(
        "restart-s", po::value(&o.restart_s), "relaunch after a failure, s, without the load (default 600)")(
        "hot-spares", po::value(&o.hot_spares), "spare nodes kept warm (default 0)")(
        "spare-restart-s", po::value(&o.spare_restart_s), "relaunch onto a hot spare, s (default 300)")(
        "repair-h", po::value(&o.repair_h),
        "repair of a failed node before it is a spare again, h (default 2)");
    add_input_options(desc, in_opts);
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "goodput")) return kExitOk;

    if (vm.count("seeds") && (o.seeds < 1 || o.seeds > 1'000'000))
        bad("seeds", std::to_string(o.seeds), "must be 1 .. 1000000");
    if (vm.count("jobs") && (o.jobs < 1 || o.jobs > 1024))
        bad("jobs", std::to_string(o.jobs), "must be 1 .. 1024");
    o.jobs = std::max(o.jobs, 1);
    check_range(vm, "days", o.days, 0, 36500, true);
    std::optional<double> tokens;
    if (vm.count("tokens")) {
        std::size_t used = 0;
        double v = 0;
        try {
            v = std::stod(tokens_text, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != tokens_text.size() || !std::isfinite(v) || !(v > 0) || v > 1e18)
            bad("tokens", tokens_text, "must be a number of tokens > 0 and <= 1e18");
        tokens = v;
    }
    std::optional<std::int64_t> interval;
    if (o.interval != "auto") {
        std::size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(o.interval, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != o.interval.size() || v < 1 || v > 1'000'000'000)
            bad("checkpoint-interval", o.interval, "must be auto or a number of steps 1 .. 1e9");
        interval = v;
    }
    if (o.mode != "sync" && o.mode != "async") bad("checkpoint-mode", o.mode, "is not one of sync, async");
    if (o.distribution != "exponential" && o.distribution != "weibull")
        bad("distribution", o.distribution, "is not one of exponential, weibull");
    check_range(vm, "weibull-shape", o.weibull_shape, 0, 100, true);
    if (vm.count("weibull-shape") && o.distribution != "weibull")
        bad("weibull-shape", fmt::format("{}", o.weibull_shape), "needs --distribution weibull");
    const char* mtbf_names[] = {"mtbf-gpu-h", "mtbf-node-h", "mtbf-nic-h", "mtbf-switch-h",
                                "mtbf-software-h"};
    for (int i = 0; i < kFailureComponents; ++i)
        check_range(vm, mtbf_names[i], o.mtbf_h[static_cast<std::size_t>(i)], 0, 1e12, false);
    check_range(vm, "detection-s", o.detection_s, 0, 1e7, false);
    check_range(vm, "restart-s", o.restart_s, 0, 1e7, false);
    check_range(vm, "spare-restart-s", o.spare_restart_s, 0, 1e7, false);
    check_range(vm, "repair-h", o.repair_h, 0, 1e5, false);
    if (vm.count("hot-spares") && (o.hot_spares < 0 || o.hot_spares > 1'000'000))
        bad("hot-spares", std::to_string(o.hot_spares), "must be 0 .. 1000000");

    // The step time and the checkpoint of the configuration.
    const Inputs in = resolve_inputs(in_opts);
    SimulationResult res;
    CheckpointCost ckpt;
    try {
        res = simulate(in.topology, in.model, in.layout, in.name);
        ckpt = checkpoint_cost(checkpoint_bytes(in.model, in.layout), in.layout, in.topology);
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", in.label, e.what()));
    }
    const Report& rep = res.report;
    if (!rep.memory.fits()) {
        std::cerr << "trainsim: " << rep.memory.oom_message() << "\n";
        return kExitOutOfMemory;
    }
    const TopologySpec& topo = in.topology;
    const double job_nodes = std::ceil(static_cast<double>(in.layout.gpus()) / topo.gpus_per_node);
    const double job_fraction = job_nodes / topo.nodes;  // the job's share of the fabric's switches
    // Hosts fail as units: an NVL72 domain (a node here) is 18 trays (TopologySpec::gpus_per_host).
    const double job_hosts = std::ceil(static_cast<double>(in.layout.gpus()) / topo.host_gpus());

    GoodputConfig c;
    c.step_s = rep.step_time_s;
    c.tokens_per_step = static_cast<double>(in.layout.global_batch) * static_cast<double>(in.model.seq_len);
    c.mode = o.mode == "async" ? CheckpointMode::async : CheckpointMode::sync;
    c.save_s = ckpt.save_s;
    c.copy_s = ckpt.copy_s;
    c.load_s = ckpt.load_s;
    c.detection_s = o.detection_s;
    c.restart_s = o.restart_s;
    c.hot_spares = o.hot_spares;
    c.spare_restart_s = o.spare_restart_s;
    c.repair_s = o.repair_h * kHour;
    const bool days_given = vm.count("days") > 0;
    c.horizon_s = tokens && !days_given ? 0.0 : o.days * kDay;
    if (tokens) c.target_work_s = std::ceil(*tokens / c.tokens_per_step) * c.step_s;
    c.failures = default_failure_model(in.layout.gpus(), job_hosts, job_nodes * topo.nics_per_node,
                                       std::round(switch_count(topo) * job_fraction));
    c.failures.weibull_shape = o.distribution == "weibull" ? o.weibull_shape : 1.0;
    for (int i = 0; i < kFailureComponents; ++i)
        c.failures.components[static_cast<std::size_t>(i)].mtbf_h = o.mtbf_h[static_cast<std::size_t>(i)];

    const double rate = c.failures.rate_per_s();
    const double mtbf_s = rate > 0 ? 1.0 / rate : 0.0;
    const double delta_s = c.mode == CheckpointMode::sync ? c.save_s : c.copy_s;
    const double recovery_s = c.detection_s + c.restart_s + c.load_s;
    const IntervalFormulas formulas = interval_formulas(delta_s, mtbf_s, recovery_s);

    // The intervals simulated: the one given, or the sweep around Young's.
    std::vector<std::int64_t> intervals;
    if (interval) {
        intervals.push_back(*interval);
    } else {
        const double center = formulas.young_s > 0 ? formulas.young_s : 1000.0 * c.step_s;
        intervals = interval_sweep(center, c.step_s);
    }
    std::vector<GoodputSummary> sweep;
    for (auto n : intervals) {
        GoodputConfig ci = c;
        ci.interval_steps = n;
        try {
            sweep.push_back(simulate_goodput(ci, o.first_seed, o.seeds, o.jobs));
        } catch (const InputError& e) {
            throw InputError(fmt::format("goodput: {} (see --mtbf-*-h, --days, --tokens)", e.what()));
        }
    }
    std::size_t best = 0;
    for (std::size_t i = 1; i < sweep.size(); ++i)
        if (sweep[i].goodput.p50 > sweep[best].goodput.p50) best = i;
    const GoodputSummary& s = sweep[best];
    auto steps_of = [&](double seconds) { return seconds / c.step_s; };

    if (vm.count("json")) {
        nlohmann::json j;
        j["workload"] = in.name;
        j["topology"] = topo.name;
        j["gpus"] = in.layout.gpus();
        j["step_time_s"] = c.step_s;
        j["tokens_per_step"] = c.tokens_per_step;
        j["checkpoint"] = {{"bytes", ckpt.bytes},
                           {"mode", to_string(c.mode)},
                           {"save", to_string(in.layout.checkpoint_save)},
                           {"save_s", ckpt.save_s},
                           {"copy_s", ckpt.copy_s},
                           {"load_s", ckpt.load_s}};
        nlohmann::json comp = nlohmann::json::object();
        for (int i = 0; i < kFailureComponents; ++i) {
            const auto& r = c.failures.components[static_cast<std::size_t>(i)];
            comp[to_string(static_cast<FailureComponent>(i))] = {{"count", r.count}, {"mtbf_h", r.mtbf_h}};
        }
        j["failure_model"] = {{"components", comp},
                              {"distribution", o.distribution},
                              {"weibull_shape", c.failures.weibull_shape},
                              {"system_mtbf_h", mtbf_s / kHour}};
        j["recovery"] = {{"detection_s", c.detection_s},
                         {"restart_s", c.restart_s},
                         {"load_s", c.load_s},
                         {"hot_spares", c.hot_spares},
                         {"spare_restart_s", c.spare_restart_s},
                         {"repair_h", c.repair_s / kHour}};
        j["stop"] = {{"horizon_days", c.horizon_s / kDay},
                     {"tokens", tokens ? *tokens : 0.0},
                     {"target_work_days", c.target_work_s / kDay}};
        j["seeds"] = o.seeds;
        j["first_seed"] = o.first_seed;
        j["interval_formulas"] = {{"blocking_s", delta_s},
                                  {"young_s", formulas.young_s},
                                  {"daly_2006_s", formulas.daly_s},
                                  {"restart_aware_s", formulas.restart_aware_s},
                                  {"exact_exponential_s", formulas.exact_s}};
        j["result"] = summary_json(s, c);
        if (tokens) j["result"]["time_to_train_days"] = stats_json(s.wall_s, kDay);
        if (!interval) {
            nlohmann::json arr = nlohmann::json::array();
            for (const auto& x : sweep)
                arr.push_back(summary_json(x, c));
            j["interval_sweep"] = arr;
            j["simulated_optimum_steps"] = s.interval_steps;
        }
        std::cout << j.dump(2) << "\n";
        return kExitOk;
    }

    std::string out;
    out += fmt::format("trainsim goodput: {} on {} x {} ({}), {} seeds from {}\n", in.name, in.layout.gpus(),
                       topo.gpu, topo.name, o.seeds, o.first_seed);
    out += fmt::format(
        "  step {:.3f} s, {:.3g} tokens per step; checkpoint {:.3g} TB ({}, {}): save {:.1f} s, "
        "copy to host {:.2f} s, load {:.1f} s\n",
        c.step_s, c.tokens_per_step, ckpt.bytes / 1e12, to_string(in.layout.checkpoint_save),
        to_string(c.mode), ckpt.save_s, ckpt.copy_s, ckpt.load_s);
    out += fmt::format("  failures ({}{}): system MTBF {:.2f} h;", o.distribution,
                       c.failures.weibull_shape != 1.0 ? fmt::format(" k={}", c.failures.weibull_shape) : "",
                       mtbf_s / kHour);
    for (int i = 0; i < kFailureComponents; ++i) {
        const auto& r = c.failures.components[static_cast<std::size_t>(i)];
        out += fmt::format(" {} {:.0f} x {:.4g} h", to_string(static_cast<FailureComponent>(i)), r.count,
                           r.mtbf_h);
        out += i + 1 < kFailureComponents ? "," : "\n";
    }
    out += fmt::format("  recovery: detection {:.0f} s + relaunch {:.0f} s + load {:.1f} s; hot spares {}",
                       c.detection_s, c.restart_s, c.load_s, c.hot_spares);
    out += c.hot_spares > 0
               ? fmt::format(" (relaunch {:.0f} s, repair {:.1f} h)\n", c.spare_restart_s, c.repair_s / kHour)
               : "\n";
    out += tokens ? fmt::format("  run: train {:.4g} tokens ({:.2f} days of steps without failures){}\n",
                                *tokens, c.target_work_s / kDay,
                                days_given ? fmt::format(", at most {} days", o.days) : "")
                  : fmt::format("  run: {} days of wall time\n", o.days);
    out += fmt::format(
        "\n  checkpoint interval formulas (blocking time {:.2f} s, system MTBF {:.0f} s, recovery {:.0f} "
        "s):\n",
        delta_s, mtbf_s, recovery_s);
    out += fmt::format("    Young sqrt(2 delta M)                 {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.young_s, steps_of(formulas.young_s));
    out += fmt::format("    Daly 2006 higher-order                {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.daly_s, steps_of(formulas.daly_s));
    out += fmt::format("    restart-aware (arXiv:2410.18124)      {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.restart_aware_s, steps_of(formulas.restart_aware_s));
    out += fmt::format("    exact optimum, exponential, sync      {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.exact_s, steps_of(formulas.exact_s));
    if (!interval) {
        out += "\n  interval sweep (goodput over the seeds):\n";
        out += "     steps   interval_s    median       p10       p90\n";
        for (std::size_t i = 0; i < sweep.size(); ++i) {
            const auto& x = sweep[i];
            out += fmt::format("  {:>8} {:>12.0f} {:>9.4f} {:>9.4f} {:>9.4f}{}\n", x.interval_steps,
                               static_cast<double>(x.interval_steps) * c.step_s, x.goodput.p50, x.goodput.p10,
                               x.goodput.p90, i == best ? "   <- simulated optimum" : "");
        }
        out +=
            fmt::format("  simulated optimum: every {} steps ({:.0f} s); Young/Daly: {:.1f} / {:.1f} steps\n",
                        s.interval_steps, static_cast<double>(s.interval_steps) * c.step_s,
                        steps_of(formulas.young_s), steps_of(formulas.daly_s));
    }
    out += fmt::format("\n  checkpoint every {} steps ({:.0f} s), {}:      median        p10        p90\n",
                       s.interval_steps, static_cast<double>(s.interval_steps) * c.step_s, to_string(c.mode));
    out += fmt::format("    goodput                         {}\n", pct3(s.goodput, 1.0, ".4f"));
    if (tokens) out += fmt::format("    time to train (days)            {}\n", pct3(s.wall_s, kDay, ".2f"));
    out += fmt::format("    wall time (days)                {}\n", pct3(s.wall_s, kDay, ".2f"));
    out += fmt::format("    lost work (h)                   {}\n", pct3(s.lost_work_s, kHour, ".1f"));
    out +=
        fmt::format("    checkpoint blocking (h)         {}\n", pct3(s.checkpoint_blocked_s, kHour, ".1f"));
    out += fmt::format("    recovery (h)                    {}\n", pct3(s.recovery_s, kHour, ".1f"));
    out += fmt::format("    checkpoints lost                {}\n", pct3(s.checkpoints_lost, 1.0, ".0f"));
    for (int i = 0; i < kFailureComponents; ++i)
        out += fmt::format("    failures: {:<21} {}\n", to_string(static_cast<FailureComponent>(i)),
                           pct3(s.failures[static_cast<std::size_t>(i)], 1.0, ".0f"));
    out += fmt::format("    mean goodput {:.4f} +- {:.4f} (95% CI of the mean)\n", s.goodput.mean,
                       s.goodput.ci95);
    if (tokens && s.finished_fraction < 1.0)
        out += fmt::format("    note: {:.0f}% of the seeds did not finish within the limit\n",
                           100.0 * (1.0 - s.finished_fraction));
    std::cout << out;
    return kExitOk;
}

}  // namespace trainsim::cli
