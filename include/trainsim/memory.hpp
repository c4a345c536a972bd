// Memory per rank and per phase: every pile, walked over the simulated order of one iteration.
//
// All GPUs of one pipeline stage (its TP, CP and DP ranks) hold the same bytes, so the model keeps one
// timeline per stage; "rank" below means any GPU of that stage. Bytes are per GPU.
//
// Piles (docs/memory.md has every formula with its source):
//   parameters   16-bit weights (ZeRO-3: 1/DP of them), LoRA adapters, QLoRA's NF4 base, fp8 weight caches
//   gradients    the gradient buffer (Megatron-LM DDP: fp32 main_grad for bf16, 16-bit for fp16; ZeRO-2/3:
//                1/DP of it), of trainable parameters only
//   optimizer    fp32 master weights and moments (see Optimizer; 1/DP with ZeRO-1/2/3 or Megatron's
//                distributed optimizer; 0 on the GPU when offloaded)
//   activations  tensors stored for the backward pass (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 4,
//                generalized to GQA, SwiGLU, flash attention, fp8), per layer, allocated at the end of the
//                layer's forward and freed at the end of its backward, in the simulated schedule's order
//   buffers      pipeline send/receive buffers, ZeRO-3 all-gathered parameters and unsharded gradients,
//                ZeRO-2 reduction bucket, fp8 scaling state, optimizer and checkpoint temporaries, and the
//                transient tensors of the op running (gradients of a layer in backward, logits)
//   framework    CUDA context and NCCL channel buffers per communicator (outside PyTorch's allocator),
//                cuBLAS workspace, and the caching allocator's cached-but-unused bytes (reserved less
//                allocated, from the allocator model of include/trainsim/caching_allocator.hpp)
// Allocated vs reserved: every tensor the walk creates is replayed through the caching-allocator model, so
// each sample carries the allocator's allocated and reserved bytes; the piles add up to what the device holds
// (reserved + what lives outside the allocator). Which of these a framework prints is reported_memory().
// Phases: load (weights and optimizer state materialized, before the first forward), forward, backward
// (recomputation included), optimizer step, checkpoint save (after the step).
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/executor.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

enum class Pile { parameters, gradients, optimizer, activations, buffers, framework };
inline constexpr int kPiles = 6;
enum class MemoryPhase { load, forward, backward, optimizer, checkpoint };
inline constexpr int kMemoryPhases = 5;

/// Bytes by pile, indexed by Pile.
using PileBytes = std::array<double, kPiles>;
double total_bytes(const PileBytes& p);

/// CUDA context of one process: driver, kernels of PyTorch, cuBLAS, cuDNN and NCCL loaded lazily (CUDA 11.7+
/// lazy loading). PyTorch's "CUDA semantics" notes put it at a few hundred MiB, outside
/// torch.cuda.memory_allocated(); 512 MiB is the value planned with here (A100 and H100 alike).
inline constexpr double kCudaContextBytes = 512.0 * 1024 * 1024;
/// cuBLAS workspace: PyTorch's default CUBLAS_WORKSPACE_CONFIG ":4096:8" (8 x 4 MiB), and TransformerEngine's
/// 32 MiB on Hopper.
inline constexpr double kCublasWorkspaceBytes = 32.0 * 1024 * 1024;
/// NCCL buffers of one channel of one communicator: the Simple protocol's NCCL_BUFFSIZE (4 MiB), LL128
/// (120 elements x 640 threads x 8 steps x 8 B = 4,915,200 B) and LL (8 lines x 512 threads x 8 steps x 16 B
/// = 524,288 B): NCCL 2.18 src/include/device.h and enqueue defaults.
inline constexpr double kNcclChannelBufferBytes = 4194304.0 + 4915200.0 + 524288.0;
/// Channels NCCL opens per communicator on an 8-GPU NVSwitch node with 8 NICs (NCCL_MIN_NCHANNELS ..
/// NCCL_MAX_NCHANNELS; 16 is what NCCL_DEBUG=INFO reports for rings on DGX A100/H100).
inline constexpr int kNcclChannels = 16;
/// The stored tensors of one transformer layer for one micro-batch, bytes per GPU.
struct LayerActivations {
    double stored = 0;  ///< kept from the end of the layer's forward to the end of its backward
    /// The same four sets tensor by tensor (each sums to its total above), as the caching-allocator model
    /// sees them.
    std::vector<double> stored_tensors, recomputed_tensors, forward_transient_tensors,
        backward_transient_tensors;
    double recomputed = 0;  ///< with recomputation: the set rebuilt before the backward, alive during it
    double forward_transient = 0;   ///< alive only while the layer's forward runs
    double backward_transient = 0;  ///< gradients alive only while the layer's backward runs
};
/// Per layer and micro-batch, by recompute mode, TP/SP/CP, flash or unfused attention, GQA, SwiGLU, dropout,
/// fp8 and LoRA (derivation: docs/memory.md; without parallelism a GPT layer stores s·b·h·(34 + 5·a·s/h)).
/// selective_op: torchtitan's per-op SAC (see activations.cpp); cp > 1 adds the K/V read from the other CP
/// ranks to the transients (torchtitan all-gathers the whole sequence's K/V; Megatron's ring one block).
/// `moe_layer`: in an MoE model, the layer's MLP is a mixture of experts (false: one of its dense layers,
/// ModelSpec::layer_is_moe); Layout::recompute_modules with recompute selective moves the modules'
/// tensors from the stored to the recomputed set.
LayerActivations layer_activations(const ModelSpec& m, const Layout& l, bool moe_layer = true);
/// Layout::activation_offload_layers: sets the bytes of `program`'s activation host copies (the segments with
/// Segment::activation_copy) to one layer's stored activations, layer_activations(m, l, ...).stored (the
/// dense layers' of an MoE model for ActivationCopy::dense_layer). Call before assign_durations.
void set_activation_copy_bytes(Program& program, const ModelSpec& m, const Layout& l);

/// Parameters one GPU of pipeline rank `stage` holds in a mixture-of-experts model, before any sharding:
/// `dense` = (the stage's embedding / output parameters `embedding_params`, all TP shards, + the attention,
/// norms, dense MLPs, routers and shared experts of its layers) / tp; `experts` = the routed experts of its
/// MoE layers / (ep * expert_tp()): num_experts / ep experts per rank, each split over ETP (Megatron-Core
/// MoELayer with expert parallelism); `linear` = the layers' part of both (the weights of its GEMMs).
struct MoeStageParams {
    double dense = 0, experts = 0, linear = 0;
};
MoeStageParams moe_stage_params(const ModelSpec& m, const Layout& l, int stage, double embedding_params);

/// True when fp8 GEMMs keep an fp8 copy (and transpose) of every linear weight for the whole step: Megatron
/// passes is_first_microbatch to TransformerEngine, which casts each weight once per step and caches it
/// (megatron/core/extensions/transformer_engine.py; TE module/linear.py). Other frameworks (torchao Float8 in
/// torchtitan, TE under DeepSpeed) cast a weight around its GEMM only.
bool caches_fp8_weights(const Layout& l);
/// True when ZeRO-3 / FSDP is PyTorch FSDP (torchtitan's FSDP2, Composer's and plain PyTorch FSDP): the
/// sharded parameter is the fp32 master weight itself (torchtitan builds the model in fp32 and casts to bf16
/// for the all-gather: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), so no 16-bit shard is
/// kept beside it; and torchtitan reduce-scatters in fp32 from a buffer on its own stream.
bool pytorch_fsdp(const Layout& l);

/// Bytes per element of the gradients a GPU keeps and reduces: fp32 in torchtitan whatever the GEMM
/// precision (FSDP2 MixedPrecisionPolicy reduce_dtype=float32, the only value torchtitan v0.2.0 allows;
/// Float8 training keeps bf16 parameters), else Layout::grad_reduce_bytes_per_element().
double gradient_bytes_per_element(const Layout& l);

/// What a framework prints as its peak memory.
///   allocated  torch.cuda.max_memory_allocated(): live tensors, rounded to 512 B;
///   reserved   torch.cuda.max_memory_reserved(): the caching allocator's segments;
///   device     what nvidia-smi shows: reserved plus the CUDA context and NCCL's buffers.
enum class ReportedMemory { allocated, reserved, device };
/// torchtitan: max reserved (components/metrics.py DeviceMemoryMonitor; the console "memory:" figure is
/// max_reserved_gib). Megatron-LM: report_memory prints allocated, max allocated, reserved and max reserved
/// (training/utils.py); max reserved is taken, the figure that bounds what fits. DeepSpeed: see_memory_usage
/// prints MA, Max_MA, CA and Max_CA; Max_CA (max reserved) is taken for the same reason. Composer's
/// MemoryMonitor logs peak_reserved_mem beside peak_allocated_mem: reserved. Plain PyTorch scripts print
/// torch.cuda.max_memory_reserved() (reserved).
ReportedMemory reported_memory(Framework f);

/// One point of a stage's memory timeline.
struct MemorySample {
    double time_s = 0;  ///< simulated time (0 when the walk had no times)
    MemoryPhase phase = MemoryPhase::load;
    PileBytes piles{};
    double in_flight_microbatches = 0;  ///< activations alive, in micro-batches of the stage's layers
    double allocated_bytes = 0;         ///< the caching allocator's live blocks (rounded), at this point
    double reserved_bytes = 0;          ///< the caching allocator's segments, at this point
};

struct StageMemory {
    int stage = 0;
    int ranks = 0;                                          ///< GPUs with this memory (tp · cp · dp)
    std::array<MemorySample, kMemoryPhases> phase_peaks{};  ///< the highest sample of each phase
    MemoryPhase peak_phase = MemoryPhase::load;
    double peak_bytes = 0;  ///< device bytes at the peak: reserved + CUDA context + NCCL buffers
    /// The highest sample (device bytes, as peak_bytes) of the walk's early part: its marks up to the end of
    /// the backward of the stage's first micro-batch (early_walk_marks). A floor under peak_bytes, which a
    /// walk of those marks alone gives (memory_peak_floor_bytes).
    double early_peak_bytes = 0;
    double peak_allocated_bytes = 0;     ///< torch.cuda.max_memory_allocated() of one GPU of the stage
    double peak_reserved_bytes = 0;      ///< torch.cuda.max_memory_reserved() of one GPU of the stage
    double outside_allocator_bytes = 0;  ///< CUDA context and NCCL buffers
    std::array<double, kMemoryPhases> phase_max_allocated_bytes{};  ///< allocator's allocated, max per phase
    std::array<double, kMemoryPhases> phase_max_reserved_bytes{};   ///< allocator's reserved, max per phase
    double peak_in_flight_microbatches = 0;  ///< most micro-batches alive at once in the schedule
    double host_bytes = 0;                   ///< optimizer state held in host memory or on NVMe (offload)
    std::vector<MemorySample> timeline;      ///< every sample, in the simulated order
    const MemorySample& peak() const { return phase_peaks[static_cast<std::size_t>(peak_phase)]; }
};

struct MemoryReport {
    std::vector<StageMemory> stages;  ///< [pp rank]
    double capacity_bytes = 0;        ///< HBM of one GPU
    int peak_stage = 0;
    std::vector<std::string> notes;  ///< what the layout changes (adapters, offload, 8-bit state, fp8)
    const StageMemory& peak() const { return stages.at(static_cast<std::size_t>(peak_stage)); }
    bool fits() const { return peak().peak_bytes <= capacity_bytes; }
    /// The pile to blame at the peak: the larger short-lived pile (activations or buffers), unless the piles
    /// held all along (parameters, gradients, optimizer state) exceed the capacity alone: then the largest
    /// of those.
    Pile blamed_pile() const;
    /// Empty when it fits; else e.g. "stage 0 runs out of memory in backward: 83.1 GiB of 80.0 GiB;
    /// activations 41.2 GiB (16 micro-batches in flight)".
    std::string oom_message() const;
    /// The highest value over the stages (the busiest GPU) of the figure `what`, bytes.
    double peak_of(ReportedMemory what) const;
};

/// The peak memory framework `f` would print for this run (the busiest GPU's): peak_of(reported_memory(f)).
/// This is what `trainsim validate` compares with a run's measured peak_memory_GiB.
double reported_peak_bytes(const MemoryReport& r, Framework f);

/// The memory walk's timing (issue 12: from the executor's observer interface, never from trace slices): an
/// executor observer (include/trainsim/executor_observer.hpp) of one GPU per pipeline stage, tp = cp = dp = 0
/// (the stage leader; the stage's other GPUs run the same ops), that keeps the end time of each of its
/// compute ops, in op order.
class ComputeEndTimes : public ExecutorObserver {
  public:
    explicit ComputeEndTimes(const Layout& l);
    bool observes(int rank) const override;
    void slice_end(const TimelineSlice& s) override;
    /// [stage] the end times (s) of the stage leader's compute ops, in op order; empty for a stage whose
    /// leader ran nothing yet.
    const std::vector<std::vector<double>>& seconds() const { return end_s_; }

  private:
    Layout layout_;
    std::vector<std::vector<double>> end_s_;
};

/// The piles every GPU of pipeline stage `stage` holds for the whole iteration (parameters, gradients,
/// optimizer state, held buffers, cuBLAS's workspace; activations 0), bytes per GPU: what simulate_memory
/// allocates before the stage's first mark, so a floor under every sample of the stage's walk. They depend on
/// the stage's parameters, not on the number of micro-batches: a program of the layout with fewer
/// micro-batches gives the same.
PileBytes held_piles(const ModelSpec& m, const Layout& l, const Program& p, int stage, const GpuSpec& gpu);

/// Walks every stage's memory marks in the executed order. `compute_end_s` (optional, from
/// ComputeEndTimes::seconds) puts simulated times on the samples; `keep_timeline` keeps every sample. Throws
/// InternalError if activations do not return to zero after the last backward (a builder bug).
MemoryReport simulate_memory(const ModelSpec& m, const Layout& l, const Program& p, const GpuSpec& gpu,
                             const std::vector<std::vector<double>>* compute_end_s = nullptr,
                             bool keep_timeline = false);

/// A floor under simulate_memory(m, l, p, gpu).peak().peak_bytes (bytes per GPU) at a fraction of its cost:
/// each stage's walk up to the end of its first micro-batch's backward (StageMemory::early_peak_bytes), the
/// largest over the stages. Its samples are the first samples of the full walk, so their highest is at most
/// the full walk's; where the schedule's steady state repeats the first micro-batches (1F1B), it is close to
/// it. The sweep's Pareto-front pruning uses it to skip full walks (sim/sweep/sweep_phase2.cpp).
double memory_peak_floor_bytes(const ModelSpec& m, const Layout& l, const Program& p, const GpuSpec& gpu);

/// JSON of the report: capacity, fits, the OOM sentence, notes, and per stage the peak of every phase by
/// pile (bytes), plus every timeline sample when `timeline` is true and the report kept them.
nlohmann::json memory_json(const MemoryReport& r, bool timeline);
/// The per-stage, per-phase table `trainsim memory` prints (GiB).
std::string format_memory_text(const MemoryReport& r);

/// A self-contained SVG chart: for every stage, the peak of each phase as a bar stacked by pile, and the
/// HBM capacity as a line.
std::string memory_svg(const MemoryReport& r, const std::string& title);

std::string to_string(Pile p);
std::string to_string(MemoryPhase p);

}  // namespace trainsim
