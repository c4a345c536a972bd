#include "commands.hpp"
#include "trainsim/errors.hpp"
namespace trainsim::cli {
int validate_command(const std::vector<std::string>&) { throw InputError("validate: not yet"); }
}
