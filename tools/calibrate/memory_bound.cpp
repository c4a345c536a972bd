// trainsim-calibrate: memory-bound kernels (copy, layer norm, GeLU) on bf16 tensors.
#include "cuda_util.hpp"
#include "kernels.hpp"

namespace trainsim::calibrate {

std::vector<MemoryRow> measure_memory_bound(int device, const std::vector<MemoryJob>& jobs,
                                            const RepPolicy& p, Progress& progress) {
    check_cuda(cudaSetDevice(device), "cudaSetDevice");
    cudaStream_t stream = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    struct StreamGuard {
        cudaStream_t s;
        ~StreamGuard() { cudaStreamDestroy(s); }
    } guard{stream};

    std::vector<MemoryRow> rows;
    progress.section("memory-bound", jobs.size());
    DeviceBuffer x, y, gamma, beta, mean, rstd;
    std::uint64_t seed = 5000;
    for (const auto& j : jobs) {
        progress.step(j.label);
        const std::int64_t elems = j.rows * j.cols;
        const auto bytes = static_cast<std::size_t>(elems) * 2;
        if (!x.reserve(bytes) || !y.reserve(bytes)) {
            x.release(), y.release();
            progress.note(fmt::format("{}: out of device memory, skipped", j.label));
            continue;
        }
        check_cuda(kernels::fill_uniform(x.get(), elems, kernels::Elem::bf16, seed++, 1.0f, stream),
                   "fill_uniform");
        TimingStats t;
        if (j.kernel == "copy") {
            t = time_on_stream(stream, p, [&] {
                check_cuda(cudaMemcpyAsync(y.get(), x.get(), bytes, cudaMemcpyDeviceToDevice, stream),
                           "cudaMemcpyAsync");
            });
        } else if (j.kernel == "gelu") {
            t = time_on_stream(stream, p, [&] {
                check_cuda(kernels::gelu_forward(x.get(), y.get(), elems, stream), "gelu_forward");
            });
        } else if (j.kernel == "layernorm") {
            const auto param_bytes = static_cast<std::size_t>(j.cols) * 2;
            const auto stat_bytes = static_cast<std::size_t>(j.rows) * sizeof(float);
            if (!gamma.reserve(param_bytes) || !beta.reserve(param_bytes) || !mean.reserve(stat_bytes) ||
                !rstd.reserve(stat_bytes)) {
                progress.note(fmt::format("{}: out of device memory, skipped", j.label));
                continue;
            }
            check_cuda(kernels::fill_uniform(gamma.get(), j.cols, kernels::Elem::bf16, seed++, 1.0f, stream),
                       "fill_uniform");
            check_cuda(kernels::fill_uniform(beta.get(), j.cols, kernels::Elem::bf16, seed++, 1.0f, stream),
                       "fill_uniform");
            t = time_on_stream(stream, p, [&] {
                check_cuda(
                    kernels::layernorm_forward(x.get(), gamma.get(), beta.get(), y.get(), mean.as<float>(),
                                               rstd.as<float>(), j.rows, j.cols, stream),
                    "layernorm_forward");
            });
        } else {
            throw DeviceError(fmt::format("unknown memory-bound kernel \"{}\"", j.kernel));
        }
        rows.push_back(MemoryRow{j.kernel, memory_job_bytes(j), t, j.label});
    }
    progress.done();
    return rows;
}

}  // namespace trainsim::calibrate
