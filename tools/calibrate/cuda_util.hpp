// Internal to trainsim-calibrate's device part: status checks that throw DeviceError naming the call, device
// buffers, and the CUDA-event timer shared by the GEMM, attention and memory-bound measurements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "kernels.hpp"
#include "measure.hpp"
#include "reference.hpp"

namespace trainsim::calibrate {

inline void check_cuda(cudaError_t e, const char* call) {
    if (e != cudaSuccess)
        throw DeviceError(fmt::format("{}: {} ({})", call, cudaGetErrorString(e), cudaGetErrorName(e)));
}

/// A device allocation that grows on demand (contents are lost when it grows).
class DeviceBuffer {
  public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    ~DeviceBuffer() { release(); }
    /// Ensures at least `bytes`; false (and no buffer) when the device is out of memory.
    bool reserve(std::size_t bytes) {
        if (bytes <= bytes_) return true;
        release();
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();  // clear the sticky-free allocation error
            return false;
        }
        check_cuda(e, "cudaMalloc");
        ptr_ = p;
        bytes_ = bytes;
        return true;
    }
    void release() {
        if (ptr_) cudaFree(ptr_);
        ptr_ = nullptr;
        bytes_ = 0;
    }
    void* get() const { return ptr_; }
    template <typename T>
    T* as() const {
        return static_cast<T*>(ptr_);
    }

  private:
    void* ptr_ = nullptr;
    std::size_t bytes_ = 0;
};

/// Times `launch` (which enqueues one run on `stream` and returns nothing or throws) with CUDA events:
/// warm-up runs (each timed, to size the repetitions), then reps_for(median warm-up time) runs enqueued back
/// to back behind a spin kernel (kernels::spin) that holds the stream while they are enqueued, each between
/// its own pair of events; the statistics of the timed runs.
template <typename Launch>
TimingStats time_on_stream(cudaStream_t stream, const RepPolicy& p, Launch&& launch) {
    cudaEvent_t a, b;
    check_cuda(cudaEventCreate(&a), "cudaEventCreate");
    check_cuda(cudaEventCreate(&b), "cudaEventCreate");
    std::vector<double> warm;
    double warm_total = 0;
    while ((static_cast<int>(warm.size()) < p.warmup_min || warm_total < p.warmup_s) && warm.size() < 10000) {
        check_cuda(cudaEventRecord(a, stream), "cudaEventRecord");
        launch();
        check_cuda(cudaEventRecord(b, stream), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        warm.push_back(ms * 1e-3);
        warm_total += ms * 1e-3;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    const int reps = reps_for(stats_of(warm).median_s, p);
    std::vector<cudaEvent_t> events(2 * static_cast<std::size_t>(reps));
    for (auto& e : events)
        check_cuda(cudaEventCreate(&e), "cudaEventCreate");
    // Hold the stream while the runs are enqueued (about 20 us of CPU each, cuBLASLt's host side included).
    check_cuda(
        kernels::spin(std::min<std::int64_t>(100'000'000, 1'000'000 + 20'000 * std::int64_t{reps}), stream),
        "spin");
    for (int r = 0; r < reps; ++r) {
        check_cuda(cudaEventRecord(events[2 * r], stream), "cudaEventRecord");
        launch();
        check_cuda(cudaEventRecord(events[2 * r + 1], stream), "cudaEventRecord");
    }
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    std::vector<double> samples;
    for (int r = 0; r < reps; ++r) {
        float ms = 0;
        check_cuda(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]), "cudaEventElapsedTime");
        samples.push_back(ms * 1e-3);
    }
    for (auto& e : events)
        cudaEventDestroy(e);
    return stats_of(std::move(samples));
}

/// Free device memory of the current device, bytes.
inline std::size_t free_device_memory() {
    std::size_t free_b = 0, total_b = 0;
    check_cuda(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    return free_b;
}

/// Copies `n` elements of type `e` from the device (synchronously: synchronize their stream first) and
/// decodes them to float.
inline std::vector<float> download(const void* p, std::int64_t n, kernels::Elem e) {
    std::vector<float> out(static_cast<std::size_t>(n));
    if (e == kernels::Elem::e4m3) {
        std::vector<std::uint8_t> raw(out.size());
        check_cuda(cudaMemcpy(raw.data(), p, raw.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (std::size_t i = 0; i < raw.size(); ++i)
            out[i] = reference::e4m3_to_float(raw[i]);
    } else if (e == kernels::Elem::fp32) {
        check_cuda(cudaMemcpy(out.data(), p, out.size() * sizeof(float), cudaMemcpyDeviceToHost),
                   "cudaMemcpy");
    } else {
        std::vector<std::uint16_t> raw(out.size());
        check_cuda(cudaMemcpy(raw.data(), p, raw.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
        for (std::size_t i = 0; i < raw.size(); ++i)
            out[i] = e == kernels::Elem::bf16 ? reference::bf16_to_float(raw[i])
                                              : reference::fp16_to_float(raw[i]);
    }
    return out;
}

}  // namespace trainsim::calibrate
