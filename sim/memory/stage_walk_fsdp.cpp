// The ZeRO-3 / FSDP events of a stage's memory walk (stage_walk.hpp): parameter groups gathered, kept or
// resharded (FSDP skips the all-gather of a group still gathered), and unsharded gradients held until their
// reduce-scatter.
#include "stage_walk.hpp"

#include <algorithm>

namespace trainsim::memory_walk {

void StageWalk::params_gathered(const MemoryMark& mk, const At& at) {
    const std::size_t nc = next_compute_[mk.op];
    const MemoryPhase gph = nc < sp_.ops.size() ? phase_of(sp_.ops[nc].phase) : at.phase;
    const int pass = gph == MemoryPhase::forward && nc < sp_.ops.size() ? sp_.ops[nc].micro_batch : -3;
    auto it = std::find_if(kept_.begin(), kept_.end(), [&](const Group& k) {
        return k.elements == mk.elements && k.kept_in_forward_of != pass;
    });
    if (it != kept_.end()) {  // still gathered: FSDP skips the all-gather
        in_use_.push_back(*it);
        kept_.erase(it);
        return;
    }
    in_use_.push_back({mk.elements, w_.allocate(Pile::buffers, 2.0 * mk.elements), -2});
    if (s_.fsdp2)  // all_gather_copy_in: the output buffer lives on the all-gather stream
        gather_outputs_.push_back(w_.allocate(Pile::buffers, 2.0 * mk.elements, AllocStream::all_gather));
    w_.sample(gph, at.time_s);
}

void StageWalk::params_released(const MemoryMark& mk, const At& at) {
    auto it = std::find_if(in_use_.begin(), in_use_.end(),
                           [&](const Group& k) { return k.elements == mk.elements; });
    if (it == in_use_.end()) return;
    const bool torchtitan = s_.torchtitan;
    bool keep = false;
    if (at.phase == MemoryPhase::forward) {
        keep = !l_.reshard_after_forward ||
               // torchtitan: the root unit (embeddings, final norm, output) is not resharded after forward
               // (FSDP2 root heuristic), nor (<= v0.1.0) the last transformer block.
               (torchtitan && (last_ == Last::embedding || last_ == Last::head)) ||
               (torchtitan && l_.pp == 1 && last_ == Last::layer &&
                layers_this_pass_ == static_cast<std::int64_t>(sp_.layers));
    } else {
        // Under PP torchtitan defers the reshard after backward to the last micro-batch; the root unit
        // reshards after the whole backward.
        keep = (l_.pp > 1 && !l_.reshard_after_forward) ||
               (torchtitan && (last_ == Last::head || last_ == Last::embedding));
    }
    if (keep) {
        it->kept_in_forward_of = at.phase == MemoryPhase::forward ? last_mb_ : -2;
        kept_.push_back(*it);
    } else {
        w_.release(it->buffer);
    }
    in_use_.erase(it);
}

void StageWalk::grads_unsharded(const MemoryMark& mk, const At& at) {
    if (s_.fsdp2) {
        // The unsharded 16-bit gradients, copied into the reduce-scatter input in the reduce dtype (fp32 in
        // torchtitan) on the reduce-scatter stream, then freed.
        Tensor g16 = w_.allocate(Pile::buffers, s_.E * mk.elements);
        reduce_inputs_.emplace_back(mk.elements, w_.allocate(Pile::buffers, s_.grad_bytes * mk.elements,
                                                             AllocStream::reduce_scatter));
        w_.sample(at.phase, at.time_s);
        w_.release(g16);
    } else {
        reduce_inputs_.emplace_back(mk.elements, w_.allocate(Pile::buffers, s_.grad_bytes * mk.elements));
        w_.sample(at.phase, at.time_s);
    }
}

void StageWalk::grads_reduced(const MemoryMark& mk) {
    auto it = std::find_if(reduce_inputs_.begin(), reduce_inputs_.end(),
                           [&](const auto& k) { return k.first == mk.elements; });
    if (it != reduce_inputs_.end()) {
        w_.release(it->second);
        reduce_inputs_.erase(it);
    }
}

}  // namespace trainsim::memory_walk
