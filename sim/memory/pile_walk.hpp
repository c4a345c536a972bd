// The bytes of one stage as the memory walk goes: every tensor it creates, by pile, replayed through the
// caching-allocator model, and the samples (allocated bytes by pile at a point of the iteration) it records
// into the stage's StageMemory. Private to sim/memory.
#pragma once

#include <cstdint>
#include <vector>

#include "static_piles.hpp"
#include "trainsim/caching_allocator.hpp"
#include "trainsim/memory.hpp"

namespace trainsim::memory_walk {

/// A tensor of the walk: its pile, its bytes and its block in the allocator model.
struct Tensor {
    Pile pile = Pile::buffers;
    double bytes = 0;
    std::int64_t block = -1;
};

class PileWalk {
  public:
    /// Allocates the static piles `st` (which must outlive the walk) on a GPU of `capacity_bytes`; samples go
    /// to `out` (its phase peaks reset), every one of them kept in out.timeline when `keep`.
    PileWalk(const StaticPiles& st, StageMemory& out, bool keep, double capacity_bytes);

    Tensor allocate(Pile p, double bytes, AllocStream stream = AllocStream::compute);
    /// Frees `x` and empties it (an empty tensor is left alone).
    void release(Tensor& x);

    /// Records the allocated bytes plus `transient` buffers (allocated for the sample, then freed) at
    /// `time_s`.
    void sample(MemoryPhase phase, double time_s, double transient = 0);
    void sample(MemoryPhase phase, double time_s, const std::vector<double>& transient);

    double& operator[](Pile p) { return piles_[static_cast<std::size_t>(p)]; }
    const CachingAllocator& allocator() const { return alloc_; }
    /// Activations alive, in micro-batches of the stage's layers: carried by the next samples.
    double in_flight_microbatches = 0;

  private:
    const StaticPiles& st_;
    StageMemory& out_;
    bool keep_;
    CachingAllocator alloc_;
    PileBytes piles_{};
};

}  // namespace trainsim::memory_walk
