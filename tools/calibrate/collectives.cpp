// trainsim-calibrate: NCCL collectives over the GPUs of this machine, one process (ncclCommInitAll), in the
// way nccl-tests times them (src/common.cu: warm-up iterations, then `iters` back to back, average time).
#include <algorithm>

#include <nccl.h>

#include "cuda_util.hpp"
#include "kernels.hpp"

namespace trainsim::calibrate {

namespace {

void check_nccl(ncclResult_t r, const char* call) {
    if (r != ncclSuccess) throw DeviceError(fmt::format("{}: {}", call, ncclGetErrorString(r)));
}

struct Rank {
    int device = 0;
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr, stop = nullptr;
    DeviceBuffer send, recv;
};

/// Enqueues one collective of `bytes` (nccl-tests' size) on every rank, as one NCCL group.
void launch(std::vector<Rank>& ranks, CollectiveOp op, std::int64_t bytes) {
    const int n = static_cast<int>(ranks.size());
    const auto count = static_cast<std::size_t>(bytes / 2);  // bf16 elements
    check_nccl(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < n; ++r) {
        Rank& k = ranks[r];
        switch (op) {
            case CollectiveOp::all_reduce:
                check_nccl(ncclAllReduce(k.send.get(), k.recv.get(), count, ncclBfloat16, ncclSum, k.comm, k.stream),
                           "ncclAllReduce");
                break;
            case CollectiveOp::all_gather:  // size = the gathered output; each rank sends count / n
                check_nccl(ncclAllGather(k.send.get(), k.recv.get(), count / n, ncclBfloat16, k.comm, k.stream),
                           "ncclAllGather");
                break;
            case CollectiveOp::reduce_scatter:  // size = the input; each rank receives count / n
                check_nccl(
                    ncclReduceScatter(k.send.get(), k.recv.get(), count / n, ncclBfloat16, ncclSum, k.comm, k.stream),
                    "ncclReduceScatter");
                break;
            case CollectiveOp::send_recv:  // ring: send to the next rank, receive from the previous one
                check_nccl(ncclSend(k.send.get(), count, ncclBfloat16, (r + 1) % n, k.comm, k.stream), "ncclSend");
                check_nccl(ncclRecv(k.recv.get(), count, ncclBfloat16, (r + n - 1) % n, k.comm, k.stream), "ncclRecv");
                break;
        }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
}

}  // namespace

std::vector<CollectiveRow> measure_collectives(int gpus, bool quick, const RepPolicy& p, Progress& progress) {
    std::vector<Rank> ranks(static_cast<std::size_t>(gpus));
    std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus));
    std::vector<int> devices(static_cast<std::size_t>(gpus));
    // The largest size every GPU can hold twice (send and receive buffers), leaving a fifth free for NCCL.
    std::size_t free_min = SIZE_MAX;
    for (int r = 0; r < gpus; ++r) {
        devices[r] = r;
        check_cuda(cudaSetDevice(r), "cudaSetDevice");
        free_min = std::min(free_min, free_device_memory());
    }
    std::int64_t max_bytes = 1;
    while (static_cast<double>(max_bytes) * 4 <= 0.8 * static_cast<double>(free_min))
        max_bytes *= 2;
    const std::vector<std::int64_t> sizes = collective_sizes(quick, max_bytes);
    if (sizes.empty()) throw DeviceError("too little free device memory for any NCCL message");
    const std::int64_t largest = sizes.back();
    if (largest < (quick ? (std::int64_t{1} << 30) : (std::int64_t{4} << 30)))
        progress.note(fmt::format("collectives: sizes above {} bytes left out (free device memory)", largest));

    check_nccl(ncclCommInitAll(comms.data(), gpus, devices.data()), "ncclCommInitAll");
    for (int r = 0; r < gpus; ++r) {
        ranks[r].device = r;
        ranks[r].comm = comms[r];
    }
    std::vector<CollectiveRow> rows;
    try {
        for (int r = 0; r < gpus; ++r) {
            Rank& k = ranks[r];
            check_cuda(cudaSetDevice(r), "cudaSetDevice");
            check_cuda(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), "cudaStreamCreate");
            check_cuda(cudaEventCreate(&k.start), "cudaEventCreate");
            check_cuda(cudaEventCreate(&k.stop), "cudaEventCreate");
            if (!k.send.reserve(static_cast<std::size_t>(largest)) || !k.recv.reserve(static_cast<std::size_t>(largest)))
                throw DeviceError("out of device memory for the NCCL buffers");
            check_cuda(kernels::fill_uniform(k.send.get(), largest / 2, kernels::Elem::bf16, 7000 + r, 1.0f, k.stream),
                       "fill_uniform");
            check_cuda(kernels::fill_uniform(k.recv.get(), largest / 2, kernels::Elem::bf16, 8000 + r, 1.0f, k.stream),
                       "fill_uniform");
        }
        const std::vector<CollectiveOp> ops{CollectiveOp::all_reduce, CollectiveOp::all_gather,
                                            CollectiveOp::reduce_scatter, CollectiveOp::send_recv};
        progress.section(fmt::format("collectives over {} GPUs", gpus), ops.size() * sizes.size());
        for (auto op : ops)
            for (auto requested : sizes) {
                const std::int64_t bytes = collective_bytes(op, requested, 2, gpus);
                progress.step(fmt::format("{} {} bytes", to_string(op), bytes));
                if (bytes <= 0) continue;
                for (int w = 0; w < p.nccl_warmup; ++w)
                    launch(ranks, op, bytes);
                for (auto& k : ranks) {
                    check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
                    check_cuda(cudaEventRecord(k.start, k.stream), "cudaEventRecord");
                }
                for (int i = 0; i < p.nccl_iters; ++i)
                    launch(ranks, op, bytes);
                double slowest_s = 0;
                for (auto& k : ranks) {
                    check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
                    check_cuda(cudaEventRecord(k.stop, k.stream), "cudaEventRecord");
                }
                for (auto& k : ranks) {
                    check_cuda(cudaEventSynchronize(k.stop), "cudaEventSynchronize");
                    float ms = 0;
                    check_cuda(cudaEventElapsedTime(&ms, k.start, k.stop), "cudaEventElapsedTime");
                    slowest_s = std::max(slowest_s, ms * 1e-3);
                }
                rows.push_back(CollectiveRow{op, gpus, 1, bytes, slowest_s / p.nccl_iters, "bf16"});
            }
        progress.done();
    } catch (...) {
        for (auto& k : ranks) {
            if (k.comm) ncclCommDestroy(k.comm);
            k.comm = nullptr;
        }
        throw;
    }
    for (auto& k : ranks) {
        cudaSetDevice(k.device);
        ncclCommDestroy(k.comm);
        cudaEventDestroy(k.start);
        cudaEventDestroy(k.stop);
        cudaStreamDestroy(k.stream);
        k.send.release();
        k.recv.release();
    }
    return rows;
}

}  // namespace trainsim::calibrate
