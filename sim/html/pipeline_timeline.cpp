// The timeline of DP replica 0 kept for the HTML page: one GPU per stage, its slices classified, and a lane
// rasterized at the chart's resolution.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "trainsim/errors.hpp"
#include "trainsim/html_report.hpp"
#include "trainsim/parallel_groups.hpp"

namespace trainsim {

const char* html_kind_name(TimelineKind k) {
    static const char* const kNames[kTimelineKinds] = {"compute", "TP", "CP",     "EP",
                                                       "PP",      "DP", "bubble", "idle"};
    return kNames[static_cast<int>(k)];
}

namespace {
bool starts_with(std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
}

/// A collective on the TP stream: "tp all_reduce", "cp all_gather", "ep all_to_all", "embedding all_reduce".
TimelineKind stream_kind(std::string_view name) {
    if (starts_with(name, "cp ")) return TimelineKind::cp;
    if (starts_with(name, "ep ")) return TimelineKind::ep;
    return TimelineKind::tp;
}

/// A wait of the main stream, named after its account (executor_observer.hpp, Track::waits).
TimelineKind wait_kind(std::string_view name) {
    if (name == "bubble") return TimelineKind::bubble;
    if (starts_with(name, "TP ")) return TimelineKind::tp;
    if (starts_with(name, "CP ")) return TimelineKind::cp;
    if (starts_with(name, "EP ")) return TimelineKind::ep;
    if (starts_with(name, "PP ")) return TimelineKind::pp;
    if (starts_with(name, "DP ")) return TimelineKind::dp;
    return TimelineKind::idle;
}

TimelineLane lane_of(Track t) {
    switch (t) {
        case Track::tp_stream:
            return TimelineLane::tp_stream;
        case Track::dp_stream:
            return TimelineLane::dp_stream;
        case Track::p2p_sends:
            return TimelineLane::p2p_sends;
        default:
            return TimelineLane::main_stream;
    }
}
}  // namespace

TimelineKind classify_slice(Track track, std::string_view name) {
    switch (track) {
        case Track::tp_stream:
            return stream_kind(name);
        case Track::dp_stream:
            return TimelineKind::dp;
        case Track::p2p_sends:
            return TimelineKind::pp;
        case Track::waits:
            return wait_kind(name);
        default:
            return TimelineKind::compute;
    }
}

PipelineTimeline::PipelineTimeline(const Layout& l)
    : layout_(l),
      stage_of_rank_(static_cast<std::size_t>(l.gpus()), -1),
      lanes_(static_cast<std::size_t>(l.pp)) {
    for (int s = 0; s < l.pp; ++s) {
        RankCoord c;
        c.pp = s;
        stage_of_rank_[static_cast<std::size_t>(rank_of(l, c))] = s;
    }
}

bool PipelineTimeline::observes(int rank) const {
    return rank >= 0 && static_cast<std::size_t>(rank) < stage_of_rank_.size() &&
           stage_of_rank_[static_cast<std::size_t>(rank)] >= 0;
}

void PipelineTimeline::slice_end(const TimelineSlice& s) {
    if (!observes(s.rank)) return;
    const int stage = stage_of_rank_[static_cast<std::size_t>(s.rank)];
    auto& lane = lanes_[static_cast<std::size_t>(stage)][static_cast<std::size_t>(lane_of(s.track))];
    lane.push_back(TimelineSpan{s.start.to_seconds(), s.end.to_seconds(), classify_slice(s.track, s.name)});
}

const std::vector<TimelineSpan>& PipelineTimeline::spans(int stage, TimelineLane lane) const {
    if (stage < 0 || stage >= stages())
        throw InternalError("PipelineTimeline::spans: stage " + std::to_string(stage) + " out of range");
    return lanes_[static_cast<std::size_t>(stage)][static_cast<std::size_t>(lane)];
}

bool PipelineTimeline::empty() const {
    for (const auto& st : lanes_)
        for (const auto& lane : st)
            if (!lane.empty()) return false;
    return true;
}

std::vector<LaneRun> rasterize_lane(const std::vector<TimelineSpan>& spans, double t_end_s, int columns) {
    if (columns < 1 || !(t_end_s > 0))
        throw InternalError("rasterize_lane: needs columns >= 1 and t_end_s > 0");
    // Seconds of each kind in each column.
    std::vector<std::array<double, kTimelineKinds>> busy(static_cast<std::size_t>(columns));
    const double col_s = t_end_s / columns;
    for (const auto& sp : spans) {
        const double a = std::max(0.0, sp.start_s), b = std::min(t_end_s, sp.end_s);
        if (!(b > a)) continue;
        const int c0 = std::min(columns - 1, static_cast<int>(a / col_s));
        // The last column the span reaches into (one that ends on a column's left edge does not reach it).
        const int c1 = std::clamp(static_cast<int>(std::ceil(b / col_s)) - 1, c0, columns - 1);
        for (int c = c0; c <= c1; ++c) {
            const double lo = std::max(a, c * col_s), hi = std::min(b, (c + 1) * col_s);
            // A slice inside one column still marks it (the smallest positive share).
            busy[static_cast<std::size_t>(c)][static_cast<std::size_t>(sp.kind)] +=
                std::max(hi - lo, std::numeric_limits<double>::min());
        }
    }
    std::vector<LaneRun> runs;
    for (int c = 0; c < columns; ++c) {
        const auto& b = busy[static_cast<std::size_t>(c)];
        const auto top = std::max_element(b.begin(), b.end());
        if (!(*top > 0)) continue;
        const auto kind = static_cast<TimelineKind>(top - b.begin());
        if (!runs.empty() && runs.back().kind == kind && runs.back().first + runs.back().count == c)
            ++runs.back().count;
        else
            runs.push_back(LaneRun{c, 1, kind});
    }
    return runs;
}

}  // namespace trainsim
