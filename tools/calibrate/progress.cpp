#include "progress.hpp"

#include <fmt/format.h>

namespace trainsim::calibrate {

void Progress::clear_line() {
    if (terminal_ && line_open_) os_ << "\r\033[K";
    line_open_ = false;
}

void Progress::section(const std::string& name, std::size_t total) {
    done();
    name_ = name;
    total_ = total;
    index_ = 0;
    os_ << fmt::format("trainsim-calibrate: {} ({} items)\n", name, total);
    os_.flush();
}

void Progress::step(const std::string& what) {
    ++index_;
    const std::string line = fmt::format("[{} {}/{}] {}", name_, index_, total_, what);
    if (terminal_) {
        clear_line();
        os_ << line;
        line_open_ = true;
    } else {
        const std::size_t every = total_ >= 10 ? total_ / 10 : 1;
        if (index_ == 1 || index_ % every == 0 || index_ == total_) os_ << line << "\n";
    }
    os_.flush();
}

void Progress::note(const std::string& line) {
    clear_line();
    os_ << "trainsim-calibrate: " << line << "\n";
    os_.flush();
}

void Progress::done() {
    if (terminal_ && line_open_) {
        os_ << "\n";
        line_open_ = false;
    }
    os_.flush();
}

}  // namespace trainsim::calibrate
