// trainsim-calibrate's own kernels: random fill, causal softmax forward/backward (the unfused attention
// path), layer norm and GeLU (memory-bound references). Straightforward kernels: one block per row for the
// row reductions (fp32 accumulation, warp shuffles), grid-stride loops elsewhere.
#include "kernels.hpp"

#include <cmath>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

namespace trainsim::calibrate::kernels {

namespace {

constexpr int kThreads = 256;

__device__ inline float uniform(std::uint64_t seed, std::uint64_t i) {
    // splitmix64 of (seed, index): 24 random bits -> [-1, 1), nudged off zero.
    std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    const float v = 2.0f * u - 1.0f;
    return v == 0.0f ? 0.5f : v;
}

template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16(v);
}
template <>
__device__ inline __half from_float<__half>(float v) {
    return __float2half(v);
}
template <>
__device__ inline __nv_fp8_e4m3 from_float<__nv_fp8_e4m3>(float v) {
    return __nv_fp8_e4m3(v);
}
template <>
__device__ inline float from_float<float>(float v) {
    return v;
}

template <typename T>
__global__ void fill_kernel(T* data, std::int64_t n, std::uint64_t seed, float scale) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
        data[i] = from_float<T>(scale * uniform(seed, static_cast<std::uint64_t>(i)));
}

int grid_for(std::int64_t n) {
    const std::int64_t blocks = (n + kThreads - 1) / kThreads;
    return static_cast<int>(blocks < 65536 ? (blocks > 0 ? blocks : 1) : 65536);
}

/// Sum (or max) over the block; every thread gets the result.
template <bool Max>
__device__ float block_reduce(float v) {
    __shared__ float partial[kThreads / 32];
    for (int o = 16; o > 0; o /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = Max ? fmaxf(v, other) : v + other;
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // `partial` may still be read by a previous call
    if (lane == 0) partial[warp] = v;
    __syncthreads();
    v = lane < kThreads / 32 ? partial[lane] : (Max ? -INFINITY : 0.0f);
    for (int o = 16; o > 0; o /= 2) {
        const float other = __shfl_xor_sync(0xffffffffu, v, o);
        v = Max ? fmaxf(v, other) : v + other;
    }
    return v;
}

__global__ void causal_softmax_kernel(__nv_bfloat16* s, std::int64_t rows_per_block, std::int64_t cols,
                                      float scale) {
    const std::int64_t row = blockIdx.x;
    __nv_bfloat16* x = s + row * cols;
    const std::int64_t last = row % rows_per_block + (cols - rows_per_block);  // last kept column
    float m = -INFINITY;
    for (std::int64_t j = threadIdx.x; j <= last && j < cols; j += blockDim.x)
        m = fmaxf(m, scale * __bfloat162float(x[j]));
    m = block_reduce<true>(m);
    float sum = 0;
    for (std::int64_t j = threadIdx.x; j <= last && j < cols; j += blockDim.x)
        sum += __expf(scale * __bfloat162float(x[j]) - m);
    sum = block_reduce<false>(sum);
    const float inv = 1.0f / sum;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        x[j] = __float2bfloat16(j <= last ? __expf(scale * __bfloat162float(x[j]) - m) * inv : 0.0f);
}

__global__ void softmax_backward_kernel(const __nv_bfloat16* p, __nv_bfloat16* dp, std::int64_t cols,
                                        float scale) {
    const std::int64_t row = blockIdx.x;
    const __nv_bfloat16* pr = p + row * cols;
    __nv_bfloat16* dr = dp + row * cols;
    float dot = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        dot += __bfloat162float(pr[j]) * __bfloat162float(dr[j]);
    dot = block_reduce<false>(dot);
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        dr[j] = __float2bfloat16(scale * __bfloat162float(pr[j]) * (__bfloat162float(dr[j]) - dot));
}

__global__ void layernorm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* gamma,
                                 const __nv_bfloat16* beta, __nv_bfloat16* y, float* mean_out,
                                 float* rstd_out, std::int64_t cols) {
    const std::int64_t row = blockIdx.x;
    const __nv_bfloat16* xr = x + row * cols;
    __nv_bfloat16* yr = y + row * cols;
    float sum = 0, sq = 0;
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
        const float v = __bfloat162float(xr[j]);
        sum += v;
        sq += v * v;
    }
    sum = block_reduce<false>(sum);
    sq = block_reduce<false>(sq);
    const float mean = sum / static_cast<float>(cols);
    const float var = fmaxf(sq / static_cast<float>(cols) - mean * mean, 0.0f);
    const float rstd = rsqrtf(var + 1e-5f);
    for (std::int64_t j = threadIdx.x; j < cols; j += blockDim.x)
        yr[j] = __float2bfloat16((__bfloat162float(xr[j]) - mean) * rstd * __bfloat162float(gamma[j]) +
                                 __bfloat162float(beta[j]));
    if (threadIdx.x == 0) {
        mean_out[row] = mean;
        rstd_out[row] = rstd;
    }
}

__device__ inline std::uint64_t global_timer_ns() {
    std::uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void spin_kernel(std::int64_t ns) {
    const std::uint64_t end = global_timer_ns() + static_cast<std::uint64_t>(ns);
    while (global_timer_ns() < end) {
    }
}

__device__ inline float gelu(float v) {
    return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

__global__ void gelu_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, std::int64_t n) {
    // 8 bf16 per 16-byte access; the tail (n % 8) element by element.
    const std::int64_t vecs = n / 8;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    uint4* yv = reinterpret_cast<uint4*>(y);
    const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < vecs;
         i += stride) {
        uint4 v = xv[i];
        __nv_bfloat16* e = reinterpret_cast<__nv_bfloat16*>(&v);
#pragma unroll
        for (int k = 0; k < 8; ++k)
            e[k] = __float2bfloat16(gelu(__bfloat162float(e[k])));
        yv[i] = v;
    }
    for (std::int64_t i = vecs * 8 + blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
         i += stride)
        y[i] = __float2bfloat16(gelu(__bfloat162float(x[i])));
}

}  // namespace

cudaError_t fill_uniform(void* data, std::int64_t n, Elem type, std::uint64_t seed, float scale,
                         cudaStream_t stream) {
    const int grid = grid_for(n);
    switch (type) {
        case Elem::bf16:
            fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(data), n, seed, scale);
            break;
        case Elem::fp16:
            fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__half*>(data), n, seed, scale);
            break;
        case Elem::e4m3:
            fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(data), n, seed, scale);
            break;
        case Elem::fp32:
            fill_kernel<<<grid, kThreads, 0, stream>>>(static_cast<float*>(data), n, seed, scale);
            break;
    }
    return cudaGetLastError();
}

cudaError_t causal_softmax_forward(void* scores, std::int64_t rows, std::int64_t rows_per_block,
                                   std::int64_t cols, float scale, cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    if (rows > 0x7fffffffLL || rows_per_block <= 0 || rows_per_block > cols) return cudaErrorInvalidValue;
    causal_softmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<__nv_bfloat16*>(scores), rows_per_block, cols, scale);
    return cudaGetLastError();
}

cudaError_t softmax_backward(const void* p, void* dp, std::int64_t rows, std::int64_t cols, float scale,
                             cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    if (rows > 0x7fffffffLL) return cudaErrorInvalidValue;
    softmax_backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(p), static_cast<__nv_bfloat16*>(dp), cols, scale);
    return cudaGetLastError();
}

cudaError_t layernorm_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean,
                              float* rstd, std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    if (rows > 0x7fffffffLL) return cudaErrorInvalidValue;
    layernorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(gamma),
        static_cast<const __nv_bfloat16*>(beta), static_cast<__nv_bfloat16*>(y), mean, rstd, cols);
    return cudaGetLastError();
}

cudaError_t spin(std::int64_t ns, cudaStream_t stream) {
    if (ns <= 0) return cudaSuccess;
    spin_kernel<<<1, 1, 0, stream>>>(ns);
    return cudaGetLastError();
}

cudaError_t gelu_forward(const void* x, void* y, std::int64_t n, cudaStream_t stream) {
    if (n <= 0) return cudaSuccess;
    gelu_kernel<<<grid_for(n / 8 > 0 ? n / 8 : n), kThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<__nv_bfloat16*>(y), n);
    return cudaGetLastError();
}

}  // namespace trainsim::calibrate::kernels
