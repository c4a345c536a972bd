// `trainsim memory`: per stage and phase, the memory piles of one iteration and their peak; --what-if the
// standard remedies, each simulated; --svg a chart; --json everything.
#include <iostream>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "inputs.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/units.hpp"
#include "trainsim/what_if.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

std::string what_if_text(const WhatIf& w) {
    std::string o =
        fmt::format("\nwhat if (each remedy simulated; baseline peak {:.2f} GiB, step {:.3f} s)\n",
                    w.baseline_peak_bytes / kGiB, w.baseline_step_time_s);
    o += fmt::format("  {:<44} {:>10} {:>10} {:>10} {:>10}  {}\n", "remedy", "peak GiB", "saved GiB",
                     "step s", "cost s", "");
    for (const auto& r : w.remedies) {
        if (!r.applicable) {
            o += fmt::format("  {:<44} not applicable: {}\n", r.name, r.reason);
            continue;
        }
        o += fmt::format("  {:<44} {:>10.2f} {:>10.2f} {:>10.3f} {:>+10.3f}  {}{}\n", r.name,
                         r.peak_bytes / kGiB, r.saved_bytes / kGiB, r.step_time_s, r.step_time_delta_s,
                         r.fits ? "fits" : "DOES NOT FIT", fmt::format(" (peak {})", r.peak_where));
    }
    return o;
}

nlohmann::json what_if_json(const WhatIf& w) {
    nlohmann::json j;
    j["baseline"] = {{"peak_bytes", w.baseline_peak_bytes},
                     {"step_time_s", w.baseline_step_time_s},
                     {"fits", w.baseline_fits}};
    j["remedies"] = nlohmann::json::array();
    for (const auto& r : w.remedies) {
        nlohmann::json x = {{"name", r.name}, {"applicable", r.applicable}};
        if (r.applicable) {
            x["peak_bytes"] = r.peak_bytes;
            x["saved_bytes"] = r.saved_bytes;
            x["step_time_s"] = r.step_time_s;
            x["step_time_delta_s"] = r.step_time_delta_s;
            x["fits"] = r.fits;
            x["peak_at"] = r.peak_where;
        } else {
            x["reason"] = r.reason;
        }
        j["remedies"].push_back(x);
    }
    return j;
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
    std::string svg_file;
    InputOptions in_opts;
    desc.add_options()("help,h", "this help")("json", "print JSON on stdout instead of the tables")(
        "what-if",
        "also simulate the standard remedies (recompute, ZeRO-1/2/3, micro-batch halved, 8-bit Adam, "
        "CPU offload): memory saved and step-time cost of each")(
        "timeline", "with --json: every memory sample of every stage (time, phase, bytes by pile)")(
        "svg", po::value(&svg_file),
        "write a chart of the per-phase peak by pile to FILE (self-contained SVG)");
    add_input_options(desc, in_opts);
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "memory")) return kExitOk;
    if (!svg_file.empty()) check_output_path(svg_file);
    const Inputs in = resolve_inputs(in_opts);
    SimulationResult res;
    WhatIf what_if;
    try {
        res = simulate(in.topology, in.model, in.layout, in.name, with_timeline());
        if (vm.count("what-if")) what_if = memory_what_if(in.topology, in.model, in.layout, in.name);
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", in.label, e.what()));
    }
    const MemoryReport& mem = res.report.memory;
    const std::string title = fmt::format("{} on {} x {}: TP {} x PP {} x DP {}{}", in.name, res.report.gpus,
                                          res.report.gpu_name, in.layout.tp, in.layout.pp, in.layout.dp,
                                          in.layout.cp > 1 ? fmt::format(" x CP {}", in.layout.cp) : "");
    if (!svg_file.empty()) write_file_atomically(svg_file, memory_svg(mem, title));
    if (vm.count("json")) {
        nlohmann::json j;
        j["workload"] = in.name;
        j["gpu"] = res.report.gpu_name;
        j["gpus"] = res.report.gpus;
        j["step_time_s"] = res.report.step_time_s;
        j["memory"] = memory_json(mem, vm.count("timeline") > 0);
        if (vm.count("what-if")) j["what_if"] = what_if_json(what_if);
        std::cout << j.dump(2) << "\n";
    } else {
        std::cout << title << "\n" << format_memory_text(mem);
        if (vm.count("what-if")) std::cout << what_if_text(what_if);
    }
    if (!mem.fits()) {
        std::cerr << "trainsim: " << mem.oom_message() << "\n";
        return kExitOutOfMemory;
    }
    return kExitOk;
}

}  // namespace trainsim::cli
