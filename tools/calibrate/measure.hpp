// trainsim-calibrate, device part: timing real kernels on the local GPUs (CUDA runtime, cuBLASLt, cuBLAS,
// NCCL, and the kernels of kernels.cu). Every function throws DeviceError naming the CUDA/cuBLAS/NCCL call
// that failed; a measurement that cannot run (out of memory, no cuBLASLt algorithm) is skipped with a note on
// the progress line instead.
#pragma once

#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "plan.hpp"
#include "profile_writer.hpp"
#include "progress.hpp"

namespace trainsim::calibrate {

class DeviceError : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

/// CUDA devices visible to this process; 0 with `why` set (cudaGetErrorString) when there is none or no
/// driver.
int cuda_device_count(std::string& why);

struct DeviceProps {
    std::string name;
    int cc_major = 0, cc_minor = 0, sm_count = 0;
    double memory_bytes = 0;
    int sm_clock_khz = 0, memory_clock_khz = 0;  ///< peak clocks (cudaDevAttrClockRate, ...MemoryClockRate)
};
DeviceProps device_props(int device);

/// Name, SMs, memory and the driver, CUDA runtime, cuBLAS, cuBLASLt and NCCL versions.
DeviceInfo device_info(int device);

/// cuBLASLt GEMMs y[m, n] = x[m, k] . W[n, k]^T in the "TN" layout (W transposed, column-major), fp32
/// accumulation, the heuristic's first algorithm with a 32 MiB workspace; fp8: e4m3 inputs with per-tensor
/// scale pointers, bf16 output.
std::vector<GemmRow> measure_gemms(int device, const std::vector<GemmJob>& jobs, const RepPolicy& p,
                                   Progress& progress);

/// Unfused causal attention as Megatron-LM's core attention runs it without a fused kernel: forward S = Q.K^T
/// (cublasGemmStridedBatchedEx over batch x heads), causal scaled softmax (kernels.cu), O = P.V; backward
/// dV = P^T.dO, dP = dO.V^T, softmax backward, dQ = dS.K, dK = dS^T.Q. Backend "unfused".
std::vector<AttentionRow> measure_attention(int device, const std::vector<AttentionShape>& shapes,
                                            const RepPolicy& p, Progress& progress);

/// copy (cudaMemcpyAsync device to device), layernorm and gelu (kernels.cu), bf16.
std::vector<MemoryRow> measure_memory_bound(int device, const std::vector<MemoryJob>& jobs,
                                            const RepPolicy& p, Progress& progress);

/// NCCL all-reduce (sum), all-gather, reduce-scatter (sum) and ring send/recv over GPUs 0 .. gpus-1 of one
/// process (ncclCommInitAll), bf16, out of place; nccl-tests' method: warm-up iterations, then timed
/// iterations back to back, time = the slowest GPU's CUDA-event time / iterations.
std::vector<CollectiveRow> measure_collectives(int gpus, bool quick, const RepPolicy& p, Progress& progress);

/// --self-check: runs each timed GPU path once on small random inputs and compares the result with the CPU
/// references of reference.hpp: cuBLASLt GEMMs in bf16, fp16 (batched too) and fp8 (per-tensor scales 0.5 and
/// 4, where the GPU has FP8), unfused attention forward (P, O) and backward (dQ, dK, dV), layer norm, GeLU
/// and the copy. One line per check on `log`; returns the number of failed checks.
int self_check(int device, std::ostream& log);
/// The same for NCCL all-reduce, all-gather, reduce-scatter and ring send/recv over GPUs 0 .. gpus-1.
int self_check_collectives(int gpus, std::ostream& log);

}  // namespace trainsim::calibrate
