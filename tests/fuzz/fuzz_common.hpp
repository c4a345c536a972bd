// Shared by the libFuzzer harnesses (tests/fuzz, built with -DTRAINSIM_FUZZ=ON by tools/scripts/fuzz.sh): run
// a loader on the fuzzer's bytes; an InputError is the expected answer to bad input, anything else (another
// exception, a crash, a sanitizer report, a timeout) is a bug that libFuzzer reports with the input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "trainsim/errors.hpp"

namespace trainsim::fuzz {

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
    return {reinterpret_cast<const char*>(data), size};
}

/// Runs `f`; swallows InputError (a clean refusal); lets anything else escape to libFuzzer (std::terminate).
template <typename F>
void expect_clean(F&& f) {
    try {
        f();
    } catch (const InputError& e) {
        // A clean refusal must still be a printable message.
        (void)one_line(e.what());
    }
}

}  // namespace trainsim::fuzz
