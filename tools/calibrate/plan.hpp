// trainsim-calibrate, device-independent part: what to measure (the GEMM shapes a workload's program runs,
// the generic shape grid, attention and memory-bound shapes, collective sizes), how many repetitions, the
// statistics, the nccl-tests bandwidth definitions and the catalog name of a CUDA device. Compiled into
// trainsim_calibrate_core (no CUDA), unit-tested in tests/unit/test_calibrate.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim::calibrate {

/// One GEMM shape as trainsim's Kernel::gemm states it: y[m, n] = x[m, k] . W[n, k]^T, `batch` independent
/// products (all dimensions in elements, per GPU after TP division). `fp8`: the workload runs it in FP8.
struct GemmShape {
    std::int64_t m = 0, n = 0, k = 0, batch = 1;
    bool fp8 = false;
    std::string label;  ///< "<workload> <kernel name>" of its first occurrence, or "grid"
};

/// The distinct GEMM shapes (key m, n, k, batch, fp8) of every segment of `program` (forward, backward with
/// dgrad and wgrad, recomputation, embedding/head, optimizer), in first-occurrence order (segments in order,
/// kernels in order). Dimensions are rounded to integers; a kernel with a zero dimension is left out.
std::vector<GemmShape> collect_gemm_shapes(const Program& program, const std::string& workload_name);

/// collect_gemm_shapes of build_program(model, layout). Throws InputError as build_program does.
std::vector<GemmShape> workload_gemm_shapes(const ModelSpec& model, const Layout& layout,
                                            const std::string& workload_name);

/// The generic grid: M in {1024, 2048, ..., 32768}, N and K in {1024, 2048, ..., 16384} (powers of two, 150
/// shapes, M outermost then N then K). Quick: M, N, K in {1024, 4096, 16384} (27 shapes).
std::vector<GemmShape> gemm_grid(bool quick);

/// Element types of the GEMMs (profile field "dtype"): bf16 | fp16 | fp8 (e4m3 x e4m3 -> bf16 output,
/// per-tensor scales).
enum class GemmDtype { bf16, fp16, fp8 };
std::string to_string(GemmDtype d);

/// FP8 tensor cores exist from compute capability 8.9 (Ada, Hopper and newer); cuBLASLt's FP8 GEMMs need
/// sm89+ (cuBLAS documentation, "cublasLtMatmul: FP8").
bool has_fp8(int cc_major, int cc_minor);

/// cuBLASLt FP8 GEMMs need every dimension a multiple of 16 (cuBLAS documentation, cublasLtMatmul FP8
/// requirements), and trainsim runs only the linear layers in FP8 (batch 1).
bool fp8_shape_supported(const GemmShape& s);

/// One GEMM to time.
struct GemmJob {
    GemmDtype dtype = GemmDtype::bf16;
    std::int64_t m = 0, n = 0, k = 0, batch = 1;
    std::string label;
};

/// The GEMMs to time: each workload shape then each grid shape, in bf16, fp16 (not with `quick`) and fp8
/// (when `fp8_available` and fp8_shape_supported), each (dtype, m, n, k, batch) once (the first label wins).
std::vector<GemmJob> plan_gemm_jobs(const std::vector<GemmShape>& workload,
                                    const std::vector<GemmShape>& grid, bool fp8_available, bool quick);

/// Causal attention of one micro-batch on one GPU (per TP rank): Q [batch, heads, seq, head_dim], K and V
/// [batch, kv_heads, seq, head_dim].
struct AttentionShape {
    std::int64_t batch = 1, heads = 0, kv_heads = 0, seq = 0, head_dim = 0;
    bool causal = true;
    std::string label;
};

/// The attention of `model` under `layout`: batch = micro-batch, heads = heads / tp, kv_heads = max(1,
/// kv_heads / tp) (Megatron-LM divides both over TP), seq = the model's sequence length, head_dim =
/// hidden / heads, causal.
AttentionShape workload_attention(const ModelSpec& model, const Layout& layout, const std::string& name);

/// Attention shapes without a workload: batch 1, 16 heads of 128, seq 2048, 4096 and 8192 (quick: 4096).
std::vector<AttentionShape> generic_attention(bool quick);

/// A memory-bound kernel to time; `elements` of 16-bit data in its input.
struct MemoryJob {
    std::string kernel;  ///< copy | layernorm | gelu
    std::int64_t rows = 0, cols = 0;
    std::string label;
};

/// Bytes read + written in HBM:
///   copy       2 bytes in, 2 out per element (cudaMemcpyAsync device to device of rows*cols bf16);
///   layernorm  bf16 x in, y out (4 bytes per element), gamma and beta (4 bytes per column), fp32 mean and
///              rstd out (8 bytes per row), as Megatron/Apex's fused layer norm forward writes them;
///   gelu       bf16 in and out (4 bytes per element).
double memory_job_bytes(const MemoryJob& j);

/// copy of 1 MiB .. 1 GiB (factor 4; quick: 16 MiB and 1 GiB), layernorm and gelu on [32768, 8192] (the shape
/// of shared/calibration/h100/kernels.json) and, with a workload (`hidden` > 0), layernorm on [tokens,
/// hidden] and gelu on [tokens, ffn_hidden / tp].
std::vector<MemoryJob> plan_memory_jobs(bool quick, std::int64_t tokens = 0, std::int64_t hidden = 0,
                                        std::int64_t ffn_per_gpu = 0);

enum class CollectiveOp { all_reduce, all_gather, reduce_scatter, send_recv };
std::string to_string(CollectiveOp op);

/// Message sizes (nccl-tests' size column, bytes) from 1 KiB to 4 GiB, factor 2 (23 sizes); quick: 1 KiB to
/// 1 GiB, factor 16 (6 sizes). Sizes above `max_bytes` are left out.
std::vector<std::int64_t> collective_sizes(bool quick, std::int64_t max_bytes);

/// The size nccl-tests actually runs for a requested `bytes` of `elem_bytes` elements over `ranks` GPUs: the
/// element count rounded down to a multiple of `ranks` for all-gather and reduce-scatter (nccl-tests
/// AllGatherGetCollByteCount: recvcount = (count / nranks) * nranks), else to whole elements.
std::int64_t collective_bytes(CollectiveOp op, std::int64_t bytes, int elem_bytes, int ranks);

/// nccl-tests' bus-bandwidth factor (doc/PERFORMANCE.md): all-reduce 2(n-1)/n, all-gather and reduce-scatter
/// (n-1)/n, send/recv 1. busbw = algbw * factor, algbw = size / time (size: all-reduce the buffer,
/// all-gather the total output, reduce-scatter the total input, send/recv the bytes each rank sends).
double busbw_factor(CollectiveOp op, int ranks);
/// size / time, bytes/s.
double algbw_bytes_per_s(double bytes, double seconds);

/// Warm-up and repetitions: at least `warmup_min` warm-up runs and `warmup_s` seconds of them; then
/// clamp(ceil(target_s / estimate), reps_min, reps_max) timed runs, each timed alone with CUDA events.
struct RepPolicy {
    int warmup_min = 5;
    double warmup_s = 0.025;
    int reps_min = 20, reps_max = 200;
    double target_s = 0.2;
    /// NCCL: nccl-tests' defaults, 5 warm-up iterations then 20 timed back to back (average time).
    int nccl_warmup = 5, nccl_iters = 20;
};
RepPolicy rep_policy(bool quick);
/// Timed runs for a kernel whose warm-up runs took `estimate_s` each.
int reps_for(double estimate_s, const RepPolicy& p);

/// Median (mean of the two middle values for an even count), min and max of `samples_s`, seconds.
struct TimingStats {
    double median_s = 0, min_s = 0, max_s = 0;
    int reps = 0;
};
/// Throws InternalError for an empty vector.
TimingStats stats_of(std::vector<double> samples_s);

/// The trainsim GPU catalog name of a CUDA device from its name and memory (cudaDeviceProp::name,
/// totalGlobalMem): "NVIDIA A100-SXM4-80GB" -> A100-SXM4-80GB (40GB likewise, or by memory), "NVIDIA H100
/// 80GB HBM3" -> H100-SXM5-80GB (more than 88 GiB: H100-SXM5-96GB), "NVIDIA H200" -> H200-SXM-141GB, "NVIDIA
/// B200" -> B200. PCIe and NVL parts, GH200/GB200 and every other device: nullopt (not in the catalog; name
/// it with
/// --gpu).
std::optional<std::string> guess_catalog_gpu(const std::string& device_name, double memory_bytes);

/// "13.0" from cudaDriverGetVersion / cudaRuntimeGetVersion's 13000 (1000 * major + 10 * minor).
std::string cuda_version_string(int v);
/// "13.1.0" from cublasLtGetVersion's 130100 (CUBLAS_VERSION: 10000 * major + 100 * minor + patch).
std::string cublas_version_string(std::int64_t v);
/// "2.28.9" from ncclGetVersion's 22809 (NCCL_VERSION: 10000 * major + 100 * minor + patch from 2.9; 1000 *
/// major + 100 * minor + patch before).
std::string nccl_version_string(int v);
/// The kernel module version ("580.159.04") from the text of /proc/driver/nvidia/version ("NVRM version:
/// NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu ..."); nullopt when absent.
std::optional<std::string> driver_version_from_proc(const std::string& text);

}  // namespace trainsim::calibrate
