// Component classes, their default MTBFs and the switch count of a topology.
#include <algorithm>
#include <cmath>

#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"

namespace trainsim {

std::string to_string(FailureComponent c) {
    switch (c) {
        case FailureComponent::gpu:
            return "gpu";
        case FailureComponent::node:
            return "node";
        case FailureComponent::nic:
            return "nic";
        case FailureComponent::network_switch:
            return "switch";
        case FailureComponent::software:
            return "software";
    }
    throw InternalError("unknown FailureComponent");
}

std::string to_string(CheckpointMode m) {
    return m == CheckpointMode::sync ? "sync" : "async";
}

double FailureModel::rate_per_s() const {
    double r = 0;
    for (const auto& c : components)
        r += c.rate_per_s();
    return r;
}

FailureModel default_failure_model(double gpus, double nodes, double nics, double switches) {
    FailureModel f;
    auto at = [&](FailureComponent c) -> ComponentReliability& {
        return f.components[static_cast<std::size_t>(c)];
    };
    at(FailureComponent::gpu) = {gpus, kDefaultGpuMtbfH};
    at(FailureComponent::node) = {nodes, kDefaultNodeMtbfH};
    at(FailureComponent::nic) = {nics, kDefaultNicMtbfH};
    at(FailureComponent::network_switch) = {switches, kDefaultSwitchMtbfH};
    at(FailureComponent::software) = {gpus, kDefaultSoftwareMtbfH};
    return f;
}

double switch_count(const TopologySpec& t) {
    if (t.nodes <= 1) return 0.0;
    const double groups = std::ceil(static_cast<double>(t.nodes) / t.nodes_per_leaf);
    const double leaves = groups * t.nics_per_node;
    const double per_leaf = std::min<double>(t.nodes, t.nodes_per_leaf);  // nodes a leaf serves
    const double spines_per_pod =
        std::ceil(per_leaf / t.oversubscription);  // a leaf's uplinks, one per spine
    if (t.tiers != 3) return leaves + spines_per_pod;
    // Three tiers: every pod has its own spines; spine s of each pod reaches the cores of plane s, as many
    // per plane as a pod spine has uplinks (ceil(leaves per pod / spine_oversubscription)).
    const double pods = std::ceil(static_cast<double>(t.nodes) / t.nodes_per_pod);
    const double leaves_per_pod =
        std::ceil(static_cast<double>(t.nodes_per_pod) / t.nodes_per_leaf) * t.nics_per_node;
    const double cores = spines_per_pod * std::ceil(leaves_per_pod / t.spine_oversubscription);
    return leaves + pods * spines_per_pod + cores;
}

}  // namespace trainsim
