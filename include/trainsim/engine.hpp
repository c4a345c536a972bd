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
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "trainsim/units.hpp"

namespace trainsim {

/// Priorities at equal time: lower runs first. Named classes keep the meaning visible at call sites.
enum class Priority : std::int32_t {
    kFlowCompletion = 0,  ///< a network flow finished its bytes
    kDefault = 10,        ///< ordinary model events (an op finishes, a rank issues its next op)
    kRateUpdate = 100,    ///< recompute network rates after every change at this instant
};

class Simulator {
  public:
    using Callback = std::function<void()>;

    Simulator() = default;
    Simulator(const Simulator&) = delete;
    Simulator& operator=(const Simulator&) = delete;

    /// Current simulated time.
    Time now() const { return now_; }

    /// Schedules `cb` at absolute time `at` (>= now()). Throws InternalError if `at` < now().
    void schedule(Time at, Priority priority, Callback cb);
    /// Schedules `cb` at now() + delay.
    void schedule_in(Time delay, Priority priority, Callback cb) {
        schedule(now_ + delay, priority, std::move(cb));
    }

    /// Runs events until none is left. Returns the number of events executed by this call.
    std::uint64_t run();

    /// Events executed since construction.
    std::uint64_t events_executed() const { return executed_; }
    /// Events scheduled and not yet executed.
    std::size_t pending() const { return heap_.size(); }

  private:
    struct Entry {
        std::int64_t time_ps;
        std::int32_t priority;
        std::uint32_t slot;
        std::uint64_t seq;
    };
    static bool later(const Entry& a, const Entry& b) {
        if (a.time_ps != b.time_ps) return a.time_ps > b.time_ps;
        if (a.priority != b.priority) return a.priority > b.priority;
        return a.seq > b.seq;
    }

    Time now_{};
    std::uint64_t next_seq_ = 0;
    std::uint64_t executed_ = 0;
    std::vector<Entry> heap_;
    std::vector<Callback> slots_;
    std::vector<std::uint32_t> free_slots_;
};

}  // namespace trainsim
