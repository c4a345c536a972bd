// trainsim-calibrate: GEMMs through cuBLASLt, and the unfused attention path through cuBLAS batched GEMMs and
// the softmax kernels of kernels.cu.
#include <cmath>
#include <memory>

#include "blas_ops.hpp"

namespace trainsim::calibrate {

LtMatmul::LtMatmul(cublasLtHandle_t lt, const GemmJob& j, const float* scales) : lt_(lt) {
    check_blas(cublasLtMatmulDescCreate(&desc_.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check_blas(cublasLtMatmulDescSetAttribute(desc_.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
               "cublasLtMatmulDescSetAttribute(TRANSA)");
    check_blas(cublasLtMatmulDescSetAttribute(desc_.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
               "cublasLtMatmulDescSetAttribute(TRANSB)");
    if (j.dtype == GemmDtype::fp8) {
        const float* sa = scales;
        const float* sb = scales + 1;
        check_blas(
            cublasLtMatmulDescSetAttribute(desc_.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa),
            "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
        check_blas(
            cublasLtMatmulDescSetAttribute(desc_.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb),
            "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
    }
    // Column-major: A = W^T stored [k, n] (ld k), used transposed; B = x^T stored [k, m] (ld k); C = D = y^T
    // [n, m] (ld n).
    check_blas(cublasLtMatrixLayoutCreate(&desc_.a, input_type(j.dtype), j.k, j.n, j.k),
               "cublasLtMatrixLayoutCreate");
    check_blas(cublasLtMatrixLayoutCreate(&desc_.b, input_type(j.dtype), j.k, j.m, j.k),
               "cublasLtMatrixLayoutCreate");
    check_blas(cublasLtMatrixLayoutCreate(&desc_.c, output_type(j.dtype), j.n, j.m, j.n),
               "cublasLtMatrixLayoutCreate");
    if (j.batch > 1) {
        set_batch(desc_.a, j.batch, j.n * j.k);
        set_batch(desc_.b, j.batch, j.m * j.k);
        set_batch(desc_.c, j.batch, j.m * j.n);
    }
    check_blas(cublasLtMatmulPreferenceCreate(&desc_.pref), "cublasLtMatmulPreferenceCreate");
    const std::uint64_t ws = kWorkspaceBytes;
    check_blas(cublasLtMatmulPreferenceSetAttribute(desc_.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                                    sizeof ws),
               "cublasLtMatmulPreferenceSetAttribute");
    int found = 0;
    check_blas(cublasLtMatmulAlgoGetHeuristic(lt_, desc_.op, desc_.a, desc_.b, desc_.c, desc_.c, desc_.pref,
                                              1, &heuristic_, &found),
               "cublasLtMatmulAlgoGetHeuristic");
    if (found == 0) throw Unsupported("cublasLtMatmulAlgoGetHeuristic found no algorithm");
}

void LtMatmul::run(const void* w, const void* x, void* y, void* workspace, cudaStream_t stream) const {
    const float alpha = 1, beta = 0;
    check_blas(cublasLtMatmul(lt_, desc_.op, &alpha, w, desc_.a, x, desc_.b, &beta, y, desc_.c, y, desc_.c,
                              &heuristic_.algo, workspace, kWorkspaceBytes, stream),
               "cublasLtMatmul");
}

void unfused_attention_forward(cublasHandle_t h, cudaStream_t s, const AttentionBuffers& b, std::int64_t bh,
                               std::int64_t seq, std::int64_t d, float alpha) {
    rm_gemm(h, false, true, seq, seq, d, alpha, b.q, b.k, b.p, bh);  // S = alpha Q.K^T
    check_cuda(kernels::causal_softmax_forward(b.p, bh * seq, seq, seq, 1.0f, s), "causal_softmax_forward");
    rm_gemm(h, false, false, seq, d, seq, 1.0f, b.p, b.v, b.o, bh);  // O = P.V
}

void unfused_attention_backward(cublasHandle_t h, cudaStream_t s, const AttentionBuffers& b, std::int64_t bh,
                                std::int64_t seq, std::int64_t d, float alpha) {
    rm_gemm(h, true, false, seq, d, seq, 1.0f, b.p, b.dout, b.dv, bh);  // dV = P^T.dO
    rm_gemm(h, false, true, seq, seq, d, 1.0f, b.dout, b.v, b.dp, bh);  // dP = dO.V^T
    check_cuda(kernels::softmax_backward(b.p, b.dp, bh * seq, seq, 1.0f, s), "softmax_backward");
    rm_gemm(h, false, false, seq, d, seq, alpha, b.dp, b.k, b.dq, bh);  // dQ = alpha dS.K
    rm_gemm(h, true, false, seq, d, seq, alpha, b.dp, b.q, b.dk, bh);   // dK = alpha dS^T.Q
}

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
        check_cuda(kernels::fill_uniform(a.get(), static_cast<std::int64_t>(a_elems), input_elem(j.dtype),
                                         seed++, 1.0f, stream.s),
                   "fill_uniform");
        check_cuda(kernels::fill_uniform(b.get(), static_cast<std::int64_t>(b_elems), input_elem(j.dtype),
                                         seed++, 1.0f, stream.s),
                   "fill_uniform");
        try {
            const LtMatmul mm(lt, j, scales.as<float>());
            const TimingStats t = time_on_stream(
                stream.s, p, [&] { mm.run(a.get(), b.get(), d.get(), workspace.get(), stream.s); });
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
        DeviceBuffer q, k, v, o, probs;
        progress.step("fwd " + what);
        if (!q.reserve(qkv_bytes) || !k.reserve(qkv_bytes) || !v.reserve(qkv_bytes) ||
            !o.reserve(qkv_bytes) || !probs.reserve(score_bytes)) {
            progress.note(fmt::format("attention {}: out of device memory (scores {:.1f} GiB), skipped", what,
                                      static_cast<double>(score_bytes) / (1 << 30)));
            progress.step("bwd " + what);
            continue;
        }
        for (DeviceBuffer* buf : {&q, &k, &v})
            check_cuda(
                kernels::fill_uniform(buf->get(), bh * sq * d, kernels::Elem::bf16, seed++, 1.0f, stream.s),
                "fill_uniform");
        AttentionBuffers ab{q.get(), k.get(), v.get(), o.get(), probs.get(),
                            nullptr, nullptr, nullptr, nullptr, nullptr};
        try {
            rows.push_back(AttentionRow{"unfused", true, s, time_on_stream(stream.s, p, [&] {
                                            unfused_attention_forward(h, stream.s, ab, bh, sq, d, alpha);
                                        })});
            // `probs` now holds P of the last forward.
            progress.step("bwd " + what);
            DeviceBuffer dout, dq, dk, dv, dp;
            if (!dout.reserve(qkv_bytes) || !dq.reserve(qkv_bytes) || !dk.reserve(qkv_bytes) ||
                !dv.reserve(qkv_bytes) || !dp.reserve(score_bytes)) {
                progress.note(fmt::format("attention backward {}: out of device memory, skipped", what));
                continue;
            }
            check_cuda(
                kernels::fill_uniform(dout.get(), bh * sq * d, kernels::Elem::bf16, seed++, 1.0f, stream.s),
                "fill_uniform");
            ab.dout = dout.get(), ab.dq = dq.get(), ab.dk = dk.get(), ab.dv = dv.get(), ab.dp = dp.get();
            rows.push_back(AttentionRow{"unfused", false, s, time_on_stream(stream.s, p, [&] {
                                            unfused_attention_backward(h, stream.s, ab, bh, sq, d, alpha);
                                        })});
        } catch (const Unsupported& e) {
            progress.note(fmt::format("attention {}: {}, skipped", what, e.what()));
        }
    }
    progress.done();
    return rows;
}

}  // namespace trainsim::calibrate
