// `trainsim run`: one iteration of one configuration, with the full report.
#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "scenario_options.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/fingerprint.hpp"
#include "trainsim/scenario_study.hpp"
#include "trainsim/simulate.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

int run_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim run [options]\n\n"
        "Simulates one training iteration event by event and prints step time (s), tokens/s, TFLOP/s per "
        "GPU,\n"
        "MFU and HFU, the pipeline bubble, exposed TP/PP/DP communication (s) and memory per stage (GiB).\n"
        "With no --topology/--workload: the embedded default (GPT-3 175B on 1024 A100-80GB, TP 8 x PP 16 x "
        "DP 8,\n"
        "the Megatron-LM README run), printed beside its measured figures.\n\noptions");
    std::string trace_file, trace_ranks = "first-replica";
    InputOptions in_opts;
    desc.add_options()("help,h", "this help")("json",
                                              "print the report as JSON on stdout instead of the table")(
        "trace", po::value(&trace_file),
        "write a Chrome trace / Perfetto JSON timeline (times in microseconds) to FILE")(
        "trace-ranks", po::value(&trace_ranks),
        "which GPUs the trace holds: first-replica (DP rank 0: every TP and PP rank; default) or all")(
        "fingerprint",
        "print the run's fingerprint (events, flows, ranks, step time, hash of every rank's time accounts; "
        "include/trainsim/fingerprint.hpp) as one line instead of the table; with --json, add it under "
        "\"fingerprint\"");
    add_input_options(desc, in_opts);
    ScenarioOptions scenario;
    add_scenario_options(desc, scenario, /*study=*/true);
    int jobs = static_cast<int>(std::thread::hardware_concurrency());
    desc.add_options()("jobs,j", po::value(&jobs),
                       "what-if with --seeds: threads that simulate seeds in parallel (default: the hardware "
                       "threads; the output does not depend on it)");
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "run")) return kExitOk;
    if (vm.count("jobs") && jobs <= 0)
        throw InputError(fmt::format("run: --jobs = {} must be positive", jobs));
    jobs = std::max(jobs, 1);
    SimulationOptions options;
    options.perturbations = scenario_perturbations(scenario);
    options.seed = scenario.seed;
    if (options.perturbations.empty() && (vm.count("seeds") || vm.count("seed")))
        throw InputError("run: --seed and --seeds need a perturbation (--straggler, --jitter or --link)");
    if (trace_ranks != "first-replica" && trace_ranks != "all")
        throw InputError(fmt::format("--trace-ranks = \"{}\" is not one of first-replica, all", trace_ranks));

    const TraceRanks trace_sel = trace_file.empty()
                                     ? TraceRanks::none
                                     : (trace_ranks == "all" ? TraceRanks::all : TraceRanks::first_replica);
    if (!trace_file.empty()) check_output_path(trace_file);
    const Inputs in = resolve_inputs(in_opts);
    options.trace = trace_sel;
    SimulationResult res;
    std::optional<ScenarioStudy> study;
    try {
        if (options.perturbations.empty())
            res = simulate(in.topology, in.model, in.layout, in.name, options);
        else
            study =
                study_scenario(in.topology, in.model, in.layout, in.name, options, scenario.seeds, jobs, res);
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", in.label, e.what()));
    }
    res.report.topology_name = in.topology.name;
    const Measured* measured = in.measured ? &*in.measured : nullptr;
    // The trace first: if it cannot be written, the run fails (exit 2) with nothing on stdout.
    if (!trace_file.empty())
        write_file_atomically(trace_file, chrome_trace(res.execution, in.layout).dump() + "\n");
    if (vm.count("json")) {
        nlohmann::json j = to_json(res.report, measured);
        if (vm.count("fingerprint")) j["fingerprint"] = to_json(fingerprint(res.execution));
        if (study) j["what_if"] = study_json(*study);
        std::cout << j.dump(2) << "\n";
    } else if (vm.count("fingerprint")) {
        std::cout << to_string(fingerprint(res.execution)) << "\n";
    } else {
        std::cout << format_text(res.report, measured);
        if (study) std::cout << format_study_text(*study);
    }
    if (!res.report.memory.fits()) {
        std::cerr << "trainsim: " << res.report.memory.oom_message() << "\n";
        return kExitOutOfMemory;
    }
    return kExitOk;
}

}  // namespace trainsim::cli
