// `trainsim memory`: per stage and phase, the memory piles of one iteration and their peak; --what-if the
// standard remedies, each simulated; --svg a chart; --json everything.
#include <algorithm>
#include <iostream>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/frontend.hpp"
#include "trainsim/html_report.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/units.hpp"
#include "trainsim/what_if.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

/// The default of --max-events (include/trainsim/frontend.hpp).
constexpr std::uint64_t kDefaultMaxEvents = kDefaultMemoryMaxEvents;

std::string what_if_text(const WhatIf& w) {
    std::string o = fmt::format(
        "\nwhat if (each remedy's memory walked over its schedule, its step simulated; baseline peak {:.2f} "
        "GiB, step {})\n",
        w.baseline_peak_bytes / kGiB,
        w.baseline_step_simulated ? fmt::format("{:.3f} s", w.baseline_step_time_s) : std::string("-"));
    o += fmt::format("  {:<44} {:>10} {:>10} {:>10} {:>10}  {}\n", "remedy", "peak GiB", "saved GiB",
                     "step s", "cost s", "");
    bool cut = !w.baseline_step_simulated;
    for (const auto& r : w.remedies) {
        if (!r.applicable) {
            o += fmt::format("  {:<44} not applicable: {}\n", r.name, r.reason);
            continue;
        }
        const std::string step = r.step_simulated ? fmt::format("{:.3f}", r.step_time_s) : "-";
        const std::string cost =
            r.step_simulated && w.baseline_step_simulated ? fmt::format("{:+.3f}", r.step_time_delta_s) : "-";
        cut = cut || !r.step_simulated;
        o += fmt::format("  {:<44} {:>10.2f} {:>10.2f} {:>10} {:>10}  {}{}\n", r.name, r.peak_bytes / kGiB,
                         r.saved_bytes / kGiB, step, cost, r.fits ? "fits" : "DOES NOT FIT",
                         fmt::format(" (peak {})", r.peak_where));
    }
    if (cut)
        o +=
            fmt::format("  -: step time not simulated, its simulation passed --max-events {} (0: no bound)\n",
                        w.max_events);
    return o;
}

/// Refuses (InputError) a `--json --timeline` document past limits::kMaxMemoryTimelineSamples, before
/// anything is written.
void check_timeline_samples(const Inputs& in, const MemoryReport& mem) {
    std::int64_t samples = 0;
    for (const auto& st : mem.stages)
        samples += static_cast<std::int64_t>(st.timeline.size());
    if (samples > limits::kMaxMemoryTimelineSamples)
        throw InputError(fmt::format(
            "memory --timeline: {}: the timeline holds {} samples over {} stages (about {:.0f} MB of JSON), "
            "above the limit of {} (trainsim/limits.hpp); fewer micro-batches (layout.global_batch) or "
            "layers "
            "give fewer, or leave out --timeline",
            in.label, samples, mem.stages.size(), static_cast<double>(samples) * 310 / 1e6,
            limits::kMaxMemoryTimelineSamples));
}

}  // namespace

int memory_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim memory [options]\n\n"
        "Memory per GPU of every pipeline stage, per phase (load, forward, backward, optimizer, "
        "checkpoint),\n"
        "by pile (parameters, gradients, optimizer state, activations, buffers, framework), in GiB, walked\n"
        "over the simulated iteration; the peak stage and phase named. Exit 3 when a stage does not fit.\n"
        "Same inputs as `trainsim run` (no options: the embedded default).\n\noptions");
    std::string svg_file, html_file;
    long long max_events_arg = static_cast<long long>(kDefaultMaxEvents);
    InputOptions in_opts;
    desc.add_options()("help,h", "this help")("json", "print JSON on stdout instead of the tables")(
        "what-if",
        "also simulate the standard remedies (recompute, ZeRO-1/2/3, micro-batch halved, 8-bit Adam, "
        "CPU offload): memory saved and step-time cost of each")(
        "timeline",
        "with --json: every memory sample of every stage (time, phase, bytes by pile); at most 2,097,152 "
        "samples (limits.hpp)")("svg", po::value(&svg_file),
                                "write a chart of the per-phase peak by pile to FILE (self-contained SVG)")(
        "html", po::value(&html_file),
        "write a self-contained HTML page to FILE: the memory chart, and when simulated the headline "
        "figures, step breakdown per stage and pipeline timeline (inline SVG; "
        "include/trainsim/html_report.hpp)")(
        "max-events", po::value(&max_events_arg)->default_value(static_cast<long long>(kDefaultMaxEvents)),
        "bound on the events of each simulation this command runs (the layout's; with --what-if, each "
        "remedy's); 0: none. Past it the memory is still complete (it is walked over the schedule's order, "
        "which needs no simulation) but has no times, and the step time is not given");
    add_input_options(desc, in_opts);
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "memory")) return kExitOk;
    check_output_option(vm, "svg", svg_file, "memory");
    check_output_option(vm, "html", html_file, "memory");
    check_distinct_outputs({{"--svg", svg_file}, {"--html", html_file}}, input_files(in_opts));
    if (max_events_arg < 0)
        throw InputError(fmt::format("memory: --max-events {} must be 0 (no bound) or more", max_events_arg));
    if (vm.count("timeline") && !vm.count("json"))  // was ignored: the tables have no timeline
        throw InputError("memory: --timeline needs --json");
    const auto max_events = static_cast<std::uint64_t>(max_events_arg);
    const Inputs in = resolve_inputs(in_opts);
    std::optional<PipelineTimeline> timeline;
    if (!html_file.empty()) timeline.emplace(in.layout);
    const MemoryStudy study =
        study_memory(in, max_events, vm.count("what-if") > 0,
                     timeline ? std::vector<ExecutorObserver*>{&*timeline} : std::vector<ExecutorObserver*>{},
                     static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    const MemoryReport& mem = study.memory();
    if (vm.count("json") && vm.count("timeline")) check_timeline_samples(in, mem);
    const std::string& gpu_name = study.gpu_name;
    const std::string title = layout_title(in, gpu_name);
    const std::string not_simulated = fmt::format(
        "(times not simulated: the iteration passed --max-events {} events; the memory is walked over the "
        "schedule's order, which needs no simulation)\n",
        max_events);
    if (!svg_file.empty()) write_file_atomically(svg_file, memory_svg(mem, title));
    if (!html_file.empty())
        write_file_atomically(html_file, memory_html(mem, study.simulated ? &study.result.report : nullptr,
                                                     study.simulated ? &*timeline : nullptr, title));
    if (vm.count("json")) {
        const nlohmann::json j = memory_document(in, study, vm.count("timeline") > 0);
        std::cout << j.dump(2) << "\n";
    } else {
        std::cout << title << "\n" << format_memory_text(mem);
        if (!study.simulated) std::cout << not_simulated;
        if (study.what_if) std::cout << what_if_text(*study.what_if);
    }
    if (!mem.fits()) {
        std::cerr << "trainsim: " << mem.oom_message() << "\n";
        return kExitOutOfMemory;
    }
    return kExitOk;
}

}  // namespace trainsim::cli
