// The training program: for each pipeline stage, the ordered work of one iteration as Megatron-LM issues it.
// All TP and DP ranks of one stage run the same op list (they differ only in their groups), so a program for
// 16K GPUs holds one list per stage, not one per GPU.
//
// Streams (as in Megatron-LM): a main stream runs compute, P2P receives wait on it; a TP stream runs TP
// collectives (waited for by the main stream right away, or after the next GEMM with TP communication
// overlap); a DP stream runs the gradient reduction buckets and the distributed optimizer's parameter
// all-gathers.
//
// Kernel shapes follow Megatron-LM's ColumnParallelLinear / RowParallelLinear (megatron/core/tensor_parallel/
// layers.py): backward of a column-parallel linear launches the all-reduce (reduce-scatter with sequence
// parallelism) of the input gradient asynchronously and overlaps it with the weight-gradient GEMM; with
// sequence parallelism the input is all-gathered again in backward and overlapped with the data-gradient
// GEMM.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/collectives.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

enum class Phase { forward, backward, recompute, optimizer };
/// The group a collective on the TP stream runs over.
enum class CommGroup {
    tp,
    cp,
    embedding  ///< the first and last pipeline stage's ranks of one (tp, cp, dp): tied embedding gradients
};
enum class OpKind {
    compute,    ///< run segment `segment` on the main stream
    tp_launch,  ///< enqueue a TP collective on the TP stream
    tp_wait,    ///< main stream waits until the TP stream is idle
    send,  ///< asynchronous P2P send of `bytes` to the neighbour stage in `direction` (+1 next, -1 previous)
    recv,  ///< main stream waits for the P2P message (virtual stage, micro-batch, direction)
    dp_launch,  ///< enqueue a DP collective on the DP stream
    dp_wait,    ///< main stream waits until the DP stream has completed `dp_target` collectives
};

/// A run of kernels executed back to back on the main stream. Shared by every op that runs the same work.
struct Segment {
    std::string name;
    std::vector<Kernel> kernels;
    double seconds = 0;  ///< filled by assign_durations()
    double flops = 0;    ///< hardware FLOPs of the kernels
};

struct Op {
    OpKind kind = OpKind::compute;
    Phase phase = Phase::forward;
    int segment = -1;                                        ///< compute
    CollectiveKind collective = CollectiveKind::all_reduce;  ///< tp_launch, dp_launch
    double bytes = 0;                                        ///< collective or P2P message bytes per rank
    int direction = 0;      ///< send/recv: +1 toward the next stage (activations),
                            ///< -1 toward the previous one (gradients)
    int virtual_stage = 0;  ///< send/recv: the receiving model chunk (global index chunk*pp + pp_rank)
    int micro_batch = -1;
    int dp_target = 0;                ///< dp_wait
    CommGroup group = CommGroup::tp;  ///< tp_launch: TP group, or CP group (ring attention K/V exchange)
};

struct StageProgram {
    std::vector<Op> ops;
    /// Most micro-batches whose activations are held at once on this stage (forward done, backward not yet),
    /// counted in units of a full stage's layers, from the executed schedule order.
    double peak_in_flight_microbatches = 0;
    double hardware_flops = 0;    ///< per rank, including recomputation
    double params = 0;            ///< parameters held by this stage (all TP shards together)
    double embedding_params = 0;  ///< of which embedding / output layer
};

struct Program {
    std::vector<Segment> segments;
    std::vector<StageProgram> stages;  ///< [pp rank]
};

/// One item of a pipeline schedule on one pipeline rank.
struct ScheduleItem {
    bool forward = true;
    int chunk = 0;  ///< model chunk (virtual stage index on this rank), 0 .. vpp-1
    int micro_batch = 0;
};

/// The order of forward and backward passes on pipeline rank `rank` of `pp`, for `m` micro-batches and `vpp`
/// chunks: GPipe (all forwards, then all backwards), 1F1B (warm-up of p-rank-1 forwards, steady 1F1B,
/// cool-down; Narayanan et al. 2021 Fig. 4), or interleaved 1F1B for vpp > 1 (Megatron-LM
/// megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving).
std::vector<ScheduleItem> pipeline_schedule(Schedule schedule, int pp, int rank, int m, int vpp);

/// Builds the program of every stage. Throws InputError for layouts the builder cannot express.
Program build_program(const ModelSpec& model, const Layout& layout);

/// Fills Segment::seconds from the compute model.
void assign_durations(Program& program, const ComputeModel& compute);

std::string to_string(Phase p);

}  // namespace trainsim
