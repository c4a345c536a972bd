// The memory walk: static piles of each stage, then the stage's memory marks in the simulated order, each
// one a sample of the allocated bytes by pile (docs/memory.md, "Timeline").
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/memory.hpp"

namespace trainsim {

namespace {

constexpr auto P = [](Pile p) { return static_cast<std::size_t>(p); };

/// Bytes every GPU of the stage holds for the whole iteration, and the temporaries of the optimizer step and
/// of a checkpoint save.
struct StaticPiles {
    PileBytes piles{};
    double optimizer_temporary = 0;   ///< alive during the optimizer step
    double checkpoint_temporary = 0;  ///< alive while a checkpoint is saved or loaded
    double host_bytes = 0;            ///< offloaded optimizer state
    double framework_fixed = 0;       ///< context, workspace, NCCL buffers
};

int communicators(const ModelSpec& m, const Layout& l, int stage) {
    int n = 0;
    if (l.tp > 1) ++n;
    if (l.cp > 1) ++n;
    if (l.dp * l.cp > 1) ++n;
    if (l.pp > 1) ++n;  // P2P to the neighbouring stages
    if (l.pp > 1 && m.tied_embeddings && (stage == 0 || stage == l.pp - 1)) ++n;
    return n;
}

StaticPiles static_piles(const ModelSpec& m, const Layout& l, const StageProgram& sp, int stage) {
    StaticPiles s;
    const double t = l.tp;
    const double dpc =
        static_cast<double>(l.dp) * l.cp;  // ZeRO and the distributed optimizer shard over DP x CP
    const double params = sp.params / t, trainable = sp.trainable_params / t;
    const double layers = static_cast<double>(sp.layers);
    const double linear = layers * m.linear_params() / t;  // linear weights of the stage's layers, per GPU
    const double frozen = params - (l.frozen_base() ? 0.0 : trainable);

    // Parameters: 16-bit weights, or NF4 linear weights (QLoRA); adapters in 16 bits; ZeRO-3 keeps 1/DP.
    double weights = l.frozen_base() ? 2.0 * frozen + 2.0 * trainable : 2.0 * params;
    if (l.adapter == Adapter::qlora) weights -= (2.0 - kQloraBaseBytesPerParam) * linear;
    if (l.zero_stage >= 3 && dpc > 1) weights /= dpc;
    // fp8 GEMMs (TransformerEngine): an fp8 copy of each linear weight and its transpose, cached across the
    // micro-batches of a step.
    if (l.precision == Precision::fp8) weights += 2.0 * linear;
    s.piles[P(Pile::parameters)] = weights;

    const double grad_shard = l.zero_stage >= 2 && dpc > 1 ? dpc : 1.0;
    s.piles[P(Pile::gradients)] = l.grad_reduce_bytes_per_element() * trainable / grad_shard;

    const bool sharded = l.sharded_optimizer() && dpc > 1;
    const double optimizer = l.optimizer_bytes_per_param() * trainable / (sharded ? dpc : 1.0);
    if (l.offload_optimizer == Offload::none)
        s.piles[P(Pile::optimizer)] = optimizer;
    else
        s.host_bytes = optimizer;

    // Buffers held all along: the pipeline's send and receive buffers (one activation or gradient message
    // each way), DeepSpeed ZeRO-2's reduction bucket, and fp8 scaling state (amax history of 1,024 steps plus
    // scale and inverse scale, fp32, for the input, weight and output-gradient of each of 4 GEMMs per layer).
    const double act_message = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) *
                               static_cast<double>(m.hidden) * l.activation_bytes() / l.cp / t;
    double buffers = l.pp > 1 ? 2.0 * act_message : 0.0;
    if (l.zero_stage == 2 && dpc > 1)
        buffers += std::min(l.dp_bucket_bytes / 4.0, trainable) * l.grad_reduce_bytes_per_element();
    if (l.precision == Precision::fp8) buffers += layers * 4 * 3 * (1024 + 2) * 4.0;
    s.piles[P(Pile::buffers)] = buffers;

    // The optimizer step's temporaries: 16-bit gradients copied to fp32 (Megatron's fp16 optimizer,
    // _copy_model_grads_to_main_grads) for the parameters this GPU updates.
    if (l.grad_reduce_bytes_per_element() < 4 && l.offload_optimizer == Offload::none)
        s.optimizer_temporary = 4.0 * trainable / (sharded ? dpc : 1.0);
    // A rank-0 save gathers the sharded state: FSDP FULL_STATE_DICT unshards one group at a time in fp32 with
    // its optimizer state; Megatron's DP-zero optimizer state gathers one bucket of one fp32 tensor at a
    // time.
    if (l.checkpoint_save == CheckpointSave::rank0) {
        const double group = l.frozen_base() ? 0.0 : layers > 0 ? trainable / layers : trainable;
        if (l.zero_stage >= 3 && dpc > 1)
            s.checkpoint_temporary = l.optimizer_bytes_per_param() * group;  // fp32 weight + moments
        else if (sharded)
            s.checkpoint_temporary = 4.0 * std::min(l.dp_bucket_bytes / 4.0, trainable);
    }
    s.framework_fixed = kCudaContextBytes + kCublasWorkspaceBytes +
                        communicators(m, l, stage) * kNcclChannels * kNcclChannelBufferBytes;
    return s;
}

class Walk {
  public:
    Walk(const StaticPiles& st, StageMemory& out, bool keep) : st_(st), out_(out), keep_(keep) {
        piles_ = st.piles;
        for (auto& p : out_.phase_peaks)
            p.piles.fill(-1.0);
    }

    /// Records the allocated bytes plus `transient` buffers at `time_s`.
    void sample(MemoryPhase phase, double time_s, double transient = 0) {
        MemorySample s;
        s.time_s = time_s;
        s.phase = phase;
        s.piles = piles_;
        s.piles[P(Pile::buffers)] += transient;
        const double short_lived = s.piles[P(Pile::activations)] + s.piles[P(Pile::buffers)];
        s.piles[P(Pile::framework)] = st_.framework_fixed + kAllocatorFragmentation * short_lived;
        s.in_flight_microbatches = in_flight_;
        auto& peak = out_.phase_peaks[static_cast<std::size_t>(phase)];
        if (peak.piles[0] < 0 || total_bytes(s.piles) > total_bytes(peak.piles)) peak = s;
        if (keep_) out_.timeline.push_back(s);
    }

    double& operator[](Pile p) { return piles_[P(p)]; }
    double in_flight_ = 0;

  private:
    const StaticPiles& st_;
    StageMemory& out_;
    bool keep_;
    PileBytes piles_{};
};

MemoryPhase phase_of(Phase p) {
    switch (p) {
        case Phase::forward:
            return MemoryPhase::forward;
        case Phase::backward:
        case Phase::recompute:
            return MemoryPhase::backward;
        case Phase::optimizer:
            return MemoryPhase::optimizer;
    }
    return MemoryPhase::forward;
}

/// What the layout changes, in words, for the report.
std::vector<std::string> memory_notes(const ModelSpec& m, const Layout& l, const Program& p) {
    std::vector<std::string> notes;
    double params = 0, trainable = 0;
    for (const auto& st : p.stages) {
        params += st.params;
        trainable += st.trainable_params;
    }
    if (l.adapter != Adapter::none) {
        std::string targets;
        for (const auto& [on, name] :
             {std::pair{l.lora_targets.qkv, "qkv"}, std::pair{l.lora_targets.proj, "proj"},
              std::pair{l.lora_targets.fc1, "fc1"}, std::pair{l.lora_targets.fc2, "fc2"}})
            if (on) targets += targets.empty() ? name : fmt::format(", {}", name);
        notes.push_back(fmt::format(
            "{} rank {} on {}: {:.1f} M trainable parameters ({:.3f}% of {:.2f} B); the base is frozen: no "
            "gradients, optimizer state or weight-gradient GEMMs for it",
            l.adapter == Adapter::lora ? "LoRA" : "QLoRA", l.lora_rank, targets, trainable / 1e6,
            100.0 * trainable / params, params / 1e9));
        if (l.adapter == Adapter::qlora)
            notes.push_back(
                fmt::format("QLoRA: the linear weights are stored in NF4 with double quantization ({:.3f} "
                            "bits each: {:.2f} GB "
                            "instead of {:.2f} GB in 16 bits over all GPUs of one replica) and dequantized "
                            "before each GEMM; the "
                            "paged optimizer's state is counted on the GPU",
                            kQloraBaseBytesPerParam * 8,
                            static_cast<double>(m.layers) * m.linear_params() * kQloraBaseBytesPerParam / 1e9,
                            static_cast<double>(m.layers) * m.linear_params() * 2 / 1e9));
    }
    if (l.offload_optimizer != Offload::none)
        notes.push_back(fmt::format(
            "optimizer state and fp32 master weights offloaded to {}: the step includes the gradients' copy "
            "to "
            "the host, the CPU step{} and the weights' copy back",
            l.offload_optimizer == Offload::cpu ? "host memory (ZeRO-Offload)" : "NVMe (ZeRO-Infinity)",
            l.offload_optimizer == Offload::nvme ? ", the state's NVMe read and write" : ""));
    if (l.optimizer != Optimizer::adam)
        notes.push_back(fmt::format("optimizer {}: {:.3f} B of state per trainable parameter (Adam: 12)",
                                    to_string(l.optimizer), l.optimizer_bytes_per_param()));
    if (l.precision == Precision::fp8)
        notes.push_back(
            "fp8 GEMMs: an fp8 copy and transpose of each linear weight (2 B), GEMM inputs stored in fp8, "
            "amax history and scales per GEMM");
    if (l.zero_stage >= 3 && l.dp * l.cp > 1)
        notes.push_back(
            "ZeRO-3 / FSDP: parameter groups all-gathered just in time with one prefetched (two groups "
            "alive), gradients of a group held until its reduce-scatter");
    return notes;
}

}  // namespace

double total_bytes(const PileBytes& p) {
    double s = 0;
    for (double x : p)
        s += x;
    return s;
}

MemoryReport simulate_memory(const ModelSpec& m, const Layout& l, const Program& p, const GpuSpec& gpu,
                             const std::vector<std::vector<double>>* compute_end_s, bool keep_timeline) {
    MemoryReport rep;
    rep.capacity_bytes = gpu.hbm_bytes;
    const LayerActivations act = layer_activations(m, l);
    const double t = l.tp, E = l.activation_bytes();
    const double T = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) / l.cp;
    const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
    const double rep_div = l.sequence_parallel ? t : 1.0;
    // Embedding: token ids (int64) and the embedding dropout mask. Head: final norm input and LM-head input,
    // and the fp32 softmax of the vocab-parallel cross-entropy (Megatron keeps it for the backward); while it
    // runs, the 16-bit logits too, and in the backward their gradient.
    const double embedding_stored = T * (8.0 + (m.dropout ? h / rep_div : 0.0));
    const double head_stored = T * (2 * E * h / rep_div + 4.0 * V / t);
    const double logits_transient = T * E * V / t;
    const double grad_bytes = l.grad_reduce_bytes_per_element();

    for (int st = 0; st < l.pp; ++st) {
        const StageProgram& sp = p.stages[static_cast<std::size_t>(st)];
        StageMemory mem;
        mem.stage = st;
        mem.ranks = l.tp * l.cp * l.dp;
        mem.peak_in_flight_microbatches = sp.peak_in_flight_microbatches;
        const StaticPiles stat = static_piles(m, l, sp, st);
        mem.host_bytes = stat.host_bytes;
        Walk w(stat, mem, keep_timeline);
        const std::vector<double>* times = compute_end_s &&
                                                   static_cast<std::size_t>(st) < compute_end_s->size() &&
                                                   !(*compute_end_s)[static_cast<std::size_t>(st)].empty()
                                               ? &(*compute_end_s)[static_cast<std::size_t>(st)]
                                               : nullptr;
        // Time of the point before op `op`: the end of the last compute op before it.
        std::size_t op_cursor = 0, computes_done = 0;
        auto time_at = [&](std::size_t op) {
            for (; op_cursor < op && op_cursor < sp.ops.size(); ++op_cursor)
                if (sp.ops[op_cursor].kind == OpKind::compute) ++computes_done;
            if (!times || computes_done == 0) return 0.0;
            return (*times)[std::min(computes_done, times->size()) - 1];
        };
        const double stage_layers = std::max<double>(1.0, static_cast<double>(sp.layers));
        long long layers_alive = 0;  // layer activations alive, counted in layers of one micro-batch

        w.sample(MemoryPhase::load, 0.0, stat.checkpoint_temporary);
        for (const auto& mk : sp.memory_marks) {
            const MemoryPhase ph = mk.op > 0 ? phase_of(sp.ops[mk.op - 1].phase) : MemoryPhase::forward;
            const double at = time_at(mk.op);
            switch (mk.event) {
                case MemoryEvent::layer_forward:
                    w.sample(ph, at, act.forward_transient);
                    w[Pile::activations] += act.stored;
                    w.in_flight_ = static_cast<double>(++layers_alive) / stage_layers;
                    w.sample(ph, at);
                    break;
                case MemoryEvent::layer_recomputed:
                    w[Pile::activations] += act.recomputed;
                    w.sample(ph, at);
                    break;
                case MemoryEvent::layer_backward:
                    w.sample(ph, at, act.backward_transient);
                    w[Pile::activations] -= act.stored + act.recomputed;
                    w.in_flight_ = static_cast<double>(--layers_alive) / stage_layers;
                    break;
                case MemoryEvent::embedding_forward:
                    w[Pile::activations] += embedding_stored;
                    break;
                case MemoryEvent::embedding_backward:
                    w[Pile::activations] -= embedding_stored;
                    break;
                case MemoryEvent::head_forward:
                    w[Pile::activations] += head_stored;
                    w.sample(ph, at, logits_transient);
                    break;
                case MemoryEvent::head_backward:
                    w.sample(ph, at, logits_transient);
                    w[Pile::activations] -= head_stored;
                    break;
                case MemoryEvent::params_gathered:
                    w[Pile::buffers] += 2.0 * mk.elements;
                    w.sample(ph, at);
                    break;
                case MemoryEvent::params_released:
                    w[Pile::buffers] -= 2.0 * mk.elements;
                    break;
                case MemoryEvent::grads_unsharded:
                    w[Pile::buffers] += grad_bytes * mk.elements;
                    w.sample(ph, at);
                    break;
                case MemoryEvent::grads_reduced:
                    w[Pile::buffers] -= grad_bytes * mk.elements;
                    break;
            }
        }
        const double end = time_at(sp.ops.size());
        const double leftover = w[Pile::activations];
        if (std::abs(leftover) > 1.0 || std::abs(w[Pile::buffers] - stat.piles[P(Pile::buffers)]) > 1.0)
            throw InternalError(
                fmt::format("memory walk of stage {}: {} B of activations and {} B of buffers "
                            "left after the iteration",
                            st, leftover, w[Pile::buffers] - stat.piles[P(Pile::buffers)]));
        w[Pile::activations] = 0;
        w.sample(MemoryPhase::optimizer, end, stat.optimizer_temporary);
        w.sample(MemoryPhase::checkpoint, end, stat.checkpoint_temporary);

        for (int ph = 0; ph < kMemoryPhases; ++ph) {
            auto& pk = mem.phase_peaks[static_cast<std::size_t>(ph)];
            if (pk.piles[0] < 0) pk.piles.fill(0.0);  // a phase without samples (none today)
            if (total_bytes(pk.piles) > mem.peak_bytes) {
                mem.peak_bytes = total_bytes(pk.piles);
                mem.peak_phase = static_cast<MemoryPhase>(ph);
            }
        }
        rep.stages.push_back(std::move(mem));
    }
    rep.notes = memory_notes(m, l, p);
    for (std::size_t i = 0; i < rep.stages.size(); ++i)
        if (rep.stages[i].peak_bytes > rep.stages[static_cast<std::size_t>(rep.peak_stage)].peak_bytes)
            rep.peak_stage = static_cast<int>(i);
    return rep;
}

}  // namespace trainsim
