#include <cstdio>
#include <fstream>

#include <fmt/format.h>

#include "commands.hpp"
#include "trainsim/errors.hpp"

namespace trainsim::cli {

void write_file_atomically(const std::string& path, const std::string& text) {
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw InputError(fmt::format("{}: cannot write the file", path));
        out << text;
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            throw InputError(fmt::format("{}: writing failed", path));
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw InputError(fmt::format("{}: cannot rename the temporary file into place", path));
    }
}

}  // namespace trainsim::cli
