// trainsim-calibrate's own CUDA kernels (kernels.cu), launched on `stream`; each returns the launch status
// (cudaGetLastError). Tensors are row-major; bf16 is __nv_bfloat16 passed as void*.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

namespace trainsim::calibrate::kernels {

enum class Elem { bf16, fp16, e4m3, fp32 };

/// Fills `n` elements with uniform random values in [-scale, scale) from a counter hash of (seed, index):
/// never zeros, deterministic for a seed.
cudaError_t fill_uniform(void* data, std::int64_t n, Elem type, std::uint64_t seed, float scale,
                         cudaStream_t stream);

/// In place on `rows` rows of `cols` bf16 scores: p = softmax(scale * s) over the columns a causal mask keeps
/// (row r of each [sq, cols] block, sq = rows_per_block, keeps columns <= r % sq + cols - sq), zeros
/// elsewhere.
cudaError_t causal_softmax_forward(void* scores, std::int64_t rows, std::int64_t rows_per_block,
                                   std::int64_t cols, float scale, cudaStream_t stream);

/// Softmax backward in place: dp <- scale * p * (dp - sum_j dp_j p_j) per row (bf16, fp32 arithmetic).
cudaError_t softmax_backward(const void* p, void* dp, std::int64_t rows, std::int64_t cols, float scale,
                             cudaStream_t stream);

/// Layer norm forward of x [rows, cols] bf16 with gamma, beta [cols] bf16: y bf16, mean and rstd fp32 [rows]
/// (eps 1e-5).
cudaError_t layernorm_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean,
                              float* rstd, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

/// One thread that busy-waits `ns` nanoseconds of the GPU's global timer: enqueued before a batch of timed
/// runs, it holds the stream while the CPU enqueues them, so that they then run back to back and no timed
/// run waits for its own launch (nvbench's "blocking kernel" does the same).
cudaError_t spin(std::int64_t ns, cudaStream_t stream);

/// GeLU (tanh approximation, as Megatron-LM's bias_gelu) of `n` bf16 elements, out of place.
cudaError_t gelu_forward(const void* x, void* y, std::int64_t n, cudaStream_t stream);

}  // namespace trainsim::calibrate::kernels
