// `trainsim run`: one iteration of one configuration, with the full report.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "scenario_options.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/fingerprint.hpp"
#include "trainsim/html_report.hpp"
#include "trainsim/limits.hpp"
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
        return InputError(fmt::format("run: --trace-window = \"{}\" {}", clip_for_message(text), why));
    };
    const auto comma = text.find(',');
    if (comma == std::string::npos) throw bad("must be START,END in seconds of simulated time (e.g. 10,12)");
    // std::from_chars, as the other options read numbers: std::stod took hex (0x1), a leading blank and
    // "+1" (round 12).
    auto number = [&](const std::string& part) {
        double v = 0;
        const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        if (part.empty() || ec != std::errc() || ptr != part.data() + part.size() || !std::isfinite(v))
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

/// The note on the trace's size (a line for stderr) when it passes 100 MB, estimated from the program of the
/// run (estimate_trace, the whole iteration; none with --trace-window, whose share of the iteration is not
/// known before the run); "" otherwise, and for a layout the program cannot be built for (the simulation
/// reports it). Refuses (InputError) a trace estimated past limits::kMaxTraceBytes. The caller prints the
/// note once the trace is written: printed before the run, a run that then failed (exit 2: its event bound)
/// left two lines on stderr (2026-11-29).
std::string trace_size_note(const Inputs& in, const TraceSelection& sel, const std::string& trace_file) {
    constexpr double kWarnBytes = 100e6;
    TraceEstimate e;
    try {
        check_layout(in.model, in.layout, in.topology.gpus());
        e = estimate_trace(build_program(in.model, in.layout), in.layout, sel.ranks);
    } catch (const std::exception&) {
        return "";
    }
    // What writes less: --trace-ranks stages was advised when it was the selection already.
    const char* less = sel.ranks == TraceRanks::stages
                           ? "--trace-window START,END writes less"
                           : "--trace-ranks stages or --trace-window START,END writes less";
    if (e.bytes > limits::kMaxTraceBytes)
        throw InputError(fmt::format(
            "--trace {}: the trace would be about {:.0f} MB ({:.1f} M events of {} GPUs), past the "
            "limit of {:.0f} MB (limits.hpp); {}",
            trace_file, e.bytes / 1e6, static_cast<double>(e.events) / 1e6, e.gpus,
            limits::kMaxTraceBytes / 1e6, less));
    if (e.bytes <= kWarnBytes) return "";
    return fmt::format("trainsim: the trace is about {:.0f} MB ({:.1f} M events of {} GPUs); {}\n",
                       e.bytes / 1e6, static_cast<double>(e.events) / 1e6, e.gpus, less);
}

/// The options of `trainsim run` as given.
struct RunArgs {
    std::string trace_file, trace_ranks = "first-replica", trace_window, tokens_text, html_file;
    double gpu_hour_price = 0;
    long long max_events = 0;
    InputOptions inputs;
    ScenarioOptions scenario;
    int jobs = static_cast<int>(std::thread::hardware_concurrency());
};

void add_run_options(po::options_description& desc, RunArgs& a) {
    desc.add_options()("help,h", "this help")("json",
                                              "print the report as JSON on stdout instead of the table")(
        "trace", po::value(&a.trace_file),
        "write a Chrome trace / Perfetto JSON timeline (times in microseconds) to FILE, streamed as the "
        "simulation runs; tracks per GPU: compute, TP stream, DP stream, P2P sends, waits (bubble, exposed "
        "communication). Without --trace-window, its estimated size is printed on stderr when above 100 MB; "
        "a "
        "trace past 1 GB is refused (estimated) or stopped (streamed), exit 2")(
        "trace-ranks", po::value(&a.trace_ranks),
        "which GPUs the trace holds: first-replica (DP rank 0: every TP, CP and PP rank; default: about 310 "
        "MB "
        "for the default run), stages (one GPU per pipeline stage, tp = cp = dp = 0: 8x smaller there; with "
        "the symmetric TP groups the other TP ranks' timelines are the same) or all")(
        "trace-window", po::value(&a.trace_window),
        "START,END: write only the slices that overlap this span of simulated time (s; whole slices, not "
        "clipped), e.g. --trace-window 10,12")(
        "html", po::value(&a.html_file),
        "write a self-contained HTML page to FILE: headline figures, step breakdown per stage, pipeline "
        "timeline of DP replica 0, memory chart (inline SVG, loads nothing; "
        "include/trainsim/html_report.hpp)")(
        "fingerprint",
        "print the run's fingerprint (events, flows, ranks, step time, hash of every rank's time accounts; "
        "include/trainsim/fingerprint.hpp) as one line instead of the table (so not with --tokens or a "
        "what-if study, whose figures the table holds); with --json, add it under \"fingerprint\"")(
        "tokens", po::value(&a.tokens_text),
        "time to train this many tokens (15T, 300B, 2.5e12): days and GPU-hours from the step time and the "
        "tokens per step (no failures: `trainsim goodput` adds them)")(
        "gpu-hour-price", po::value(&a.gpu_hour_price),
        "with --tokens: US dollars per GPU-hour; adds the cost to train")(
        "max-events", po::value(&a.max_events),
        "stop the simulation after N events with exit 2 and one line saying so (the input is valid, larger "
        "than asked for): a bound on the run's time, about 0.1-0.3 us of CPU per event, a step of the "
        "fabric's flow-rate updates counted as one (docs/performance.md); 0: no bound (the default, but "
        "for a what-if study: 2^25 shared by its unperturbed run and its seeds, limits.hpp)");
    add_input_options(desc, a.inputs);
    add_scenario_options(desc, a.scenario, /*study=*/true);
    desc.add_options()("jobs,j", po::value(&a.jobs),
                       "what-if with --seeds: threads that simulate seeds in parallel (default: the hardware "
                       "threads; the output does not depend on it)");
}

/// The trace's selection from --trace-ranks and --trace-window. Throws InputError.
TraceSelection trace_selection(const RunArgs& a, const po::variables_map& vm) {
    if (a.trace_ranks != "first-replica" && a.trace_ranks != "stages" && a.trace_ranks != "all")
        throw InputError(fmt::format("--trace-ranks = \"{}\" is not one of first-replica, stages, all",
                                     clip_for_message(a.trace_ranks)));
    if (vm.count("trace") && a.trace_file.empty())
        throw InputError("run: --trace needs a file name (it is empty: \"\")");
    if (!vm.count("trace") && vm.count("trace-window"))
        throw InputError("run: --trace-window needs --trace FILE");
    if (!vm.count("trace") && vm.count("trace-ranks"))
        throw InputError("run: --trace-ranks needs --trace FILE");
    TraceSelection sel;
    sel.ranks = a.trace_ranks == "all"      ? TraceRanks::all
                : a.trace_ranks == "stages" ? TraceRanks::stages
                                            : TraceRanks::first_replica;
    if (vm.count("trace-window")) sel = parse_trace_window(a.trace_window, sel);
    return sel;
}

/// --tokens and --gpu-hour-price: the tokens to train and the price, when given. Throws InputError.
std::optional<std::pair<double, std::optional<double>>> training_args(const RunArgs& a,
                                                                      const po::variables_map& vm) {
    if (vm.count("gpu-hour-price") && !vm.count("tokens"))
        throw InputError("run: --gpu-hour-price needs --tokens");
    if (!vm.count("tokens")) return std::nullopt;
    const double tokens = parse_count(a.tokens_text, "run: --tokens");
    check_tokens(tokens, a.tokens_text, "run");
    std::optional<double> price;
    if (vm.count("gpu-hour-price")) {
        check_gpu_hour_price(a.gpu_hour_price, "run");
        price = a.gpu_hour_price;
    }
    return std::make_pair(tokens, price);
}

/// The simulation, streaming the trace to FILE when asked (the file replaced once the run is over: a run
/// that fails leaves it untouched); the what-if study with perturbations.
SimulationResult simulate_run(const Inputs& in, const RunArgs& a, const po::variables_map& vm,
                              const TraceSelection& sel, SimulationOptions options,
                              std::optional<ScenarioStudy>& study, PipelineTimeline* timeline) {
    std::unique_ptr<OutputFile> trace_out;
    std::unique_ptr<ChromeTraceWriter> trace_writer;
    std::string trace_note;
    if (vm.count("trace")) {
        if (!vm.count("trace-window")) trace_note = trace_size_note(in, sel, a.trace_file);
        trace_out = std::make_unique<OutputFile>(a.trace_file);
        trace_writer = std::make_unique<ChromeTraceWriter>(
            in.layout, sel,
            [out = trace_out.get(), file = a.trace_file, written = 0.0](std::string_view piece) mutable {
                written += static_cast<double>(piece.size());
                if (written > limits::kMaxTraceBytes)
                    throw InputError(fmt::format(
                        "--trace {}: the trace passed the limit of {:.0f} MB (limits.hpp) and was stopped; "
                        "--trace-ranks stages or a shorter --trace-window START,END writes less",
                        file, limits::kMaxTraceBytes / 1e6));
                // The write's error names the file alone; "--trace" keeps the workload file from being
                // blamed for a full disk ("small.json: t.json: writing failed (No space left ...)").
                try {
                    out->write(piece);
                } catch (const InputError& e) {
                    throw InputError(fmt::format("--trace {}", e.what()));
                }
            });
        options.observers.push_back(trace_writer.get());
        options.memory_timeline = true;
    }
    if (timeline) {
        options.observers.push_back(timeline);
        options.memory_timeline = true;
    }
    SimulationResult res;
    try {
        if (options.perturbations.empty())
            res = simulate(in.topology, in.model, in.layout, in.name, options);
        else
            study = study_scenario(in.topology, in.model, in.layout, in.name, options, a.scenario.seeds,
                                   std::max(a.jobs, 1), res);
    } catch (const EventLimitExceeded& e) {
        if (!vm.count("max-events") && !options.perturbations.empty())
            throw InputError(fmt::format(
                "{}: {} (a what-if study's default: {} events over its {} simulations, the unperturbed run "
                "and {} seed(s), limits.hpp; run --max-events N bounds each simulation, 0: no bound)",
                in.label, e.what(), limits::kMaxWhatIfStudyEvents, a.scenario.seeds + 1, a.scenario.seeds));
        throw InputError(
            fmt::format("{}: {} (run --max-events {}; 0: no bound)", in.label, e.what(), e.events));
    } catch (const InputError& e) {
        // An error that names a command-line option (a --link or --straggler found bad once the cluster is
        // built) blames the option, not the workload file.
        if (std::string_view(e.what()).rfind("--", 0) == 0) throw;
        throw InputError(fmt::format("{}: {}", in.label, e.what()));
    }
    res.report.topology_name = in.topology.name;
    // The trace first: if it cannot be written, the run fails (exit 2) with nothing on stdout.
    if (trace_out) trace_out->commit();
    std::cerr << trace_note;
    return res;
}

/// Prints the report (text, JSON or the fingerprint); the exit code (3: out of memory).
int print_run(const SimulationResult& res, const Inputs& in, const po::variables_map& vm,
              const std::optional<ScenarioStudy>& study, const TimeToTrain* train) {
    const Measured* measured = in.measured ? &*in.measured : nullptr;
    if (vm.count("json")) {
        nlohmann::json j = to_json(res.report, measured);
        if (train) j["time_to_train"] = to_json(*train);
        if (vm.count("fingerprint")) j["fingerprint"] = to_json(fingerprint(res.execution));
        if (study) j["what_if"] = study_json(*study);
        std::cout << j.dump(2) << "\n";
    } else if (vm.count("fingerprint")) {
        std::cout << to_string(fingerprint(res.execution)) << "\n";
    } else {
        std::cout << format_text(res.report, measured, train);
        if (study) std::cout << format_study_text(*study);
    }
    if (!res.report.memory.fits()) {
        std::cerr << "trainsim: " << res.report.memory.oom_message() << "\n";
        return kExitOutOfMemory;
    }
    return kExitOk;
}

}  // namespace

int run_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim run [options]\n\n"
        "Simulates one training iteration event by event and prints step time (s), tokens/s, tokens/s per "
        "GPU,\n"
        "tokens/day, TFLOP/s per GPU, MFU and HFU, the pipeline bubble, exposed TP/PP/DP communication (s) "
        "and\n"
        "memory per stage (GiB); with --tokens, the time to train. With no --topology/--workload: the "
        "embedded\n"
        "default (GPT-3 175B on 1024 A100-80GB, TP 8 x PP 16 x DP 8, the Megatron-LM README run), printed\n"
        "beside its measured figures.\n\noptions");
    RunArgs a;
    add_run_options(desc, a);
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "run")) return kExitOk;
    if (vm.count("jobs")) check_jobs(a.jobs, "run: ");
    if (a.max_events < 0)
        throw InputError(fmt::format("run: --max-events {} must be 0 (no bound) or more", a.max_events));
    SimulationOptions options;
    options.execution.max_events = static_cast<std::uint64_t>(a.max_events);
    options.perturbations = scenario_perturbations(a.scenario);
    // A what-if study without --max-events: its simulations share limits::kMaxWhatIfStudyEvents.
    if (!options.perturbations.empty() && !vm.count("max-events"))
        options.execution.max_events = static_cast<std::uint64_t>(
            std::max<std::int64_t>(1, limits::kMaxWhatIfStudyEvents / (std::max(a.scenario.seeds, 1) + 1)));
    options.seed = a.scenario.seed;
    if (options.perturbations.empty() && (vm.count("seeds") || vm.count("seed")))
        throw InputError("run: --seed and --seeds need a perturbation (--straggler, --jitter or --link)");
    if (options.perturbations.empty() && vm.count("jobs"))
        throw InputError(
            fmt::format("run: --jobs {} applies to a what-if study's seeds; give a perturbation "
                        "(--straggler, --jitter or "
                        "--link)",
                        a.jobs));
    const TraceSelection sel = trace_selection(a, vm);
    const auto training = training_args(a, vm);
    // --fingerprint prints one line instead of the table, which held the time to train and the what-if
    // study: both were computed and dropped without a word, exit 0 (round 15). --json keeps them.
    if (vm.count("fingerprint") && !vm.count("json") && (training || !options.perturbations.empty()))
        throw InputError(fmt::format(
            "run: --fingerprint prints the run's fingerprint line alone, without the {} that {} asks for; "
            "add --json to have both",
            training ? "time to train" : "what-if study",
            training ? "--tokens" : "--straggler, --jitter or --link"));
    check_output_option(vm, "trace", a.trace_file, "run");
    check_output_option(vm, "html", a.html_file, "run");
    check_distinct_outputs({{"--trace", a.trace_file}, {"--html", a.html_file}}, input_files(a.inputs));
    const Inputs in = resolve_inputs(a.inputs);
    std::optional<ScenarioStudy> study;
    std::optional<PipelineTimeline> timeline;
    if (vm.count("html")) timeline.emplace(in.layout);
    const SimulationResult res =
        simulate_run(in, a, vm, sel, options, study, timeline ? &*timeline : nullptr);
    if (timeline)
        write_file_atomically(a.html_file,
                              run_html(res.report, &*timeline, layout_title(in, res.report.gpu_name)));
    std::optional<TimeToTrain> train;
    if (training) train = time_to_train(res.report, training->first, training->second);
    return print_run(res, in, vm, study, train ? &*train : nullptr);
}

}  // namespace trainsim::cli
