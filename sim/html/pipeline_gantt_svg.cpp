// The Gantt of DP replica 0: one row per pipeline stage, four lanes per row, drawn at pixel resolution.
#include <algorithm>

#include <fmt/format.h>

#include "html_charts.hpp"
#include "html_svg.hpp"

namespace trainsim::html {

namespace {
constexpr double kLeft = 90, kTop = 70, kPlotW = 1000, kLaneH = 7, kLaneGap = 1, kRowGap = 8;
constexpr double kRowH = kTimelineLanes * (kLaneH + kLaneGap) - kLaneGap;
const char* const kLaneNames[kTimelineLanes] = {"main stream", "TP stream", "DP stream", "P2P sends"};

/// The rectangles of one lane at `y`.
std::string lane_rects(const std::vector<TimelineSpan>& spans, double t_end_s, double y) {
    std::string o;
    const double px = kPlotW / static_cast<int>(kPlotW);
    for (const auto& run : rasterize_lane(spans, t_end_s, static_cast<int>(kPlotW)))
        o += fmt::format("<rect x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"/>\n",
                         kLeft + px * run.first, y, px * run.count, kLaneH, kind_colour(run.kind));
    return o;
}

/// Row `s`: its label, a faint band behind its lanes and the lanes.
std::string stage_row(const PipelineTimeline& t, int s, double t_end_s) {
    const double y = kTop + s * (kRowH + kRowGap);
    std::string o = fmt::format(
        "<rect x=\"{}\" y=\"{:.0f}\" width=\"{}\" height=\"{:.0f}\" fill=\"#f4f4f4\"/><text x=\"{}\" "
        "y=\"{:.0f}\" "
        "text-anchor=\"end\">stage {}</text>\n",
        kLeft, y, kPlotW, kRowH, kLeft - 8, y + kRowH / 2 + 4, s);
    for (int lane = 0; lane < kTimelineLanes; ++lane)
        o += lane_rects(t.spans(s, static_cast<TimelineLane>(lane)), t_end_s, y + lane * (kLaneH + kLaneGap));
    return o;
}
}  // namespace

std::string pipeline_gantt_svg(const PipelineTimeline& t) {
    const Axis ax = round_axis(t.step_time_s(), 10);
    const double plot_h = t.stages() * (kRowH + kRowGap) - kRowGap;
    // Tall enough for the legend (kinds and the step-time line, 18 px each) when there are few stages.
    std::string o =
        svg_open(kLeft + kPlotW + 170, std::max(kTop + plot_h + 60, kTop + 18.0 * (kTimelineKinds + 1) + 10));
    o += fmt::format(
        "<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">Pipeline timeline of DP replica 0 "
        "(one "
        "GPU per stage: tp = cp = dp = 0)</text>\n<text x=\"{}\" y=\"40\">Lanes of each stage, top to "
        "bottom: "
        "{}, {}, {}, {}; each pixel shows the kind that ran longest in it</text>\n",
        kLeft, kLeft, kLaneNames[0], kLaneNames[1], kLaneNames[2], kLaneNames[3]);
    for (int s = 0; s < t.stages(); ++s)
        o += stage_row(t, s, ax.max);
    o += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.1f}\" stroke=\"#c00\" stroke-dasharray=\"6 "
        "3\"><title>step time {3:.4f} s</title></line>\n",
        kLeft + kPlotW * t.step_time_s() / ax.max, kTop - 4, kTop + plot_h + 4, t.step_time_s());
    o += x_ticks(ax, kLeft, kTop, kPlotW, plot_h, "simulated time since the iteration began (s)");
    std::vector<std::pair<std::string, std::string>> items;
    for (int k = 0; k < kTimelineKinds; ++k)
        items.emplace_back(html_kind_name(static_cast<TimelineKind>(k)),
                           kind_colour(static_cast<TimelineKind>(k)));
    items.emplace_back("step time (dashed)", "#c00");
    o += legend(items, kLeft + kPlotW + 16, kTop);
    return o + "</svg>\n";
}

}  // namespace trainsim::html
