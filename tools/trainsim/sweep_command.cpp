// `trainsim sweep`: every training layout of a model on N GPUs, rejected (with the reason counted) or
// simulated, ranked by step time.
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "processes.hpp"
#include "scenario_options.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/html_report.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/output_file.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"
#include "trainsim/units.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

std::string duration_text(double s) {
    const auto total = static_cast<long long>(s + 0.5);
    if (total >= 3600) return fmt::format("{}h{:02}m", total / 3600, (total / 60) % 60);
    if (total >= 60) return fmt::format("{}m{:02}s", total / 60, total % 60);
    return fmt::format("{}s", total);
}

/// The progress line on stderr (a terminal only): layouts checked, then simulated / to simulate, the rate of
/// simulations and the ETA; at most 5 updates a second.
class Progress {
  public:
    void operator()(const SweepProgress& p) {
        const auto now = std::chrono::steady_clock::now();
        if (p.checks_done && !sim_started_) {
            sim_start_ = now;
            sim_started_ = true;
        }
        const bool last = p.checks_done && p.simulated == p.to_simulate;
        if (!last && now - last_ < std::chrono::milliseconds(200)) return;
        last_ = now;
        if (!p.checks_done) {
            std::fprintf(stderr, "\rsweep: checked %zu/%zu layouts   ", p.checked, p.layouts);
        } else {
            const double elapsed = std::chrono::duration<double>(now - sim_start_).count();
            const double rate = elapsed > 0 ? static_cast<double>(p.simulated) / elapsed : 0.0;
            const std::string eta =
                rate > 0 ? duration_text(static_cast<double>(p.to_simulate - p.simulated) / rate) : "?";
            std::fprintf(stderr, "\rsweep: %zu layouts checked; simulated %zu/%zu, %.2f/s, ETA %s   ",
                         p.layouts, p.simulated, p.to_simulate, rate, eta.c_str());
        }
        open_ = !last;
        if (last) std::fprintf(stderr, "\n");
        std::fflush(stderr);
    }
    /// Ends the line when the sweep ended before its last simulation was announced (pruned groups and
    /// groups out of memory are never simulated).
    void finish() {
        if (!open_) return;
        std::fprintf(stderr, "\n");
        std::fflush(stderr);
        open_ = false;
    }

  private:
    std::chrono::steady_clock::time_point last_{};
    std::chrono::steady_clock::time_point sim_start_ = std::chrono::steady_clock::now();
    bool sim_started_ = false;
    bool open_ = false;  ///< a line was printed and not ended
};

/// The options of `trainsim sweep` as given.
struct SweepArgs {
    std::string topology_file, workload_file, csv_file, html_file, profile_file, calibration_file;
    std::string gpus_text, min_headroom_text, tokens_text;
    double gpu_hour_price = 0;
    std::vector<std::string> sets, fixes, varies;
    long long global_batch = 0;
    std::size_t top_k = 10;
    int jobs = static_cast<int>(std::thread::hardware_concurrency());
    ScenarioOptions scenario;
};

void add_sweep_options(po::options_description& desc, SweepArgs& a) {
    desc.add_options()("help,h", "this help")(
        "topology", po::value(&a.topology_file),
        "cluster description, JSON (topologies/*.json); default: the embedded dgx-a100")(
        "workload", po::value(&a.workload_file),
        "model and the layout fields the sweep keeps, JSON (workloads/*.json); default: the embedded "
        "gpt3-175b")(
        "gpus", po::value(&a.gpus_text),
        "cluster size in GPUs (default: the topology's, nodes x gpus_per_node): topology nodes = N / "
        "gpus_per_node; several sizes "
        "ranked together: --gpus 512,1024,2048 (a gpus column is added)")(
        "global-batch", po::value(&a.global_batch), "global batch in sequences (default: the workload's)")(
        "fix", po::value(&a.fixes)->composing(),
        "pin a dimension: tp=8, pp=4, dp=32, cp=1, micro_batch=1, vpp=2, recompute=full, "
        "sequence_parallel=true, "
        "distributed_optimizer=false (repeatable)")(
        "vary", po::value(&a.varies)->composing(),
        "restrict a dimension to a list: tp=4,8 or recompute=none,selective (repeatable)")(
        "min-headroom", po::value(&a.min_headroom_text),
        "memory safety margin, percent of HBM (10% or 10): a layout whose peak exceeds (1 - margin) x HBM "
        "counts as out of memory (default 0%)")(
        "tokens", po::value(&a.tokens_text),
        "time to train this many tokens (15T, 300B, 2.5e12): days and GPU-hours per layout, from its step "
        "time and tokens per step (no failures: `trainsim goodput` adds them)")(
        "gpu-hour-price", po::value(&a.gpu_hour_price),
        "with --tokens: US dollars per GPU-hour; adds the cost to train")(
        "top", po::value(&a.top_k),
        "layouts listed, best first (default 10; 0 only with --csv, --html or --json: every layout "
        "simulated, as --exhaustive)")(
        "exhaustive",
        "check and simulate every layout; without it (and without --top 0) a layout is neither simulated "
        "nor checked against memory when a lower bound on its step time (the busiest GPU's compute, the "
        "pipeline's fill and drain, every collective as if alone on the fabric) exceeds the step time of "
        "the --top-th best of its size: it cannot be in the top, which stays exact; --csv and --json list it "
        "as pruned, with its bound. With --html such a layout is checked against memory and pruned only "
        "when a simulated layout is also faster and needs no more memory, so the page's Pareto front of "
        "step time against peak memory is exact too")(
        "csv", po::value(&a.csv_file),
        "write every layout of the grid to FILE as CSV (one row each: simulated, pruned, out of memory or "
        "rejected, with the reason)")(
        "html", po::value(&a.html_file),
        "write a self-contained HTML page to FILE: step time against peak memory of every simulated layout "
        "with the Pareto front, the best layout's headline figures, step breakdown and memory (inline SVG)")(
        "json", "print every evaluated layout and the best report as JSON on stdout instead of the tables")(
        "jobs,j", po::value(&a.jobs),
        "threads that simulate in parallel (default: the hardware threads; under mpirun, per process)")(
        "profile", po::value(&a.profile_file), kProfileHelp)(
        "set", po::value(&a.sets)->composing(),
        "override a field of the topology or workload before the sweep, as for run: model.seq_len=8192, "
        "layout.precision=\"fp8\" (repeatable; --gpus sets topology.nodes; a field the grid sweeps, "
        "layout.tp, dp, cp, micro_batch, recompute, sequence_parallel, distributed_optimizer, zero_stage, is "
        "refused: --fix pins it)")(
        "calibration", po::value(&a.calibration_file),
        "GPU model constants measured or fitted (format trainsim-calibration/1), applied over the catalog");
    add_scenario_options(desc, a.scenario, /*study=*/true);
}

/// Parses the command line; false for --help (printed). Throws InputError (one line).
bool parse_sweep_args(const std::vector<std::string>& args, po::options_description& desc,
                      po::variables_map& vm) {
    try {
        const auto parsed = po::command_line_parser(args).options(desc).run();
        refuse_negative_counts(parsed, "sweep");
        for (const auto& o : parsed.options)
            if (o.position_key >= 0 && !o.original_tokens.empty())
                throw InputError(fmt::format("sweep: unexpected argument \"{}\"", o.original_tokens.front()));
        po::store(parsed, vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw InputError(fmt::format("sweep: {}", e.what()));
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return false;
    }
    return true;
}

/// --gpus: one size or a comma-separated list, each a positive integer.
std::vector<int> parse_gpus(const std::string& text) {
    std::vector<int> sizes;
    std::size_t start = 0;
    while (true) {
        const auto comma = text.find(',', start);
        const std::string item =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        long long g = 0;
        const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), g);
        if (item.empty() || ec != std::errc() || ptr != item.data() + item.size())
            throw InputError(
                fmt::format("sweep: --gpus = \"{}\" is not a number of GPUs (N, or a list N,N,...)",
                            clip_for_message(text)));
        if (g <= 0) throw InputError(fmt::format("sweep: --gpus = {} must be positive", g));
        if (g > limits::kMaxGpus)
            throw InputError(fmt::format("sweep: --gpus = {} is above the limit of {}", g, limits::kMaxGpus));
        // A repeated size was swept once without a word (2026-11-29).
        if (std::find(sizes.begin(), sizes.end(), static_cast<int>(g)) != sizes.end())
            throw InputError(
                fmt::format("sweep: --gpus = \"{}\" names {} GPUs twice", clip_for_message(text), g));
        sizes.push_back(static_cast<int>(g));
        if (comma == std::string::npos) return sizes;
        start = comma + 1;
    }
}

/// --min-headroom: a percentage in [0, 100), "%" optional; the fraction.
double parse_headroom(const std::string& text) {
    std::string number = text;
    if (!number.empty() && number.back() == '%') number.pop_back();
    double pct = 0;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), pct);
    if (number.empty() || ec != std::errc() || ptr != number.data() + number.size() || !(pct >= 0) ||
        !(pct < 100))
        throw InputError(fmt::format("sweep: --min-headroom = \"{}\" is not a percentage of HBM in [0, 100)",
                                     clip_for_message(text)));
    return pct / 100.0;
}

/// Throws `message` (a check of the workload `work_name` failed) blamed on the --set that gave a field it
/// names (blame_set), else on the last --set of `topology_key` (the GPU the message gives by value), else on
/// the file: `sweep --set layout.precision=fp8` on A100 and `--set layout.layers_per_stage=[4,4]` blamed the
/// file, which holds neither (round 15; `run` names the --set since round 8).
[[noreturn]] void throw_blaming_sets(const std::string& work_name, const std::vector<std::string>& sets,
                                     const std::string& message, const char* topology_key) {
    const InputError e(fmt::format("{}: {}", work_name, message));
    blame_set(e, sets, work_name);
    if (topology_key)
        for (auto it = sets.rbegin(); it != sets.rend(); ++it)
            if (it->rfind(std::string(topology_key) + "=", 0) == 0)
                throw InputError(
                    fmt::format("{} with --set \"{}\": {}", work_name, clip_for_message(*it), message));
    throw e;
}

/// The topology (calibration and profile applied, its size the smallest of --gpus, or its own without
/// --gpus) and the workload, with the --set overrides.
std::pair<TopologySpec, Workload> sweep_inputs(const SweepArgs& a, std::optional<int> gpus,
                                               const po::variables_map& vm) {
    nlohmann::json topo_json =
        a.topology_file.empty() ? default_topology_json() : read_json_file(a.topology_file);
    nlohmann::json work_json =
        a.workload_file.empty() ? default_workload_json() : read_json_file(a.workload_file);
    for (const auto& set : a.sets)
        apply_override(topo_json, work_json, set);
    const std::string topo_name = a.topology_file.empty() ? "embedded dgx-a100" : a.topology_file;
    const std::string work_name = a.workload_file.empty() ? "embedded gpt3-175b" : a.workload_file;
    TopologySpec topo =
        parse_blaming_sets(a.sets, topo_name, [&] { return parse_topology(topo_json, topo_name); });
    if (!a.calibration_file.empty()) {
        const Calibration calibration =
            parse_calibration(read_json_file(a.calibration_file), a.calibration_file);
        check_calibration_gpu(calibration, a.calibration_file, topo.gpu, topo_name);
        apply_calibration(calibration, topo);
    }
    if (gpus && *gpus % topo.gpus_per_node != 0)
        throw InputError(fmt::format("sweep: --gpus = {} is not a multiple of {}: {}", *gpus, topo_name,
                                     topo.node_gpus_field()));
    // Two sizes asked for: --gpus sets topology.nodes, over a --set of it that gave another size.
    if (gpus)
        for (auto it = a.sets.rbegin(); it != a.sets.rend(); ++it)
            if (it->rfind("topology.nodes=", 0) == 0) {
                if (topo.gpus() != *gpus)
                    throw InputError(fmt::format(
                        "sweep: --set \"{}\" makes the cluster {} GPUs and --gpus {} another size; --gpus "
                        "sets topology.nodes: give one of them",
                        clip_for_message(*it), topo.gpus(), clip_for_message(a.gpus_text)));
                break;
            }
    if (gpus) topo.nodes = *gpus / topo.gpus_per_node;
    if (!a.profile_file.empty()) topo.profile = load_profile(a.profile_file, topo.gpu, topo_name);
    Workload work =
        parse_blaming_sets(a.sets, work_name, [&] { return parse_workload(work_json, work_name); });
    if (vm.count("global-batch")) {
        for (auto it = a.sets.rbegin(); it != a.sets.rend(); ++it)
            if (it->rfind("layout.global_batch=", 0) == 0) {
                if (work.layout.global_batch != a.global_batch)
                    throw InputError(fmt::format(
                        "sweep: --set \"{}\" and --global-batch {} give two global batches; give one",
                        clip_for_message(*it), a.global_batch));
                break;
            }
        work.layout.global_batch = a.global_batch;
    }
    // The grid varies neither the precision nor the FP8 recipe: one the GPU lacks is the workload's error
    // (run_sweep refuses it too, without the file's name).
    try {
        (void)run_compute_model(topo, topology_gpu(topo), work.layout);
    } catch (const InputError& e) {
        throw_blaming_sets(work_name, a.sets, e.what(), "topology.gpu");
    }
    // So is a layers_per_stage of another length than its pp (run_sweep refuses it too, without the name):
    // it was copied into every layout of that pp (6 M entries: past 25 s and gigabytes).
    const Layout& l = work.layout;
    if (!l.layers_per_stage.empty() && l.pipeline_layout.empty() &&
        static_cast<std::int64_t>(l.layers_per_stage.size()) != l.pp)
        throw_blaming_sets(work_name, a.sets,
                           fmt::format("layout.layers_per_stage has {} entries; layout.pp = {}",
                                       l.layers_per_stage.size(), l.pp),
                           nullptr);
    return {std::move(topo), std::move(work)};
}

/// The options of run_sweep from the command line (sizes, margin, time to train, what-if, processes).
SweepOptions sweep_options(const SweepArgs& a, const std::vector<int>& sizes, const po::variables_map& vm) {
    SweepOptions options;
    options.jobs = std::max(a.jobs, 1);
    if (sizes.size() > 1) options.gpus = sizes;
    if (vm.count("min-headroom")) options.min_headroom = parse_headroom(a.min_headroom_text);
    if (vm.count("tokens")) {
        options.train_tokens = parse_count(a.tokens_text, "sweep: --tokens");
        check_tokens(*options.train_tokens, a.tokens_text, "sweep");
    }
    if (vm.count("gpu-hour-price")) {
        if (!options.train_tokens) throw InputError("sweep: --gpu-hour-price needs --tokens");
        check_gpu_hour_price(a.gpu_hour_price, "sweep");
        options.gpu_hour_price_usd = a.gpu_hour_price;
    }
    options.perturbations = scenario_perturbations(a.scenario);
    options.seed = a.scenario.seed;
    options.seeds = a.scenario.seeds;
    if (options.perturbations.empty() && (vm.count("seeds") || vm.count("seed")))
        throw InputError("sweep: --seed and --seeds need a perturbation (--straggler, --jitter or --link)");
    options.processes = processes();
    // The CSV and JSON list every layout with its verdict, the pruned ones as `pruned` with their bound;
    // the HTML page draws the Pareto front of step time against peak memory: with --html a layout is
    // pruned only if it is also dominated (a simulated one faster and no larger), so the front is exact.
    if (!vm.count("exhaustive") && a.top_k > 0) {
        options.prune_beyond_top = a.top_k;
        options.prune_keeps_pareto_front = !a.html_file.empty();
    }
    return options;
}

/// Writes the CSV (rank 0) and prints the result; the exit code (3: nothing fits). Throws InputError, before
/// printing or writing anything, when every layout is rejected or the grid is empty.
int report_sweep(const SweepResult& res, const SweepArgs& a, bool json) {
    // Bad input (exit 2): nothing on stdout and no file written.
    if (res.simulated == 0 && res.out_of_memory == 0) {
        if (res.entries.empty()) throw InputError("sweep: the grid is empty (check --fix and --vary)");
        // The reasons are counted with their numbers as N; the first such layout's own message names them.
        const std::string& reason = res.reject_counts.front().first;  // a plain reference: lambdas capture it
        const auto count = res.reject_counts.front().second;
        const auto example = std::find_if(res.entries.begin(), res.entries.end(), [&](const SweepEntry& e) {
            return e.reason == reason && !e.detail.empty();
        });
        throw InputError(
            example == res.entries.end() || example->detail == reason
                ? fmt::format("sweep: every layout is rejected; most often ({} of {}): {}", count,
                              res.entries.size(), reason)
                : fmt::format("sweep: every layout is rejected; most often ({} of {}), e.g. {}: {}", count,
                              res.entries.size(), canonical_string(example->layout),
                              clip_for_message(example->detail, 160)));
    }
    // A what-if sweep whose every runnable layout passed its share of the event bound is not "out of
    // memory": it is larger than a what-if sweep runs by default.
    const auto bound = std::find_if(res.reject_counts.begin(), res.reject_counts.end(), [](const auto& r) {
        return r.first.find("passed its bound of") != std::string::npos;
    });
    if (res.simulated == 0 && bound != res.reject_counts.end())
        throw InputError(fmt::format(
            "sweep: no layout was simulated: {} passed their share of the {} events of a what-if study "
            "(limits.hpp kMaxWhatIfStudyEvents, shared by the layouts that pass the grid checks and the "
            "seeds: "
            "their fabric's rate updates, out of step under the perturbation, are that costly), {} are out "
            "of "
            "memory; --fix and --vary narrow the grid",
            bound->second, limits::kMaxWhatIfStudyEvents, res.out_of_memory));
    // The CSV first: if it cannot be written, the sweep fails (exit 2) with nothing on stdout.
    if (!a.csv_file.empty() && output_process()) write_file_atomically(a.csv_file, sweep_csv(res));
    if (!a.html_file.empty() && output_process())
        write_file_atomically(a.html_file,
                              sweep_html(res, fmt::format("{} sweep on {} ({})", res.workload_name,
                                                          res.topology_name, res.gpu_name)));
    if (json)
        std::cout << sweep_json(res).dump(2) << "\n";
    else
        std::cout << format_sweep_text(res, a.top_k);
    if (res.simulated == 0) {  // every layout that passed the checks is out of memory
        std::cerr << fmt::format(
            "trainsim: sweep: no layout fits in {:.1f} GiB of HBM{}\n", res.hbm_bytes / kGiB,
            res.min_headroom > 0 ? fmt::format(" with {:g}% headroom", 100.0 * res.min_headroom) : "");
        return kExitOutOfMemory;
    }
    return kExitOk;
}

}  // namespace

int sweep_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim sweep [--gpus N[,N...]] [options]\n\n"
        "Enumerates the training layouts of the workload's model on N GPUs (tp, pp, cp, dp = N/(tp*pp*cp),\n"
        "micro_batch, vpp, recompute, sequence_parallel, distributed_optimizer), rejects the invalid ones "
        "and\n"
        "those over the GPU's HBM (counted by reason), simulates the rest and ranks them by step time: step\n"
        "time (s), tokens/s, tokens/s per GPU, tokens/day, MFU, bubble, exposed TP/PP/DP communication (s), "
        "peak\n"
        "memory and headroom (GiB), what limits each, then the best layout's full report. Several sizes\n"
        "(--gpus 512,1024,2048) are ranked together. Other layout fields (global batch, precision,\n"
        "attention, overlaps, bucket size) come from the workload file.\n"
        "Default grid: tp powers of 2 up to gpus_per_node (the NVLink domain), at most 8 (--vary tp=16 for\n"
        "more); pp divisors of model.layers (and the workload's pp when it gives layers_per_stage); cp 1\n"
        "(--vary cp=1,2,4 for long sequences); ep (MoE models) divisors of the experts; micro_batch\n"
        "1,2,4,8; vpp 1,2,4 (pp > 1); recompute none,selective,full (the workload's recompute_modules and\n"
        "recompute_mla_up_proj kept on selective points only, its recompute_num_layers on full ones);\n"
        "sequence_parallel false,true (tp > 1); distributed_optimizer false,true.\n"
        "Without --gpus, N is the topology's size (nodes x gpus_per_node, after --set).\n"
        "Under mpirun (-np N) the layouts are spread over the processes; the output is the same.\n\noptions");
    SweepArgs a;
    add_sweep_options(desc, a);
    po::variables_map vm;
    if (!parse_sweep_args(args, desc, vm)) return kExitOk;
    check_output_option(vm, "csv", a.csv_file, "sweep");
    check_output_option(vm, "html", a.html_file, "sweep");
    check_distinct_outputs({{"--csv", a.csv_file}, {"--html", a.html_file}},
                           {{"--topology", a.topology_file},
                            {"--workload", a.workload_file},
                            {"--profile", a.profile_file},
                            {"--calibration", a.calibration_file}});
    // Without --gpus: the topology's own size (its nodes x gpus_per_node, after --set).
    std::vector<int> sizes = vm.count("gpus") ? parse_gpus(a.gpus_text) : std::vector<int>{};
    if (vm.count("global-batch") && a.global_batch <= 0)
        throw InputError(fmt::format("sweep: --global-batch = {} must be positive", a.global_batch));
    if (vm.count("jobs")) check_jobs(a.jobs, "sweep: ");
    // --top 0 lists no layout; the text alone would then simulate every layout for nothing (no pruning).
    if (a.top_k == 0 && a.csv_file.empty() && a.html_file.empty() && !vm.count("json"))
        throw InputError("sweep: --top = 0 lists no layout: give --top N >= 1, or --csv, --html or --json");
    refuse_swept_sets(a.sets);
    SweepGrid grid;
    for (const auto& f : a.fixes)
        restrict_sweep_grid(grid, f, "--fix");
    for (const auto& v : a.varies)
        restrict_sweep_grid(grid, v, "--vary");
    const auto [topo, work] = sweep_inputs(
        a, sizes.empty() ? std::nullopt : std::optional<int>(*std::min_element(sizes.begin(), sizes.end())),
        vm);
    if (sizes.empty()) sizes = {topo.gpus()};
    SweepOptions options = sweep_options(a, sizes, vm);
    Progress progress;
    if (isatty(STDERR_FILENO) && !options.processes) options.progress = std::ref(progress);
    const SweepResult res = run_sweep(topo, work.model, work.layout, grid, work.name, options);
    progress.finish();
    return report_sweep(res, a, vm.count("json") > 0);
}

}  // namespace trainsim::cli
