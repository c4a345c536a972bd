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
//   framework    CUDA context, cuBLAS workspace, NCCL channel buffers per communicator, and caching-
//                allocator fragmentation (named constants below)
// Phases: load (weights and optimizer state materialized, before the first forward), forward, backward
// (recomputation included), optimizer step, checkpoint save (after the step).
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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
/// PyTorch caching allocator waste, as a fraction of the short-lived bytes (activations and buffers): blocks
/// rounded to 512 B, large blocks carved out of 2 MiB / 20 MiB segments and split
/// (c10/cuda/CUDACachingAllocator.cpp), the gap between torch.cuda.memory_reserved() and
/// memory_allocated(). A planning margin, not a measurement.
inline constexpr double kAllocatorFragmentation = 0.10;

/// The stored tensors of one transformer layer for one micro-batch, bytes per GPU.
struct LayerActivations {
    double stored = 0;      ///< kept from the end of the layer's forward to the end of its backward
    double recomputed = 0;  ///< with recomputation: the set rebuilt before the backward, alive during it
    double forward_transient = 0;   ///< alive only while the layer's forward runs
    double backward_transient = 0;  ///< gradients alive only while the layer's backward runs
};
/// Per layer and micro-batch, by recompute mode, TP/SP/CP, flash or unfused attention, GQA, SwiGLU, dropout,
/// fp8 and LoRA (derivation: docs/memory.md; without parallelism a GPT layer stores s·b·h·(34 + 5·a·s/h)).
LayerActivations layer_activations(const ModelSpec& m, const Layout& l);

/// One point of a stage's memory timeline.
struct MemorySample {
    double time_s = 0;  ///< simulated time (0 when the walk had no times)
    MemoryPhase phase = MemoryPhase::load;
    PileBytes piles{};
    double in_flight_microbatches = 0;  ///< activations alive, in micro-batches of the stage's layers
};

struct StageMemory {
    int stage = 0;
    int ranks = 0;                                          ///< GPUs with this memory (tp · cp · dp)
    std::array<MemorySample, kMemoryPhases> phase_peaks{};  ///< the highest sample of each phase
    MemoryPhase peak_phase = MemoryPhase::load;
    double peak_bytes = 0;
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
};

/// End times (s) of each stage's compute ops, in op order, from a simulation that traced one GPU per stage
/// (TraceRanks::stage_leaders). Empty inner vectors where a stage was not traced.
std::vector<std::vector<double>> compute_end_times(const ExecutionResult& r, const Layout& l);

/// Walks every stage's memory marks in the executed order. `compute_end_s` (optional, from
/// compute_end_times) puts simulated times on the samples; `keep_timeline` keeps every sample. Throws
/// InternalError if activations do not return to zero after the last backward (a builder bug).
MemoryReport simulate_memory(const ModelSpec& m, const Layout& l, const Program& p, const GpuSpec& gpu,
                             const std::vector<std::vector<double>>* compute_end_s = nullptr,
                             bool keep_timeline = false);

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
