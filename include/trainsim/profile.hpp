// Hardware profiles: kernel times measured on one GPU type (format `trainsim-profile/1`,
// docs/calibration.md), read by `--profile FILE` (the compute model then takes measured kernel times by
// shape, see compute.hpp) and by `trainsim fit --profile FILE` (fits the analytic model's constants to them).
//
// Every quantity in the file is a string with its unit ("0.165ms", "2GiB", "117.3GBps"), parsed by
// parse_quantity; every object refuses keys it does not define. Shapes (all counts, positive):
//   gemm        y[m,n] = x[m,k] . W[n,k]^T, `batch` independent products, dtype bf16 | fp16 | fp8 (e4m3 x
//   e4m3
//               -> bf16 with per-tensor scales); 2·m·n·k·batch FLOPs
//   attention   q [batch, heads, seq, head_dim], k/v [batch, kv_heads, seq, head_dim], backend cudnn | flash
//   |
//               unfused, pass fwd | bwd, causal or not
//   memory_bound  a kernel moving `bytes` (read + written)
//   collectives   nccl-tests rows (size column as `bytes`, algbw and busbw as nccl-tests defines them)
//   layers      one TP rank's whole transformer layer, forward and forward+backward: a TEST of the model,
//               never used to time kernels
// All readers throw InputError "FILE: field = value why" naming the field (e.g. "p.json: gemm[3].m = 0 must
// be positive").
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/layout.hpp"

namespace trainsim {

/// Median time and spread of one measurement; min, max, reps and label are optional in the file.
struct ProfileTiming {
    double time_s = 0;  ///< median, seconds
    std::optional<double> min_s, max_s;
    std::optional<int> reps;
    std::string label;  ///< free text ("mcore_1.7B qkv fwd"); empty when absent
};

enum class GemmDtype { bf16, fp16, fp8 };

struct ProfileGemm {
    GemmDtype dtype = GemmDtype::bf16;
    double m = 0, n = 0, k = 0, batch = 1;
    ProfileTiming timing;
};

struct ProfileAttention {
    AttentionKernel backend = AttentionKernel::cudnn;
    bool backward = false;  ///< pass "bwd"
    double batch = 1, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
    bool causal = true;
    ProfileTiming timing;
};

struct ProfileMemoryBound {
    std::string kernel;  ///< copy | layernorm | gelu | any other name
    double bytes = 0;    ///< read + written
    ProfileTiming timing;
};

struct ProfileCollective {
    std::string op;  ///< all_reduce | all_gather | reduce_scatter | send_recv
    int gpus = 0, nodes = 0;
    double bytes = 0, time_s = 0, algbw_bytes_per_s = 0, busbw_bytes_per_s = 0;
    std::string dtype;  ///< optional
};

struct ProfileLayer {
    std::string label;
    AttentionKernel attention_backend = AttentionKernel::cudnn;
    int hidden = 0, heads = 0, kv_heads = 0, ffn_hidden = 0, seq = 0, micro_batch = 0, tp = 0;
    std::string mlp;  ///< gelu | swiglu
    double fwd_s = 0, fwd_bwd_s = 0;
};

struct ProfileDevice {
    std::string name;  ///< as the driver names it ("NVIDIA H100 80GB HBM3")
    int sm_count = 0;
    double memory_bytes = 0;
    std::string driver, cuda;
    std::map<std::string, std::string> libraries;  ///< library -> version (free keys)
};

struct Profile {
    std::string file;  ///< where it was read from (for messages); not written
    std::string gpu;   ///< trainsim GPU catalog name the profile describes
    ProfileDevice device;
    std::string date;    ///< ISO date of the measurement
    std::string source;  ///< how it was measured
    std::vector<ProfileGemm> gemm;
    std::vector<ProfileAttention> attention;
    std::vector<ProfileMemoryBound> memory_bound;
    std::vector<ProfileCollective> collectives;
    std::vector<ProfileLayer> layers;
};

/// Reads a trainsim-profile/1 document. Throws InputError naming `file` and the field for a missing, unknown
/// or malformed field (non-positive shape, unknown dtype/backend/pass, a time without unit, a gpu that is not
/// in the catalog).
Profile parse_profile(const nlohmann::json& j, const std::string& file);
/// Reads and parses a profile file.
Profile read_profile(const std::string& path);
/// Writes a profile (times as "...us", bytes as "...B", bandwidths as "...GBps"); parse_profile reads it
/// back.
nlohmann::json to_json(const Profile& p);

/// Converts reference measurements (format trainsim-kernel-measurements/1, ../shared/calibration/README.md)
/// into a profile of catalog GPU `gpu`: `gemm` rows (fwd, dgrad, wgrad of the linear layers), `gemm_grid` and
/// `gemm_fp8` become gemm rows in the y[m,n] = x[m,k]·W[n,k]^T convention (fwd: m=M, n=N, k=K; dgrad dx[M,K]
/// = dy[M,N]·W: m=M, n=K, k=N; wgrad dW[N,K] = dy^T·x: m=N, n=K, k=M), labelled "config linear kind" or
/// "grid"; `attention` rows one per backend and pass; copy_1GiB, layernorm_*, gelu_* memory-bound rows;
/// `layers` rows. `source` is written into the profile's source. Throws InputError naming the field of a
/// malformed input.
Profile import_kernel_measurements(const nlohmann::json& j, const std::string& file, const std::string& gpu,
                                   const std::string& source);

std::string to_string(GemmDtype d);

}  // namespace trainsim
