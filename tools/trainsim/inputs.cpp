#include "inputs.hpp"

#include <fmt/format.h>

#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/measured_runs.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

void add_input_options(po::options_description& desc, InputOptions& o) {
    desc.add_options()("topology", po::value(&o.topology_file),
                       "cluster description, JSON (topologies/*.json); quantities carry units")(
        "workload", po::value(&o.workload_file), "model and training layout, JSON (workloads/*.json)")(
        "set", po::value(&o.sets)->composing(),
        "override a field: layout.tp=4, model.layers=48, topology.nodes=16, "
        "topology.scale_out.nic_rate=400Gbps (repeatable; `trainsim schema` lists the fields, their units "
        "and "
        "ranges)")(
        "from-runs", po::value(&o.runs_file),
        "simulate one run of a measured-runs file (format trainsim-measured-runs/1) instead; needs --id")(
        "id", po::value(&o.run_id), "the run id in the --from-runs file")(
        "calibration", po::value(&o.calibration_file),
        "GPU model constants measured or fitted (format trainsim-calibration/1), applied over the catalog")(
        "profile", po::value(&o.profile_file), kProfileHelp);
}

std::shared_ptr<const Profile> load_profile(const std::string& file, const std::string& gpu,
                                            const std::string& cluster_label) {
    auto p = std::make_shared<const Profile>(read_profile(file));
    if (p->gpu != gpu)
        throw InputError(fmt::format("{}: the profile describes GPU {}, but the cluster of {} has GPU {}",
                                     file, p->gpu, cluster_label, gpu));
    return p;
}

Inputs resolve_inputs(const InputOptions& o) {
    std::optional<Calibration> calibration;
    if (!o.calibration_file.empty())
        calibration = parse_calibration(read_json_file(o.calibration_file), o.calibration_file);
    Inputs in;
    if (!o.runs_file.empty() || !o.run_id.empty()) {
        if (o.runs_file.empty() || o.run_id.empty()) throw InputError("--from-runs and --id go together");
        if (!o.topology_file.empty() || !o.workload_file.empty() || !o.sets.empty())
            throw InputError("--from-runs cannot be combined with --topology, --workload or --set");
        const auto parsed = parse_measured_runs(read_json_file(o.runs_file), o.runs_file);
        const MeasuredRun* run = nullptr;
        for (const auto& r : parsed.runs)
            if (r.id == o.run_id) run = &r;
        if (!run) throw InputError(fmt::format("{}: --id \"{}\" names no run", o.runs_file, o.run_id));
        if (run->error) throw InputError(*run->error);
        if (run->unsupported)
            throw InputError(fmt::format("{}: run \"{}\" uses {}, which trainsim does not simulate yet",
                                         o.runs_file, o.run_id, *run->unsupported));
        in.topology = run->topology;
        in.model = run->model;
        in.layout = run->layout;
        in.name = run->id;
        in.label = fmt::format("{}: run \"{}\"", o.runs_file, o.run_id);
        if (run->step_time_s)
            in.measured = Measured{fmt::format("{} ({})", run->id, run->source), *run->step_time_s, 0, ""};
    } else {
        nlohmann::json topo_json =
            o.topology_file.empty() ? default_topology_json() : read_json_file(o.topology_file);
        nlohmann::json work_json =
            o.workload_file.empty() ? default_workload_json() : read_json_file(o.workload_file);
        for (const auto& s : o.sets)
            apply_override(topo_json, work_json, s);
        const std::string topo_name = o.topology_file.empty() ? "embedded dgx-a100" : o.topology_file;
        in.label = o.workload_file.empty() ? "embedded gpt3-175b" : o.workload_file;
        in.topology = parse_topology(topo_json, topo_name);
        const Workload work = parse_workload(work_json, in.label);
        in.model = work.model;
        in.layout = work.layout;
        in.name = work.name;
        if (work.measured && o.sets.empty()) in.measured = work.measured;
    }
    if (calibration) apply_calibration(*calibration, in.topology);
    if (!o.profile_file.empty())
        in.topology.profile = load_profile(o.profile_file, in.topology.gpu,
                                           o.topology_file.empty() ? in.label : o.topology_file);
    return in;
}

}  // namespace trainsim::cli
