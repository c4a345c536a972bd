// trainsim-calibrate: GEMMs through cuBLASLt, and the unfused attention path through cuBLAS batched GEMMs and
// the softmax kernels of kernels.cu.
#include <cmath>
#include <memory>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "cuda_util.hpp"
#include "kernels.hpp"

namespace trainsim::calibrate {

namespace {

constexpr std::size_t kWorkspaceBytes = 32u << 20;  // cuBLAS recommends 32 MiB on Hopper

/// A cuBLAS status that means "this configuration is not available" (no algorithm, unsupported): the row
/// is skipped with a note; any other failure is a DeviceError.
class Unsupported : public std::runtime_error {
  public:
    using std::runtime_error::runtime_error;
};

void check_blas(cublasStatus_t s, const char* call) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    const std::string msg = fmt::format("{}: {}", call, cublasLtGetStatusString(s));
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH) throw Unsupported(msg);
    throw DeviceError(msg);
}

cudaDataType input_type(GemmDtype d) {
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
cudaDataType output_type(GemmDtype d) {
    return d == GemmDtype::fp16 ? CUDA_R_16F : CUDA_R_16BF;
}
std::size_t input_bytes(GemmDtype d) {
    return d == GemmDtype::fp8 ? 1 : 2;
}
kernels::Elem input_elem(GemmDtype d) {
    return d == GemmDtype::fp8 ? kernels::Elem::e4m3 : d == GemmDtype::fp16 ? kernels::Elem::fp16 : kernels::Elem::bf16;
}

struct LtDescriptors {
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

void set_batch(cublasLtMatrixLayout_t l, std::int64_t batch, std::int64_t stride) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    check_blas(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)");
    check_blas(
        cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
        "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)");
}

struct Stream {
    cudaStream_t s = nullptr;
    Stream() { check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate"); }
    ~Stream() { cudaStreamDestroy(s); }
};

std::string shape_text(const GemmJob& j) {
    return fmt::format("{} {}x{}x{}{}", to_string(j.dtype), j.m, j.n, j.k,
                       j.batch > 1 ? fmt::format(" batch {}", j.batch) : "");
}

/// Row-major C[M, N] = alpha * op(A) . op(B), bf16, fp32 accumulation, `batch` products with strides M*K,
/// K*N, M*N; A is stored [M, K] ([K, M] when `ta`), B [K, N] ([N, K] when `tb`). cuBLAS is column-major, so
/// it computes C^T = op(B)^T . op(A)^T.
void rm_gemm(cublasHandle_t h, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
             const void* A, const void* B, void* C, std::int64_t batch) {
    const float beta = 0;
    check_blas(cublasGemmStridedBatchedEx(h, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                                          static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &alpha,
                                          B, CUDA_R_16BF, static_cast<int>(tb ? K : N), K * N, A, CUDA_R_16BF,
                                          static_cast<int>(ta ? M : K), M * K, &beta, C, CUDA_R_16BF,
                                          static_cast<int>(N), M * N, static_cast<int>(batch),
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmStridedBatchedEx");
}

}  // namespace

std::vector<GemmRow> measure_gemms(int device, const std::vector<GemmJob>& jobs, const RepPolicy& p,
                                   Progress& progress) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    Stream stream;
    cublasLtHandle_t lt = nullptr;
    check_blas(cublasLtCreate(&lt), "cublasLtCreate");
    std::unique_ptr<cublasLtContext, decltype(&cublasLtDestroy)> lt_guard(lt, cublasLtDestroy);
    DeviceBuffer a, b, d, workspace, scales;
    if (!workspace.reserve(kWorkspaceBytes) || !scales.reserve(2 * sizeof(float)))
        throw DeviceError("out of device memory for the cuBLASLt workspace");
    // Per-tensor scales of the fp8 operands (the value does not change the kernel's time).
    const float one[2] = {1.0f, 1.0f};
    check_cuda(cudaMemcpy(scales.get(), one, sizeof one, cudaMemcpyHostToDevice), "cudaMemcpy");

    std::vector<GemmRow> rows;
    progress.section("gemm", jobs.size());
    std::uint64_t seed = 1;
    for (const auto& j : jobs) {
        progress.step(fmt::format("{} ({})", shape_text(j), j.label));
        const std::size_t ib = input_bytes(j.dtype);
        const auto a_elems = static_cast<std::size_t>(j.n * j.k * j.batch);  // W [n, k]
        const auto b_elems = static_cast<std::size_t>(j.m * j.k * j.batch);  // x [m, k]
        const auto d_elems = static_cast<std::size_t>(j.m * j.n * j.batch);  // y [m, n]
        if (!a.reserve(a_elems * ib) || !b.reserve(b_elems * ib) || !d.reserve(d_elems * 2)) {
            a.release(), b.release(), d.release();
            progress.note(fmt::format("gemm {}: out of device memory, skipped", shape_text(j)));
            continue;
        }
        check_cuda(kernels::fill_uniform(a.get(), static_cast<std::int64_t>(a_elems), input_elem(j.dtype), seed++,
                                         1.0f, stream.s),
                   "fill_uniform");
        check_cuda(kernels::fill_uniform(b.get(), static_cast<std::int64_t>(b_elems), input_elem(j.dtype), seed++,
                                         1.0f, stream.s),
                   "fill_uniform");
        try {
            LtDescriptors desc;
            check_blas(cublasLtMatmulDescCreate(&desc.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
            const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
            check_blas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                       "cublasLtMatmulDescSetAttribute(TRANSA)");
            check_blas(cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                       "cublasLtMatmulDescSetAttribute(TRANSB)");
            if (j.dtype == GemmDtype::fp8) {
                const float* sa = scales.as<float>();
                const float* sb = sa + 1;
                check_blas(
                    cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa),
                    "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
                check_blas(
                    cublasLtMatmulDescSetAttribute(desc.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb),
                    "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
            }
            // Column-major: A = W^T stored [k, n] (ld k), used transposed; B = x^T stored [k, m] (ld k); D =
            // y^T [n, m] (ld n).
            check_blas(cublasLtMatrixLayoutCreate(&desc.a, input_type(j.dtype), j.k, j.n, j.k), "cublasLtMatrixLayoutCreate");
            check_blas(cublasLtMatrixLayoutCreate(&desc.b, input_type(j.dtype), j.k, j.m, j.k), "cublasLtMatrixLayoutCreate");
            check_blas(cublasLtMatrixLayoutCreate(&desc.c, output_type(j.dtype), j.n, j.m, j.n), "cublasLtMatrixLayoutCreate");
            if (j.batch > 1) {
                set_batch(desc.a, j.batch, j.n * j.k);
                set_batch(desc.b, j.batch, j.m * j.k);
                set_batch(desc.c, j.batch, j.m * j.n);
            }
            check_blas(cublasLtMatmulPreferenceCreate(&desc.pref), "cublasLtMatmulPreferenceCreate");
            const std::uint64_t ws = kWorkspaceBytes;
            check_blas(cublasLtMatmulPreferenceSetAttribute(desc.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                            sizeof ws),
                       "cublasLtMatmulPreferenceSetAttribute");
            cublasLtMatmulHeuristicResult_t heuristic{};
            int found = 0;
            check_blas(cublasLtMatmulAlgoGetHeuristic(lt, desc.op, desc.a, desc.b, desc.c, desc.c, desc.pref, 1,
                                                      &heuristic, &found),
                       "cublasLtMatmulAlgoGetHeuristic");
            if (found == 0) throw Unsupported("cublasLtMatmulAlgoGetHeuristic found no algorithm");
            const float alpha = 1, beta = 0;
            const TimingStats t = time_on_stream(stream.s, p, [&] {
                check_blas(cublasLtMatmul(lt, desc.op, &alpha, a.get(), desc.a, b.get(), desc.b, &beta, d.get(),
                                          desc.c, d.get(), desc.c, &heuristic.algo, workspace.get(), kWorkspaceBytes,
                                          stream.s),
                           "cublasLtMatmul");
            });
            rows.push_back(GemmRow{j.dtype, j.m, j.n, j.k, j.batch, t, j.label});
        } catch (const Unsupported& e) {
            progress.note(fmt::format("gemm {}: {}, skipped", shape_text(j), e.what()));
        }
    }
    progress.done();
    return rows;
}

std::vector<AttentionRow> measure_attention(int device, const std::vector<AttentionShape>& shapes,
                                            const RepPolicy& p, Progress& progress) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    Stream stream;
    cublasHandle_t h = nullptr;
    check_blas(cublasCreate(&h), "cublasCreate");
    std::unique_ptr<cublasContext, decltype(&cublasDestroy)> h_guard(h, cublasDestroy);
    check_blas(cublasSetStream(h, stream.s), "cublasSetStream");

    std::vector<AttentionRow> rows;
    progress.section("attention", 2 * shapes.size());
    std::uint64_t seed = 1000;
    for (const auto& s : shapes) {
        const std::string what = fmt::format("b={} heads={} kv_heads={} seq={} head_dim={}", s.batch, s.heads,
                                             s.kv_heads, s.seq, s.head_dim);
        // Q, K, V [batch*heads, seq, head_dim]: K and V expanded to every query head (Megatron-LM's unfused
        // path repeat_interleaves them; the expansion itself is not timed).
        const std::int64_t bh = s.batch * s.heads, sq = s.seq, d = s.head_dim;
        const auto qkv_bytes = static_cast<std::size_t>(bh * sq * d * 2);
        const auto score_bytes = static_cast<std::size_t>(bh * sq * sq * 2);
        const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
        DeviceBuffer q, k, v, o, scores;
        progress.step("fwd " + what);
        if (!q.reserve(qkv_bytes) || !k.reserve(qkv_bytes) || !v.reserve(qkv_bytes) || !o.reserve(qkv_bytes) ||
            !scores.reserve(score_bytes)) {
            progress.note(fmt::format("attention {}: out of device memory (scores {:.1f} GiB), skipped", what,
                                      static_cast<double>(score_bytes) / (1 << 30)));
            progress.step("bwd " + what);
            continue;
        }
        for (DeviceBuffer* buf : {&q, &k, &v})
            check_cuda(kernels::fill_uniform(buf->get(), bh * sq * d, kernels::Elem::bf16, seed++, 1.0f, stream.s),
                       "fill_uniform");
        try {
            auto forward = [&] {
                rm_gemm(h, false, true, sq, sq, d, alpha, q.get(), k.get(), scores.get(), bh);  // S = Q.K^T
                check_cuda(kernels::causal_softmax_forward(scores.get(), bh * sq, sq, sq, 1.0f, stream.s),
                           "causal_softmax_forward");
                rm_gemm(h, false, false, sq, d, sq, 1.0f, scores.get(), v.get(), o.get(), bh);  // O = P.V
            };
            rows.push_back(AttentionRow{"unfused", true, s, time_on_stream(stream.s, p, forward)});
            // `scores` now holds P of the last forward.
            progress.step("bwd " + what);
            DeviceBuffer dout, dq, dk, dv, dp;
            if (!dout.reserve(qkv_bytes) || !dq.reserve(qkv_bytes) || !dk.reserve(qkv_bytes) ||
                !dv.reserve(qkv_bytes) || !dp.reserve(score_bytes)) {
                progress.note(fmt::format("attention backward {}: out of device memory, skipped", what));
                continue;
            }
            check_cuda(kernels::fill_uniform(dout.get(), bh * sq * d, kernels::Elem::bf16, seed++, 1.0f, stream.s),
                       "fill_uniform");
            auto backward = [&] {
                rm_gemm(h, true, false, sq, d, sq, 1.0f, scores.get(), dout.get(), dv.get(), bh);  // dV = P^T.dO
                rm_gemm(h, false, true, sq, sq, d, 1.0f, dout.get(), v.get(), dp.get(), bh);       // dP = dO.V^T
                check_cuda(kernels::softmax_backward(scores.get(), dp.get(), bh * sq, sq, 1.0f, stream.s),
                           "softmax_backward");
                rm_gemm(h, false, false, sq, d, sq, alpha, dp.get(), k.get(), dq.get(), bh);  // dQ = dS.K
                rm_gemm(h, true, false, sq, d, sq, alpha, dp.get(), q.get(), dk.get(), bh);   // dK = dS^T.Q
            };
            rows.push_back(AttentionRow{"unfused", false, s, time_on_stream(stream.s, p, backward)});
        } catch (const Unsupported& e) {
            progress.note(fmt::format("attention {}: {}, skipped", what, e.what()));
        }
    }
    progress.done();
    return rows;
}

}  // namespace trainsim::calibrate
