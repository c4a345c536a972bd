#include <algorithm>

#include <fmt/format.h>

#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"

namespace trainsim {

namespace {
/// The smallest of the four children h[f .. f+3] (the first among equals), without branches (the comparisons
/// of random keys are unpredictable).
template <class Entry, class Before>
std::size_t smallest_of_four(const Entry* h, std::size_t f, Before before) {
    const std::size_t a = f + static_cast<std::size_t>(before(h[f + 1], h[f]));
    const std::size_t b = f + 2 + static_cast<std::size_t>(before(h[f + 3], h[f + 2]));
    const std::size_t take_b = static_cast<std::size_t>(0) - static_cast<std::size_t>(before(h[b], h[a]));
    return a ^ ((a ^ b) & take_b);
}
}  // namespace

std::uint64_t Simulator::checked_key(Time at, Priority priority) {
    if (at < now_)
        throw InternalError(fmt::format("event scheduled at {} ps, before now = {} ps", at.picoseconds(),
                                        now_.picoseconds()));
    const auto p = static_cast<std::int32_t>(priority);
    if (p < 0 || p > 255) throw InternalError(fmt::format("event priority {} outside 0 .. 255", p));
    if (next_seq_ >= seq_limit_) {
        drop_free_root();  // the running event's entry leaves before the renumbering
        renumber();
    }
    return (static_cast<std::uint64_t>(p) << 56) | (next_seq_++ << kSlotBits);
}

void Simulator::throw_too_many_pending() {
    throw InternalError(fmt::format("more than {} events pending", 1u << kSlotBits));
}

void Simulator::renumber() {
    // Sorted, the pending entries are a valid min-heap; their new sequence numbers 0 .. n-1 keep their order,
    // and every later event gets a larger one, as it would have without renumbering.
    std::sort(heap_.begin() + kHeapPad, heap_.end(), before);
    using U128 = unsigned __int128;
    const U128 seq_mask = ((U128{1} << kSeqBits) - 1) << kSlotBits;
    std::uint64_t seq = 0;
    for (std::size_t i = kHeapPad; i < heap_.size(); ++i)
        heap_[i].order = (heap_[i].order & ~seq_mask) | (static_cast<U128>(seq++) << kSlotBits);
    next_seq_ = seq;
}

void Simulator::push(const Entry& e) {
    if (root_free_) {
        root_free_ = false;
        replace_root(e);
        return;
    }
    // Sift up with a hole.
    std::size_t i = heap_size();
    heap_.push_back(e);
    Entry* h = heap();
    while (i > 0) {
        const std::size_t parent = (i - 1) / 4;
        if (!before(e, h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

std::size_t Simulator::smallest_child(std::size_t i) const {
    const std::size_t n = heap_size();
    const Entry* h = heap();
    std::size_t best = 4 * i + 1;
    for (std::size_t c = best + 1; c < n && c <= 4 * i + 4; ++c)
        if (before(h[c], h[best])) best = c;
    return best;
}

void Simulator::drop_free_root() {
    if (!root_free_) return;
    pop_top();
    root_free_ = false;
}

void Simulator::pop_top() {
    // Floyd's bottom-up deletion: move the hole at the root down to a leaf along the smallest children
    // (smallest_of_four), then sift the last entry up from there (it came from the bottom, so it rarely
    // climbs).
    const Entry last = heap_.back();
    heap_.pop_back();
    const std::size_t n = heap_size();
    if (n == 0) return;
    Entry* h = heap();
    std::size_t i = 0;
    while (4 * i + 4 < n) {
        const std::size_t best = smallest_of_four(h, 4 * i + 1, before);
        h[i] = h[best];
        i = best;
    }
    if (4 * i + 1 < n) {  // a last, incomplete group of children
        const std::size_t best = smallest_child(i);
        h[i] = h[best];
        i = best;
    }
    while (i > 0) {
        const std::size_t parent = (i - 1) / 4;
        if (!before(last, h[parent])) break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = last;
}

void Simulator::replace_root(const Entry& e) {
    // Sift down with a hole from the root: the smallest of each group of children moves up while it comes
    // before `e` (an event in the near future stops high in the heap).
    const std::size_t n = heap_size();
    Entry* h = heap();
    std::size_t i = 0;
    while (4 * i + 4 < n) {
        const std::size_t best = smallest_of_four(h, 4 * i + 1, before);
        if (!before(h[best], e)) break;
        h[i] = h[best];
        i = best;
    }
    if (4 * i + 4 >= n && 4 * i + 1 < n) {  // a last, incomplete group of children
        const std::size_t best = smallest_child(i);
        if (before(h[best], e)) {
            h[i] = h[best];
            i = best;
        }
    }
    h[i] = e;
}

std::uint64_t Simulator::run(std::uint64_t max_events) {
    std::uint64_t count = 0;
    while (heap_size() > 0 && count < max_events) {
        const Entry e = heap()[0];
        now_ = Time::ps(static_cast<std::int64_t>(e.order >> 64));
        ++count;
        ++executed_;
        // Pages never move, and the slot is released only after the call: the callback runs in place even
        // if it schedules more events.
        EventCallback& cb = callback(slot_of(e));
        root_free_ = true;  // the first event the callback schedules takes the root (push)
        try {
            cb();
        } catch (...) {
            drop_free_root();
            throw;
        }
        drop_free_root();
        cb.reset();
        free_slots_.push_back(slot_of(e));
    }
    return count;
}

}  // namespace trainsim
