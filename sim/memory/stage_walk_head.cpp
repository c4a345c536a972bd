// The loss head's events of a stage's memory walk (stage_walk.hpp): the final norm and LM-head inputs stored,
// and the logits and cross-entropy tensors of each framework's loss, forward and backward.
#include "stage_walk.hpp"

namespace trainsim::memory_walk {

void StageWalk::head_forward(const At& at) {
    computed(Last::head);
    const double T = s_.T, E = s_.E, h = s_.h, TV = s_.TV;
    const MemoryPhase ph = at.phase;
    // Final norm input, and the LM-head input (gathered over the sequence by torchtitan's DTensor TP, which
    // saves it so).
    std::vector<Tensor> v{w_.allocate(Pile::activations, T * E * h / s_.rep_div),
                          w_.allocate(Pile::activations, T * E * h / s_.head_in_div)};
    if (s_.loss_parallel) {
        // DTensor loss_parallel _log_softmax: x - max, exp of it (summed), then the result.
        Tensor logits = w_.allocate(Pile::buffers, E * TV);
        Tensor fp32 = w_.allocate(Pile::buffers, 4.0 * TV);
        Tensor shifted = w_.allocate(Pile::buffers, 4.0 * TV);
        Tensor ex = w_.allocate(Pile::buffers, 4.0 * TV);
        w_.sample(ph, at.time_s);
        w_.release(ex);
        v.push_back(w_.allocate(Pile::activations, 4.0 * TV));  // log_softmax output
        w_.release(shifted);
        w_.release(fp32);
        w_.release(logits);
    } else if (s_.eager_ce) {
        Tensor logits = w_.allocate(Pile::buffers, E * TV);
        Tensor fp32 = w_.allocate(Pile::buffers, 4.0 * TV);
        v.push_back(w_.allocate(Pile::activations, 4.0 * TV));  // log_softmax output
        w_.sample(ph, at.time_s);
        w_.release(fp32);
        w_.release(logits);
    } else if (l_.cross_entropy_fusion || s_.flash_attn_ce) {
        // TE's fused cross entropy writes the gradient into the 16-bit logits, kept; flash-attn's keeps the
        // logits (and a fp32 log-sum-exp per token) for its backward.
        v.push_back(w_.allocate(Pile::activations, E * TV + (s_.flash_attn_ce ? 4.0 * T : 0.0)));
        w_.sample(ph, at.time_s);
    } else {
        v.push_back(w_.allocate(Pile::activations, 4.0 * TV));  // fp32 softmax
        w_.sample(ph, at.time_s, E * TV);
    }
    push(at.micro_batch, std::move(v));
}

void StageWalk::head_backward(const At& at) {
    computed(Last::head);
    const double E = s_.E, TV = s_.TV;
    if (s_.loss_parallel) {
        // _nll_loss_and_log_softmax_backward: (zeros scattered with -1 + exp(x)) * grad.
        Tensor zeros = w_.allocate(Pile::buffers, 4.0 * TV);
        Tensor ex = w_.allocate(Pile::buffers, 4.0 * TV);
        Tensor sum = w_.allocate(Pile::buffers, 4.0 * TV);
        w_.sample(at.phase, at.time_s);
        w_.release(ex);
        w_.release(zeros);
        Tensor grad = w_.allocate(Pile::buffers, 4.0 * TV);
        w_.release(sum);
        pop(at.micro_batch);
        Tensor grad16 = w_.allocate(Pile::buffers, E * TV);
        w_.release(grad);
        w_.release(grad16);
    } else if (s_.eager_ce) {
        Tensor grad_out = w_.allocate(Pile::buffers, 4.0 * TV);
        Tensor grad_in = w_.allocate(Pile::buffers, 4.0 * TV);
        w_.sample(at.phase, at.time_s);
        w_.release(grad_out);
        pop(at.micro_batch);
        Tensor grad16 = w_.allocate(Pile::buffers, E * TV);
        w_.release(grad_in);
        w_.release(grad16);
    } else if (s_.flash_attn_ce) {
        // flash-attn's backward writes a new 16-bit gradient beside the saved logits.
        Tensor grad16 = w_.allocate(Pile::buffers, E * TV);
        w_.sample(at.phase, at.time_s);
        pop(at.micro_batch);
        w_.release(grad16);
    } else {
        w_.sample(at.phase, at.time_s, E * TV);
        pop(at.micro_batch);
    }
}

}  // namespace trainsim::memory_walk
