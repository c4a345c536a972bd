// trainsim-calibrate --self-check: the timed GPU paths run once on small inputs and compared with CPU
// references, so that a first run on new hardware shows the measurements time the right computation.
#include <cmath>
#include <memory>

#include "blas_ops.hpp"

namespace trainsim::calibrate {

namespace {

struct Checker {
    std::ostream& log;
    int failures = 0;
    void report(const std::string& name, double worst) {
        const bool ok = worst <= 1;
        log << fmt::format("self-check {}: {} (worst error {:.3f} of the tolerance)\n", name,
                           ok ? "ok" : "FAILED", worst);
        failures += ok ? 0 : 1;
    }
};

DeviceBuffer& random_buffer(DeviceBuffer& b, std::int64_t n, kernels::Elem e, std::uint64_t seed,
                            cudaStream_t s) {
    const std::size_t eb = e == kernels::Elem::e4m3 ? 1 : e == kernels::Elem::fp32 ? 4 : 2;
    if (!b.reserve(static_cast<std::size_t>(n) * eb))
        throw DeviceError("out of device memory in --self-check");
    check_cuda(kernels::fill_uniform(b.get(), n, e, seed, 1.0f, s), "fill_uniform");
    return b;
}

void check_gemms(int device, Checker& c, cudaStream_t s) {
    cublasLtHandle_t lt = nullptr;
    check_blas(cublasLtCreate(&lt), "cublasLtCreate");
    std::unique_ptr<cublasLtContext, decltype(&cublasLtDestroy)> guard(lt, cublasLtDestroy);
    DeviceBuffer workspace, scales;
    if (!workspace.reserve(kWorkspaceBytes) || !scales.reserve(2 * sizeof(float)))
        throw DeviceError("out of device memory in --self-check");
    const float scale[2] = {0.5f, 4.0f};  // W's and x's: y = 2 x.W^T for fp8
    check_cuda(cudaMemcpy(scales.get(), scale, sizeof scale, cudaMemcpyHostToDevice), "cudaMemcpy");
    const DeviceProps props = device_props(device);
    std::vector<GemmJob> jobs{{GemmDtype::bf16, 96, 80, 64, 1, ""},
                              {GemmDtype::bf16, 40, 24, 72, 3, ""},
                              {GemmDtype::fp16, 96, 80, 64, 1, ""},
                              {GemmDtype::fp16, 40, 24, 72, 2, ""}};
    if (has_fp8(props.cc_major, props.cc_minor)) jobs.push_back({GemmDtype::fp8, 64, 48, 96, 1, ""});
    std::uint64_t seed = 90000;
    for (const auto& j : jobs) {
        const kernels::Elem in = input_elem(j.dtype);
        const kernels::Elem out = j.dtype == GemmDtype::fp16 ? kernels::Elem::fp16 : kernels::Elem::bf16;
        DeviceBuffer w, x, y;
        random_buffer(w, j.n * j.k * j.batch, in, seed++, s);
        random_buffer(x, j.m * j.k * j.batch, in, seed++, s);
        random_buffer(y, j.m * j.n * j.batch, out, seed++, s);  // overwritten (beta = 0)
        const std::string name = "gemm " + shape_text(j);
        try {
            const LtMatmul mm(lt, j, scales.as<float>());
            mm.run(w.get(), x.get(), y.get(), workspace.get(), s);
        } catch (const Unsupported& e) {
            c.log << fmt::format("self-check {}: {} (not checked)\n", name, e.what());
            continue;
        }
        check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        auto want = reference::gemm_xwt(download(x.get(), j.m * j.k * j.batch, in),
                                        download(w.get(), j.n * j.k * j.batch, in), j.m, j.n, j.k, j.batch);
        if (j.dtype == GemmDtype::fp8)
            for (auto& v : want)
                v *= scale[0] * scale[1];
        c.report(name, reference::worst_error(download(y.get(), j.m * j.n * j.batch, out), want, 1e-2, 1e-2));
    }
}

void check_attention(Checker& c, cudaStream_t s) {
    cublasHandle_t h = nullptr;
    check_blas(cublasCreate(&h), "cublasCreate");
    std::unique_ptr<cublasContext, decltype(&cublasDestroy)> guard(h, cublasDestroy);
    check_blas(cublasSetStream(h, s), "cublasSetStream");
    const std::int64_t bh = 3, seq = 40, d = 16;
    const float alpha = 1.0f / std::sqrt(static_cast<float>(d));
    const std::int64_t nq = bh * seq * d, np = bh * seq * seq;
    const auto bf = kernels::Elem::bf16;
    DeviceBuffer q, k, v, o, p, dout, dq, dk, dv, dp;
    random_buffer(q, nq, bf, 1, s), random_buffer(k, nq, bf, 2, s), random_buffer(v, nq, bf, 3, s);
    random_buffer(o, nq, bf, 4, s), random_buffer(p, np, bf, 5, s), random_buffer(dout, nq, bf, 6, s);
    random_buffer(dq, nq, bf, 7, s), random_buffer(dk, nq, bf, 8, s), random_buffer(dv, nq, bf, 9, s);
    random_buffer(dp, np, bf, 10, s);
    const AttentionBuffers ab{q.get(),    k.get(),  v.get(),  o.get(),  p.get(),
                              dout.get(), dq.get(), dk.get(), dv.get(), dp.get()};
    unfused_attention_forward(h, s, ab, bh, seq, d, alpha);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const auto hq = download(q.get(), nq, bf), hk = download(k.get(), nq, bf), hv = download(v.get(), nq, bf);
    const auto fwd = reference::attention_forward(hq, hk, hv, bh, seq, d, alpha);
    const auto gpu_p = download(p.get(), np, bf);
    c.report("attention forward P (causal softmax)", reference::worst_error(gpu_p, fwd.p, 3e-2, 1e-3));
    c.report("attention forward O", reference::worst_error(download(o.get(), nq, bf), fwd.o, 3e-2, 1e-3));
    unfused_attention_backward(h, s, ab, bh, seq, d, alpha);
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const auto bwd =
        reference::attention_backward(hq, hk, hv, gpu_p, download(dout.get(), nq, bf), bh, seq, d, alpha);
    c.report("attention backward dQ", reference::worst_error(download(dq.get(), nq, bf), bwd.dq, 5e-2, 1e-3));
    c.report("attention backward dK", reference::worst_error(download(dk.get(), nq, bf), bwd.dk, 5e-2, 1e-3));
    c.report("attention backward dV", reference::worst_error(download(dv.get(), nq, bf), bwd.dv, 3e-2, 1e-3));
}

void check_memory_bound(Checker& c, cudaStream_t s) {
    const auto bf = kernels::Elem::bf16;
    const std::int64_t rows = 5, cols = 1000, n = rows * cols + 3;  // GeLU: a tail after the 8-wide vectors
    DeviceBuffer x, y, gamma, beta, mean, rstd;
    random_buffer(x, n, bf, 20, s), random_buffer(y, n, bf, 21, s);
    random_buffer(gamma, cols, bf, 22, s), random_buffer(beta, cols, bf, 23, s);
    random_buffer(mean, rows, kernels::Elem::fp32, 24, s),
        random_buffer(rstd, rows, kernels::Elem::fp32, 25, s);
    check_cuda(kernels::layernorm_forward(x.get(), gamma.get(), beta.get(), y.get(), mean.as<float>(),
                                          rstd.as<float>(), rows, cols, s),
               "layernorm_forward");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    const auto hx = download(x.get(), n, bf);
    const std::vector<float> hx_ln(hx.begin(), hx.begin() + rows * cols);
    c.report("layernorm",
             reference::worst_error(download(y.get(), rows * cols, bf),
                                    reference::layernorm(hx_ln, download(gamma.get(), cols, bf),
                                                         download(beta.get(), cols, bf), rows, cols),
                                    2e-2, 1e-2));
    check_cuda(kernels::gelu_forward(x.get(), y.get(), n, s), "gelu_forward");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    c.report("gelu", reference::worst_error(download(y.get(), n, bf), reference::gelu(hx), 1e-2, 1e-3));
    check_cuda(
        cudaMemcpyAsync(y.get(), x.get(), static_cast<std::size_t>(n) * 2, cudaMemcpyDeviceToDevice, s),
        "cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    c.report("copy", reference::worst_error(download(y.get(), n, bf), hx, 0, 1e-30));
}

}  // namespace

int self_check(int device, std::ostream& log) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    Stream stream;
    Checker c{log};
    check_gemms(device, c, stream.s);
    check_attention(c, stream.s);
    check_memory_bound(c, stream.s);
    return c.failures;
}

}  // namespace trainsim::calibrate
