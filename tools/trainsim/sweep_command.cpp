// `trainsim sweep`: every training layout of a model on N GPUs, rejected (with the reason counted) or
// simulated, ranked by step time.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "scenario_options.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
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
        if (last) std::fprintf(stderr, "\n");
        std::fflush(stderr);
    }

  private:
    std::chrono::steady_clock::time_point last_{};
    std::chrono::steady_clock::time_point sim_start_ = std::chrono::steady_clock::now();
    bool sim_started_ = false;
};

}  // namespace

int sweep_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim sweep --gpus N [options]\n\n"
        "Enumerates the training layouts of the workload's model on N GPUs (tp, pp, cp, dp = N/(tp*pp*cp),\n"
        "micro_batch, vpp, recompute, sequence_parallel, distributed_optimizer), rejects the invalid ones "
        "and\n"
        "those over the GPU's HBM (counted by reason), simulates the rest and ranks them by step time: step\n"
        "time (s), tokens/s, MFU, bubble, exposed TP/PP/DP communication (s), peak memory and headroom "
        "(GiB),\n"
        "what limits each, then the best layout's full report. Other layout fields (global batch, "
        "precision,\n"
        "attention, overlaps, bucket size) come from the workload file.\n"
        "Default grid: tp powers of 2 up to gpus_per_node; pp divisors of model.layers (and the workload's "
        "pp\n"
        "when it gives layers_per_stage); cp 1 (--vary cp=1,2,4 for long sequences); micro_batch 1,2,4,8;\n"
        "vpp 1,2,4 (pp > 1); recompute none,selective,full; sequence_parallel false,true (tp > 1);\n"
        "distributed_optimizer false,true.\n\noptions");
    std::string topology_file, workload_file, csv_file, profile_file, calibration_file;
    std::vector<std::string> sets;
    std::vector<std::string> fixes, varies;
    int gpus = 0;
    long long global_batch = 0;
    std::size_t top_k = 10;
    int jobs = static_cast<int>(std::thread::hardware_concurrency());
    desc.add_options()("help,h", "this help")(
        "topology", po::value(&topology_file),
        "cluster description, JSON (topologies/*.json); default: the embedded dgx-a100")(
        "workload", po::value(&workload_file),
        "model and the layout fields the sweep keeps, JSON (workloads/*.json); default: the embedded "
        "gpt3-175b")("gpus", po::value(&gpus),
                     "cluster size in GPUs (required): topology nodes = N / gpus_per_node")(
        "global-batch", po::value(&global_batch), "global batch in sequences (default: the workload's)")(
        "fix", po::value(&fixes)->composing(),
        "pin a dimension: tp=8, pp=4, dp=32, cp=1, micro_batch=1, vpp=2, recompute=full, "
        "sequence_parallel=true, "
        "distributed_optimizer=false (repeatable)")(
        "vary", po::value(&varies)->composing(),
        "restrict a dimension to a list: tp=4,8 or recompute=none,selective (repeatable)")(
        "top", po::value(&top_k), "layouts listed, best first (default 10)")(
        "csv", po::value(&csv_file), "write every evaluated layout to FILE as CSV (one row each)")(
        "json", "print every evaluated layout and the best report as JSON on stdout instead of the tables")(
        "jobs,j", po::value(&jobs), "threads that simulate in parallel (default: the hardware threads)")(
        "profile", po::value(&profile_file), kProfileHelp)(
        "set", po::value(&sets)->composing(),
        "override a field of the topology or workload before the sweep, as for run: model.seq_len=8192, "
        "layout.recompute=\"full\" (repeatable; --gpus sets topology.nodes)")(
        "calibration", po::value(&calibration_file),
        "GPU model constants measured or fitted (format trainsim-calibration/1), applied over the catalog");
    ScenarioOptions scenario;
    add_scenario_options(desc, scenario, /*study=*/true);
    po::variables_map vm;
    try {
        const auto parsed = po::command_line_parser(args).options(desc).run();
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
        return kExitOk;
    }
    if (!csv_file.empty()) check_output_path(csv_file);
    if (!vm.count("gpus")) throw InputError("sweep: --gpus N is required (the cluster size in GPUs)");
    if (gpus <= 0) throw InputError(fmt::format("sweep: --gpus = {} must be positive", gpus));
    if (vm.count("global-batch") && global_batch <= 0)
        throw InputError(fmt::format("sweep: --global-batch = {} must be positive", global_batch));
    if (vm.count("jobs") && jobs <= 0)
        throw InputError(fmt::format("sweep: --jobs = {} must be positive", jobs));
    jobs = std::max(jobs, 1);

    SweepGrid grid;
    for (const auto& f : fixes)
        restrict_sweep_grid(grid, f, "--fix");
    for (const auto& v : varies)
        restrict_sweep_grid(grid, v, "--vary");

    nlohmann::json topo_json =
        topology_file.empty() ? default_topology_json() : read_json_file(topology_file);
    nlohmann::json work_json =
        workload_file.empty() ? default_workload_json() : read_json_file(workload_file);
    for (const auto& set : sets)
        apply_override(topo_json, work_json, set);
    const std::string topo_name = topology_file.empty() ? "embedded dgx-a100" : topology_file;
    const std::string work_name = workload_file.empty() ? "embedded gpt3-175b" : workload_file;
    TopologySpec topo = parse_topology(topo_json, topo_name);
    if (!calibration_file.empty())
        apply_calibration(parse_calibration(read_json_file(calibration_file), calibration_file), topo);
    if (gpus % topo.gpus_per_node != 0)
        throw InputError(fmt::format("sweep: --gpus = {} is not a multiple of {}: gpus_per_node = {}", gpus,
                                     topo_name, topo.gpus_per_node));
    topo.nodes = gpus / topo.gpus_per_node;
    if (!profile_file.empty()) topo.profile = load_profile(profile_file, topo.gpu, topo_name);
    Workload work = parse_workload(work_json, work_name);
    if (vm.count("global-batch")) work.layout.global_batch = global_batch;

    SweepOptions options;
    options.jobs = jobs;
    options.perturbations = scenario_perturbations(scenario);
    options.seed = scenario.seed;
    options.seeds = scenario.seeds;
    if (options.perturbations.empty() && (vm.count("seeds") || vm.count("seed")))
        throw InputError("sweep: --seed and --seeds need a perturbation (--straggler, --jitter or --link)");
    Progress progress;
    if (isatty(STDERR_FILENO)) options.progress = std::ref(progress);
    const SweepResult res = run_sweep(topo, work.model, work.layout, grid, work.name, options);

    // The CSV first: if it cannot be written, the sweep fails (exit 2) with nothing on stdout.
    if (!csv_file.empty()) write_file_atomically(csv_file, sweep_csv(res));
    if (vm.count("json"))
        std::cout << sweep_json(res).dump(2) << "\n";
    else
        std::cout << format_sweep_text(res, top_k);
    if (res.simulated == 0) {
        if (res.out_of_memory > 0) {
            std::cerr << fmt::format("trainsim: sweep: no layout fits in {:.1f} GiB of HBM\n",
                                     res.hbm_bytes / kGiB);
            return kExitOutOfMemory;
        }
        throw InputError(res.entries.empty()
                             ? std::string("sweep: the grid is empty (check --fix and --vary)")
                             : fmt::format("sweep: every layout is rejected; most often: {}",
                                           res.reject_counts.front().first));
    }
    return kExitOk;
}

}  // namespace trainsim::cli
