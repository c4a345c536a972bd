#include <algorithm>

#include <fmt/format.h>

#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"

namespace trainsim {

void Simulator::schedule(Time at, Priority priority, Callback cb) {
    if (at < now_)
        throw InternalError(fmt::format("event scheduled at {} ps, before now = {} ps", at.picoseconds(),
                                        now_.picoseconds()));
    std::uint32_t slot;
    if (!free_slots_.empty()) {
        slot = free_slots_.back();
        free_slots_.pop_back();
        slots_[slot] = std::move(cb);
    } else {
        slot = static_cast<std::uint32_t>(slots_.size());
        slots_.push_back(std::move(cb));
    }
    heap_.push_back(Entry{at.picoseconds(), static_cast<std::int32_t>(priority), slot, next_seq_++});
    std::push_heap(heap_.begin(), heap_.end(), later);
}

std::uint64_t Simulator::run() {
    std::uint64_t count = 0;
    while (!heap_.empty()) {
        std::pop_heap(heap_.begin(), heap_.end(), later);
        const Entry e = heap_.back();
        heap_.pop_back();
        now_ = Time::ps(e.time_ps);
        Callback cb = std::move(slots_[e.slot]);
        slots_[e.slot] = nullptr;
        free_slots_.push_back(e.slot);
        ++count;
        ++executed_;
        cb();
    }
    return count;
}

}  // namespace trainsim
