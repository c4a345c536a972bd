// The standard memory remedies (remedies.hpp).
#include "remedies.hpp"

#include <fmt/format.h>

namespace trainsim::what_if {

std::vector<Candidate> standard_remedies(const ModelSpec& model, const Layout& layout) {
    const bool dp = layout.dp * layout.cp > 1;
    const std::int64_t half = model.layers / 2;
    return {
        {"recompute selective", layout.recompute == Recompute::selective ? "already selective" : "",
         [](Layout& l) { l.recompute = Recompute::selective; }},
        {"recompute full", layout.recompute == Recompute::full ? "already full" : "",
         [](Layout& l) { l.recompute = Recompute::full; }},
        {"distributed optimizer (ZeRO-1)",
         layout.sharded_optimizer() ? "optimizer state already sharded"
         : !dp                      ? "needs DP > 1"
                                    : "",
         [](Layout& l) { l.distributed_optimizer = true; }},
        {"ZeRO-2",
         layout.zero_stage >= 2 ? "already ZeRO-2 or 3"
         : !dp                  ? "needs DP > 1"
                                : "",
         [](Layout& l) { l.zero_stage = 2; }},
        {"ZeRO-3 / FSDP",
         layout.zero_stage >= 3 ? "already ZeRO-3"
         : !dp                  ? "needs DP > 1"
                                : "",
         [](Layout& l) { l.zero_stage = 3; }},
        {layout.micro_batch >= 2 ? fmt::format("micro-batch {} (halved)", layout.micro_batch / 2)
                                 : std::string("micro-batch halved"),
         layout.micro_batch < 2 ? "micro-batch is 1" : "", [](Layout& l) { l.micro_batch /= 2; }},
        {"8-bit Adam", layout.optimizer != Optimizer::adam ? "optimizer is not Adam" : "",
         [](Layout& l) { l.optimizer = Optimizer::adam_8bit; }},
        {"optimizer offloaded to CPU (ZeRO-Offload)",
         layout.offload_optimizer != Offload::none ? "already offloaded" : "",
         [](Layout& l) { l.offload_optimizer = Offload::cpu; }},
        {fmt::format("activation offload of {} layers", half),
         layout.activation_offload_layers >= half ? "already offloading as many"
         : layout.pp != 1 || layout.recompute != Recompute::none || layout.framework != Framework::megatron ||
                 layout.moe_a2a_overlap || half < 1
             ? "needs pp 1, no recompute, Megatron (Megatron-Core's conditions)"
             : "",
         [half](Layout& l) { l.activation_offload_layers = half; }},
    };
}

}  // namespace trainsim::what_if
