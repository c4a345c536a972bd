// Placeholder until the MoE model fields are merged.
#include "layer_ops.hpp"
#include "trainsim/errors.hpp"
namespace trainsim::detail {
void BlockBuilder::moe_forward(OpTemplate&) {
    throw InternalError("MoE layers not built yet");
}
void BlockBuilder::moe_backward(OpTemplate&) {
    throw InternalError("MoE layers not built yet");
}
void BlockBuilder::ep_all_to_all(OpTemplate&, double) {}
}  // namespace trainsim::detail
