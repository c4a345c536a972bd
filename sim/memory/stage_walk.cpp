// One stage's memory walk (stage_walk.hpp): the run-wide shapes, the walk over the memory marks, the layer
// and embedding events, and the end of the iteration (optimizer step, checkpoint save, peaks). The loss
// head's events are in stage_walk_head.cpp, the ZeRO-3 / FSDP ones in stage_walk_fsdp.cpp.
#include "stage_walk.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim::memory_walk {

namespace {

constexpr auto P = [](Pile p) { return static_cast<std::size_t>(p); };

}  // namespace

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

WalkShapes walk_shapes(const ModelSpec& m, const Layout& l) {
    WalkShapes s;
    s.act = layer_activations(m, l);
    // Layers outside Megatron's recomputed block (Layout::recompute_num_layers) store what they would without
    // recompute.
    Layout kept_layout = l;
    kept_layout.recompute = Recompute::none;
    s.act_kept = layer_activations(m, kept_layout);
    s.act_dense = layer_activations(m, l, false);
    s.act_dense_kept = layer_activations(m, kept_layout, false);
    const double t = l.tp;
    s.E = l.activation_bytes();
    s.T = static_cast<double>(l.micro_batch) * static_cast<double>(m.seq_len) / l.cp;
    s.h = static_cast<double>(m.hidden);
    const double V = static_cast<double>(m.vocab);
    s.rep_div = l.sequence_parallel ? t : 1.0;
    // Embedding: token ids (int64) and the embedding dropout mask. Head: final norm input and LM-head input.
    // Megatron's vocab-parallel cross-entropy keeps the fp32 softmax for the backward; while it runs, the
    // 16-bit logits exist too, and in the backward their gradient. PyTorch's eager F.cross_entropy on
    // logits cast to fp32 (torchtitan's loss, `pred.flatten(0, 1).float()`; autocast does the same for
    // plain PyTorch) holds in forward the 16-bit logits, their fp32 copy and the fp32 log_softmax output
    // (kept for the backward); in backward the log_softmax output, the fp32 gradient of it
    // (nll_loss_backward) and the fp32 gradient of its input, before the cast back to 16 bits.
    s.eager_ce = l.framework == Framework::torchtitan || l.framework == Framework::pytorch;
    // llm-foundry's loss (Composer runs of MPT): flash-attn's fused CrossEntropyLoss, its default `loss_fn:
    // fused_crossentropy` (llmfoundry/models/mpt/modeling_mpt.py ComposerMPTCausalLM): it saves the 16-bit
    // logits and one fp32 log-sum-exp per token, and its backward writes a new 16-bit gradient
    // (inplace_backward False) while they are alive (flash_attn/losses/cross_entropy.py).
    s.flash_attn_ce = l.framework == Framework::composer;
    // torchtitan with TP computes the loss under DTensor's loss_parallel (vocab-sharded logits; its
    // log_softmax and nll backward are decompositions with full-size temporaries: torch/distributed/tensor/
    // parallel/loss.py), and keeps the LM-head input gathered over the sequence.
    s.loss_parallel = l.framework == Framework::torchtitan && l.tp > 1;
    s.head_in_div = l.framework == Framework::torchtitan ? 1.0 : s.rep_div;
    s.TV = s.T * V / t;
    s.embedding_stored = s.T * (8.0 + (m.dropout ? s.h / s.rep_div : 0.0));
    s.grad_bytes = gradient_bytes_per_element(l);
    s.fsdp2 = pytorch_fsdp(l);
    s.torchtitan = l.framework == Framework::torchtitan;
    return s;
}

const std::vector<double>* stage_compute_end_s(const std::vector<std::vector<double>>* compute_end_s,
                                               int stage) {
    const auto st = static_cast<std::size_t>(stage);
    return compute_end_s && st < compute_end_s->size() && !(*compute_end_s)[st].empty()
               ? &(*compute_end_s)[st]
               : nullptr;
}

StageWalk::StageWalk(const Layout& l, const WalkShapes& s, const StageProgram& sp, int stage,
                     const std::vector<double>* compute_end_s, const StaticPiles& stat, StageMemory& mem,
                     bool keep_timeline, double capacity_bytes)
    : l_(l),
      s_(s),
      sp_(sp),
      stage_(stage),
      times_(compute_end_s),
      stat_(stat),
      mem_(mem),
      w_(stat, mem, keep_timeline, capacity_bytes),
      stage_layers_(std::max<double>(1.0, static_cast<double>(sp.layers))),
      next_compute_(sp.ops.size() + 1, sp.ops.size()) {
    for (std::size_t i = sp.ops.size(); i-- > 0;)
        next_compute_[i] = sp.ops[i].kind == OpKind::compute ? i : next_compute_[i + 1];
}

/// Time of the point before op `op`: the end of the last compute op before it.
double StageWalk::time_at(std::size_t op) {
    for (; op_cursor_ < op && op_cursor_ < sp_.ops.size(); ++op_cursor_)
        if (sp_.ops[op_cursor_].kind == OpKind::compute) ++computes_done_;
    if (!times_ || computes_done_ == 0) return 0.0;
    return (*times_)[std::min(computes_done_, times_->size()) - 1];
}

void StageWalk::computed(Last what) {
    last_ = what;
    for (auto& x : gather_outputs_)
        w_.release(x);
    gather_outputs_.clear();
}

void StageWalk::push(int mb, std::vector<Tensor> v) {
    stored_[mb].push_back(std::move(v));
}

void StageWalk::pop(int mb) {
    auto& stack = stored_[mb];
    if (stack.empty())
        throw InternalError(
            fmt::format("memory walk of stage {}: nothing stored for micro-batch {}", stage_, mb));
    for (auto& x : stack.back())
        w_.release(x);
    stack.pop_back();
}

std::size_t early_walk_marks(const StageProgram& sp) {
    std::int64_t backward = 0;
    for (std::size_t i = 0; i < sp.memory_marks.size(); ++i)
        if (sp.memory_marks[i].event == MemoryEvent::layer_backward && ++backward == sp.layers) return i + 1;
    return sp.memory_marks.size();
}

void StageWalk::run() {
    w_.sample(MemoryPhase::load, 0.0, stat_.checkpoint_temporary);
    const std::size_t early = early_walk_marks(sp_);
    walk_marks(0, early);
    mem_.early_peak_bytes = highest_sample_bytes();
    walk_marks(early, sp_.memory_marks.size());
    finish();
}

void StageWalk::run_early() {
    w_.sample(MemoryPhase::load, 0.0, stat_.checkpoint_temporary);
    walk_marks(0, early_walk_marks(sp_));
    mem_.early_peak_bytes = highest_sample_bytes();
}

void StageWalk::walk_marks(std::size_t from, std::size_t to) {
    for (std::size_t i = from; i < to; ++i) {
        const MemoryMark& mk = sp_.memory_marks[i];
        const Op* op = mk.op > 0 ? &sp_.ops[mk.op - 1] : nullptr;
        // The phase is that of the last compute op before the mark (a collective launched for the next
        // group, e.g. a ZeRO-3 all-gather, carries no phase of its own).
        for (; phase_cursor_ < mk.op && phase_cursor_ < sp_.ops.size(); ++phase_cursor_)
            if (sp_.ops[phase_cursor_].kind == OpKind::compute) {
                last_phase_ = phase_of(sp_.ops[phase_cursor_].phase);
                last_mb_ = sp_.ops[phase_cursor_].micro_batch;
            }
        const int mb = op ? op->micro_batch : 0;
        on_mark(mk, At{last_phase_, mb, time_at(mk.op)});
    }
}

double StageWalk::highest_sample_bytes() const {
    double best = 0;
    for (const auto& pk : mem_.phase_peaks)
        if (pk.piles[0] >= 0) best = std::max(best, total_bytes(pk.piles));
    return best;
}

void StageWalk::on_mark(const MemoryMark& mk, const At& at) {
    switch (mk.event) {
        case MemoryEvent::layer_forward:
            return layer_forward(mk.dense_layer ? s_.act_dense : s_.act, at);
        case MemoryEvent::layer_forward_kept:
            return layer_forward(mk.dense_layer ? s_.act_dense_kept : s_.act_kept, at);
        case MemoryEvent::layer_recomputed:
            return layer_recomputed(mk.dense_layer ? s_.act_dense : s_.act, at);
        case MemoryEvent::layer_backward:
            return layer_backward(mk.dense_layer ? s_.act_dense : s_.act, at);
        case MemoryEvent::embedding_forward:
            computed(Last::embedding);
            layers_this_pass_ = 0;
            return push(at.micro_batch, {w_.allocate(Pile::activations, s_.embedding_stored)});
        case MemoryEvent::embedding_backward:
            computed(Last::embedding);
            return pop(at.micro_batch);
        case MemoryEvent::head_forward:
            return head_forward(at);
        case MemoryEvent::head_backward:
            return head_backward(at);
        case MemoryEvent::params_gathered:
            return params_gathered(mk, at);
        case MemoryEvent::params_released:
            return params_released(mk, at);
        case MemoryEvent::grads_unsharded:
            return grads_unsharded(mk, at);
        case MemoryEvent::grads_reduced:
            return grads_reduced(mk);
        // The op before these marks may be a collective launch (micro-batch -1): the last compute op's.
        case MemoryEvent::activations_offloaded:
            return activations_offloaded(last_mb_, static_cast<std::size_t>(mk.elements));
        case MemoryEvent::activations_reloaded:
            return activations_reloaded(last_mb_, static_cast<std::size_t>(mk.elements), at);
    }
}

void StageWalk::activations_offloaded(int mb, std::size_t depth) {
    auto& stack = stored_[mb];
    if (depth >= stack.size())
        throw InternalError(
            fmt::format("memory walk of stage {}: no entry {} deep to offload", stage_, depth));
    const std::size_t index = stack.size() - 1 - depth;
    std::vector<double> sizes;
    for (auto& x : stack[index]) {
        sizes.push_back(x.bytes);
        w_.release(x);
    }
    stack[index].clear();
    offloaded_[{mb, index}] = std::move(sizes);
}

void StageWalk::activations_reloaded(int mb, std::size_t depth, const At& at) {
    auto& stack = stored_[mb];
    const std::size_t index = depth < stack.size() ? stack.size() - 1 - depth : stack.size();
    const auto it = offloaded_.find({mb, index});
    if (it == offloaded_.end())
        throw InternalError(
            fmt::format("memory walk of stage {}: no offloaded entry {} deep", stage_, depth));
    for (double b : it->second)
        stack[index].push_back(w_.allocate(Pile::activations, b));
    offloaded_.erase(it);
    w_.sample(at.phase, at.time_s);
}

void StageWalk::layer_forward(const LayerActivations& la, const At& at) {
    // The layer's output and stored tensors are created while its forward intermediates are alive; the
    // intermediates are freed after.
    computed(Last::layer);
    ++layers_this_pass_;
    std::vector<Tensor> transient, v;
    for (double b : la.forward_transient_tensors)
        transient.push_back(w_.allocate(Pile::buffers, b));
    for (double b : la.stored_tensors)
        v.push_back(w_.allocate(Pile::activations, b));
    push(at.micro_batch, std::move(v));
    w_.in_flight_microbatches = static_cast<double>(++layers_alive_) / stage_layers_;
    w_.sample(at.phase, at.time_s);
    for (auto& x : transient)
        w_.release(x);
}

void StageWalk::layer_recomputed(const LayerActivations& la, const At& at) {
    if (!stored_[at.micro_batch].empty())
        for (double b : la.recomputed_tensors)
            stored_[at.micro_batch].back().push_back(w_.allocate(Pile::activations, b));
    w_.sample(at.phase, at.time_s);
}

void StageWalk::layer_backward(const LayerActivations& la, const At& at) {
    // The gradients are computed while the stored and recomputed tensors are alive; those are freed as the
    // layer's backward ends, the input gradient handed on.
    computed(Last::layer);
    std::vector<Tensor> transient;
    for (double b : la.backward_transient_tensors)
        transient.push_back(w_.allocate(Pile::buffers, b));
    w_.sample(at.phase, at.time_s);
    pop(at.micro_batch);
    for (auto& x : transient)
        w_.release(x);
    w_.in_flight_microbatches = static_cast<double>(--layers_alive_) / stage_layers_;
}

void StageWalk::finish() {
    computed(Last::none);
    for (auto& k : kept_)
        w_.release(k.buffer);
    for (auto& k : in_use_)
        w_.release(k.buffer);
    for (auto& k : reduce_inputs_)
        w_.release(k.second);
    const double end = time_at(sp_.ops.size());
    const double leftover = w_[Pile::activations];
    if (std::abs(leftover) > 1.0 || std::abs(w_[Pile::buffers] - stat_.piles[P(Pile::buffers)]) > 1.0)
        throw InternalError(
            fmt::format("memory walk of stage {}: {} B of activations and {} B of buffers "
                        "left after the iteration",
                        stage_, leftover, w_[Pile::buffers] - stat_.piles[P(Pile::buffers)]));
    std::vector<double> step_tensors;
    for (double left = stat_.optimizer_temporary; left > 0; left -= stat_.optimizer_temporary_tensor)
        step_tensors.push_back(std::min(left, stat_.optimizer_temporary_tensor));
    w_.sample(MemoryPhase::optimizer, end, step_tensors);
    w_.sample(MemoryPhase::checkpoint, end, stat_.checkpoint_temporary);

    for (int ph = 0; ph < kMemoryPhases; ++ph) {
        auto& pk = mem_.phase_peaks[static_cast<std::size_t>(ph)];
        if (pk.piles[0] < 0) pk.piles.fill(0.0);  // a phase without samples (none today)
        if (total_bytes(pk.piles) > mem_.peak_bytes) {
            mem_.peak_bytes = total_bytes(pk.piles);
            mem_.peak_phase = static_cast<MemoryPhase>(ph);
        }
    }
    mem_.peak_allocated_bytes = w_.allocator().peak_allocated_bytes();
    mem_.peak_reserved_bytes = w_.allocator().peak_reserved_bytes();
}

}  // namespace trainsim::memory_walk
