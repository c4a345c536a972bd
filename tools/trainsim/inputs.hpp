// The inputs `run` and `memory` share: a topology and a workload (or the embedded default) with --set
// overrides and a calibration file, or one run of a measured-runs file (--from-runs FILE --id ID).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/report.hpp"

namespace trainsim::cli {

struct InputOptions {
    std::string topology_file, workload_file, runs_file, run_id, calibration_file;
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

/// Adds --topology, --workload, --set, --from-runs, --id and --calibration to `desc`.
void add_input_options(boost::program_options::options_description& desc, InputOptions& o);

/// Reads the files and applies overrides and calibration. Throws InputError naming the file and field.
Inputs resolve_inputs(const InputOptions& o);

}  // namespace trainsim::cli
