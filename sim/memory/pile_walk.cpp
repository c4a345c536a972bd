// The piles and allocator of one stage's memory walk, and its samples (pile_walk.hpp).
#include "pile_walk.hpp"

#include <algorithm>

namespace trainsim::memory_walk {

namespace {
constexpr auto P = [](Pile p) { return static_cast<std::size_t>(p); };
}  // namespace

PileWalk::PileWalk(const StaticPiles& st, StageMemory& out, bool keep, double capacity_bytes)
    : st_(st), out_(out), keep_(keep), alloc_(capacity_bytes - st.outside_allocator) {
    for (auto& p : out_.phase_peaks)
        p.piles.fill(-1.0);
    for (int i = 0; i < kPiles; ++i)
        if (st.piles[static_cast<std::size_t>(i)] > 0)
            allocate(static_cast<Pile>(i), st.piles[static_cast<std::size_t>(i)]);
    out_.outside_allocator_bytes = st.outside_allocator;
}

Tensor PileWalk::allocate(Pile p, double bytes, AllocStream stream) {
    Tensor x{p, bytes, alloc_.allocate(bytes, stream)};
    piles_[P(p)] += bytes;
    return x;
}

void PileWalk::release(Tensor& x) {
    if (x.block < 0 && x.bytes == 0) return;
    alloc_.free(x.block);
    piles_[P(x.pile)] -= x.bytes;
    x = Tensor{};
}

void PileWalk::sample(MemoryPhase phase, double time_s, double transient) {
    sample(phase, time_s, std::vector<double>{transient});
}

void PileWalk::sample(MemoryPhase phase, double time_s, const std::vector<double>& transient) {
    std::vector<Tensor> tr;
    for (double b : transient)
        if (b > 0) tr.push_back(allocate(Pile::buffers, b));
    MemorySample s;
    s.time_s = time_s;
    s.phase = phase;
    s.piles = piles_;
    const double live = total_bytes(piles_);
    // Reserved less the live tensors: the allocator's rounding, unsplit slack and cached free blocks.
    s.piles[P(Pile::framework)] += st_.outside_allocator + (alloc_.reserved_bytes() - live);
    s.allocated_bytes = alloc_.allocated_bytes();
    s.reserved_bytes = alloc_.reserved_bytes();
    s.in_flight_microbatches = in_flight_microbatches;
    const std::size_t ph = static_cast<std::size_t>(phase);
    auto& peak = out_.phase_peaks[ph];
    const double tot = total_bytes(s.piles), peak_tot = total_bytes(peak.piles);
    if (peak.piles[0] < 0 || tot > peak_tot || (tot == peak_tot && s.allocated_bytes > peak.allocated_bytes))
        peak = s;
    out_.phase_max_allocated_bytes[ph] = std::max(out_.phase_max_allocated_bytes[ph], s.allocated_bytes);
    out_.phase_max_reserved_bytes[ph] = std::max(out_.phase_max_reserved_bytes[ph], s.reserved_bytes);
    if (keep_) out_.timeline.push_back(s);
    for (auto it = tr.rbegin(); it != tr.rend(); ++it)
        release(*it);
}

}  // namespace trainsim::memory_walk
