// trainsim-calibrate: NCCL collectives over the GPUs of this machine, one process (ncclCommInitAll), in the
// way nccl-tests times them (src/common.cu: warm-up iterations, then `iters` back to back, average time).
#include <algorithm>

#include <nccl.h>

#include "cuda_util.hpp"
#include "kernels.hpp"
#include "reference.hpp"

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

/// GPUs 0 .. gpus-1 with one NCCL communicator (ncclCommInitAll), a stream and two events each; buffers of
/// `buffer_bytes` (send and receive) on each, filled with random bf16.
class Ranks {
  public:
    Ranks(int gpus, std::int64_t buffer_bytes) : ranks_(static_cast<std::size_t>(gpus)) {
        std::vector<ncclComm_t> comms(static_cast<std::size_t>(gpus));
        std::vector<int> devices(static_cast<std::size_t>(gpus));
        for (int r = 0; r < gpus; ++r)
            devices[r] = r;
        check_nccl(ncclCommInitAll(comms.data(), gpus, devices.data()), "ncclCommInitAll");
        for (int r = 0; r < gpus; ++r) {
            ranks_[r].device = r;
            ranks_[r].comm = comms[r];
        }
        for (int r = 0; r < gpus; ++r) {
            Rank& k = ranks_[r];
            check_cuda(cudaSetDevice(r), "cudaSetDevice");
            check_cuda(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking), "cudaStreamCreate");
            check_cuda(cudaEventCreate(&k.start), "cudaEventCreate");
            check_cuda(cudaEventCreate(&k.stop), "cudaEventCreate");
            if (!k.send.reserve(static_cast<std::size_t>(buffer_bytes)) ||
                !k.recv.reserve(static_cast<std::size_t>(buffer_bytes)))
                throw DeviceError("out of device memory for the NCCL buffers");
            check_cuda(kernels::fill_uniform(k.send.get(), buffer_bytes / 2, kernels::Elem::bf16, 7000 + r,
                                             1.0f, k.stream),
                       "fill_uniform");
            check_cuda(kernels::fill_uniform(k.recv.get(), buffer_bytes / 2, kernels::Elem::bf16, 8000 + r,
                                             1.0f, k.stream),
                       "fill_uniform");
        }
        for (auto& k : ranks_)
            check_cuda(cudaStreamSynchronize(k.stream), "cudaStreamSynchronize");
    }
    Ranks(const Ranks&) = delete;
    Ranks& operator=(const Ranks&) = delete;
    ~Ranks() {
        for (auto& k : ranks_) {
            cudaSetDevice(k.device);
            if (k.comm) ncclCommDestroy(k.comm);
            if (k.start) cudaEventDestroy(k.start);
            if (k.stop) cudaEventDestroy(k.stop);
            if (k.stream) cudaStreamDestroy(k.stream);
            k.send.release();
            k.recv.release();
        }
    }
    std::vector<Rank>& get() { return ranks_; }

  private:
    std::vector<Rank> ranks_;
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
                check_nccl(
                    ncclAllReduce(k.send.get(), k.recv.get(), count, ncclBfloat16, ncclSum, k.comm, k.stream),
                    "ncclAllReduce");
                break;
            case CollectiveOp::all_gather:  // size = the gathered output; each rank sends count / n
                check_nccl(
                    ncclAllGather(k.send.get(), k.recv.get(), count / n, ncclBfloat16, k.comm, k.stream),
                    "ncclAllGather");
                break;
            case CollectiveOp::reduce_scatter:  // size = the input; each rank receives count / n
                check_nccl(ncclReduceScatter(k.send.get(), k.recv.get(), count / n, ncclBfloat16, ncclSum,
                                             k.comm, k.stream),
                           "ncclReduceScatter");
                break;
            case CollectiveOp::send_recv:  // ring: send to the next rank, receive from the previous one
                check_nccl(ncclSend(k.send.get(), count, ncclBfloat16, (r + 1) % n, k.comm, k.stream),
                           "ncclSend");
                check_nccl(ncclRecv(k.recv.get(), count, ncclBfloat16, (r + n - 1) % n, k.comm, k.stream),
                           "ncclRecv");
                break;
        }
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
}

}  // namespace

std::vector<CollectiveRow> measure_collectives(int gpus, bool quick, const RepPolicy& p, Progress& progress) {
    // The largest size every GPU can hold twice (send and receive buffers), leaving a fifth free for NCCL.
    std::size_t free_min = SIZE_MAX;
    for (int r = 0; r < gpus; ++r) {
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
        progress.note(
            fmt::format("collectives: sizes above {} bytes left out (free device memory)", largest));

    Ranks group(gpus, largest);
    std::vector<Rank>& ranks = group.get();
    std::vector<CollectiveRow> rows;
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
            for (auto& k : ranks) {
                check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
                check_cuda(cudaEventRecord(k.stop, k.stream), "cudaEventRecord");
            }
            double slowest_s = 0;
            for (auto& k : ranks) {
                check_cuda(cudaEventSynchronize(k.stop), "cudaEventSynchronize");
                float ms = 0;
                check_cuda(cudaEventElapsedTime(&ms, k.start, k.stop), "cudaEventElapsedTime");
                slowest_s = std::max(slowest_s, ms * 1e-3);
            }
            rows.push_back(CollectiveRow{op, gpus, 1, bytes, slowest_s / p.nccl_iters, "bf16"});
        }
    progress.done();
    return rows;
}

int self_check_collectives(int gpus, std::ostream& log) {
    const int per_rank = 256;  // bf16 elements per rank's share
    const std::int64_t count = static_cast<std::int64_t>(per_rank) * gpus;
    Ranks group(gpus, count * 2);
    std::vector<Rank>& ranks = group.get();
    int failures = 0;
    for (auto op : {CollectiveOp::all_reduce, CollectiveOp::all_gather, CollectiveOp::reduce_scatter,
                    CollectiveOp::send_recv}) {
        for (auto& k : ranks) {
            check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
            check_cuda(cudaMemsetAsync(k.recv.get(), 0, static_cast<std::size_t>(count * 2), k.stream),
                       "cudaMemset");
        }
        launch(ranks, op, count * 2);
        std::vector<std::vector<float>> send, recv;
        for (auto& k : ranks) {
            check_cuda(cudaSetDevice(k.device), "cudaSetDevice");
            check_cuda(cudaStreamSynchronize(k.stream), "cudaStreamSynchronize");
            send.push_back(download(k.send.get(), count, kernels::Elem::bf16));
            recv.push_back(download(k.recv.get(), count, kernels::Elem::bf16));
        }
        double worst = 0;
        for (int r = 0; r < gpus; ++r) {
            std::vector<float> want(static_cast<std::size_t>(count), 0.0f), got = recv[r];
            for (std::int64_t i = 0; i < count; ++i)
                switch (op) {
                    case CollectiveOp::all_reduce:
                        for (int q = 0; q < gpus; ++q)
                            want[i] += send[q][i];
                        break;
                    case CollectiveOp::all_gather:  // rank q's first count/n elements land at q * count/n
                        want[i] = send[i / per_rank][i % per_rank];
                        break;
                    case CollectiveOp::reduce_scatter:  // rank r receives the sum of every rank's r-th share
                        if (i < per_rank)
                            for (int q = 0; q < gpus; ++q)
                                want[i] += send[q][r * per_rank + i];
                        break;
                    case CollectiveOp::send_recv:
                        want[i] = send[(r + gpus - 1) % gpus][i];
                        break;
                }
            if (op == CollectiveOp::reduce_scatter) {
                got.resize(per_rank);
                want.resize(per_rank);
            }
            // NCCL keeps bf16 partial sums between steps: up to n - 1 roundings of 2^-8.
            worst = std::max(worst, reference::worst_error(got, want, 5e-2, 1e-2));
        }
        const bool ok = worst <= 1;
        log << fmt::format("self-check nccl {} over {} GPUs: {} (worst error {:.3f} of the tolerance)\n",
                           to_string(op), gpus, ok ? "ok" : "FAILED", worst);
        failures += ok ? 0 : 1;
    }
    return failures;
}

}  // namespace trainsim::calibrate
