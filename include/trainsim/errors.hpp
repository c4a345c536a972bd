// The two kinds of failure: the user's input is wrong (InputError, exit code 2), or trainsim has a bug
// (InternalError, exit code 1). As gem5 separates fatal() from panic(); the library throws, only the CLI
// exits.
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace trainsim {

/// The user's input is invalid. The message is one line naming the file (where known), the field and the
/// value.
class InputError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// A simulation passed its bound on events (ExecutionOptions::max_events) and was stopped: the input is
/// valid, but simulating it in full was not asked for at this cost. `events` is the bound.
class EventLimitExceeded : public InputError {
  public:
    EventLimitExceeded(const std::string& what, unsigned long long events)
        : InputError(what), events(events) {}
    unsigned long long events;
};

/// An invariant of the simulator broke: a bug in trainsim, never the user's fault.
class InternalError : public std::logic_error {
  public:
    using std::logic_error::logic_error;
};

/// The length in bytes (2 to 4) of the well-formed UTF-8 character that `s` starts with, or 0 when its first
/// byte (>= 0x80) starts none: RFC 3629, section 4 (no overlong forms, no surrogates, nothing past U+10FFFF).
inline std::size_t utf8_sequence_length(std::string_view s) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char c = byte(0);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f;
    }
    if (n == 0 || s.size() < n || byte(1) < lo || byte(1) > hi) return 0;
    for (std::size_t i = 2; i < n; ++i)
        if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
    return n;
}

/// `value` as echoed in an error message: control characters (NUL, newline, ...) written as \xHH or \n so the
/// message stays one line and is not cut at a NUL, and a value longer than `max_chars` cut there, with its
/// length told ("...(100000 characters)").
inline std::string clip_for_message(std::string_view value, std::size_t max_chars = 80) {
    std::string out;
    for (std::size_t i = 0; i < value.size() && i < max_chars; ++i) {
        const auto c = static_cast<unsigned char>(value[i]);
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else if (c >= 0x80) {
            // A whole UTF-8 character is kept (even one that crosses the cut); a byte that starts none (a
            // file in Latin-1, a broken byte) is escaped, so the message stays valid UTF-8 text.
            const std::size_t n = utf8_sequence_length(value.substr(i));
            if (n == 0) {
                out += fmt::format("\\x{:02x}", c);
            } else {
                out.append(value.substr(i, n));
                i += n - 1;
            }
        } else {
            out += static_cast<char>(c);
        }
    }
    if (value.size() > max_chars) out += fmt::format("...({} characters)", value.size());
    return out;
}

/// A whole error message made printable on one line: control characters escaped, any run of more than 100
/// characters without a space (a value echoed whole by a message that did not cut it: a long option value,
/// file name or key) cut at 80 with its length told, and at most 600 characters in all.
inline std::string one_line(std::string_view message) {
    std::string cut;
    std::size_t start = 0;
    while (start <= message.size()) {
        const std::size_t space = std::min(message.find(' ', start), message.size());
        const std::string_view word = message.substr(start, space - start);
        if (word.size() > 100) {
            // The punctuation ending the word is kept after the cut ("PATH: cannot open" lost its colon).
            std::size_t keep = word.size();
            while (keep > 0 && (word[keep - 1] == ':' || word[keep - 1] == ',' || word[keep - 1] == ';'))
                --keep;
            cut += clip_for_message(word.substr(0, keep)) + std::string(word.substr(keep));
        } else {
            cut += std::string(word);
        }
        if (space == message.size()) break;
        cut += ' ';
        start = space + 1;
    }
    return clip_for_message(cut, 600);
}

/// Exit codes of the `trainsim` CLI.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitOutOfMemory = 3;
inline constexpr int kExitOutsideTolerance = 4;  ///< `validate`: a simulated run is outside the tolerance

}  // namespace trainsim
