// Checkpoint size from the memory model's quantities, and its save, copy and load times on a topology.
#include <cmath>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

double checkpoint_bytes(const ModelSpec& m, const Layout& l) {
    const Program p = build_program(m, l);
    const double dpc = static_cast<double>(l.dp) * l.cp;
    const bool zero3 = l.zero_stage >= 3 && dpc > 1;
    // As the memory model (sim/memory/memory_walk.cpp, static_piles): PyTorch FSDP keeps the fp32 shard as
    // the master weight, no 16-bit copy beside it.
    const bool fp32_shards =
        pytorch_fsdp(l) && zero3 && !l.frozen_base() && l.offload_optimizer == Offload::none;
    double bytes = 0;
    for (const auto& sp : p.stages) {
        const double params = sp.params, trainable = sp.trainable_params;
        const double frozen = params - (l.frozen_base() ? trainable : 0.0);
        const double linear = static_cast<double>(sp.layers) * m.linear_params();
        double weights = l.frozen_base() ? 2.0 * frozen + 2.0 * trainable : 2.0 * params;
        if (l.adapter == Adapter::qlora) weights -= (2.0 - kQloraBaseBytesPerParam) * linear;
        double optimizer = l.optimizer_bytes_per_param() * trainable;
        if (fp32_shards) {
            weights = 0.0;  // the fp32 master weight, counted in optimizer_bytes_per_param
            optimizer += 4.0 * (params - trainable);
        }
        bytes += weights + optimizer;
    }
    return bytes;
}

CheckpointCost checkpoint_cost(double bytes, const Layout& layout, const TopologySpec& t) {
    if (layout.gpus() > t.gpus())
        throw InputError(
            fmt::format("the layout needs {} GPUs, the topology {} has {}", layout.gpus(), t.name, t.gpus()));
    CheckpointCost c;
    c.bytes = bytes;
    const bool rank0 = layout.checkpoint_save == CheckpointSave::rank0;
    const double nodes = rank0 ? 1.0 : std::ceil(static_cast<double>(layout.gpus()) / t.gpus_per_node);
    const double writer_gpus = rank0 ? 1.0 : static_cast<double>(layout.gpus());
    c.save_s = bytes / (nodes * t.storage_write_bandwidth_per_node.bytes_per_s);
    c.load_s = bytes / (nodes * t.storage_read_bandwidth_per_node.bytes_per_s);
    c.copy_s = t.pcie_bandwidth.bytes_per_s > 0 ? bytes / writer_gpus / t.pcie_bandwidth.bytes_per_s : 0.0;
    return c;
}

}  // namespace trainsim
