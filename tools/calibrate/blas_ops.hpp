// Internal to trainsim-calibrate's device part: cuBLAS/cuBLASLt helpers shared by the measurements (gemm.cpp)
// and --self-check (selfcheck.cpp), so that both run exactly the same GPU code.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include "cuda_util.hpp"
#include "kernels.hpp"

namespace trainsim::calibrate {

inline constexpr std::size_t kWorkspaceBytes = 32u << 20;  // cuBLAS recommends 32 MiB on Hopper

/// A cuBLAS status that means "this configuration is not available" (no algorithm, unsupported): the row
/// is skipped with a note; any other failure is a DeviceError.
class Unsupported : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

inline void check_blas(cublasStatus_t s, const char* call) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    const std::string msg = fmt::format("{}: {}", call, cublasLtGetStatusString(s));
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH) throw Unsupported(msg);
    throw DeviceError(msg);
}

inline cudaDataType input_type(GemmDtype d) {
    switch (d) {
        case GemmDtype::bf16:
            return CUDA_R_16BF;
        case GemmDtype::fp16:
            return CUDA_R_16F;
        case GemmDtype::fp8:
            return CUDA_R_8F_E4M3;
    }
    return CUDA_R_16BF;
}
/// fp8 GEMMs write bf16 (as torch._scaled_mm with out_dtype bf16 and TransformerEngine's fp8 GEMMs do).
inline cudaDataType output_type(GemmDtype d) {
    return d == GemmDtype::fp16 ? CUDA_R_16F : CUDA_R_16BF;
}
inline std::size_t input_bytes(GemmDtype d) {
    return d == GemmDtype::fp8 ? 1 : 2;
}
inline kernels::Elem input_elem(GemmDtype d) {
    return d == GemmDtype::fp8    ? kernels::Elem::e4m3
           : d == GemmDtype::fp16 ? kernels::Elem::fp16
                                  : kernels::Elem::bf16;
}

struct LtDescriptors {
    LtDescriptors() = default;
    LtDescriptors(const LtDescriptors&) = delete;
    LtDescriptors& operator=(const LtDescriptors&) = delete;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~LtDescriptors() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

inline void set_batch(cublasLtMatrixLayout_t l, std::int64_t batch, std::int64_t stride) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    check_blas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    check_blas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                sizeof stride),
               "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

struct Stream {
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    cudaStream_t s = nullptr;
    Stream() { check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream() { cudaStreamDestroy(s); }
};

inline std::string shape_text(const GemmJob& j) {
    return fmt::format("{} {}x{}x{}{}", to_string(j.dtype), j.m, j.n, j.k,
                       j.batch > 1 ? fmt::format(" batch {}", j.batch) : "");
}

/// Row-major C[M, N] = alpha * op(A) . op(B), bf16, fp32 accumulation, `batch` products with strides M*K,
/// K*N, M*N; A is stored [M, K] ([K, M] when `ta`), B [K, N] ([N, K] when `tb`). cuBLAS is column-major, so
/// it computes C^T = op(B)^T . op(A)^T.
inline void rm_gemm(cublasHandle_t h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K,
                    float alpha, const void* A, const void* B, void* C, std::int64_t batch) {
    const float beta = 0;
    check_blas(cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          static_cast<int>(N), static_cast<int>(M), static_cast<int>(K),
                                          &alpha, B, CUDA_R_16BF, static_cast<int>(tb ? K : N), K * N, A,
                                          CUDA_R_16BF, static_cast<int>(ta ? M : K), M * K, &beta, C,
                                          CUDA_R_16BF, static_cast<int>(N), M * N, static_cast<int>(batch),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

/// One cuBLASLt GEMM y[m, n] = x[m, k] . W[n, k]^T of `job` (TN layout; see measure_gemms), its algorithm
/// chosen once. Throws Unsupported when cuBLASLt has no algorithm for it.
class LtMatmul {
  public:
    /// `scales`: two device floats, the per-tensor scales of W and x (used for fp8 only).
    LtMatmul(cublasLtHandle_t lt, const GemmJob& job, const float* scales);
    /// Enqueues y = x . W^T on `stream` (W [batch][n, k], x [batch][m, k], y [batch][m, n]).
    void run(const void* w, const void* x, void* y, void* workspace, cudaStream_t stream) const;

  private:
    cublasLtHandle_t lt_;
    LtDescriptors desc_;
    cublasLtMatmulHeuristicResult_t heuristic_{};
};

/// Unfused causal attention of `bh` heads of [seq, d] (bf16, row-major), as measure_attention times it.
struct AttentionBuffers {
    void *q, *k, *v, *o, *p;         ///< forward: P ([bh, seq, seq]) holds the probabilities afterwards
    void *dout, *dq, *dk, *dv, *dp;  ///< backward: dp holds dS afterwards
};
/// S = alpha Q.K^T, P = causal softmax(S) in place, O = P.V.
void unfused_attention_forward(cublasHandle_t h, cudaStream_t s, const AttentionBuffers& b, std::int64_t bh,
                               std::int64_t seq, std::int64_t d, float alpha);
/// dV = P^T.dO, dP = dO.V^T, dS = P (dP - rowsum(dP P)) in place, dQ = alpha dS.K, dK = alpha dS^T.Q.
void unfused_attention_backward(cublasHandle_t h, cudaStream_t s, const AttentionBuffers& b, std::int64_t bh,
                                std::int64_t seq, std::int64_t d, float alpha);

}  // namespace trainsim::calibrate
