// trainsim schema: the input files' fields (docs/inputs.md), generated from the schemas.
#include <iostream>

#include "commands.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

int schema_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim schema [--markdown]\n\n"
        "Every field of the input files (topology; workload model and layout) with its type, unit, default,\n"
        "range or choices and meaning, as Markdown: docs/inputs.md (tools/scripts/update_inputs_doc.sh).\n\n"
        "options");
    desc.add_options()("help,h", "this help")("markdown", "print docs/inputs.md (the default)");
    po::variables_map vm;
    if (!parse_input_command(args, desc, vm, "schema")) return kExitOk;
    std::cout << inputs_markdown();
    return kExitOk;
}

}  // namespace trainsim::cli
