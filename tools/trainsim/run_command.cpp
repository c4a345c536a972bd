// `trainsim run`: one iteration of one configuration, with the full report.
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/measured_runs.hpp"
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
    std::string topology_file, workload_file, trace_file, trace_ranks = "first-replica", runs_file, run_id;
    std::string calibration_file;
    std::vector<std::string> sets;
    desc.add_options()("help,h", "this help")(
        "topology", po::value(&topology_file),
        "cluster description, JSON (topologies/*.json); quantities carry units")(
        "workload", po::value(&workload_file), "model and training layout, JSON (workloads/*.json)")(
        "set", po::value(&sets)->composing(),
        "override a field: layout.tp=4, model.layers=48, topology.nodes=16, "
        "topology.scale_out.nic_rate=400Gbps "
        "(repeatable)")("json", "print the report as JSON on stdout instead of the table")(
        "trace", po::value(&trace_file),
        "write a Chrome trace / Perfetto JSON timeline (times in microseconds) to FILE")(
        "trace-ranks", po::value(&trace_ranks),
        "which GPUs the trace holds: first-replica (DP rank 0: every TP and PP rank; default) or all")(
        "from-runs", po::value(&runs_file),
        "simulate one run of a measured-runs file (format trainsim-measured-runs/1) instead; needs --id")(
        "id", po::value(&run_id), "the run id in the --from-runs file")(
        "calibration", po::value(&calibration_file),
        "GPU model constants measured or fitted (format trainsim-calibration/1), applied over the catalog");
    po::variables_map vm;
    try {
        const auto parsed = po::command_line_parser(args).options(desc).run();
        // boost drops words that are not options; refuse them (`trainsim run gpt3.json` would run the
        // default).
        for (const auto& o : parsed.options)
            if (o.position_key >= 0 && !o.original_tokens.empty())
                throw InputError(
                    fmt::format("run: unexpected argument \"{}\" (files are given with --topology FILE "
                                "and --workload FILE)",
                                o.original_tokens.front()));
        po::store(parsed, vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw InputError(fmt::format("run: {}", e.what()));
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return kExitOk;
    }
    if (trace_ranks != "first-replica" && trace_ranks != "all")
        throw InputError(fmt::format("--trace-ranks = \"{}\" is not one of first-replica, all", trace_ranks));

    std::optional<Calibration> calibration;
    if (!calibration_file.empty())
        calibration = parse_calibration(read_json_file(calibration_file), calibration_file);
    const TraceRanks trace_sel = trace_file.empty()
                                     ? TraceRanks::none
                                     : (trace_ranks == "all" ? TraceRanks::all : TraceRanks::first_replica);
    if (!runs_file.empty() || !run_id.empty()) {
        if (runs_file.empty() || run_id.empty()) throw InputError("--from-runs and --id go together");
        if (!topology_file.empty() || !workload_file.empty() || !sets.empty())
            throw InputError("--from-runs cannot be combined with --topology, --workload or --set");
        const auto parsed = parse_measured_runs(read_json_file(runs_file), runs_file);
        const MeasuredRun* run = nullptr;
        for (const auto& r : parsed.runs)
            if (r.id == run_id) run = &r;
        if (!run) throw InputError(fmt::format("{}: --id \"{}\" names no run", runs_file, run_id));
        if (run->unsupported)
            throw InputError(fmt::format("{}: run \"{}\" uses {}, which trainsim does not simulate yet",
                                         runs_file, run_id, *run->unsupported));
        TopologySpec run_topology = run->topology;
        if (calibration) apply_calibration(*calibration, run_topology);
        SimulationResult res;
        try {
            res = simulate(run_topology, run->model, run->layout, run->id, trace_sel);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: run \"{}\": {}", runs_file, run_id, e.what()));
        }
        Measured meas{fmt::format("{} ({})", run->id, run->source), run->step_time_s, 0, ""};
        if (!trace_file.empty())
            write_file_atomically(trace_file, chrome_trace(res.execution, run->layout).dump() + "\n");
        if (vm.count("json"))
            std::cout << to_json(res.report, &meas).dump(2) << "\n";
        else
            std::cout << format_text(res.report, &meas);
        return kExitOk;
    }

    nlohmann::json topo_json =
        topology_file.empty() ? default_topology_json() : read_json_file(topology_file);
    nlohmann::json work_json =
        workload_file.empty() ? default_workload_json() : read_json_file(workload_file);
    for (const auto& s : sets)
        apply_override(topo_json, work_json, s);
    const std::string topo_name = topology_file.empty() ? "embedded dgx-a100" : topology_file;
    const std::string work_name = workload_file.empty() ? "embedded gpt3-175b" : workload_file;
    TopologySpec topo = parse_topology(topo_json, topo_name);
    if (calibration) apply_calibration(*calibration, topo);
    const Workload work = parse_workload(work_json, work_name);

    SimulationResult res;
    try {
        res = simulate(topo, work.model, work.layout, work.name, trace_sel);
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", work_name, e.what()));
    }
    res.report.topology_name = topo.name;
    const Measured* measured = work.measured && sets.empty() ? &*work.measured : nullptr;
    // The trace first: if it cannot be written, the run fails (exit 2) with nothing on stdout.
    if (!trace_file.empty())
        write_file_atomically(trace_file, chrome_trace(res.execution, work.layout).dump() + "\n");
    if (vm.count("json"))
        std::cout << to_json(res.report, measured).dump(2) << "\n";
    else
        std::cout << format_text(res.report, measured);
    return kExitOk;
}

}  // namespace trainsim::cli
