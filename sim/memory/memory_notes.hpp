// What a layout changes in memory, in words, for the memory report. Private to sim/memory.
#pragma once

#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim::memory_walk {

/// The notes of MemoryReport::notes: adapters, offload, 8-bit state, fp8, ZeRO-3 / FSDP, and which peak the
/// framework prints.
std::vector<std::string> memory_notes(const ModelSpec& m, const Layout& l, const Program& p,
                                      const GpuSpec& gpu);

}  // namespace trainsim::memory_walk
