// The discrete-event engine. One Simulator object per simulation, passed by reference to whoever schedules
// (never a global), so that one process can run many simulations, in parallel threads if it likes.
//
// Contract:
//  - Events are executed in the total order (time, priority, sequence), where sequence is a 64-bit counter of
//    schedule() calls. Lower priority values run first at equal time. Hence the same schedule() calls in the
//    same order give the same execution order, byte for byte, on any machine (as OMNeT++ and SST keep an
//    insertion counter because a heap is not stable).
//  - Time never goes backwards: scheduling before now() throws InternalError.
//  - A callback may schedule further events, including at now().
//
// Implementation (for speed: the engine runs tens of millions of events per simulation): the queue is a
// 4-ary min-heap of 16-byte entries (time, priority, sequence and the slot of the callback packed into one
// 128-bit key, compared without branches);
// callbacks are stored once, in pages that never move, in a move-only function object with 48 bytes of
// inline storage (every callback of the simulator fits; larger ones fall back to the free store), and run in
// place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/align/aligned_allocator.hpp>

#include "trainsim/units.hpp"

namespace trainsim {

/// Priorities at equal time: lower runs first. Named classes keep the meaning visible at call sites. Values
/// must lie in 0 .. 255.
enum class Priority : std::int32_t {
    kFlowCompletion = 0,  ///< a network flow finished its bytes
    kDefault = 10,        ///< ordinary model events (an op finishes, a rank issues its next op)
    kRateUpdate = 100,    ///< recompute network rates after every change at this instant
};

/// A move-only `void()` callable with small-buffer storage: callables up to kInlineBytes (and alignment 16)
/// that are nothrow-movable are stored inline, without allocation.
class EventCallback {
  public:
    static constexpr std::size_t kInlineBytes = 48;

    EventCallback() = default;
    template <class F>
    requires(!std::is_same_v<std::decay_t<F>, EventCallback> && std::is_invocable_v<std::decay_t<F>&>)
        EventCallback(F&& f) {  // NOLINT: implicit, as std::function
        emplace(std::forward<F>(f));
    }
    EventCallback(EventCallback&& o) noexcept : ops_(o.ops_) {
        if (ops_) {
            ops_->relocate(buf_, o.buf_);
            o.ops_ = nullptr;
        }
    }
    EventCallback& operator=(EventCallback&& o) noexcept {
        if (this != &o) {
            reset();
            ops_ = o.ops_;
            if (ops_) {
                ops_->relocate(buf_, o.buf_);
                o.ops_ = nullptr;
            }
        }
        return *this;
    }
    EventCallback(const EventCallback&) = delete;
    EventCallback& operator=(const EventCallback&) = delete;
    ~EventCallback() { reset(); }

    explicit operator bool() const { return ops_ != nullptr; }
    void operator()() { ops_->invoke(buf_); }
    void reset() noexcept {
        if (ops_) {
            if (ops_->destroy) ops_->destroy(buf_);
            ops_ = nullptr;
        }
    }
    /// Stores `f` (this must be empty).
    template <class F>
    void emplace(F&& f) {
        using T = std::decay_t<F>;
        if constexpr (std::is_same_v<T, EventCallback>) {
            *this = std::move(f);
        } else if constexpr (fits_inline<T>()) {
            ::new (static_cast<void*>(buf_)) T(std::forward<F>(f));
            ops_ = &kInlineOps<T>;
        } else {
            ::new (static_cast<void*>(buf_)) T*(new T(std::forward<F>(f)));
            ops_ = &kHeapOps<T>;
        }
    }

  private:
    struct Ops {
        void (*invoke)(void*);
        void (*relocate)(void* dst, void* src) noexcept;  ///< move-construct at dst, destroy src
        void (*destroy)(void*) noexcept;
    };
    template <class T>
    static constexpr bool fits_inline() {
        return sizeof(T) <= kInlineBytes && alignof(T) <= 16 && std::is_nothrow_move_constructible_v<T>;
    }
    template <class T>
    static constexpr Ops kInlineOps = {
        [](void* p) { (*static_cast<T*>(p))(); },
        [](void* dst, void* src) noexcept {
            ::new (dst) T(std::move(*static_cast<T*>(src)));
            static_cast<T*>(src)->~T();
        },
        std::is_trivially_destructible_v<T> ? nullptr : +[](void* p) noexcept { static_cast<T*>(p)->~T(); },
    };
    template <class T>
    static constexpr Ops kHeapOps = {
        [](void* p) { (**static_cast<T**>(p))(); },
        [](void* dst, void* src) noexcept { ::new (dst) T*(*static_cast<T**>(src)); },
        [](void* p) noexcept { delete *static_cast<T**>(p); },
    };

    alignas(16) unsigned char buf_[kInlineBytes];
    const Ops* ops_ = nullptr;
};

class Simulator {
  public:
    using Callback = EventCallback;

    Simulator() = default;
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    /// Current simulated time.
    Time now() const { return now_; }

    /// Schedules `cb` at absolute time `at` (>= now()). Throws InternalError if `at` < now() or the priority
    /// is outside 0 .. 255.
    template <class F>
    void schedule(Time at, Priority priority, F&& cb) {
        const std::uint64_t key = checked_key(at, priority);  // priority and sequence, slot bits clear
        const std::uint32_t slot = take_slot();
        callback(slot).emplace(std::forward<F>(cb));
        push(Entry{(static_cast<unsigned __int128>(at.picoseconds()) << 64) | key | slot});
    }
    /// Schedules `cb` at now() + delay.
    template <class F>
    void schedule_in(Time delay, Priority priority, F&& cb) {
        schedule(now_ + delay, priority, std::forward<F>(cb));
    }

    /// Runs events until none is left, or until `max_events` have run in this call (pending() then tells
    /// whether any is left). Returns the number of events executed by this call.
    std::uint64_t run(std::uint64_t max_events = ~std::uint64_t{0});

    /// Events executed since construction.
    std::uint64_t events_executed() const { return executed_; }
    /// Events scheduled and not yet executed.
    std::size_t pending() const { return heap_.size() - kHeapPad - (root_free_ ? 1 : 0); }

    /// For tests: renumber the pending events' sequence numbers every `limit` schedule() calls (>= 1)
    /// instead of every 2^30.
    void set_sequence_limit_for_testing(std::uint64_t limit) { seq_limit_ = limit; }

  private:
    /// One queued event, 16 bytes: time (ps, >= 0) << 64 | priority << 56 | sequence << 26 | slot. The
    /// sequence has 30 bits: when it runs out, the pending events are renumbered in their order (which keeps
    /// the order of every pair, pending or future); the slot has 26 bits (64 M events pending at most).
    struct Entry {
        unsigned __int128 order;
    };
    static constexpr int kSlotBits = 26;
    static constexpr int kSeqBits = 30;
    static bool before(const Entry& a, const Entry& b) { return a.order < b.order; }
    static std::uint32_t slot_of(const Entry& e) {
        return static_cast<std::uint32_t>(e.order) & ((1u << kSlotBits) - 1);
    }
    static constexpr std::uint32_t kPageBits = 10;
    static constexpr std::uint32_t kPageSize = 1u << kPageBits;

    std::uint64_t checked_key(Time at, Priority priority);
    std::uint32_t take_slot() {
        if (!free_slots_.empty()) {
            const std::uint32_t s = free_slots_.back();
            free_slots_.pop_back();
            return s;
        }
        if (slot_count_ == (1u << kSlotBits)) throw_too_many_pending();
        if (slot_count_ == pages_.size() * kPageSize)
            pages_.push_back(std::make_unique<EventCallback[]>(kPageSize));
        return slot_count_++;
    }
    EventCallback& callback(std::uint32_t slot) { return pages_[slot >> kPageBits][slot & (kPageSize - 1)]; }
    void push(const Entry& e);
    [[noreturn]] static void throw_too_many_pending();
    void renumber();
    void pop_top();
    /// Puts `e` in place of the root (the event being run, already taken) and sifts it down.
    void replace_root(const Entry& e);
    /// Takes the running event's entry out of the root if no event took its place (root_free_).
    void drop_free_root();
    /// The smallest of node i's children (at most 4; the last group may be incomplete).
    std::size_t smallest_child(std::size_t i) const;
    /// The running event's entry still sits at the root (run() takes it out after its callback unless the
    /// callback schedules an event, which then takes its place: one sift instead of a pop and a push; the
    /// order of events is the heap's key order either way).
    bool root_free_ = false;

    Time now_{};
    std::uint64_t next_seq_ = 0;
    std::uint64_t executed_ = 0;
    /// The heap's storage starts kHeapPad unused entries before its root, so that each node's four children
    /// (nodes 4i+1 .. 4i+4, at heap_[4i+4 .. 4i+7]) fill one 64-byte cache line of the 64-byte-aligned
    /// storage: a step of a sift reads one line, not two.
    static constexpr std::size_t kHeapPad = 3;
    /// 4-ary min-heap on `order`, node i at heap_[kHeapPad + i] (heap())
    std::vector<Entry, boost::alignment::aligned_allocator<Entry, 64>> heap_ =
        std::vector<Entry, boost::alignment::aligned_allocator<Entry, 64>>(kHeapPad, Entry{0});
    Entry* heap() { return heap_.data() + kHeapPad; }
    const Entry* heap() const { return heap_.data() + kHeapPad; }
    std::size_t heap_size() const { return heap_.size() - kHeapPad; }
    std::uint64_t seq_limit_ = std::uint64_t{1} << kSeqBits;
    std::vector<std::unique_ptr<EventCallback[]>> pages_;
    std::uint32_t slot_count_ = 0;
    std::vector<std::uint32_t> free_slots_;
};

}  // namespace trainsim
