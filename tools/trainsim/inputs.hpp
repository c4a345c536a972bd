// The inputs `run`, `memory` and `goodput` share: a topology and a workload (or the embedded default) with
// --set overrides and a calibration file, or one run of a measured-runs file (--from-runs FILE --id ID).
// Resolved by the library (include/trainsim/frontend.hpp, shared with the Python module); here the
// command-line options.
#pragma once

#include <boost/program_options.hpp>

#include "trainsim/frontend.hpp"
#include "trainsim/output_file.hpp"

namespace trainsim::cli {

using InputOptions = InputSources;
using trainsim::Inputs;
using trainsim::load_profile;
using trainsim::resolve_inputs;

/// Help text of --profile.
inline constexpr const char* kProfileHelp =
    "measured kernel times of the cluster's GPU type (format trainsim-profile/1, e.g. "
    "topologies/profiles/h100-sxm5-80gb.json): GEMMs, attention and memory-bound kernels are timed from it "
    "where it measured something close enough, the rest by the analytic model";

/// Adds --topology, --workload, --set, --from-runs, --id, --calibration and --profile to `desc`.
void add_input_options(boost::program_options::options_description& desc, InputOptions& o);
/// The files the input options name, with their options (for check_distinct_outputs).
std::vector<NamedFile> input_files(const InputOptions& o);

/// "NAME on GPUS x GPU: TP t x PP p x DP d[ x CP c]": the title of memory's table and of the --html pages.
std::string layout_title(const Inputs& in, const std::string& gpu_name);

}  // namespace trainsim::cli
