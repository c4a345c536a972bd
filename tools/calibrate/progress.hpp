// trainsim-calibrate's progress line on stderr: on a terminal one line rewritten in place ("[gemm 12/412]
// bf16 4096x6144x2048"); otherwise (a log file) a line when a section starts and every tenth of it.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>

namespace trainsim::calibrate {

class Progress {
  public:
    Progress(std::ostream& os, bool terminal) : os_(os), terminal_(terminal) {}
    /// Starts a section of `total` items.
    void section(const std::string& name, std::size_t total);
    /// The next item of the section begins.
    void step(const std::string& what);
    /// A full line (a skipped item, a note), not overwritten.
    void note(const std::string& line);
    /// Ends the section's line.
    void done();

  private:
    void clear_line();
    std::ostream& os_;
    bool terminal_;
    bool line_open_ = false;
    std::string name_;
    std::size_t total_ = 0, index_ = 0;
};

}  // namespace trainsim::calibrate
