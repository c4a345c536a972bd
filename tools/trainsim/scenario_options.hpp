// The what-if options shared by `trainsim run` and `trainsim sweep` (docs/what-if.md): --straggler, --jitter,
// --link (repeatable), --seed, --seeds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "trainsim/perturbation.hpp"

namespace trainsim::cli {

struct ScenarioOptions {
    std::vector<std::string> stragglers, jitters, links;
    std::uint64_t seed = kDefaultSeed;
    int seeds = 1;
};

/// Adds the options to `desc`; `study`: also --seeds.
void add_scenario_options(boost::program_options::options_description& desc, ScenarioOptions& o, bool study);

/// The perturbations of the parsed options. Throws InputError naming the option and the value.
Perturbations scenario_perturbations(const ScenarioOptions& o);

}  // namespace trainsim::cli
