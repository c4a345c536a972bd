// Megatron-Core's combined 1F1B schedule for MoE all-to-all overlap (Layout::moe_a2a_overlap, Megatron
// `--overlap-moe-expert-parallel-comm --delay-wgrad-compute`, core v0.14+).
//
// Source (NVIDIA/Megatron-LM): megatron/core/pipeline_parallel/combined_1f1b.py (the schedule: every
// steady-state forward step runs merged with a backward step of another micro-batch) and
// megatron/core/models/common/model_chunk_schedule_plan.py (TransformerModelChunkSchedulePlan.run: forward
// layer i paired with the backward's i-th layer, last layer first; TransformerLayerSchedulePlan.run: one
// layer pair on a computation and a communication stream). A layer is cut into pre_dispatch_computation
// (attention, pre-MLP norm, shared experts, router, permute), moe_dispatch (the dispatch all-to-all), mlp
// (the local experts) and moe_combine (the combine all-to-all, unpermute, residual add)
// (models/gpt/fine_grained_callables.py). One layer pair runs
//     comm stream: combine_bwd(b)    | dispatch_fwd(f) -> dispatch_bwd(b)  | combine_fwd(f)
//     comp stream: pre_dispatch_fwd(f) | mlp_bwd(b) -> mlp_bwd_dw(b) -> mlp_fwd(f) | pre_dispatch_bwd(b)
// each stream in order, each kernel after the one whose output it needs. Here the all-to-alls stay on the
// TP stream (in order, as Megatron's one communication stream) and the main stream waits for the one it
// needs just before launching the next, which gives exactly those dependencies:
//     B.pre  launch(B.combine)  F.pre  wait  launch(F.dispatch)  B.mlp  wait  launch(B.dispatch)  F.mlp
//     wait  launch(F.combine)  B.recompute B.post  wait  F.post
// where for the forward pre = up to the dispatch, mlp = between dispatch and combine, post = after the
// combine; for the backward pre = up to the combine's backward all-to-all, mlp = the experts' backward, post
// = after the dispatch's backward all-to-all (with the layer's recomputation just before it: Megatron
// recomputes inside the attention's backward). A dense layer has no all-to-all: its attention is `pre` and
// its MLP `mlp` (forward), its MLP's backward `mlp` and its attention's `post` (backward). Unpermute runs on
// Megatron's communication stream; here it stays on the main stream (a memory-bound pass, small). The passes'
// other ops keep their order: the forward's prologue (receive, embedding), the backward's (receive, output
// layer), the layer pairs, the unpaired layers (backward first, as Megatron), the forward's epilogue (output
// layer, send) and the backward's (embedding, send).
#include <algorithm>

#include "stage_builder.hpp"

namespace trainsim::detail {

namespace {

/// One pass's op list as forward_pass / backward_pass wrote it.
struct Captured {
    std::vector<Op> ops;
    std::vector<MemoryMark> marks;
    std::vector<LayerSpan> spans;
    std::vector<std::size_t> pos;  ///< [op] its index in the merged list
};

/// A layer span cut at its two EP all-to-alls (launch and wait each): [rec) [pre) c1 [mlp) c2 [post).
struct LayerParts {
    std::size_t rec_b = 0, rec_e = 0, pre_b = 0, pre_e = 0, mlp_b = 0, mlp_e = 0, post_b = 0, post_e = 0;
    std::size_t c1 = 0, c2 = 0;  ///< index of the all-to-all's launch (its wait follows); valid if `comm`
    bool comm = false;
};

bool ep_launch(const Op& op) {
    return op.kind == OpKind::tp_launch && op.group == CommGroup::ep;
}

LayerParts cut(const Captured& c, const LayerSpan& s, bool forward) {
    LayerParts p;
    p.rec_b = s.begin;
    p.rec_e = s.mid;
    std::vector<std::size_t> launches;
    for (std::size_t i = s.mid; i < s.end; ++i)
        if (ep_launch(c.ops[i]) && i + 1 < s.end && c.ops[i + 1].kind == OpKind::tp_wait)
            launches.push_back(i);
    if (launches.size() != 2) {
        // A dense layer: Megatron's pre_dispatch_computation is its attention, its mlp the dense MLP
        // (fine_grained_callables.py, mlp_wrapper); no all-to-all. Forward: pre = attention, mlp = MLP;
        // backward: mlp = the MLP's backward, post = the attention's.
        const std::size_t at = std::min(s.mid + s.split, s.end);
        p.pre_b = p.pre_e = p.mlp_b = s.mid;
        p.mlp_e = p.post_b = p.post_e = s.end;
        if (forward)
            p.pre_e = p.mlp_b = at;
        else
            p.mlp_e = p.post_b = at;
        return p;
    }
    p.comm = true;
    p.c1 = launches[0];
    p.c2 = launches[1];
    p.pre_b = s.mid;
    p.pre_e = p.c1;
    p.mlp_b = p.c1 + 2;
    p.mlp_e = p.c2;
    p.post_b = p.c2 + 2;
    p.post_e = s.end;
    return p;
}

/// Writes ops of captured passes into one list, remembering where each went.
class Merger {
  public:
    explicit Merger(std::vector<Op>& out) : out_(out) {}
    void put(Captured& c, std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) {
            c.pos[i] = out_.size();
            out_.push_back(c.ops[i]);
        }
    }
    /// The launch (or the wait) of the all-to-all at `at` of a layer with comm.
    void launch(Captured& c, const LayerParts& p, std::size_t at) {
        if (p.comm) put(c, at, at + 1);
    }
    void wait(Captured& c, const LayerParts& p, std::size_t at) {
        if (p.comm) put(c, at + 1, at + 2);
    }
    /// Forward layer fp of f and backward layer bp of b, one Megatron layer pair.
    void pair(Captured& f, const LayerParts& fp, Captured& b, const LayerParts& bp) {
        put(b, bp.pre_b, bp.pre_e);
        launch(b, bp, bp.c1);  // combine's backward
        put(f, fp.rec_b, fp.rec_e);
        put(f, fp.pre_b, fp.pre_e);
        wait(b, bp, bp.c1);
        launch(f, fp, fp.c1);  // dispatch
        put(b, bp.mlp_b, bp.mlp_e);
        wait(f, fp, fp.c1);
        launch(b, bp, bp.c2);  // dispatch's backward
        put(f, fp.mlp_b, fp.mlp_e);
        wait(b, bp, bp.c2);
        launch(f, fp, fp.c2);  // combine
        put(b, bp.rec_b, bp.rec_e);
        put(b, bp.post_b, bp.post_e);
        wait(f, fp, fp.c2);
        put(f, fp.post_b, fp.post_e);
    }
    /// A layer of one pass alone, in its own order.
    void alone(Captured& c, const LayerSpan& s) { put(c, s.begin, s.end); }

  private:
    std::vector<Op>& out_;
};

/// The merged index of captured mark position `at` (before op `at` of its pass): right after the pass's op
/// before it, which the marked event follows (the memory walk takes the micro-batch from that op).
std::size_t merged_mark(const Captured& c, std::size_t at) {
    if (at == 0) return c.pos.empty() ? 0 : c.pos[0];
    return c.pos[std::min(at, c.ops.size()) - 1] + 1;
}

}  // namespace

bool StageBuilder::combines_passes() const {
    return layout_.moe_a2a_overlap && model_.moe() && layout_.ep > 1 &&
           layout_.schedule == Schedule::one_f_one_b && !zero3_ && !ds3_;
}

void StageBuilder::combined_pass(const ScheduleItem& f_item, const ScheduleItem& b_item) {
    Captured f, b;
    auto capture = [&](Captured& c, auto&& pass) {
        std::swap(sp_.ops, c.ops);
        std::swap(sp_.memory_marks, c.marks);
        spans_ = &c.spans;
        pass();
        spans_ = nullptr;
        std::swap(sp_.ops, c.ops);
        std::swap(sp_.memory_marks, c.marks);
        c.pos.assign(c.ops.size(), 0);
    };
    // The forward's layers are stored as the backward's are freed, layer by layer: the step holds about
    // the micro-batches in flight before it, not one more (forward_pass alone would count one more).
    const double peak = std::max(sp_.peak_in_flight_microbatches, in_flight_);
    capture(f, [&] { forward_pass(f_item); });
    capture(b, [&] { backward_pass(b_item); });
    sp_.peak_in_flight_microbatches = peak;

    std::vector<Op> out;
    Merger m(out);
    const std::size_t f_first = f.spans.empty() ? f.ops.size() : f.spans.front().begin;
    const std::size_t b_first = b.spans.empty() ? b.ops.size() : b.spans.front().begin;
    m.put(f, 0, f_first);
    m.put(b, 0, b_first);
    const std::size_t pairs = std::min(f.spans.size(), b.spans.size());
    // Ops between two layers (a DP bucket launched after a layer's backward, a parameter all-gather waited
    // for before a layer's forward) go with the next layer.
    auto lead = [&](Captured& c, std::size_t k) {
        if (k > 0 && k < c.spans.size()) m.put(c, c.spans[k - 1].end, c.spans[k].begin);
    };
    for (std::size_t k = 0; k < pairs; ++k) {
        lead(b, k);
        lead(f, k);
        m.pair(f, cut(f, f.spans[k], true), b, cut(b, b.spans[k], false));
    }
    for (std::size_t k = pairs; k < b.spans.size(); ++k) {
        lead(b, k);
        m.alone(b, b.spans[k]);
    }
    for (std::size_t k = pairs; k < f.spans.size(); ++k) {
        lead(f, k);
        m.alone(f, f.spans[k]);
    }
    m.put(f, f.spans.empty() ? f.ops.size() : f.spans.back().end, f.ops.size());
    m.put(b, b.spans.empty() ? b.ops.size() : b.spans.back().end, b.ops.size());

    const std::size_t base = sp_.ops.size();
    std::vector<MemoryMark> marks;
    for (Captured* c : {&f, &b})
        for (MemoryMark mk : c->marks) {
            mk.op = base + merged_mark(*c, mk.op);
            marks.push_back(mk);
        }
    std::stable_sort(marks.begin(), marks.end(),
                     [](const MemoryMark& x, const MemoryMark& y) { return x.op < y.op; });
    sp_.ops.insert(sp_.ops.end(), out.begin(), out.end());
    sp_.memory_marks.insert(sp_.memory_marks.end(), marks.begin(), marks.end());
}

}  // namespace trainsim::detail
