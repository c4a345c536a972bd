// `trainsim goodput`: failures, checkpoints and goodput over a whole training run
// (include/trainsim/goodput.hpp, docs/goodput.md). The step time comes from simulate(), the checkpoint size
// from the memory model's quantities, the storage bandwidth from the topology.
#include <algorithm>
#include <cmath>
#include <cstdint>
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
#include "trainsim/limits.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/units.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

constexpr double kHour = 3600.0, kDay = 86400.0;

struct Options {
    int seeds = 100;
    std::uint64_t first_seed = 1;
    int jobs = static_cast<int>(std::thread::hardware_concurrency());
    double days = 54.0;
    std::string interval = "auto", mode = "sync", distribution = "exponential";
    double weibull_shape = 1.0;
    std::array<double, kFailureComponents> mtbf_h{kDefaultGpuMtbfH, kDefaultNodeMtbfH, kDefaultNicMtbfH,
                                                  kDefaultSwitchMtbfH, kDefaultSoftwareMtbfH};
    double detection_s = kDefaultDetectionS, restart_s = kDefaultRestartS;
    double spare_restart_s = kDefaultSpareRestartS, repair_h = kDefaultRepairS / kHour;
    int hot_spares = 0;
    std::string tokens_text;
    // Checked by check_options:
    std::optional<double> tokens;                ///< --tokens
    std::optional<std::int64_t> interval_steps;  ///< --checkpoint-interval, unless auto
    bool days_given = false;
};

/// The configuration simulated, its checkpoint, and the study of the intervals.
struct GoodputRun {
    const Inputs& in;
    const Options& o;
    CheckpointCost ckpt;
    GoodputConfig c;
    CheckpointIntervalStudy study;
};

[[noreturn]] void bad(const std::string& option, const std::string& value, const std::string& why) {
    throw InputError(fmt::format("goodput: --{} = \"{}\" {}", option, clip_for_message(value), why));
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

/// The command's options, read into `o`.
po::options_description goodput_options(Options& o) {
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
    desc.add_options()("help,h", "this help")("json", "print the result as JSON")(
        "seeds", po::value(&o.seeds), "runs simulated, seeds --seed .. --seed + N - 1 (default 100)")(
        "seed", po::value(&o.first_seed), "first seed (default 1)")(
        "jobs,j", po::value(&o.jobs),
        "threads (default: the hardware threads); the output does not depend on it")(
        "days", po::value(&o.days),
        "wall-clock length of the run, days (default 54; with --tokens: a limit)")(
        "tokens", po::value(&o.tokens_text),
        "train this many tokens (15T, 300B, 15.6e12) and report the time it takes (the run ends with a "
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
    return desc;
}

/// A number of the whole text, else std::nullopt.
template <class T>
std::optional<T> parse_whole(const std::string& text, T (*parse)(const std::string&, std::size_t*)) {
    std::size_t used = 0;
    T v{};
    try {
        v = parse(text, &used);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    return used == text.size() ? std::optional<T>(v) : std::nullopt;
}

long long to_long_long(const std::string& s, std::size_t* used) {
    return std::stoll(s, used);
}

/// Checks the options' values (InputError naming the option and the value) and reads --tokens and
/// --checkpoint-interval.
void check_options(const po::variables_map& vm, Options& o) {
    if (vm.count("seeds") && (o.seeds < 1 || o.seeds > 1'000'000))
        bad("seeds", std::to_string(o.seeds), "must be 1 .. 1000000");
    if (vm.count("jobs") && (o.jobs < 1 || o.jobs > limits::kMaxJobs))
        bad("jobs", std::to_string(o.jobs), fmt::format("must be 1 .. {}", limits::kMaxJobs));
    o.jobs = std::max(o.jobs, 1);
    check_range(vm, "days", o.days, 0, 36500, true);
    if (vm.count("tokens")) {
        // As run and sweep read it (15T, 300B, 2.5e12): "15T" was refused here as not a number of tokens.
        o.tokens = parse_count(o.tokens_text, "goodput: --tokens");
        check_tokens(*o.tokens, o.tokens_text, "goodput");
    }
    if (o.interval != "auto") {
        const auto v = parse_whole<long long>(o.interval, to_long_long);
        if (!v || *v < 1 || *v > 1'000'000'000)
            bad("checkpoint-interval", o.interval, "must be auto or a number of steps 1 .. 1e9");
        o.interval_steps = *v;
    }
    if (o.mode != "sync" && o.mode != "async") bad("checkpoint-mode", o.mode, "is not one of sync, async");
    if (o.distribution != "exponential" && o.distribution != "weibull")
        bad("distribution", o.distribution, "is not one of exponential, weibull");
    // Fits of HPC failure logs give shapes of 0.5-0.8 (Schroeder & Gibson, DSN 2006). Below 0.5 new units
    // fail within seconds (scale = MTBF / Gamma(1 + 1/k): 100! smaller for k = 0.01), a job's recovery
    // hardly ever completes and one seed of Llama 3 405B on 16,384 GPUs ran past a minute (k = 0.1).
    check_range(vm, "weibull-shape", o.weibull_shape, 0.5, 100, false);
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
    // Without a spare node no relaunch is onto a spare and no node is repaired into one: both were ignored.
    if (o.hot_spares == 0 && vm.count("spare-restart-s"))
        bad("spare-restart-s", fmt::format("{}", o.spare_restart_s), "needs --hot-spares N (N >= 1)");
    if (o.hot_spares == 0 && vm.count("repair-h"))
        bad("repair-h", fmt::format("{}", o.repair_h), "needs --hot-spares N (N >= 1)");
    o.days_given = vm.count("days") > 0;
}

/// The job's configuration with the options' recovery, failure and stop settings.
GoodputConfig configure(const Inputs& in, double step_s, const CheckpointCost& ckpt, const Options& o) {
    GoodputConfig c = job_goodput_config(step_s, in.model, in.layout, in.topology, ckpt);
    c.mode = o.mode == "async" ? CheckpointMode::async : CheckpointMode::sync;
    c.detection_s = o.detection_s;
    c.restart_s = o.restart_s;
    c.hot_spares = o.hot_spares;
    c.spare_restart_s = o.spare_restart_s;
    c.repair_s = o.repair_h * kHour;
    c.horizon_s = o.tokens && !o.days_given ? 0.0 : o.days * kDay;
    if (o.tokens) c.target_work_s = std::ceil(*o.tokens / c.tokens_per_step) * c.step_s;
    c.failures.weibull_shape = o.distribution == "weibull" ? o.weibull_shape : 1.0;
    for (int i = 0; i < kFailureComponents; ++i)
        c.failures.components[static_cast<std::size_t>(i)].mtbf_h = o.mtbf_h[static_cast<std::size_t>(i)];
    return c;
}

nlohmann::json goodput_json(const GoodputRun& r) {
    const Inputs& in = r.in;
    const Options& o = r.o;
    const GoodputConfig& c = r.c;
    const CheckpointCost& ckpt = r.ckpt;
    const TopologySpec& topo = in.topology;
    const GoodputSummary& s = r.study.chosen();
    nlohmann::json j;
    j["workload"] = in.name;
    j["topology"] = topo.name;
    j["gpus"] = in.layout.gpus();
    j["step_time_s"] = c.step_s;
    j["tokens_per_step"] = c.tokens_per_step;
    j["checkpoint"] = {
        {"bytes", ckpt.bytes},   {"mode", to_string(c.mode)}, {"save", to_string(in.layout.checkpoint_save)},
        {"save_s", ckpt.save_s}, {"copy_s", ckpt.copy_s},     {"load_s", ckpt.load_s}};
    nlohmann::json comp = nlohmann::json::object();
    for (int i = 0; i < kFailureComponents; ++i) {
        const auto& unit = c.failures.components[static_cast<std::size_t>(i)];
        comp[to_string(static_cast<FailureComponent>(i))] = {{"count", unit.count}, {"mtbf_h", unit.mtbf_h}};
    }
    j["failure_model"] = {{"components", comp},
                          {"distribution", o.distribution},
                          {"weibull_shape", c.failures.weibull_shape},
                          {"system_mtbf_h", r.study.mtbf_s / kHour}};
    j["recovery"] = {{"detection_s", c.detection_s},
                     {"restart_s", c.restart_s},
                     {"load_s", c.load_s},
                     {"hot_spares", c.hot_spares},
                     {"spare_restart_s", c.spare_restart_s},
                     {"repair_h", c.repair_s / kHour}};
    j["stop"] = {{"horizon_days", c.horizon_s / kDay},
                 {"tokens", o.tokens ? *o.tokens : 0.0},
                 {"target_work_days", c.target_work_s / kDay}};
    j["seeds"] = o.seeds;
    j["first_seed"] = o.first_seed;
    const IntervalFormulas& formulas = r.study.formulas;
    j["interval_formulas"] = {{"blocking_s", r.study.blocking_s},
                              {"young_s", formulas.young_s},
                              {"daly_2006_s", formulas.daly_s},
                              {"restart_aware_s", formulas.restart_aware_s},
                              {"exact_exponential_s", formulas.exact_s}};
    j["result"] = summary_json(s, c);
    if (o.tokens) j["result"]["time_to_train_days"] = stats_json(s.wall_s, kDay);
    if (!o.interval_steps) {
        nlohmann::json arr = nlohmann::json::array();
        for (const auto& x : r.study.sweep)
            arr.push_back(summary_json(x, c));
        j["interval_sweep"] = arr;
        j["simulated_optimum_steps"] = s.interval_steps;
    }
    return j;
}

/// The configuration: step, checkpoint, failure model, recovery and the run's length.
std::string setup_text(const GoodputRun& r) {
    const Inputs& in = r.in;
    const Options& o = r.o;
    const GoodputConfig& c = r.c;
    const CheckpointCost& ckpt = r.ckpt;
    const TopologySpec& topo = in.topology;
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
                       r.study.mtbf_s / kHour);
    for (int i = 0; i < kFailureComponents; ++i) {
        const auto& unit = c.failures.components[static_cast<std::size_t>(i)];
        out += fmt::format(" {} {:.0f} x {:.4g} h", to_string(static_cast<FailureComponent>(i)), unit.count,
                           unit.mtbf_h);
        out += i + 1 < kFailureComponents ? "," : "\n";
    }
    out += fmt::format("  recovery: detection {:.0f} s + relaunch {:.0f} s + load {:.1f} s; hot spares {}",
                       c.detection_s, c.restart_s, c.load_s, c.hot_spares);
    out += c.hot_spares > 0
               ? fmt::format(" (relaunch {:.0f} s, repair {:.1f} h)\n", c.spare_restart_s, c.repair_s / kHour)
               : "\n";
    out += o.tokens ? fmt::format("  run: train {:.4g} tokens ({:.2f} days of steps without failures){}\n",
                                  *o.tokens, c.target_work_s / kDay,
                                  o.days_given ? fmt::format(", at most {} days", o.days) : "")
                    : fmt::format("  run: {} days of wall time\n", o.days);
    return out;
}

/// The interval formulas and, for --checkpoint-interval auto, the sweep and the simulated optimum.
std::string intervals_text(const GoodputRun& r) {
    const GoodputConfig& c = r.c;
    const IntervalFormulas& formulas = r.study.formulas;
    const GoodputSummary& s = r.study.chosen();
    auto steps_of = [&](double seconds) { return seconds / c.step_s; };
    std::string out;
    out += fmt::format(
        "\n  checkpoint interval formulas (blocking time {:.2f} s, system MTBF {:.0f} s, recovery {:.0f} "
        "s):\n",
        r.study.blocking_s, r.study.mtbf_s, r.study.recovery_s);
    out += fmt::format("    Young sqrt(2 delta M)                 {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.young_s, steps_of(formulas.young_s));
    out += fmt::format("    Daly 2006 higher-order                {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.daly_s, steps_of(formulas.daly_s));
    out += fmt::format("    restart-aware (arXiv:2410.18124)      {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.restart_aware_s, steps_of(formulas.restart_aware_s));
    out += fmt::format("    exact optimum, exponential, sync      {:>9.0f} s = {:>7.1f} steps\n",
                       formulas.exact_s, steps_of(formulas.exact_s));
    if (!r.o.interval_steps) {
        out += "\n  interval sweep (goodput over the seeds):\n";
        out += "     steps   interval_s    median       p10       p90\n";
        for (std::size_t i = 0; i < r.study.sweep.size(); ++i) {
            const auto& x = r.study.sweep[i];
            out += fmt::format("  {:>8} {:>12.0f} {:>9.4f} {:>9.4f} {:>9.4f}{}\n", x.interval_steps,
                               static_cast<double>(x.interval_steps) * c.step_s, x.goodput.p50, x.goodput.p10,
                               x.goodput.p90, i == r.study.best ? "   <- simulated optimum" : "");
        }
        out +=
            fmt::format("  simulated optimum: every {} steps ({:.0f} s); Young/Daly: {:.1f} / {:.1f} steps\n",
                        s.interval_steps, static_cast<double>(s.interval_steps) * c.step_s,
                        steps_of(formulas.young_s), steps_of(formulas.daly_s));
    }
    return out;
}

/// The chosen interval's figures over the seeds: median, p10, p90.
std::string result_text(const GoodputRun& r) {
    const GoodputConfig& c = r.c;
    const GoodputSummary& s = r.study.chosen();
    std::string out;
    out += fmt::format("\n  checkpoint every {} steps ({:.0f} s), {}:      median        p10        p90\n",
                       s.interval_steps, static_cast<double>(s.interval_steps) * c.step_s, to_string(c.mode));
    out += fmt::format("    goodput                         {}\n", pct3(s.goodput, 1.0, ".4f"));
    if (r.o.tokens)
        out += fmt::format("    time to train (days)            {}\n", pct3(s.wall_s, kDay, ".2f"));
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
    if (r.o.tokens && s.finished_fraction < 1.0)
        out += fmt::format("    note: {:.0f}% of the seeds did not finish within the limit\n",
                           100.0 * (1.0 - s.finished_fraction));
    return out;
}

}  // namespace

int goodput_command(const std::vector<std::string>& args) {
    Options o;
    InputOptions in_opts;
    po::options_description desc = goodput_options(o);
    add_input_options(desc, in_opts);
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "goodput")) return kExitOk;
    check_options(vm, o);

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
    if (!res.report.memory.fits()) {
        std::cerr << "trainsim: " << res.report.memory.oom_message() << "\n";
        return kExitOutOfMemory;
    }
    GoodputRun run{in, o, ckpt, configure(in, res.report.step_time_s, ckpt, o), {}};
    // A span shorter than one step completes no step: its work was counted as it accrued, so --days 1e-12
    // printed a goodput of 1.0000 (2026-11-29). Refused: no step's worth of training is in it.
    if (run.c.horizon_s > 0 && run.c.horizon_s < run.c.step_s)
        bad("days", fmt::format("{}", o.days),
            fmt::format("({:.4g} s) is shorter than one training step ({:.4g} s): no step would complete",
                        run.c.horizon_s, run.c.step_s));
    try {
        run.study = study_checkpoint_intervals(run.c, o.interval_steps, o.first_seed, o.seeds, o.jobs);
    } catch (const InputError& e) {
        throw InputError(fmt::format("goodput: {} (see --mtbf-*-h, --days, --tokens)", e.what()));
    }
    if (vm.count("json"))
        std::cout << goodput_json(run).dump(2) << "\n";
    else
        std::cout << setup_text(run) << intervals_text(run) << result_text(run);
    return kExitOk;
}

}  // namespace trainsim::cli
