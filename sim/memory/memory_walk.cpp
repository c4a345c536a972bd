// The memory walk: static piles of each stage, then the stage's memory marks in the simulated order, each
// one a sample of the allocated bytes by pile (docs/memory.md, "Timeline").
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "trainsim/caching_allocator.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/memory.hpp"

namespace trainsim {

bool caches_fp8_weights(const Layout& l) {
    return l.framework == Framework::megatron;
}

bool pytorch_fsdp(const Layout& l) {
    return l.zero_stage >= 3 && (l.framework == Framework::torchtitan || l.framework == Framework::composer ||
                                 l.framework == Framework::pytorch);
}

double gradient_bytes_per_element(const Layout& l) {
    return l.framework == Framework::torchtitan ? 4.0 : l.grad_reduce_bytes_per_element();
}

ReportedMemory reported_memory(Framework f) {
    switch (f) {
        case Framework::torchtitan:
        case Framework::megatron:
        case Framework::deepspeed:
        case Framework::composer:
        case Framework::pytorch:
            return ReportedMemory::reserved;
    }
    return ReportedMemory::reserved;
}

double MemoryReport::peak_of(ReportedMemory what) const {
    double best = 0;
    for (const auto& st : stages)
        best = std::max(best, what == ReportedMemory::allocated  ? st.peak_allocated_bytes
                              : what == ReportedMemory::reserved ? st.peak_reserved_bytes
                                                                 : st.peak_bytes);
    return best;
}

double reported_peak_bytes(const MemoryReport& r, Framework f) {
    return r.peak_of(reported_memory(f));
}

namespace {

constexpr auto P = [](Pile p) { return static_cast<std::size_t>(p); };

/// Bytes every GPU of the stage holds for the whole iteration, and the temporaries of the optimizer step and
/// of a checkpoint save.
struct StaticPiles {
    PileBytes piles{};
    double optimizer_temporary = 0;         ///< alive during the optimizer step
    double optimizer_temporary_tensor = 0;  ///< ... made of per-parameter tensors at most this large
    double checkpoint_temporary = 0;        ///< alive while a checkpoint is saved or loaded
    double host_bytes = 0;                  ///< offloaded optimizer state
    double outside_allocator = 0;           ///< CUDA context and NCCL buffers
};

int communicators(const ModelSpec& m, const Layout& l, int stage) {
    int n = 0;
    if (l.tp > 1) ++n;
    if (l.cp > 1) ++n;
    if (l.dp * l.cp > 1) ++n;
    if (l.pp > 1) ++n;  // P2P to the neighbouring stages
    // The embedding group: tied embeddings, or MTP's copy of the embedding on the last stage.
    if (l.pp > 1 && (m.tied_embeddings || m.mtp_layers > 0) && (stage == 0 || stage == l.pp - 1)) ++n;
    return n;
}

}  // namespace

MoeStageParams moe_stage_params(const ModelSpec& m, const Layout& l, int stage, double embedding_params) {
    MoeStageParams p;
    const double t = l.tp, experts_split = static_cast<double>(l.ep) * l.expert_tp();
    p.dense = embedding_params / t;
    // MLA's duplicated down-projections are whole on every TP rank
    // (ModelSpec::tp_replicated_attention_params).
    const double replicated = m.tp_replicated_attention_params() * (1.0 - 1.0 / t);
    for (const std::int64_t i : stage_layer_indices(m, l, stage)) {
        p.dense += m.layer_dense_params(i) / t + replicated;
        p.experts += m.layer_expert_params(i) / experts_split;
    }
    // The MTP layers' routed experts on the loss stage (their dense part is in embedding_params: the program
    // counts it with the output layer's group).
    if (stage == l.pp - 1) p.experts += m.mtp_expert_params() / experts_split;
    p.linear = p.dense - embedding_params / t + p.experts;
    return p;
}

namespace {

StaticPiles static_piles(const ModelSpec& m, const Layout& l, const StageProgram& sp, int stage) {
    StaticPiles s;
    const double t = l.tp;
    const double dpc =
        static_cast<double>(l.dp) * l.cp;  // ZeRO and the distributed optimizer shard over DP x CP
    double params = sp.params / t, trainable = sp.trainable_params / t;
    const double layers = static_cast<double>(sp.layers);
    double linear = layers * m.linear_params() / t;  // linear weights of the stage's layers, per GPU
    // MoE (no adapters): dense parts over TP and sharded over DP x CP, routed experts over EP x ETP and
    // sharded over the expert-DP group (Megatron-Core's distributed optimizer shards expert parameters over
    // expert_data_parallel, megatron/core/distributed/distributed_data_parallel.py expert buffers).
    // `shard_fraction(x)` is the share of the per-GPU parameters one rank keeps when x-sharded.
    const bool moe = m.moe() && !l.frozen_base();
    MoeStageParams mp;
    if (moe) {
        mp = moe_stage_params(m, l, stage, sp.embedding_params);
        params = trainable = mp.dense + mp.experts;
        linear = mp.linear;
    }
    const double edp = std::max(1, l.expert_dp());
    // Per-GPU parameters left after sharding the dense part over `dense_ways` and the experts over
    // `expert_ways` (for dense models: trainable / dense_ways).
    auto sharded_params = [&](double dense_ways, double expert_ways) {
        return moe ? mp.dense / dense_ways + mp.experts / expert_ways : trainable / dense_ways;
    };
    const double frozen = params - (l.frozen_base() ? 0.0 : trainable);
    const bool zero3 = l.zero_stage >= 3 && dpc > 1;
    const bool sharded = l.sharded_optimizer() && dpc > 1;
    // PyTorch FSDP: the fp32 sharded parameter is the master weight; no 16-bit shard beside it.
    const bool fp32_shards =
        pytorch_fsdp(l) && zero3 && !l.frozen_base() && l.offload_optimizer == Offload::none;

    // Parameters: 16-bit weights, or NF4 linear weights (QLoRA); adapters in 16 bits; ZeRO-3 keeps 1/DP.
    double weights = l.frozen_base() ? 2.0 * frozen + 2.0 * trainable : 2.0 * params;
    if (l.adapter == Adapter::qlora) weights -= (2.0 - kQloraBaseBytesPerParam) * linear;
    if (fp32_shards) weights = 4.0 * params;
    if (zero3) weights = moe ? weights / params * sharded_params(dpc, edp) : weights / dpc;
    // fp8 GEMMs under Megatron (TransformerEngine with is_first_microbatch): an fp8 copy of each linear
    // weight and its transpose, cached across the micro-batches of a step, sharded like the weights. With
    // fp8_param_gather the linear weights are FP8 themselves (1 B) with their cached transpose (1 B): the
    // 2 B already counted.
    if (l.precision == Precision::fp8 && caches_fp8_weights(l) && !l.fp8_param_gather)
        weights += 2.0 * linear / (zero3 ? dpc : 1.0);
    s.piles[P(Pile::parameters)] = weights;

    const bool grad_sharded = l.zero_stage >= 2 && dpc > 1;
    s.piles[P(Pile::gradients)] =
        gradient_bytes_per_element(l) * sharded_params(grad_sharded ? dpc : 1.0, grad_sharded ? edp : 1.0);

    const double master = fp32_shards ? 4.0 : 0.0;  // counted with the parameters
    const double optimizer =
        (l.optimizer_bytes_per_param() - master) * sharded_params(sharded ? dpc : 1.0, sharded ? edp : 1.0);
    if (l.offload_optimizer == Offload::none)
        s.piles[P(Pile::optimizer)] = optimizer;
    else
        s.host_bytes = optimizer;

    // Buffers held all along: the pipeline's send and receive buffers (one activation or gradient message
    // each way), DeepSpeed ZeRO-2's reduction bucket, and fp8 delayed-scaling state (amax history of 1,024
    // steps plus scale and inverse scale, fp32, for the input, weight and output-gradient of each of 4 GEMMs
    // per layer; current scaling keeps no history).
    const double act_message = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) *
                               static_cast<double>(m.hidden) * l.activation_bytes() / l.cp / t;
    double buffers = l.pp > 1 ? 2.0 * act_message : 0.0;
    if (l.zero_stage == 2 && dpc > 1)
        buffers += std::min(l.dp_bucket_bytes / 4.0, trainable) * gradient_bytes_per_element(l);
    if (l.precision == Precision::fp8 && l.fp8_recipe == Fp8Recipe::delayed)
        buffers += layers * 4 * 3 * (1024 + 2) * 4.0;
    s.piles[P(Pile::buffers)] = buffers;
    s.piles[P(Pile::framework)] = kCublasWorkspaceBytes;  // allocated through PyTorch's allocator

    // The optimizer step's temporaries: 16-bit gradients copied to fp32 (Megatron's fp16 optimizer,
    // _copy_model_grads_to_main_grads) for the parameters this GPU updates.
    if (gradient_bytes_per_element(l) < 4 && l.offload_optimizer == Offload::none)
        s.optimizer_temporary = 4.0 * sharded_params(sharded ? dpc : 1.0, sharded ? edp : 1.0);
    // One fp32 copy per parameter tensor: the largest is a layer's widest weight (or its shard).
    {
        const double h = static_cast<double>(m.hidden), d = static_cast<double>(m.head_dim());
        const double widest =
            h *
            std::max((m.mlp == MlpKind::swiglu ? 2.0 : 1.0) * static_cast<double>(m.ffn_hidden),
                     static_cast<double>(m.heads + 2 * m.kv_heads) * d) /
            t;
        s.optimizer_temporary_tensor = 4.0 * widest / (sharded ? dpc : 1.0);
    }
    // A rank-0 save gathers the sharded state: FSDP FULL_STATE_DICT unshards one group at a time in fp32 with
    // its optimizer state; Megatron's DP-zero optimizer state gathers one bucket of one fp32 tensor at a
    // time.
    if (l.checkpoint_save == CheckpointSave::rank0) {
        const double group = l.frozen_base() ? 0.0 : layers > 0 ? trainable / layers : trainable;
        if (zero3)
            s.checkpoint_temporary = l.optimizer_bytes_per_param() * group;  // fp32 weight + moments
        else if (sharded)
            s.checkpoint_temporary = 4.0 * std::min(l.dp_bucket_bytes / 4.0, trainable);
    }
    s.outside_allocator =
        kCudaContextBytes + communicators(m, l, stage) * kNcclChannels * kNcclChannelBufferBytes;
    return s;
}

/// A tensor of the walk: its pile, its bytes and its block in the allocator model.
struct Tensor {
    Pile pile = Pile::buffers;
    double bytes = 0;
    std::int64_t block = -1;
};

class Walk {
  public:
    Walk(const StaticPiles& st, StageMemory& out, bool keep, double capacity_bytes)
        : st_(st), out_(out), keep_(keep), alloc_(capacity_bytes - st.outside_allocator) {
        for (auto& p : out_.phase_peaks)
            p.piles.fill(-1.0);
        for (int i = 0; i < kPiles; ++i)
            if (st.piles[static_cast<std::size_t>(i)] > 0)
                allocate(static_cast<Pile>(i), st.piles[static_cast<std::size_t>(i)]);
        out_.outside_allocator_bytes = st.outside_allocator;
    }

    Tensor allocate(Pile p, double bytes, AllocStream stream = AllocStream::compute) {
        Tensor x{p, bytes, alloc_.allocate(bytes, stream)};
        piles_[P(p)] += bytes;
        return x;
    }
    void release(Tensor& x) {
        if (x.block < 0 && x.bytes == 0) return;
        alloc_.free(x.block);
        piles_[P(x.pile)] -= x.bytes;
        x = Tensor{};
    }

    /// Records the allocated bytes plus `transient` buffers (allocated for the sample, then freed) at
    /// `time_s`.
    void sample(MemoryPhase phase, double time_s, double transient = 0) {
        sample(phase, time_s, std::vector<double>{transient});
    }
    void sample(MemoryPhase phase, double time_s, const std::vector<double>& transient) {
        std::vector<Tensor> tr;
        for (double b : transient)
            if (b > 0) tr.push_back(allocate(Pile::buffers, b));
        MemorySample s;
        s.time_s = time_s;
        s.phase = phase;
        s.piles = piles_;
        const double live = total_bytes(piles_);
        // Reserved less the live tensors: the allocator's rounding, unsplit slack and cached free blocks.
        s.piles[P(Pile::framework)] += st_.outside_allocator + (alloc_.reserved_bytes() - live);
        s.allocated_bytes = alloc_.allocated_bytes();
        s.reserved_bytes = alloc_.reserved_bytes();
        s.in_flight_microbatches = in_flight_;
        const std::size_t ph = static_cast<std::size_t>(phase);
        auto& peak = out_.phase_peaks[ph];
        const double tot = total_bytes(s.piles), peak_tot = total_bytes(peak.piles);
        if (peak.piles[0] < 0 || tot > peak_tot ||
            (tot == peak_tot && s.allocated_bytes > peak.allocated_bytes))
            peak = s;
        out_.phase_max_allocated_bytes[ph] = std::max(out_.phase_max_allocated_bytes[ph], s.allocated_bytes);
        out_.phase_max_reserved_bytes[ph] = std::max(out_.phase_max_reserved_bytes[ph], s.reserved_bytes);
        if (keep_) out_.timeline.push_back(s);
        for (auto it = tr.rbegin(); it != tr.rend(); ++it)
            release(*it);
    }

    double& operator[](Pile p) { return piles_[P(p)]; }
    const CachingAllocator& allocator() const { return alloc_; }
    double in_flight_ = 0;

  private:
    const StaticPiles& st_;
    StageMemory& out_;
    bool keep_;
    CachingAllocator alloc_;
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
    if (l.precision == Precision::fp8 && l.fp8_param_gather && caches_fp8_weights(l))
        notes.push_back(
            "fp8 GEMMs (TransformerEngine) with fp8_param_gather: the linear weights held in fp8 with "
            "their transpose (1 + 1 B), all-gathered in fp8, GEMM inputs stored in fp8");
    else if (l.precision == Precision::fp8)
        notes.push_back(
            caches_fp8_weights(l)
                ? "fp8 GEMMs (TransformerEngine): an fp8 copy and transpose of each linear weight "
                  "cached for the step (2 B, sharded like the weights), GEMM inputs stored in fp8, "
                  "scaling state per GEMM"
                : "fp8 GEMMs without a weight cache (torchao Float8 or TE without "
                  "is_first_microbatch): a weight's fp8 cast exists only around its GEMM");
    if (l.zero_stage >= 3 && l.dp * l.cp > 1)
        notes.push_back(fmt::format(
            "ZeRO-3 / FSDP: parameter groups all-gathered just in time with one prefetched (two groups "
            "alive), gradients of a group held until its reduce-scatter; {}{}",
            l.reshard_after_forward ? "resharded after forward" : "kept gathered from forward to backward",
            l.framework == Framework::torchtitan
                ? "; torchtitan (FSDP2): fp32 shards are the master weights, the root unit (embeddings, "
                  "norm, "
                  "output) and the last block stay gathered, fp32 reduce-scatter buffers on their own stream"
                : ""));
    notes.push_back("peak memory as the framework prints it: " +
                    std::string(reported_memory(l.framework) == ReportedMemory::reserved ? "max reserved"
                                : reported_memory(l.framework) == ReportedMemory::allocated
                                    ? "max allocated"
                                    : "device total") +
                    " (caching-allocator model: include/trainsim/caching_allocator.hpp)");
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
    // Layers outside Megatron's recomputed block (Layout::recompute_num_layers) store what they would without
    // recompute.
    Layout kept_layout = l;
    kept_layout.recompute = Recompute::none;
    const LayerActivations act_kept = layer_activations(m, kept_layout);
    const double t = l.tp, E = l.activation_bytes();
    const double T = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) / l.cp;
    const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
    const double rep_div = l.sequence_parallel ? t : 1.0;
    // Embedding: token ids (int64) and the embedding dropout mask. Head: final norm input and LM-head input.
    // Megatron's vocab-parallel cross-entropy keeps the fp32 softmax for the backward; while it runs, the
    // 16-bit logits exist too, and in the backward their gradient. PyTorch's eager F.cross_entropy on
    // logits cast to fp32 (torchtitan's loss, `pred.flatten(0, 1).float()`; autocast does the same for
    // Composer) holds in forward the 16-bit logits, their fp32 copy and the fp32 log_softmax output (kept for
    // the backward); in backward the log_softmax output, the fp32 gradient of it (nll_loss_backward) and the
    // fp32 gradient of its input, before the cast back to 16 bits.
    const bool eager_ce = l.framework == Framework::torchtitan || l.framework == Framework::composer ||
                          l.framework == Framework::pytorch;
    // torchtitan with TP computes the loss under DTensor's loss_parallel (vocab-sharded logits; its
    // log_softmax and nll backward are decompositions with full-size temporaries: torch/distributed/tensor/
    // parallel/loss.py), and keeps the LM-head input gathered over the sequence.
    const bool loss_parallel = l.framework == Framework::torchtitan && l.tp > 1;
    const double head_in_div = l.framework == Framework::torchtitan ? 1.0 : rep_div;
    const double TV = T * V / t;  // logits per GPU (vocab-parallel / loss-parallel under TP)
    const double embedding_stored = T * (8.0 + (m.dropout ? h / rep_div : 0.0));
    const double grad_bytes = gradient_bytes_per_element(l);
    const bool fsdp2 = pytorch_fsdp(l);
    const bool torchtitan = l.framework == Framework::torchtitan;

    for (int st = 0; st < l.pp; ++st) {
        const StageProgram& sp = p.stages[static_cast<std::size_t>(st)];
        StageMemory mem;
        mem.stage = st;
        mem.ranks = l.tp * l.cp * l.dp;
        mem.peak_in_flight_microbatches = sp.peak_in_flight_microbatches;
        const StaticPiles stat = static_piles(m, l, sp, st);
        mem.host_bytes = stat.host_bytes;
        Walk w(stat, mem, keep_timeline, gpu.hbm_bytes);
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

        // Stored tensors by micro-batch, as a stack: the backward frees them in reverse order.
        std::map<int, std::vector<std::vector<Tensor>>> stored;
        auto push = [&](int mb, std::vector<Tensor> v) { stored[mb].push_back(std::move(v)); };
        auto pop = [&](int mb) {
            auto& stack = stored[mb];
            if (stack.empty())
                throw InternalError(
                    fmt::format("memory walk of stage {}: nothing stored for "
                                "micro-batch {}",
                                st, mb));
            for (auto& x : stack.back())
                w.release(x);
            stack.pop_back();
        };
        // ZeRO-3 / FSDP parameter groups: gathered and in use, or gathered and kept (not resharded). Groups
        // are known by their size only: a kept buffer serves a later gather of the same size, in the backward
        // or in the forward of another micro-batch (within one forward pass every gather is a new group).
        struct Group {
            double elements = 0;
            Tensor buffer;
            int kept_in_forward_of = -2;  ///< the micro-batch whose forward kept it; -2: kept in a backward
        };
        std::vector<Group> in_use, kept;
        std::vector<Tensor> gather_outputs;  // FSDP2 all-gather outputs on their stream, until copied out
        std::vector<std::pair<double, Tensor>> reduce_inputs;  // FSDP2 fp32 reduce-scatter inputs
        enum class Last { none, embedding, layer, head } last = Last::none;
        std::int64_t layers_this_pass = 0;
        auto computed = [&](Last what) {
            last = what;
            for (auto& x : gather_outputs)
                w.release(x);
            gather_outputs.clear();
        };

        w.sample(MemoryPhase::load, 0.0, stat.checkpoint_temporary);
        std::size_t phase_cursor = 0;
        MemoryPhase last_phase = MemoryPhase::forward;
        int last_mb = -1;
        // The compute op at or after each op: a parameter gather serves the compute that follows it.
        std::vector<std::size_t> next_compute(sp.ops.size() + 1, sp.ops.size());
        for (std::size_t i = sp.ops.size(); i-- > 0;)
            next_compute[i] = sp.ops[i].kind == OpKind::compute ? i : next_compute[i + 1];
        for (const auto& mk : sp.memory_marks) {
            const Op* op = mk.op > 0 ? &sp.ops[mk.op - 1] : nullptr;
            // The phase is that of the last compute op before the mark (a collective launched for the
            // next group, e.g. a ZeRO-3 all-gather, carries no phase of its own).
            for (; phase_cursor < mk.op && phase_cursor < sp.ops.size(); ++phase_cursor)
                if (sp.ops[phase_cursor].kind == OpKind::compute) {
                    last_phase = phase_of(sp.ops[phase_cursor].phase);
                    last_mb = sp.ops[phase_cursor].micro_batch;
                }
            const MemoryPhase ph = last_phase;
            const int mb = op ? op->micro_batch : 0;
            const double at = time_at(mk.op);
            switch (mk.event) {
                case MemoryEvent::layer_forward:
                case MemoryEvent::layer_forward_kept: {
                    // The layer's output and stored tensors are created while its forward intermediates
                    // are alive; the intermediates are freed after.
                    const LayerActivations& la = mk.event == MemoryEvent::layer_forward ? act : act_kept;
                    computed(Last::layer);
                    ++layers_this_pass;
                    std::vector<Tensor> transient, v;
                    for (double b : la.forward_transient_tensors)
                        transient.push_back(w.allocate(Pile::buffers, b));
                    for (double b : la.stored_tensors)
                        v.push_back(w.allocate(Pile::activations, b));
                    push(mb, std::move(v));
                    w.in_flight_ = static_cast<double>(++layers_alive) / stage_layers;
                    w.sample(ph, at);
                    for (auto& x : transient)
                        w.release(x);
                    break;
                }
                case MemoryEvent::layer_recomputed:
                    if (!stored[mb].empty())
                        for (double b : act.recomputed_tensors)
                            stored[mb].back().push_back(w.allocate(Pile::activations, b));
                    w.sample(ph, at);
                    break;
                case MemoryEvent::layer_backward: {
                    // The gradients are computed while the stored and recomputed tensors are alive; those are
                    // freed as the layer's backward ends, the input gradient handed on.
                    computed(Last::layer);
                    std::vector<Tensor> transient;
                    for (double b : act.backward_transient_tensors)
                        transient.push_back(w.allocate(Pile::buffers, b));
                    w.sample(ph, at);
                    pop(mb);
                    for (auto& x : transient)
                        w.release(x);
                    w.in_flight_ = static_cast<double>(--layers_alive) / stage_layers;
                    break;
                }
                case MemoryEvent::embedding_forward:
                    computed(Last::embedding);
                    layers_this_pass = 0;
                    push(mb, {w.allocate(Pile::activations, embedding_stored)});
                    break;
                case MemoryEvent::embedding_backward:
                    computed(Last::embedding);
                    pop(mb);
                    break;
                case MemoryEvent::head_forward: {
                    computed(Last::head);
                    // Final norm input, and the LM-head input (gathered over the sequence by torchtitan's
                    // DTensor TP, which saves it so).
                    std::vector<Tensor> v{w.allocate(Pile::activations, T * E * h / rep_div),
                                          w.allocate(Pile::activations, T * E * h / head_in_div)};
                    if (loss_parallel) {
                        // DTensor loss_parallel _log_softmax: x - max, exp of it (summed), then the result.
                        Tensor logits = w.allocate(Pile::buffers, E * TV);
                        Tensor fp32 = w.allocate(Pile::buffers, 4.0 * TV);
                        Tensor shifted = w.allocate(Pile::buffers, 4.0 * TV);
                        Tensor ex = w.allocate(Pile::buffers, 4.0 * TV);
                        w.sample(ph, at);
                        w.release(ex);
                        v.push_back(w.allocate(Pile::activations, 4.0 * TV));  // log_softmax output
                        w.release(shifted);
                        w.release(fp32);
                        w.release(logits);
                    } else if (eager_ce) {
                        Tensor logits = w.allocate(Pile::buffers, E * TV);
                        Tensor fp32 = w.allocate(Pile::buffers, 4.0 * TV);
                        v.push_back(w.allocate(Pile::activations, 4.0 * TV));  // log_softmax output
                        w.sample(ph, at);
                        w.release(fp32);
                        w.release(logits);
                    } else if (l.cross_entropy_fusion) {
                        // TE's fused cross entropy writes the gradient into the 16-bit logits, kept.
                        v.push_back(w.allocate(Pile::activations, E * TV));
                        w.sample(ph, at);
                    } else {
                        v.push_back(w.allocate(Pile::activations, 4.0 * TV));  // fp32 softmax
                        w.sample(ph, at, E * TV);
                    }
                    push(mb, std::move(v));
                    break;
                }
                case MemoryEvent::head_backward:
                    computed(Last::head);
                    if (loss_parallel) {
                        // _nll_loss_and_log_softmax_backward: (zeros scattered with -1 + exp(x)) * grad.
                        Tensor zeros = w.allocate(Pile::buffers, 4.0 * TV);
                        Tensor ex = w.allocate(Pile::buffers, 4.0 * TV);
                        Tensor sum = w.allocate(Pile::buffers, 4.0 * TV);
                        w.sample(ph, at);
                        w.release(ex);
                        w.release(zeros);
                        Tensor grad = w.allocate(Pile::buffers, 4.0 * TV);
                        w.release(sum);
                        pop(mb);
                        Tensor grad16 = w.allocate(Pile::buffers, E * TV);
                        w.release(grad);
                        w.release(grad16);
                    } else if (eager_ce) {
                        Tensor grad_out = w.allocate(Pile::buffers, 4.0 * TV);
                        Tensor grad_in = w.allocate(Pile::buffers, 4.0 * TV);
                        w.sample(ph, at);
                        w.release(grad_out);
                        pop(mb);
                        Tensor grad16 = w.allocate(Pile::buffers, E * TV);
                        w.release(grad_in);
                        w.release(grad16);
                    } else {
                        w.sample(ph, at, E * TV);
                        pop(mb);
                    }
                    break;
                case MemoryEvent::params_gathered: {
                    const std::size_t nc = next_compute[mk.op];
                    const MemoryPhase gph = nc < sp.ops.size() ? phase_of(sp.ops[nc].phase) : ph;
                    const int pass =
                        gph == MemoryPhase::forward && nc < sp.ops.size() ? sp.ops[nc].micro_batch : -3;
                    auto it = std::find_if(kept.begin(), kept.end(), [&](const Group& k) {
                        return k.elements == mk.elements && k.kept_in_forward_of != pass;
                    });
                    if (it != kept.end()) {  // still gathered: FSDP skips the all-gather
                        in_use.push_back(*it);
                        kept.erase(it);
                        break;
                    }
                    in_use.push_back({mk.elements, w.allocate(Pile::buffers, 2.0 * mk.elements), -2});
                    if (fsdp2)  // all_gather_copy_in: the output buffer lives on the all-gather stream
                        gather_outputs.push_back(
                            w.allocate(Pile::buffers, 2.0 * mk.elements, AllocStream::all_gather));
                    w.sample(gph, at);
                    break;
                }
                case MemoryEvent::params_released: {
                    auto it = std::find_if(in_use.begin(), in_use.end(),
                                           [&](const Group& k) { return k.elements == mk.elements; });
                    if (it == in_use.end()) break;
                    bool keep = false;
                    if (ph == MemoryPhase::forward) {
                        keep = !l.reshard_after_forward ||
                               // torchtitan: the root unit (embeddings, final norm, output) is not
                               // resharded after forward (FSDP2 root heuristic), nor (<= v0.1.0) the last
                               // transformer block.
                               (torchtitan && (last == Last::embedding || last == Last::head)) ||
                               (torchtitan && l.pp == 1 && last == Last::layer &&
                                layers_this_pass == static_cast<std::int64_t>(sp.layers));
                    } else {
                        // Under PP torchtitan defers the reshard after backward to the last micro-batch;
                        // the root unit reshards after the whole backward.
                        keep = (l.pp > 1 && !l.reshard_after_forward) ||
                               (torchtitan && (last == Last::head || last == Last::embedding));
                    }
                    if (keep) {
                        it->kept_in_forward_of = ph == MemoryPhase::forward ? last_mb : -2;
                        kept.push_back(*it);
                    } else {
                        w.release(it->buffer);
                    }
                    in_use.erase(it);
                    break;
                }
                case MemoryEvent::grads_unsharded:
                    if (fsdp2) {
                        // The unsharded 16-bit gradients, copied into the reduce-scatter input in the reduce
                        // dtype (fp32 in torchtitan) on the reduce-scatter stream, then freed.
                        Tensor g16 = w.allocate(Pile::buffers, E * mk.elements);
                        reduce_inputs.emplace_back(
                            mk.elements,
                            w.allocate(Pile::buffers, grad_bytes * mk.elements, AllocStream::reduce_scatter));
                        w.sample(ph, at);
                        w.release(g16);
                    } else {
                        reduce_inputs.emplace_back(mk.elements,
                                                   w.allocate(Pile::buffers, grad_bytes * mk.elements));
                        w.sample(ph, at);
                    }
                    break;
                case MemoryEvent::grads_reduced: {
                    auto it = std::find_if(reduce_inputs.begin(), reduce_inputs.end(),
                                           [&](const auto& k) { return k.first == mk.elements; });
                    if (it != reduce_inputs.end()) {
                        w.release(it->second);
                        reduce_inputs.erase(it);
                    }
                    break;
                }
            }
        }
        computed(Last::none);
        for (auto& k : kept)
            w.release(k.buffer);
        for (auto& k : in_use)
            w.release(k.buffer);
        for (auto& k : reduce_inputs)
            w.release(k.second);
        const double end = time_at(sp.ops.size());
        const double leftover = w[Pile::activations];
        if (std::abs(leftover) > 1.0 || std::abs(w[Pile::buffers] - stat.piles[P(Pile::buffers)]) > 1.0)
            throw InternalError(
                fmt::format("memory walk of stage {}: {} B of activations and {} B of buffers "
                            "left after the iteration",
                            st, leftover, w[Pile::buffers] - stat.piles[P(Pile::buffers)]));
        std::vector<double> step_tensors;
        for (double left = stat.optimizer_temporary; left > 0; left -= stat.optimizer_temporary_tensor)
            step_tensors.push_back(std::min(left, stat.optimizer_temporary_tensor));
        w.sample(MemoryPhase::optimizer, end, step_tensors);
        w.sample(MemoryPhase::checkpoint, end, stat.checkpoint_temporary);

        for (int ph = 0; ph < kMemoryPhases; ++ph) {
            auto& pk = mem.phase_peaks[static_cast<std::size_t>(ph)];
            if (pk.piles[0] < 0) pk.piles.fill(0.0);  // a phase without samples (none today)
            if (total_bytes(pk.piles) > mem.peak_bytes) {
                mem.peak_bytes = total_bytes(pk.piles);
                mem.peak_phase = static_cast<MemoryPhase>(ph);
            }
        }
        mem.peak_allocated_bytes = w.allocator().peak_allocated_bytes();
        mem.peak_reserved_bytes = w.allocator().peak_reserved_bytes();
        rep.stages.push_back(std::move(mem));
    }
    rep.notes = memory_notes(m, l, p);
    for (std::size_t i = 0; i < rep.stages.size(); ++i)
        if (rep.stages[i].peak_bytes > rep.stages[static_cast<std::size_t>(rep.peak_stage)].peak_bytes)
            rep.peak_stage = static_cast<int>(i);
    return rep;
}

}  // namespace trainsim
