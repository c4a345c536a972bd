// Strong types for the quantities trainsim works with, and the parser for quantities written with their unit
// in input files ("300GBps", "200Gbps", "2us", "80GiB").
//
// Time: simulated time is an integer number of picoseconds held in a signed 64-bit integer. Range: ±9.22e18
// ps, i.e. ±106 days of simulated time; one training iteration is at most minutes. Integer time makes event
// order exact (no rounding ties), as in gem5 (Tick) and htsim (simtime_picosec).
#pragma once

#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

namespace trainsim {

/// Simulated time, integer picoseconds. Overflow is impossible by construction: conversions from seconds
/// refuse durations beyond kMaxSeconds and sums, differences and products are checked; both throw InputError
/// ("a simulated time ... is beyond ..."), since only an input (a huge size, a tiny bandwidth or efficiency)
/// can take a training step there. Commands prefix the message with the input file.
class Time {
  public:
    /// Longest duration one conversion from seconds accepts: 10^6 s (11.6 days; a step takes minutes).
    static constexpr double kMaxSeconds = 1e6;
    constexpr Time() = default;
    static constexpr Time ps(std::int64_t v) { return Time(v); }
    /// From seconds (double), rounded to the nearest picosecond. Throws InputError beyond ±kMaxSeconds or
    /// NaN.
    static Time seconds(double s);
    /// From seconds (double), rounded up to the next picosecond. Throws InputError as seconds() does.
    static Time seconds_up(double s);
    static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }
    constexpr std::int64_t picoseconds() const { return ps_; }
    constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }
    constexpr double to_us() const { return static_cast<double>(ps_) * 1e-6; }
    constexpr Time operator+(Time o) const {
        std::int64_t r = 0;
        if (__builtin_add_overflow(ps_, o.ps_, &r)) overflow();
        return Time(r);
    }
    constexpr Time operator-(Time o) const {
        std::int64_t r = 0;
        if (__builtin_sub_overflow(ps_, o.ps_, &r)) overflow();
        return Time(r);
    }
    constexpr Time& operator+=(Time o) { return *this = *this + o; }
    /// This duration `n` times (checked like +).
    constexpr Time times(std::int64_t n) const {
        std::int64_t r = 0;
        if (__builtin_mul_overflow(ps_, n, &r)) overflow();
        return Time(r);
    }
    constexpr auto operator<=>(const Time&) const = default;

  private:
    constexpr explicit Time(std::int64_t v) : ps_(v) {}
    /// Throws InputError: a simulated time passed the 64-bit picosecond range.
    [[noreturn]] static void overflow();
    std::int64_t ps_ = 0;
};

/// Bandwidth in bytes per second (double: rates are shares of capacities, not counted quantities).
struct Bandwidth {
    double bytes_per_s = 0.0;
    static constexpr Bandwidth GBps(double v) { return {v * 1e9}; }
    static constexpr Bandwidth Gbps(double v) { return {v * 1e9 / 8.0}; }
    constexpr auto operator<=>(const Bandwidth&) const = default;
};

/// The dimension a quantity string must have.
enum class Dimension { time, bandwidth, bytes };

/// Parses a number followed by a unit: time `ps ns us ms s`; bandwidth `Bps KBps MBps GBps TBps PBps`
/// (bytes/s, decimal) and `bps Kbps Mbps Gbps Tbps Pbps` (bits/s), each also written with a slash (`GB/s`,
/// `Gb/s`; the schema's SI unit `B/s`); bytes `B KB MB GB TB PB` (decimal) `KiB MiB GiB TiB PiB` (binary).
/// Returns the value in the SI base (seconds, bytes/s, bytes). Throws InputError (with `where` as the field
/// path) when the unit is missing or does not match `dim`, or when the number is negative, zero where
/// `allow_zero` is false, or not finite.
double parse_quantity(std::string_view text, Dimension dim, const std::string& where,
                      bool allow_zero = false);

Time parse_time(std::string_view text, const std::string& where);
Bandwidth parse_bandwidth(std::string_view text, const std::string& where);
double parse_bytes(std::string_view text, const std::string& where);

/// Parses a count: a finite decimal number of at least 1 with an optional suffix K (1e3), M (1e6), B (1e9) or
/// T (1e12), e.g. "15T", "2.5e12", "300B" (no hexadecimal). Throws InputError naming `where` and the value
/// when it is not one.
double parse_count(std::string_view text, const std::string& where);

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kSecondsPerDay = 86400.0;

}  // namespace trainsim
