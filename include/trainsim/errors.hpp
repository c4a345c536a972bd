// The two kinds of failure: the user's input is wrong (InputError, exit code 2), or trainsim has a bug
// (InternalError, exit code 1). As gem5 separates fatal() from panic(); the library throws, only the CLI
// exits.
#pragma once

#include <stdexcept>
#include <string>

namespace trainsim {

/// The user's input is invalid. The message is one line naming the file (where known), the field and the
/// value.
class InputError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// An invariant of the simulator broke: a bug in trainsim, never the user's fault.
class InternalError : public std::logic_error {
  public:
    using std::logic_error::logic_error;
};

/// Exit codes of the `trainsim` CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitOutOfMemory = 3;
inline constexpr int kExitOutsideTolerance = 4;  ///< `validate`: a simulated run is outside the tolerance

}  // namespace trainsim
