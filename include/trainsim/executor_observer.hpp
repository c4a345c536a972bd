// The executor's observer interface: how anything outside the executor learns the simulated timeline of a
// GPU (issue 12: "memory timing from an executor observer interface; the trace writer, memory marks and
// future probes subscribe to it"). The executor holds no timeline itself: it reports every slice of the GPUs
// an observer asked for, as it simulates, and forgets it. Subscribers today: the Chrome trace writer
// (include/trainsim/report.hpp, ChromeTraceWriter: streams the slices to disk), the memory walk's timing
// (include/trainsim/memory.hpp, ComputeEndTimes: the compute ends of one GPU per stage) and SliceRecorder
// below (keeps every slice in memory: tests and small tools).
//
// Observing changes no simulated time. It changes the executor's path for the observed GPUs' units only in
// how many events it schedules: an observed unit's compute and TP collectives run event by event
// (ExecutionOptions::run_local_ops_ahead is declined for it, so that every slice is reported), which changes
// ExecutionResult::events and nothing else (tests/unit/test_executor.cpp checks the times).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainsim/units.hpp"

namespace trainsim {

/// The tracks of one GPU's timeline. Values are stable (the Chrome trace's thread ids are these).
enum class Track : int {
    compute = 0,    ///< the main stream runs one compute op's kernels (named after its segment)
    tp_stream = 1,  ///< a TP, CP or tied-embedding collective, from its start (its last member arrived) to
                    ///< its completion (named "tp all_reduce", "cp all_gather", "embedding all_reduce"...)
    dp_stream = 2,  ///< a DP collective, from its start to its completion ("dp reduce_scatter"...)
    p2p_sends = 3,  ///< a P2P send's transfer, from its start (both sides posted) to its arrival
                    ///< ("send_act mb3", "send_grad mb3")
    waits = 4,      ///< the main stream blocked, named after the account it is charged to (RankTimes):
                    ///< "bubble", "TP exposed", "CP exposed", "PP exposed", "DP exposed", "idle"
};
inline constexpr int kTracks = 5;
/// "compute", "TP stream", "DP stream", "P2P sends", "waits".
const char* to_string(Track t);

/// One slice of a GPU's timeline.
struct TimelineSlice {
    int rank = 0;  ///< global GPU rank (include/trainsim/executor.hpp, coord_of)
    Track track = Track::compute;
    std::string_view name;  ///< valid during the call only
    Time start;             ///< simulated time since the iteration began
    Time end;               ///< >= start
};

/// Subscribes to the executor's timeline (execute(), include/trainsim/executor.hpp). Callbacks run on the
/// simulating thread, in the executor's order (deterministic); they must not throw across the simulation
/// unless the run is to fail (the exception propagates out of execute()).
///
/// Order guarantees, per (rank, track): the slices of compute, TP stream, DP stream and waits do not overlap
/// and their slice_end calls come in start order; P2P sends may overlap (a unit can have a send of each
/// direction in flight), their slice_end calls come in arrival order. Across ranks and tracks nothing is
/// ordered: a compute run's slices are reported when the run starts (the executor times back-to-back
/// kernels at once), so a slice may be reported before the simulated clock reaches it, and a collective's
/// after it ended.
class ExecutorObserver {
  public:
    virtual ~ExecutorObserver() = default;
    /// Whether this observer wants rank `rank`'s slices; asked once per rank before the simulation starts.
    virtual bool observes(int rank) const = 0;
    /// A slice of an observed rank begins: called when the executor knows it began, before its slice_end:
    /// at a collective's or a transfer's start; for a compute op and a wait (whose account is decided when
    /// it ends) right before its slice_end. The default does nothing.
    virtual void slice_begin(int rank, Track track, std::string_view name, Time start) {
        (void)rank, (void)track, (void)name, (void)start;
    }
    /// A slice of an observed rank ended (its whole extent).
    virtual void slice_end(const TimelineSlice& slice) = 0;
    /// The simulation is over; `step_time` is the iteration's time (after the last "idle"/"bubble" slice
    /// of the drain). The default does nothing.
    virtual void finished(Time step_time) { (void)step_time; }
};

/// A slice as SliceRecorder keeps it (the name copied).
struct RecordedSlice {
    int rank = 0;
    Track track = Track::compute;
    std::string name;
    Time start, end;
};

/// Keeps every slice of the ranks it observes, in slice_end order (for tests and small tools: a whole
/// iteration of a large cluster is millions of slices; the trace writer streams them instead).
class SliceRecorder : public ExecutorObserver {
  public:
    /// Observes the ranks r with ranks[r] true; an empty vector: every rank.
    explicit SliceRecorder(std::vector<bool> ranks = {}) : ranks_(std::move(ranks)) {}
    bool observes(int rank) const override {
        return ranks_.empty() || (rank >= 0 && static_cast<std::size_t>(rank) < ranks_.size() &&
                                  ranks_[static_cast<std::size_t>(rank)]);
    }
    void slice_end(const TimelineSlice& s) override {
        slices.push_back(RecordedSlice{s.rank, s.track, std::string(s.name), s.start, s.end});
    }
    std::vector<RecordedSlice> slices;

  private:
    std::vector<bool> ranks_;
};

}  // namespace trainsim
