// Pictures: one self-contained HTML page per run, memory study or sweep (`trainsim run|memory|sweep --html
// FILE`). The page loads nothing: no script, no external style, font or image; every chart is inline SVG
// drawn here. The bytes are a function of the inputs alone (no date, no address, fixed number formats), so
// the same run writes the same page.
//
// What a page holds, in this order (sections are <section id="...">, each with an <h2>):
//   headline   a table of the headline figures: step time (s), MFU (%), tokens/s per GPU, peak memory per GPU
//              (GiB, and the GPU's HBM), the pipeline bubble (s), tokens/day (report.hpp gives their
//              definitions); a sweep adds the layout and the counts of simulated / out-of-memory / rejected
//              layouts.
//   scatter    (sweep) every simulated layout as a point: step time (s, x) against peak memory per GPU (GiB,
//              y); the Pareto front (no other layout is both faster and smaller; ties kept) drawn as filled
//              points joined by a line, the best (fastest) layout ringed; the memory limit (HBM less the
//              headroom asked for) as a dashed line. Each point's <title> names its layout.
//   breakdown  per pipeline stage a stacked bar of one iteration of a GPU of that stage (mean over the
//              stage's GPUs, StageTimes in report.hpp): compute, exposed TP, CP, EP, PP and DP communication,
//              bubble, idle (s). The bars sum to the step time (each GPU's accounts cover its iteration).
//   timeline   (run and memory, with a PipelineTimeline) the Gantt of DP replica 0: one row per pipeline
//   stage
//              (its GPU tp = cp = dp = 0, which with the symmetric TP groups is every GPU of the stage), four
//              lanes per row: the main stream (compute, and its waits coloured by the account they are
//              charged to: bubble, exposed TP/CP/EP/PP/DP, idle), the TP stream (TP, CP, EP and
//              tied-embedding collectives), the DP stream, the P2P sends. Time (s) on x. The lanes are drawn
//              at the chart's resolution: each pixel column of a lane shows the kind that occupied most of
//              its time (a kind present at all in a column shows, so short collectives stay visible),
//              adjacent columns of one kind merged into one rectangle; the page's size is thus bounded by the
//              chart's width, not by the number of kernels.
//   memory     memory_svg() of memory.hpp (the per-phase peak of every stage by pile, and the peak stage's
//              timeline when the report kept it), reused as it is.
// Colours are shared by the breakdown and the timeline (compute blue, TP orange, CP yellow, EP purple, PP
// red, DP green, bubble grey, idle light grey); every chart has a title, axes with units and a legend.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "trainsim/executor_observer.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/report.hpp"
#include "trainsim/sweep.hpp"

namespace trainsim {

/// What the timeline and the breakdown colour: one entry per account of the executor (RankTimes) and per
/// kind of stream activity. Values index html_kind_name() and the colour table.
enum class TimelineKind : std::uint8_t {
    compute = 0,
    tp,      ///< a TP collective (and the tied-embedding all-reduce) or the main stream's exposed TP wait
    cp,      ///< a CP collective or its exposed wait
    ep,      ///< an EP all-to-all (MoE dispatch / combine) or its exposed wait
    pp,      ///< a P2P send, or the main stream's exposed PP wait (a message in flight)
    dp,      ///< a DP collective (gradient reduce-scatter / all-reduce, FSDP all-gathers) or its exposed wait
    bubble,  ///< the pipeline bubble (a P2P peer not ready, the drain)
    idle,    ///< waiting for nothing the accounts name (uneven stages)
};
inline constexpr int kTimelineKinds = 8;
/// "compute", "TP", "CP", "EP", "PP", "DP", "bubble", "idle".
const char* html_kind_name(TimelineKind k);

/// The lanes of one stage's row in the timeline.
enum class TimelineLane : std::uint8_t { main_stream = 0, tp_stream, dp_stream, p2p_sends };
inline constexpr int kTimelineLanes = 4;

/// One slice as the timeline keeps it: simulated seconds since the iteration began (end >= start).
struct TimelineSpan {
    double start_s = 0, end_s = 0;
    TimelineKind kind = TimelineKind::compute;
};

/// The executor observer behind the timeline section: observes one GPU per pipeline stage of DP replica 0
/// (rank_of(tp 0, cp 0, dp 0, pp s), parallel_groups.hpp) and keeps its slices, classified (about 24 bytes
/// each: a whole iteration of GPT-3 175B on 16 stages is a few hundred thousand). Observing changes no
/// simulated time (executor_observer.hpp). Slices of other ranks are ignored; a slice whose name the
/// classification does not know is kept as compute on the main stream, idle on a wait.
class PipelineTimeline : public ExecutorObserver {
  public:
    explicit PipelineTimeline(const Layout& l);
    bool observes(int rank) const override;
    void slice_end(const TimelineSlice& s) override;
    void finished(Time step_time) override { step_time_s_ = step_time.to_seconds(); }

    int stages() const { return static_cast<int>(lanes_.size()); }
    /// The spans of stage `stage`'s lane, in the order the executor reported them.
    const std::vector<TimelineSpan>& spans(int stage, TimelineLane lane) const;
    /// The iteration's time (s) once finished() was called, else 0.
    double step_time_s() const { return step_time_s_; }
    /// Whether any slice was kept.
    bool empty() const;

  private:
    Layout layout_;
    std::vector<int> stage_of_rank_;  ///< [rank] the stage whose row it is, -1 when not observed
    std::vector<std::array<std::vector<TimelineSpan>, kTimelineLanes>> lanes_;  ///< [stage][lane]
    double step_time_s_ = 0;
};

/// The kind of one executor slice (its track and name: "tp all_reduce", "CP exposed", "bubble"...).
TimelineKind classify_slice(Track track, std::string_view name);

/// One lane at `columns` pixel columns over [0, t_end_s): per column the kind that occupied most of its
/// time, or -1 where nothing ran; then runs of equal columns as (first column, column count, kind). For the
/// timeline's drawing; exposed for tests. `columns` >= 1, `t_end_s` > 0.
struct LaneRun {
    int first = 0, count = 0;
    TimelineKind kind = TimelineKind::compute;
};
std::vector<LaneRun> rasterize_lane(const std::vector<TimelineSpan>& spans, double t_end_s, int columns);

/// The page of `trainsim run --html`: headline, breakdown, timeline (omitted when `timeline` is null or
/// empty), memory. `title` is the page's title and first heading (escaped here).
std::string run_html(const Report& r, const PipelineTimeline* timeline, const std::string& title);

/// The page of `trainsim memory --html`: the memory chart first, then (when `simulated` is not null) the
/// headline, breakdown and timeline of that simulation. `memory` is the memory report drawn (the simulated
/// report's, or the one walked without times).
std::string memory_html(const MemoryReport& memory, const Report* simulated, const PipelineTimeline* timeline,
                        const std::string& title);

/// The indices (into r.entries) of the simulated layouts on the Pareto front of (step time, peak memory per
/// GPU), both minimized, by step time ascending: a layout is on it when no other is at most as slow and at
/// most as large and strictly better in one (two identical points are both kept). Not simulated: never.
std::vector<std::size_t> sweep_pareto_front(const SweepResult& r);

/// The page of `trainsim sweep --html`: headline of the best layout with the sweep's counts, the scatter, and
/// the best layout's breakdown and memory (when its report has them: see SweepEntry::report).
std::string sweep_html(const SweepResult& r, const std::string& title);

}  // namespace trainsim
