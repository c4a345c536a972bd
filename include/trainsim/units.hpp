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

/// Simulated time, integer picoseconds. Arithmetic is plain int64; callers stay far from the range limit.
class Time {
  public:
    constexpr Time() = default;
    static constexpr Time ps(std::int64_t v) { return Time(v); }
    /// From seconds (double), rounded to the nearest picosecond.
    static Time seconds(double s);
    static constexpr Time max() { return Time(std::numeric_limits<std::int64_t>::max()); }
    constexpr std::int64_t picoseconds() const { return ps_; }
    constexpr double to_seconds() const { return static_cast<double>(ps_) * 1e-12; }
    constexpr double to_us() const { return static_cast<double>(ps_) * 1e-6; }
    constexpr Time operator+(Time o) const { return Time(ps_ + o.ps_); }
    constexpr Time operator-(Time o) const { return Time(ps_ - o.ps_); }
    constexpr Time& operator+=(Time o) {
        ps_ += o.ps_;
        return *this;
    }
    constexpr auto operator<=>(const Time&) const = default;

  private:
    constexpr explicit Time(std::int64_t v) : ps_(v) {}
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

/// Parses a number followed by a unit: time `ps ns us ms s`; bandwidth `Bps KBps MBps GBps TBps` (bytes/s,
/// decimal) and `bps Kbps Mbps Gbps Tbps` (bits/s); bytes `B KB MB GB TB` (decimal) `KiB MiB GiB TiB`
/// (binary). Returns the value in the SI base (seconds, bytes/s, bytes). Throws InputError (with `where` as
/// the field path) when the unit is missing or does not match `dim`, or when the number is negative, zero
/// where `allow_zero` is false, or not finite.
double parse_quantity(std::string_view text, Dimension dim, const std::string& where,
                      bool allow_zero = false);

Time parse_time(std::string_view text, const std::string& where);
Bandwidth parse_bandwidth(std::string_view text, const std::string& where);
double parse_bytes(std::string_view text, const std::string& where);

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

}  // namespace trainsim
