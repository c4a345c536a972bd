// The inputs of a simulation resolved from files or JSON text (include/trainsim/frontend.hpp).
#include <initializer_list>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/calibration.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/frontend.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/simulate.hpp"

namespace trainsim {

namespace {

/// The inputs of one run of a measured-runs file.
Inputs run_inputs(const InputSources& o) {
    // The file, or the text the Python module's simulate(runs=dict or JSON string) gives.
    const std::string runs_name = o.runs_file.empty() && o.runs_text ? o.runs_text->name : o.runs_file;
    if (runs_name.empty())
        throw InputError("--id needs --from-runs FILE (the measured-runs file it names a run of)");
    if (o.run_id.empty())
        throw InputError(fmt::format(
            "--from-runs {}: --id ID is missing or empty (the id of one of its runs)", runs_name));
    if (!o.topology_file.empty() || !o.workload_file.empty() || o.topology_text || o.workload_text ||
        !o.sets.empty())
        throw InputError("--from-runs cannot be combined with --topology, --workload or --set");
    const auto parsed = parse_measured_runs(
        o.runs_file.empty() ? parse_json_text(o.runs_text->text, runs_name) : read_json_file(o.runs_file),
        runs_name);
    const MeasuredRun* run = nullptr;
    for (const auto& r : parsed.runs)
        if (r.id == o.run_id) run = &r;
    if (!run) {
        for (const auto& c : parsed.collectives)
            if (c.id == o.run_id)
                throw InputError(
                    fmt::format("{}: --id \"{}\" names a collective row, not a training run "
                                "(`trainsim validate` simulates it)",
                                runs_name, clip_for_message(o.run_id)));
        throw InputError(fmt::format("{}: --id \"{}\" names no run", runs_name, clip_for_message(o.run_id)));
    }
    if (run->error) throw InputError(*run->error);
    if (run->unsupported)
        throw InputError(fmt::format("{}: run \"{}\" uses {}, which trainsim does not simulate yet",
                                     runs_name, clip_for_message(o.run_id), *run->unsupported));
    Inputs in;
    in.topology = run->topology;
    in.model = run->model;
    in.layout = run->layout;
    in.name = run->id;
    in.label = fmt::format("{}: run \"{}\"", runs_name, clip_for_message(o.run_id));
    if (run->step_time_s)
        in.measured = Measured{fmt::format("{} ({})", run->id, run->source), *run->step_time_s, 0, ""};
    return in;
}

/// One JSON input: the file, else the text, else the embedded default; `name` names it in messages.
nlohmann::json read_input(const std::string& file, const std::optional<JsonText>& text,
                          nlohmann::json (*embedded)(), const std::string& default_name, std::string& name) {
    if (!file.empty()) {
        name = file;
        return read_json_file(file);
    }
    if (text) {
        name = text->name;
        return parse_json_text(text->text, text->name);
    }
    name = default_name;
    return embedded();
}

/// Throws `message` (a check of the workload `in.label` failed) blamed on the --set that gave a field it
/// names (blame_set), else on the last --set of one of `topology_keys` (a size or GPU of the topology the
/// message gives by value), else on the file.
[[noreturn]] void throw_blaming_sets(const Inputs& in, const std::vector<std::string>& sets,
                                     const std::string& message,
                                     std::initializer_list<const char*> topology_keys) {
    const InputError e(fmt::format("{}: {}", in.label, message));
    blame_set(e, sets, in.label);
    for (auto it = sets.rbegin(); it != sets.rend(); ++it)
        for (const char* key : topology_keys)
            if (it->rfind(std::string(key) + "=", 0) == 0)
                throw InputError(
                    fmt::format("{} with --set \"{}\": {}", in.label, clip_for_message(*it), message));
    throw e;
}

/// A layout a --set made invalid (a pipeline_layout, a tp the heads do not divide, a GPU without the
/// precision) is blamed on the --set that gave the field, not on the file: checked here, before the
/// simulation would.
void check_set_layout(const Inputs& in, const std::vector<std::string>& sets) {
    const auto violations = layout_violations(in.model, in.layout, in.topology.gpus());
    if (!violations.empty()) {
        const LayoutViolation& first = violations.front();
        // The cluster's GPUs, which the message gives by value, from a --set of the topology.
        if (first.check == LayoutCheck::gpu_count)
            throw_blaming_sets(in, sets, first.message, {"topology.nodes", "topology.gpus_per_node"});
        throw_blaming_sets(in, sets, first.message, {});
    }
    // The layer passes a fabric whose TP groups share their ports admits (`--set layout.dp=65536` on
    // pcie-h100): named with the --set, as the layout checks above.
    try {
        check_shared_tp_port_work(in.topology, in.model, in.layout);
    } catch (const InputError& e) {
        throw_blaming_sets(in, sets, e.what(), {"topology.scale_up.kind", "topology.scale_out.topology"});
    }
    // The precision or FP8 recipe the GPU lacks (`--set topology.gpu=A100-SXM4-80GB` under an FP8 workload).
    try {
        (void)run_compute_model(in.topology, topology_gpu(in.topology), in.layout);
    } catch (const InputError& e) {
        throw_blaming_sets(in, sets, e.what(), {"topology.gpu"});
    }
}

}  // namespace

std::shared_ptr<const Profile> load_profile(const std::string& file, const std::string& gpu,
                                            const std::string& cluster_label) {
    auto p = std::make_shared<const Profile>(read_profile(file));
    if (p->gpu != gpu)
        throw InputError(fmt::format("{}: the profile describes GPU {}, but the cluster of {} has GPU {}",
                                     file, p->gpu, cluster_label, gpu));
    return p;
}

Inputs resolve_inputs(const InputSources& o) {
    std::optional<Calibration> calibration;
    if (!o.calibration_file.empty())
        calibration = parse_calibration(read_json_file(o.calibration_file), o.calibration_file);
    Inputs in;
    if (!o.runs_file.empty() || o.runs_text || !o.run_id.empty()) {
        in = run_inputs(o);
    } else {
        std::string topo_name;
        nlohmann::json topo_json = read_input(o.topology_file, o.topology_text, default_topology_json,
                                              "embedded dgx-a100", topo_name);
        nlohmann::json work_json = read_input(o.workload_file, o.workload_text, default_workload_json,
                                              "embedded gpt3-175b", in.label);
        for (const auto& s : o.sets)
            apply_override(topo_json, work_json, s);
        in.topology =
            parse_blaming_sets(o.sets, topo_name, [&] { return parse_topology(topo_json, topo_name); });
        const Workload work =
            parse_blaming_sets(o.sets, in.label, [&] { return parse_workload(work_json, in.label); });
        in.model = work.model;
        in.layout = work.layout;
        in.name = work.name;
        if (work.measured && o.sets.empty()) in.measured = work.measured;
        if (!o.sets.empty() && o.check_set_layout) check_set_layout(in, o.sets);
    }
    const std::string cluster_label = !o.topology_file.empty() ? o.topology_file
                                      : o.topology_text        ? o.topology_text->name
                                                               : in.label;
    if (calibration) {
        check_calibration_gpu(*calibration, o.calibration_file, in.topology.gpu, cluster_label);
        apply_calibration(*calibration, in.topology);
        // Its constants change every kernel time: a duration past the simulated range that they make (a
        // kernel_overhead_s of 1 s) blamed the workload alone (round 12).
        in.label += fmt::format(" with --calibration {}", o.calibration_file);
    }
    if (!o.profile_file.empty())
        in.topology.profile = load_profile(o.profile_file, in.topology.gpu, cluster_label);
    return in;
}

void refuse_swept_sets(const std::vector<std::string>& sets) {
    for (const std::string& set : sets) {
        const std::string key = set.substr(0, set.find('='));
        for (const char* swept :
             {"tp", "dp", "cp", "micro_batch", "recompute", "sequence_parallel", "distributed_optimizer"})
            if (key == std::string("layout.") + swept)
                throw InputError(fmt::format(
                    "sweep: --set \"{}\": the sweep sets {} at each point of its grid, so the value would "
                    "be ignored; pin it with --fix {}=VALUE (or list values with --vary)",
                    clip_for_message(set), key, swept));
        if (key == "layout.zero_stage")
            throw InputError(
                fmt::format("sweep: --set \"{}\": the sweep's layouts are all ZeRO stage 0 (it "
                            "sweeps distributed_optimizer), so the value would be ignored",
                            clip_for_message(set)));
    }
}

SimulationResult simulate_inputs(const Inputs& in, const SimulationOptions& options) {
    SimulationResult res =
        with_label(in, [&] { return simulate(in.topology, in.model, in.layout, in.name, options); });
    res.report.topology_name = in.topology.name;
    return res;
}

nlohmann::json run_json(const Inputs& in, const Report& report) {
    return to_json(report, in.measured ? &*in.measured : nullptr);
}

}  // namespace trainsim
