// Naming and reporting helpers of the memory model: the OOM sentence, pile and phase names, and the memory
// walk's timing (ComputeEndTimes, an executor observer of the stage leaders).
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/memory.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

std::string to_string(Pile p) {
    switch (p) {
        case Pile::parameters:
            return "parameters";
        case Pile::gradients:
            return "gradients";
        case Pile::optimizer:
            return "optimizer state";
        case Pile::activations:
            return "activations";
        case Pile::buffers:
            return "buffers";
        case Pile::framework:
            return "framework";
    }
    return "?";
}

std::string to_string(MemoryPhase p) {
    switch (p) {
        case MemoryPhase::load:
            return "load";
        case MemoryPhase::forward:
            return "forward";
        case MemoryPhase::backward:
            return "backward";
        case MemoryPhase::optimizer:
            return "optimizer";
        case MemoryPhase::checkpoint:
            return "checkpoint";
    }
    return "?";
}

Pile MemoryReport::blamed_pile() const {
    const MemorySample& s = peak().peak();
    const double held = s.piles[0] + s.piles[1] + s.piles[2];
    Pile blame = Pile::parameters;
    if (held > capacity_bytes) {
        for (Pile p : {Pile::gradients, Pile::optimizer})
            if (s.piles[static_cast<std::size_t>(p)] > s.piles[static_cast<std::size_t>(blame)]) blame = p;
    } else {
        blame = s.piles[3] >= s.piles[4] ? Pile::activations : Pile::buffers;
    }
    return blame;
}

std::string MemoryReport::oom_message() const {
    if (fits()) return {};
    const StageMemory& st = peak();
    const MemorySample& s = st.peak();
    const Pile blame = blamed_pile();
    std::string what =
        fmt::format("{} {:.1f} GiB", to_string(blame), s.piles[static_cast<std::size_t>(blame)] / kGiB);
    if (blame == Pile::activations)
        what +=
            fmt::format(" ({:g} micro-batches in flight)", std::round(s.in_flight_microbatches * 100) / 100);
    return fmt::format("stage {} runs out of memory in {}: {:.1f} GiB of {:.1f} GiB; {}", st.stage,
                       to_string(st.peak_phase), st.peak_bytes / kGiB, capacity_bytes / kGiB, what);
}

ComputeEndTimes::ComputeEndTimes(const Layout& l) : layout_(l), end_s_(static_cast<std::size_t>(l.pp)) {}

bool ComputeEndTimes::observes(int rank) const {
    const RankCoord c = coord_of(layout_, rank);
    return c.tp == 0 && c.cp == 0 && c.dp == 0;
}

void ComputeEndTimes::slice_end(const TimelineSlice& s) {
    if (s.track != Track::compute) return;
    end_s_[static_cast<std::size_t>(coord_of(layout_, s.rank).pp)].push_back(s.end.to_seconds());
}

}  // namespace trainsim

namespace trainsim {

namespace {
nlohmann::json piles_json(const PileBytes& p) {
    nlohmann::json j;
    for (int i = 0; i < kPiles; ++i)
        j[to_string(static_cast<Pile>(i)) == "optimizer state" ? "optimizer"
                                                               : to_string(static_cast<Pile>(i))] =
            p[static_cast<std::size_t>(i)];
    j["total"] = total_bytes(p);
    return j;
}
}  // namespace

nlohmann::json memory_json(const MemoryReport& r, bool timeline) {
    using nlohmann::json;
    json j;
    j["capacity_bytes"] = r.capacity_bytes;
    j["fits"] = r.fits();
    j["peak_stage"] = r.peak_stage;
    j["peak_phase"] = to_string(r.peak().peak_phase);
    j["peak_bytes"] = r.peak().peak_bytes;
    j["peak_allocated_bytes"] = r.peak_of(ReportedMemory::allocated);
    j["peak_reserved_bytes"] = r.peak_of(ReportedMemory::reserved);
    j["blamed_pile"] = to_string(r.blamed_pile());
    if (!r.fits()) j["out_of_memory"] = r.oom_message();
    j["notes"] = r.notes;
    json stages = json::array();
    for (const auto& st : r.stages) {
        json s;
        s["stage"] = st.stage;
        s["ranks"] = st.ranks;
        s["peak_phase"] = to_string(st.peak_phase);
        s["peak_bytes"] = st.peak_bytes;
        s["peak_allocated_bytes"] = st.peak_allocated_bytes;
        s["peak_reserved_bytes"] = st.peak_reserved_bytes;
        s["outside_allocator_bytes"] = st.outside_allocator_bytes;
        s["peak_in_flight_microbatches"] = st.peak_in_flight_microbatches;
        s["host_bytes"] = st.host_bytes;
        json phases;
        for (int ph = 0; ph < kMemoryPhases; ++ph) {
            const auto& pk = st.phase_peaks[static_cast<std::size_t>(ph)];
            phases[to_string(static_cast<MemoryPhase>(ph))] = {
                {"time_s", pk.time_s},
                {"in_flight_microbatches", pk.in_flight_microbatches},
                {"bytes", piles_json(pk.piles)},
                {"max_allocated_bytes", st.phase_max_allocated_bytes[static_cast<std::size_t>(ph)]},
                {"max_reserved_bytes", st.phase_max_reserved_bytes[static_cast<std::size_t>(ph)]}};
        }
        s["phases"] = phases;
        if (timeline) {
            json tl = json::array();
            for (const auto& x : st.timeline) {
                json row = json::array({x.time_s, to_string(x.phase)});
                for (double b : x.piles)
                    row.push_back(b);
                row.push_back(x.allocated_bytes);
                row.push_back(x.reserved_bytes);
                tl.push_back(row);
            }
            s["timeline"] = {{"columns",
                              {"time_s", "phase", "parameters", "gradients", "optimizer", "activations",
                               "buffers", "framework", "allocated", "reserved"}},
                             {"samples", tl}};
        }
        stages.push_back(s);
    }
    j["stages"] = stages;
    return j;
}

std::string format_memory_text(const MemoryReport& r) {
    std::string o;
    if (!r.fits()) o += fmt::format("OUT OF MEMORY: {}\n\n", r.oom_message());
    o += fmt::format(
        "memory per GPU by stage and phase (GiB; capacity {:.1f} GiB; the piles at each phase's peak, "
        "framew. "
        "including the allocator's cached-but-unused bytes; alloc. and reserved: the caching allocator's max "
        "in the phase)\n",
        r.capacity_bytes / kGiB);
    o += fmt::format("  {:>5} {:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>10}\n",
                     "stage", "phase", "params", "grads", "optim.", "activ.", "buffers", "framew.", "total",
                     "alloc.", "reserved", "in-fl.", "at (s)");
    for (const auto& st : r.stages) {
        for (int ph = 0; ph < kMemoryPhases; ++ph) {
            const auto& pk = st.phase_peaks[static_cast<std::size_t>(ph)];
            const bool is_peak = static_cast<int>(st.peak_phase) == ph;
            o += fmt::format(
                "  {:>5} {:<10} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} "
                "{:>9.2f} "
                "{:>7.2f} {:>10.3f}{}\n",
                ph == 0 ? std::to_string(st.stage) : "", to_string(static_cast<MemoryPhase>(ph)),
                pk.piles[0] / kGiB, pk.piles[1] / kGiB, pk.piles[2] / kGiB, pk.piles[3] / kGiB,
                pk.piles[4] / kGiB, pk.piles[5] / kGiB, total_bytes(pk.piles) / kGiB,
                st.phase_max_allocated_bytes[static_cast<std::size_t>(ph)] / kGiB,
                st.phase_max_reserved_bytes[static_cast<std::size_t>(ph)] / kGiB, pk.in_flight_microbatches,
                pk.time_s, is_peak ? "  <- stage peak" : "");
        }
        if (st.host_bytes > 0)
            o += fmt::format("  {:>5} optimizer state offloaded to the host: {:.2f} GiB per GPU\n", "",
                             st.host_bytes / kGiB);
    }
    const auto& pk = r.peak();
    o += fmt::format("peak: stage {} in {}: {:.2f} GiB of {:.1f} GiB ({:.1f}% of HBM){}\n", pk.stage,
                     to_string(pk.peak_phase), pk.peak_bytes / kGiB, r.capacity_bytes / kGiB,
                     100.0 * pk.peak_bytes / r.capacity_bytes, r.fits() ? "" : " -- DOES NOT FIT");
    o += fmt::format(
        "caching allocator (busiest GPU): max allocated {:.2f} GiB, max reserved {:.2f} GiB; outside it "
        "(CUDA context, NCCL) {:.2f} GiB\n",
        r.peak_of(ReportedMemory::allocated) / kGiB, r.peak_of(ReportedMemory::reserved) / kGiB,
        pk.outside_allocator_bytes / kGiB);
    for (const auto& n : r.notes)
        o += fmt::format("note: {}\n", n);
    return o;
}

}  // namespace trainsim
