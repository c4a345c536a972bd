#include <nlohmann/json.hpp>

#include "trainsim/fingerprint.hpp"

#include <bit>

#include <fmt/format.h>

namespace trainsim {

std::uint64_t fnv1a64(const void* data, std::size_t size, std::uint64_t hash) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
        hash ^= p[i];
        hash *= kFnv1a64Prime;
    }
    return hash;
}

namespace {

/// Hashes a 64-bit value as 8 bytes, least significant first (the same on every host byte order).
std::uint64_t mix(std::uint64_t hash, std::uint64_t v) {
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i)
        bytes[i] = static_cast<unsigned char>(v >> (8 * i));
    return fnv1a64(bytes, sizeof bytes, hash);
}

std::uint64_t mix(std::uint64_t hash, double v) {
    return mix(hash, std::bit_cast<std::uint64_t>(v));
}

}  // namespace

Fingerprint fingerprint(const ExecutionResult& r) {
    Fingerprint f;
    f.events = r.events;
    f.flows = r.flows;
    f.ranks = r.ranks.size();
    f.step_time_s = r.step_time_s;
    std::uint64_t h = kFnv1a64Offset;
    h = mix(h, f.events);
    h = mix(h, f.flows);
    h = mix(h, f.ranks);
    h = mix(h, f.step_time_s);
    for (const RankTimes& t : r.ranks) {
        for (double v :
             {t.compute_s, t.tp_exposed_s, t.pp_exposed_s, t.bubble_s, t.dp_exposed_s, t.idle_s, t.finish_s})
            h = mix(h, v);
        for (double v : t.compute_by_phase_s)
            h = mix(h, v);
    }
    f.hash = h;
    return f;
}

std::string to_string(const Fingerprint& f) {
    return fmt::format("events={} flows={} ranks={} step_time_s={} hash={:016x}", f.events, f.flows, f.ranks,
                       f.step_time_s, f.hash);
}

nlohmann::json to_json(const Fingerprint& f) {
    return {{"events", f.events},
            {"flows", f.flows},
            {"ranks", f.ranks},
            {"step_time_s", f.step_time_s},
            {"hash", fmt::format("{:016x}", f.hash)}};
}

}  // namespace trainsim
