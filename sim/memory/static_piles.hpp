// The static piles of one pipeline stage: the bytes every GPU of the stage holds for the whole iteration
// (parameters, gradients, optimizer state, held buffers, what lives outside the allocator), and the
// temporaries of the optimizer step and of a checkpoint save (docs/memory.md, "Piles"). Private to
// sim/memory.
#pragma once

#include "trainsim/layout.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim::memory_walk {

/// Bytes every GPU of the stage holds for the whole iteration, and the temporaries of the optimizer step and
/// of a checkpoint save.
struct StaticPiles {
    PileBytes piles{};
    double optimizer_temporary = 0;         ///< alive during the optimizer step
    double optimizer_temporary_tensor = 0;  ///< ... made of per-parameter tensors at most this large
    double checkpoint_temporary = 0;        ///< alive while a checkpoint is saved or loaded
    double host_bytes = 0;                  ///< offloaded optimizer state
    double outside_allocator = 0;           ///< CUDA context and NCCL buffers
};

/// The static piles of pipeline rank `stage` (program stage `sp`), bytes per GPU, on `gpu` (whether
/// TransformerEngine's cached FP8 weights carry a transpose: GpuSpec::fp8_gemm_any_layout).
StaticPiles static_piles(const ModelSpec& m, const Layout& l, const StageProgram& sp, int stage,
                         const GpuSpec& gpu);

}  // namespace trainsim::memory_walk
