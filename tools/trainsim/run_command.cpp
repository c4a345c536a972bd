// `trainsim run`: one iteration of one configuration, with the full report.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "scenario_options.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/fingerprint.hpp"
#include "trainsim/output_file.hpp"
#include "trainsim/scenario_study.hpp"
#include "trainsim/simulate.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

/// --trace-window START,END: seconds of simulated time, 0 <= START < END. Throws InputError naming the
/// option and the value.
TraceSelection parse_trace_window(const std::string& text, TraceSelection sel) {
    const auto bad = [&](const char* why) {
        return InputError(fmt::format("run: --trace-window = \"{}\" {}", text, why));
    };
    const auto comma = text.find(',');
    if (comma == std::string::npos) throw bad("must be START,END in seconds of simulated time (e.g. 10,12)");
    auto number = [&](const std::string& part) {
        std::size_t used = 0;
        double v = 0;
        try {
            v = std::stod(part, &used);
        } catch (const std::exception&) {
            throw bad("must be START,END in seconds of simulated time (e.g. 10,12)");
        }
        if (used != part.size() || !std::isfinite(v))
            throw bad("must be START,END in seconds of simulated time (e.g. 10,12)");
        return v;
    };
    const double start = number(text.substr(0, comma)), end = number(text.substr(comma + 1));
    if (start < 0 || end <= start) throw bad("needs 0 <= START < END");
    if (end > 1e6) throw bad("ends after 10^6 s of simulated time");
    sel.window_start = Time::seconds(start);
    sel.window_end = Time::seconds(end);
    return sel;
}

/// Prints an estimate of the trace's size to stderr when it would pass 100 MB (from the program of the run:
/// estimate_trace, the whole iteration; not with --trace-window, whose share of the iteration is not known
/// before the run). A layout the program cannot be built for prints nothing (the simulation reports it).
void warn_trace_size(const Inputs& in, const TraceSelection& sel) {
    constexpr double kWarnBytes = 100e6;
    TraceEstimate e;
    try {
        check_layout(in.model, in.layout, in.topology.gpus());
        e = estimate_trace(build_program(in.model, in.layout), in.layout, sel.ranks);
    } catch (const std::exception&) {
        return;
    }
    if (e.bytes <= kWarnBytes) return;
    std::cerr << fmt::format(
        "trainsim: the trace will be about {:.0f} MB ({:.1f} M events of {} GPUs); --trace-ranks stages or "
        "--trace-window writes less\n",
        e.bytes / 1e6, static_cast<double>(e.events) / 1e6, e.gpus);
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim run [options]\n\n"
        "Simulates one training iteration event by event and prints step time (s), tokens/s, TFLOP/s per "
        "GPU,\n"
        "MFU and HFU, the pipeline bubble, exposed TP/PP/DP communication (s) and memory per stage (GiB).\n"
        "With no --topology/--workload: the embedded default (GPT-3 175B on 1024 A100-80GB, TP 8 x PP 16 x "
        "DP 8,\n"
        "the Megatron-LM README run), printed beside its measured figures.\n\noptions");
    std::string trace_file, trace_ranks = "first-replica", trace_window;
    InputOptions in_opts;
    desc.add_options()("help,h", "this help")("json",
                                              "print the report as JSON on stdout instead of the table")(
        "trace", po::value(&trace_file),
        "write a Chrome trace / Perfetto JSON timeline (times in microseconds) to FILE, streamed as the "
        "simulation runs; tracks per GPU: compute, TP stream, DP stream, P2P sends, waits (bubble, exposed "
        "communication). Without --trace-window, its estimated size is printed on stderr when above 100 MB")(
        "trace-ranks", po::value(&trace_ranks),
        "which GPUs the trace holds: first-replica (DP rank 0: every TP, CP and PP rank; default: about 310 "
        "MB "
        "for the default run), stages (one GPU per pipeline stage, tp = cp = dp = 0: 8x smaller there; with "
        "the symmetric TP groups the other TP ranks' timelines are the same) or all")(
        "trace-window", po::value(&trace_window),
        "START,END: write only the slices that overlap this span of simulated time (s; whole slices, not "
        "clipped), e.g. --trace-window 10,12")(
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
    if (trace_ranks != "first-replica" && trace_ranks != "stages" && trace_ranks != "all")
        throw InputError(
            fmt::format("--trace-ranks = \"{}\" is not one of first-replica, stages, all", trace_ranks));
    const bool tracing = vm.count("trace") > 0;
    if (tracing && trace_file.empty()) throw InputError("run: --trace needs a file name (it is empty: \"\")");
    if (!tracing && vm.count("trace-window")) throw InputError("run: --trace-window needs --trace FILE");
    TraceSelection sel;
    sel.ranks = trace_ranks == "all"      ? TraceRanks::all
                : trace_ranks == "stages" ? TraceRanks::stages
                                          : TraceRanks::first_replica;
    if (vm.count("trace-window")) sel = parse_trace_window(trace_window, sel);
    if (tracing) check_output_path(trace_file);
    const Inputs in = resolve_inputs(in_opts);
    // The trace streams to a temporary file beside FILE as the simulation runs, and replaces FILE once the
    // run is over (include/trainsim/output_file.hpp); a run that fails leaves FILE untouched.
    std::unique_ptr<OutputFile> trace_out;
    std::unique_ptr<ChromeTraceWriter> trace_writer;
    if (tracing) {
        if (!vm.count("trace-window")) warn_trace_size(in, sel);
        trace_out = std::make_unique<OutputFile>(trace_file);
        trace_writer = std::make_unique<ChromeTraceWriter>(
            in.layout, sel, [out = trace_out.get()](std::string_view piece) { out->write(piece); });
        options.observers.push_back(trace_writer.get());
        options.memory_timeline = true;
    }
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
    if (trace_out) trace_out->commit();
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
