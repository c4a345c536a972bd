// Expands a pipeline schedule into each stage's ops: per micro-batch the forward and backward of the stage's
// layers (with recomputation), embedding and LM head on the first and last virtual stage, P2P transfers
// between stages, the DP gradient reduction in buckets, and the optimizer step. One stage's ops are built by
// detail::StageBuilder (stage_builder.cpp; DeepSpeed's ZeRO-3 coordinator in deepspeed_stage3.cpp).
#include <algorithm>

#include "stage_builder.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

GroupKind group_kind_of(const Op& op) {
    if (op.kind == OpKind::dp_launch) return op.group == CommGroup::edp ? GroupKind::edp : GroupKind::dp_cp;
    switch (op.group) {
        case CommGroup::cp:
            return GroupKind::cp;
        case CommGroup::embedding:
            return GroupKind::embedding;
        case CommGroup::ep:
            return GroupKind::ep;
        case CommGroup::etp:
            return GroupKind::etp;
        default:
            return GroupKind::tp;
    }
}

Program build_program(const ModelSpec& model, const Layout& layout) {
    return build_program(model, layout, Program{});
}

Program build_program(const ModelSpec& model, const Layout& layout, Program recycled) {
    Program prog;
    detail::BlockBuilder blocks(model, layout, prog.segments);
    detail::ProgramTemplates templates(blocks, model, layout);
    const detail::ProgramShape shape(model, layout);
    for (int r = 0; r < layout.pp; ++r) {
        detail::StageBuilder builder(model, layout, blocks, templates, shape, r);
        if (static_cast<std::size_t>(r) < recycled.stages.size())
            builder.reuse_ops(std::move(recycled.stages[static_cast<std::size_t>(r)].ops));
        prog.stages.push_back(builder.build());
    }
    for (auto& st : prog.stages)
        for (const auto& op : st.ops)
            if (op.kind == OpKind::compute)
                st.hardware_flops += prog.segments[static_cast<std::size_t>(op.segment)].flops;
    return prog;
}

void assign_durations(Program& program, const ComputeModel& compute) {
    for (auto& seg : program.segments) {
        seg.seconds = 0;
        for (const auto& k : seg.kernels)
            seg.seconds += compute.seconds(k);
    }
    // Copy waits after the segments that hide them (those never wait themselves).
    for (auto& seg : program.segments) {
        if (seg.hidden_by.empty()) continue;
        double hidden = 0;
        for (const auto& [other, count] : seg.hidden_by)
            hidden += count * program.segments[static_cast<std::size_t>(other)].seconds;
        seg.seconds = std::max(0.0, seg.seconds - hidden);
    }
}

}  // namespace trainsim
