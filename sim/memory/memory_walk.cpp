// The memory walk: static piles of each stage (static_piles.cpp), then the stage's memory marks in the
// simulated order (stage_walk.cpp), each one a sample of the allocated bytes by pile (pile_walk.cpp;
// docs/memory.md, "Timeline"); and the framework behaviours the walk and the report share.
#include <algorithm>

#include "memory_notes.hpp"
#include "stage_walk.hpp"
#include "static_piles.hpp"
#include "trainsim/memory.hpp"

namespace trainsim {

bool caches_fp8_weights(const Layout& l) {
    return l.framework == Framework::megatron;
}

bool pytorch_fsdp(const Layout& l) {
    return l.zero_stage >= 3 && (l.framework == Framework::torchtitan || l.framework == Framework::composer ||
                                 l.framework == Framework::pytorch);
}

double gradient_bytes_per_element(const Layout& l) {
    return l.framework == Framework::torchtitan ? 4.0 : l.grad_reduce_bytes_per_element();
}

ReportedMemory reported_memory(Framework f) {
    switch (f) {
        case Framework::torchtitan:
        case Framework::megatron:
        case Framework::deepspeed:
        case Framework::composer:
        case Framework::pytorch:
            return ReportedMemory::reserved;
    }
    return ReportedMemory::reserved;
}

double MemoryReport::peak_of(ReportedMemory what) const {
    double best = 0;
    for (const auto& st : stages)
        best = std::max(best, what == ReportedMemory::allocated  ? st.peak_allocated_bytes
                              : what == ReportedMemory::reserved ? st.peak_reserved_bytes
                                                                 : st.peak_bytes);
    return best;
}

double reported_peak_bytes(const MemoryReport& r, Framework f) {
    return r.peak_of(reported_memory(f));
}

double total_bytes(const PileBytes& p) {
    double s = 0;
    for (double x : p)
        s += x;
    return s;
}

PileBytes held_piles(const ModelSpec& m, const Layout& l, const Program& p, int stage, const GpuSpec& gpu) {
    return memory_walk::static_piles(m, l, p.stages.at(static_cast<std::size_t>(stage)), stage, gpu).piles;
}

MemoryReport simulate_memory(const ModelSpec& m, const Layout& l, const Program& p, const GpuSpec& gpu,
                             const std::vector<std::vector<double>>* compute_end_s, bool keep_timeline) {
    MemoryReport rep;
    rep.capacity_bytes = gpu.hbm_bytes;
    const memory_walk::WalkShapes shapes = memory_walk::walk_shapes(m, l);
    for (int st = 0; st < l.pp; ++st) {
        const StageProgram& sp = p.stages[static_cast<std::size_t>(st)];
        StageMemory mem;
        mem.stage = st;
        mem.ranks = l.tp * l.cp * l.dp;
        mem.peak_in_flight_microbatches = sp.peak_in_flight_microbatches;
        const memory_walk::StaticPiles stat = memory_walk::static_piles(m, l, sp, st, gpu);
        mem.host_bytes = stat.host_bytes;
        memory_walk::StageWalk walk(l, shapes, sp, st, memory_walk::stage_compute_end_s(compute_end_s, st),
                                    stat, mem, keep_timeline, gpu.hbm_bytes);
        walk.run();
        rep.stages.push_back(std::move(mem));
    }
    rep.notes = memory_walk::memory_notes(m, l, p, gpu);
    for (std::size_t i = 0; i < rep.stages.size(); ++i)
        if (rep.stages[i].peak_bytes > rep.stages[static_cast<std::size_t>(rep.peak_stage)].peak_bytes)
            rep.peak_stage = static_cast<int>(i);
    return rep;
}

double memory_peak_floor_bytes(const ModelSpec& m, const Layout& l, const Program& p, const GpuSpec& gpu) {
    const memory_walk::WalkShapes shapes = memory_walk::walk_shapes(m, l);
    double floor = 0;
    for (int st = 0; st < l.pp; ++st) {
        const StageProgram& sp = p.stages[static_cast<std::size_t>(st)];
        StageMemory mem;
        const memory_walk::StaticPiles stat = memory_walk::static_piles(m, l, sp, st, gpu);
        memory_walk::StageWalk walk(l, shapes, sp, st, nullptr, stat, mem, false, gpu.hbm_bytes);
        walk.run_early();
        floor = std::max(floor, mem.early_peak_bytes);
    }
    return floor;
}

}  // namespace trainsim
