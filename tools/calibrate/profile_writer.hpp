// trainsim-calibrate: the measurements as a trainsim-profile/1 document (/work/notes/profile-format.md, the
// reader is sim/io's profile loader). Every quantity is a string with its unit (parse_time, parse_bytes,
// parse_bandwidth read them back); keys appear in the order of the format description; optional keys ("min",
// "max", "reps", "label", "dtype") are written when known.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan.hpp"

namespace trainsim::calibrate {

struct DeviceInfo {
    std::string name;  ///< cudaDeviceProp::name
    int sm_count = 0;
    double memory_bytes = 0;
    std::string driver;  ///< kernel module version, or the CUDA driver API version when unknown
    std::string cuda;    ///< CUDA runtime version
    std::map<std::string, std::string> libraries;  ///< e.g. cublas, cublasLt, nccl (free keys)
};

struct GemmRow {
    GemmDtype dtype = GemmDtype::bf16;
    std::int64_t m = 0, n = 0, k = 0, batch = 1;
    TimingStats time;
    std::string label;
};

struct AttentionRow {
    std::string backend;  ///< cudnn | flash | unfused
    bool forward = true;  ///< pass fwd | bwd
    AttentionShape shape;
    TimingStats time;
};

struct MemoryRow {
    std::string kernel;
    double bytes = 0;  ///< read + written
    TimingStats time;
    std::string label;
};

struct CollectiveRow {
    CollectiveOp op = CollectiveOp::all_reduce;
    int gpus = 0, nodes = 1;
    std::int64_t bytes = 0;  ///< nccl-tests' size
    double time_s = 0;       ///< average of the timed iterations
    std::string dtype = "bf16";
};

struct Profile {
    std::string gpu;  ///< trainsim catalog name
    DeviceInfo device;
    std::string date;    ///< ISO date
    std::string source;  ///< tool, command line, warm-up and repetitions, clocks
    std::vector<GemmRow> gemm;
    std::vector<AttentionRow> attention;
    std::vector<MemoryRow> memory_bound;
    std::vector<CollectiveRow> collectives;
};

/// Seconds as "<value>us" with 4 decimals (0.1 ns; CUDA events resolve about 0.5 us).
std::string format_time(double seconds);
/// Bytes as "<n>GiB", "<n>MiB", "<n>KiB" when a whole multiple, else "<n>B".
std::string format_bytes(double bytes);
/// Bytes per second as "<value>GBps" (decimal GB, as nccl-tests), 4 decimals.
std::string format_bandwidth(double bytes_per_s);

/// The document (an empty section is left out: every array is optional). Throws InternalError for a row with
/// a non-positive time (never written).
nlohmann::ordered_json profile_to_json(const Profile& p);

/// Today's date in UTC, ISO 8601 (YYYY-MM-DD).
std::string today_utc();

}  // namespace trainsim::calibrate
