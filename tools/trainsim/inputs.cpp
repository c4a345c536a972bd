#include "inputs.hpp"

#include <fmt/format.h>

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

std::vector<NamedFile> input_files(const InputOptions& o) {
    return {{"--topology", o.topology_file},
            {"--workload", o.workload_file},
            {"--from-runs", o.runs_file},
            {"--calibration", o.calibration_file},
            {"--profile", o.profile_file}};
}

std::string layout_title(const Inputs& in, const std::string& gpu_name) {
    return fmt::format("{} on {} x {}: TP {} x PP {} x DP {}{}", in.name, in.layout.gpus(), gpu_name,
                       in.layout.tp, in.layout.pp, in.layout.dp,
                       in.layout.cp > 1 ? fmt::format(" x CP {}", in.layout.cp) : "");
}

}  // namespace trainsim::cli
