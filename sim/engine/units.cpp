#include "trainsim/units.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim {

namespace {
void check_seconds(double s) {
    if (!(std::fabs(s) <= Time::kMaxSeconds))
        throw InputError(fmt::format(
            "a simulated duration of {:.3g} s is beyond the supported {:.0e} s: an input (a huge model size "
            "or "
            "batch, a tiny bandwidth or efficiency) makes one operation or the step take that long",
            s, Time::kMaxSeconds));
}
}  // namespace

Time Time::seconds(double s) {
    check_seconds(s);
    return Time(static_cast<std::int64_t>(std::llround(s * 1e12)));
}

Time Time::seconds_up(double s) {
    check_seconds(s);
    return Time(static_cast<std::int64_t>(std::ceil(s * 1e12)));
}

void Time::overflow() {
    throw InputError(
        "a simulated time passed the supported range (2^63 ps, 106 days): an input (a huge model size or "
        "batch, "
        "a tiny bandwidth or efficiency) makes the step take that long");
}

namespace {

struct UnitScale {
    std::string_view name;
    double scale;
};

const std::vector<UnitScale>& units_of(Dimension dim) {
    static const std::vector<UnitScale> time = {
        {"ps", 1e-12}, {"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
    static const std::vector<UnitScale> bandwidth = {
        {"Bps", 1.0},      {"KBps", 1e3},     {"MBps", 1e6},      {"GBps", 1e9},
        {"TBps", 1e12},    {"PBps", 1e15},    {"bps", 1.0 / 8},   {"Kbps", 1e3 / 8},
        {"Mbps", 1e6 / 8}, {"Gbps", 1e9 / 8}, {"Tbps", 1e12 / 8}, {"Pbps", 1e15 / 8}};
    static const std::vector<UnitScale> bytes = {{"B", 1.0},
                                                 {"KB", 1e3},
                                                 {"MB", 1e6},
                                                 {"GB", 1e9},
                                                 {"TB", 1e12},
                                                 {"PB", 1e15},
                                                 {"KiB", 1024.0},
                                                 {"MiB", 1024.0 * 1024.0},
                                                 {"GiB", 1024.0 * 1024.0 * 1024.0},
                                                 {"TiB", 1024.0 * 1024.0 * 1024.0 * 1024.0},
                                                 {"PiB", 1024.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0}};
    switch (dim) {
        case Dimension::time:
            return time;
        case Dimension::bandwidth:
            return bandwidth;
        case Dimension::bytes:
            return bytes;
    }
    throw InternalError("unknown dimension");
}

std::string_view dimension_name(Dimension dim) {
    switch (dim) {
        case Dimension::time:
            return "a time (ps, ns, us, ms, s)";
        case Dimension::bandwidth:
            return "a bandwidth (e.g. GBps or GB/s for bytes/s, Gbps or Gb/s for bits/s)";
        case Dimension::bytes:
            return "a size (B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB)";
    }
    return "";
}

}  // namespace

double parse_quantity(std::string_view text, Dimension dim, const std::string& where, bool allow_zero) {
    const std::string s(text);
    std::size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == '-' ||
                            s[i] == '+' || s[i] == 'e' || s[i] == 'E')) {
        // Stop at an 'e'/'E' that begins a unit rather than an exponent (no such unit exists today, but be
        // strict).
        if ((s[i] == 'e' || s[i] == 'E') &&
            (i + 1 >= s.size() || !(std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '-')))
            break;
        ++i;
    }
    const std::string number = s.substr(0, i);
    std::string unit = s.substr(i);
    const std::string shown = clip_for_message(s);
    while (!unit.empty() && unit.front() == ' ')
        unit.erase(unit.begin());
    // A bandwidth written with a slash, as the schema and datasheets write it (`trainsim schema` prints
    // B/s): "GB/s" is "GBps", "Gb/s" is "Gbps".
    std::string name = unit;
    if (dim == Dimension::bandwidth && name.size() > 2 && name.compare(name.size() - 2, 2, "/s") == 0)
        name.replace(name.size() - 2, 2, "ps");
    if (number.empty())
        throw InputError(fmt::format("{} = \"{}\" is not a number with a unit; expected {}", where, shown,
                                     dimension_name(dim)));
    if (unit.empty())
        throw InputError(
            fmt::format("{} = \"{}\" has no unit; expected {}", where, shown, dimension_name(dim)));
    char* end = nullptr;
    const double value = std::strtod(number.c_str(), &end);
    if (end != number.c_str() + number.size() || !std::isfinite(value))
        throw InputError(fmt::format("{} = \"{}\" is not a number with a unit", where, shown));
    for (const auto& u : units_of(dim)) {
        if (u.name == name) {
            if (value < 0.0) throw InputError(fmt::format("{} = \"{}\" must not be negative", where, shown));
            if (value == 0.0 && !allow_zero)
                throw InputError(fmt::format("{} = \"{}\" must be positive", where, shown));
            return value * u.scale;
        }
    }
    throw InputError(fmt::format("{} = \"{}\" has unit \"{}\"; expected {}", where, shown,
                                 clip_for_message(unit), dimension_name(dim)));
}

Time parse_time(std::string_view text, const std::string& where) {
    return Time::seconds(parse_quantity(text, Dimension::time, where, /*allow_zero=*/true));
}

Bandwidth parse_bandwidth(std::string_view text, const std::string& where) {
    return Bandwidth{parse_quantity(text, Dimension::bandwidth, where)};
}

double parse_bytes(std::string_view text, const std::string& where) {
    return parse_quantity(text, Dimension::bytes, where);
}

double parse_count(std::string_view text, const std::string& where) {
    std::string number(text);
    double scale = 1.0;
    if (!number.empty()) {
        switch (number.back()) {
            case 'K':
                scale = 1e3;
                break;
            case 'M':
                scale = 1e6;
                break;
            case 'B':
                scale = 1e9;
                break;
            case 'T':
                scale = 1e12;
                break;
            default:
                break;
        }
        if (scale != 1.0) number.pop_back();
    }
    char* end = nullptr;
    const double value = number.empty() ? 0.0 : std::strtod(number.c_str(), &end);
    // strtod also reads hexadecimal ("0x10"), which a count never is; a count is at least 1.
    if (number.empty() || end != number.c_str() + number.size() || !std::isfinite(value * scale) ||
        !(value * scale >= 1) || std::isspace(static_cast<unsigned char>(number.front())) ||
        number.find_first_of("xX") != std::string::npos)
        throw InputError(fmt::format(
            "{} = \"{}\" is not a positive count: a number with an optional K, M, B or T suffix (e.g. 15T)",
            where, clip_for_message(std::string(text))));
    return value * scale;
}

}  // namespace trainsim
