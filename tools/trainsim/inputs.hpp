// The inputs `run` and `memory` share: a topology and a workload (or the embedded default) with --set
// overrides and a calibration file, or one run of a measured-runs file (--from-runs FILE --id ID).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/profile.hpp"
#include "trainsim/report.hpp"

namespace trainsim::cli {

struct InputOptions {
    std::string topology_file, workload_file, runs_file, run_id, calibration_file, profile_file;
    std::vector<std::string> sets;
};

/// What to simulate, resolved from the options.
struct Inputs {
    TopologySpec topology;
    ModelSpec model;
    Layout layout;
    std::string name;                  ///< workload name, or the run id
    std::string label;                 ///< prefix of error messages: the workload file, or "FILE: run "ID""
    std::optional<Measured> measured;  ///< printed beside the prediction (not with --set)
};

/// Reads the hardware profile `file` (trainsim-profile/1) for the clusters of GPU type `gpu`. Throws
/// InputError naming the file and both GPU types when the profile describes another GPU.
std::shared_ptr<const Profile> load_profile(const std::string& file, const std::string& gpu,
                                            const std::string& cluster_label);

/// Help text of --profile.
inline constexpr const char* kProfileHelp =
    "measured kernel times of the cluster's GPU type (format trainsim-profile/1, e.g. "
    "topologies/profiles/h100-sxm5-80gb.json): GEMMs, attention and memory-bound kernels are timed from it "
    "where it measured something close enough, the rest by the analytic model";

/// Adds --topology, --workload, --set, --from-runs, --id, --calibration and --profile to `desc`.
void add_input_options(boost::program_options::options_description& desc, InputOptions& o);

/// Reads the files and applies overrides and calibration. Throws InputError naming the file and field.
Inputs resolve_inputs(const InputOptions& o);

}  // namespace trainsim::cli
