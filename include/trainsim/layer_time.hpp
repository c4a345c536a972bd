// Compute time of one transformer layer on one GPU, as the program builder issues its kernels: a test of the
// compute model against measured whole layers (a profile's `layers` rows, docs/calibration.md).
#pragma once

#include "trainsim/compute.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/profile.hpp"

namespace trainsim {

struct LayerComputeTime {
    double forward_s = 0;   ///< the layer's forward kernels
    double backward_s = 0;  ///< its backward kernels (no recomputation)
};

/// Sum of the durations of the kernels of one transformer layer's forward and backward (BlockBuilder in
/// sim/program/layer_ops.hpp), timed by `compute`; TP collectives and their waits are left out.
LayerComputeTime layer_compute_time(const ModelSpec& m, const Layout& l, const ComputeModel& compute);

/// The model and layout of a measured layer row: its hidden, heads, KV heads, FFN width, MLP, sequence,
/// micro-batch, TP and attention backend; bf16, no sequence parallelism, no dropout (the measured layers have
/// none), no recomputation.
ModelSpec layer_model(const ProfileLayer& row);
Layout layer_layout(const ProfileLayer& row);

}  // namespace trainsim
