// Internal: a JSON object reader that names the file and field in every error and refuses unknown keys.
#pragma once

#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/errors.hpp"
#include "trainsim/units.hpp"

namespace trainsim::detail {

/// A JSON value as echoed in an error message: its JSON text cut at 80 characters (errors.hpp
/// clip_for_message).
inline std::string shown(const nlohmann::json& v) {
    return clip_for_message(v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

class StrictObject {
  public:
    StrictObject(const nlohmann::json& j, std::string file, std::string path)
        : j_(j), file_(std::move(file)), path_(std::move(path)) {
        if (!j_.is_object())
            fail(path_.empty() ? "the document" : path_, fmt::format("must be an object, got {}", shown(j_)));
    }

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        throw InputError(fmt::format("{}: {} {}", file_, field, what));
    }
    std::string field(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
    const std::string& file() const { return file_; }

    bool has(const std::string& key) {
        if (!j_.contains(key)) return false;
        used_.insert(key);
        return true;
    }
    const nlohmann::json& raw(const std::string& key) {
        if (!j_.contains(key)) fail(field(key), "is missing");
        used_.insert(key);
        return j_.at(key);
    }
    StrictObject object(const std::string& key) { return StrictObject(raw(key), file_, field(key)); }

    std::int64_t integer(const std::string& key) {
        const auto& v = raw(key);
        if (!v.is_number_integer()) fail(field(key), fmt::format("= {} must be an integer", shown(v)));
        // Integer fields are counts held in an int (GPUs, layers, batch sizes): refuse what does not fit
        // rather than truncate it (nodes = 4294967298 would silently become 2).
        constexpr std::int64_t kMax = std::numeric_limits<int>::max();
        if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax)
                                   : (v.get<std::int64_t>() > kMax || v.get<std::int64_t>() < -kMax))
            fail(field(key), fmt::format("= {} is out of range (at most {})", shown(v), kMax));
        return v.get<std::int64_t>();
    }
    std::int64_t integer_or(const std::string& key, std::int64_t def) {
        return has(key) ? integer(key) : def;
    }
    std::int64_t positive(const std::string& key) {
        const auto v = integer(key);
        if (v <= 0) fail(field(key), fmt::format("= {} must be positive", v));
        return v;
    }
    double number(const std::string& key) {
        const auto& v = raw(key);
        if (!v.is_number()) fail(field(key), fmt::format("= {} must be a number", shown(v)));
        return v.get<double>();
    }
    /// A finite number in [lo, hi] (`unit` follows the range in the message, e.g. "s"). Throws InputError.
    double number_in(const std::string& key, double lo, double hi, const char* unit = "") {
        const double v = number(key);
        if (!(v >= lo && v <= hi))
            fail(field(key), fmt::format("= {} is outside the supported range [{} .. {}]{}{}",
                                         shown(raw(key)), lo, hi, *unit ? " " : "", unit));
        return v;
    }
    bool boolean(const std::string& key) {
        const auto& v = raw(key);
        if (!v.is_boolean()) fail(field(key), fmt::format("= {} must be true or false", shown(v)));
        return v.get<bool>();
    }
    bool boolean_or(const std::string& key, bool def) { return has(key) ? boolean(key) : def; }
    std::string string(const std::string& key) {
        const auto& v = raw(key);
        if (!v.is_string()) fail(field(key), fmt::format("= {} must be a string", shown(v)));
        return v.get<std::string>();
    }
    std::string choice(const std::string& key, std::initializer_list<const char*> allowed) {
        const std::string v = string(key);
        std::string list;
        for (const char* a : allowed) {
            if (v == a) return v;
            list += (list.empty() ? "\"" : ", \"") + std::string(a) + "\"";
        }
        fail(field(key), fmt::format("= \"{}\" is not one of {}", clip_for_message(v), list));
    }
    std::string choice(const std::string& key, const std::vector<std::string>& allowed) {
        const std::string v = string(key);
        std::string list;
        for (const auto& a : allowed) {
            if (v == a) return v;
            list += (list.empty() ? "\"" : ", \"") + a + "\"";
        }
        fail(field(key), fmt::format("= \"{}\" is not one of {}", clip_for_message(v), list));
    }
    double quantity(const std::string& key, Dimension dim, bool allow_zero = false) {
        const auto& v = raw(key);
        if (!v.is_string())
            fail(field(key), fmt::format("= {} must be a string with its unit, e.g. \"{}\"", shown(v),
                                         dim == Dimension::time        ? "2us"
                                         : dim == Dimension::bandwidth ? "300GBps"
                                                                       : "160MB"));
        double value = 0;
        try {
            value = parse_quantity(v.get<std::string>(), dim, field(key), allow_zero);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", file_, e.what()));
        }
        // Plausible ranges keep simulated time far from the 64-bit picosecond limit and flows from stalling:
        // latencies up to 1 s, bandwidths from 1 MB/s to 1 PB/s, sizes up to 1 PB.
        const double lo = dim == Dimension::bandwidth ? 1e6 : 0.0;
        const double hi = dim == Dimension::time ? 1.0 : 1e15;
        if (value < lo || value > hi)
            fail(field(key), fmt::format("= \"{}\" is outside the supported range [{} .. {}] {}",
                                         clip_for_message(v.get<std::string>()), lo, hi,
                                         dim == Dimension::time        ? "s"
                                         : dim == Dimension::bandwidth ? "B/s"
                                                                       : "B"));
        return value;
    }

    /// Throws for any key that was not read.
    void finish() const {
        for (auto it = j_.begin(); it != j_.end(); ++it)
            if (!used_.count(it.key())) fail(clip_for_message(field(it.key())), "is not a known field");
    }

  private:
    const nlohmann::json& j_;
    std::string file_;
    std::string path_;
    std::set<std::string> used_;
};

}  // namespace trainsim::detail
