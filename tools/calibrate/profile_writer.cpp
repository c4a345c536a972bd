#include <nlohmann/json.hpp>

#include "profile_writer.hpp"

#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim::calibrate {

namespace {
using ojson = nlohmann::ordered_json;

void require_time(double s, const std::string& what) {
    if (!(s > 0) || !std::isfinite(s))
        throw InternalError(fmt::format("profile: {} has time {} s, not a positive measurement", what, s));
}

void add_timing(ojson& row, const TimingStats& t, const std::string& what) {
    require_time(t.median_s, what);
    row["time"] = format_time(t.median_s);
    row["min"] = format_time(t.min_s);
    row["max"] = format_time(t.max_s);
    row["reps"] = t.reps;
}
}  // namespace

std::string format_time(double seconds) {
    return fmt::format("{:.4f}us", seconds * 1e6);
}

std::string format_bytes(double bytes) {
    const double b = std::round(bytes);
    const auto whole = [&](double unit) { return std::fmod(b, unit) == 0.0 && b >= unit; };
    if (whole(1024.0 * 1024.0 * 1024.0)) return fmt::format("{:.0f}GiB", b / (1024.0 * 1024.0 * 1024.0));
    if (whole(1024.0 * 1024.0)) return fmt::format("{:.0f}MiB", b / (1024.0 * 1024.0));
    if (whole(1024.0)) return fmt::format("{:.0f}KiB", b / 1024.0);
    return fmt::format("{:.0f}B", b);
}

std::string format_bandwidth(double bytes_per_s) {
    return fmt::format("{:.4f}GBps", bytes_per_s / 1e9);
}

ojson profile_to_json(const Profile& p) {
    ojson j;
    j["format"] = "trainsim-profile/1";
    j["gpu"] = p.gpu;
    ojson dev;
    dev["name"] = p.device.name;
    dev["sm_count"] = p.device.sm_count;
    dev["memory"] = fmt::format("{:.1f}GiB", p.device.memory_bytes / (1024.0 * 1024.0 * 1024.0));
    dev["driver"] = p.device.driver;
    dev["cuda"] = p.device.cuda;
    ojson libs = ojson::object();
    for (const auto& [k, v] : p.device.libraries)
        libs[k] = v;
    dev["libraries"] = libs;
    j["device"] = dev;
    j["date"] = p.date;
    j["source"] = p.source;

    ojson gemm = ojson::array();
    for (const auto& r : p.gemm) {
        ojson row;
        row["dtype"] = to_string(r.dtype);
        row["m"] = r.m;
        row["n"] = r.n;
        row["k"] = r.k;
        row["batch"] = r.batch;
        add_timing(row, r.time, fmt::format("gemm {} {}x{}x{}", to_string(r.dtype), r.m, r.n, r.k));
        if (!r.label.empty()) row["label"] = r.label;
        gemm.push_back(row);
    }
    if (!gemm.empty()) j["gemm"] = gemm;

    ojson attention = ojson::array();
    for (const auto& r : p.attention) {
        ojson row;
        row["backend"] = r.backend;
        row["pass"] = r.forward ? "fwd" : "bwd";
        row["batch"] = r.shape.batch;
        row["heads"] = r.shape.heads;
        row["kv_heads"] = r.shape.kv_heads;
        row["seq"] = r.shape.seq;
        row["head_dim"] = r.shape.head_dim;
        row["causal"] = r.shape.causal;
        add_timing(row, r.time, fmt::format("attention {} seq {}", r.forward ? "fwd" : "bwd", r.shape.seq));
        if (!r.shape.label.empty()) row["label"] = r.shape.label;
        attention.push_back(row);
    }
    if (!attention.empty()) j["attention"] = attention;

    ojson memory = ojson::array();
    for (const auto& r : p.memory_bound) {
        ojson row;
        row["kernel"] = r.kernel;
        row["bytes"] = format_bytes(r.bytes);
        add_timing(row, r.time, r.label);
        if (!r.label.empty()) row["label"] = r.label;
        memory.push_back(row);
    }
    if (!memory.empty()) j["memory_bound"] = memory;

    ojson coll = ojson::array();
    for (const auto& r : p.collectives) {
        require_time(r.time_s, fmt::format("{} of {} bytes", to_string(r.op), r.bytes));
        const double algbw = algbw_bytes_per_s(static_cast<double>(r.bytes), r.time_s);
        ojson row;
        row["op"] = to_string(r.op);
        row["gpus"] = r.gpus;
        row["nodes"] = r.nodes;
        row["bytes"] = format_bytes(static_cast<double>(r.bytes));
        row["time"] = format_time(r.time_s);
        row["algbw"] = format_bandwidth(algbw);
        row["busbw"] = format_bandwidth(algbw * busbw_factor(r.op, r.gpus));
        row["dtype"] = r.dtype;
        coll.push_back(row);
    }
    if (!coll.empty()) j["collectives"] = coll;
    return j;
}

std::string today_utc() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    return fmt::format("{:04d}-{:02d}-{:02d}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
}

}  // namespace trainsim::calibrate
