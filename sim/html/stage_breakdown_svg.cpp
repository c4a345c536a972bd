// The step breakdown per pipeline stage: one stacked bar per stage of its GPU's accounts (StageTimes).
#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "html_charts.hpp"
#include "html_svg.hpp"

namespace trainsim::html {

namespace {
/// The accounts of one stage in TimelineKind order (TP without its CP and EP parts), in seconds.
std::array<double, kTimelineKinds> accounts(const StageTimes& s) {
    const double tp_only = std::max(0.0, s.tp_exposed_s - s.cp_exposed_s - s.ep_exposed_s);
    return {s.compute_s,    tp_only,        s.cp_exposed_s, s.ep_exposed_s,
            s.pp_exposed_s, s.dp_exposed_s, s.bubble_s,     s.idle_s};
}

constexpr double kLeft = 70, kTop = 50, kPlotH = 300, kBottom = 60;

/// The stacked bar of stage `i` in slot [x, x + slot); each segment's <title> names it with its seconds.
std::string stage_bar(const StageTimes& s, double x, double slot, double max_s) {
    std::string o;
    const double w = std::min(40.0, slot * 0.7), bx = x + (slot - w) / 2;
    double acc = 0;
    const auto a = accounts(s);
    for (int k = 0; k < kTimelineKinds; ++k) {
        const double v = a[static_cast<std::size_t>(k)];
        if (!(v > 0)) continue;
        const double y0 = kTop + kPlotH - kPlotH * (acc + v) / max_s, h = kPlotH * v / max_s;
        o += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.2f}\" fill=\"{}\"><title>stage {}: "
            "{} "
            "{:.4f} s</title></rect>\n",
            bx, y0, w, h, kind_colour(static_cast<TimelineKind>(k)), s.stage,
            html_kind_name(static_cast<TimelineKind>(k)), v);
        acc += v;
    }
    return o;
}
}  // namespace

std::string stage_breakdown_svg(const Report& r) {
    const auto n = static_cast<double>(std::max<std::size_t>(1, r.stages.size()));
    const double plot_w = std::max(480.0, std::min(1000.0, 36.0 * n)), slot = plot_w / n;
    double top_s = r.step_time_s;
    for (const auto& s : r.stages) {
        double sum = 0;
        for (double v : accounts(s))
            sum += v;
        top_s = std::max(top_s, sum);
    }
    const Axis ax = round_axis(top_s);
    std::string o = svg_open(std::max(kLeft + plot_w + 150, 820.0), kTop + kPlotH + kBottom);
    o += fmt::format(
        "<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">Step time breakdown per pipeline "
        "stage "
        "(one GPU of each stage, mean over its GPUs)</text>\n",
        kLeft);
    o += y_grid(ax, kLeft, kTop, plot_w, kPlotH, "seconds per iteration (s)");
    const int label_every = std::max(1, static_cast<int>(std::ceil(n / 32)));
    for (std::size_t i = 0; i < r.stages.size(); ++i) {
        const double x = kLeft + slot * static_cast<double>(i);
        o += stage_bar(r.stages[i], x, slot, ax.max);
        if (static_cast<int>(i) % label_every == 0)
            o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                             x + slot / 2, kTop + kPlotH + 16, r.stages[i].stage);
    }
    o += fmt::format(
        "<line x1=\"{0}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#c00\" stroke-dasharray=\"6 "
        "3\"><title>step time {3:.4f} s</title></line>\n",
        kLeft, kLeft + plot_w, kTop + kPlotH - kPlotH * r.step_time_s / ax.max, r.step_time_s);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">pipeline stage</text>\n",
                     kLeft + plot_w / 2, kTop + kPlotH + 36);
    std::vector<std::pair<std::string, std::string>> items;
    for (int k = 0; k < kTimelineKinds; ++k) {
        const auto kind = static_cast<TimelineKind>(k);
        items.emplace_back(
            k == 0 ? std::string("compute") : std::string(html_kind_name(kind)) + (k < 6 ? " exposed" : ""),
            kind_colour(kind));
    }
    items.emplace_back("step time (dashed)", "#c00");
    o += legend(items, kLeft + plot_w + 16, kTop);
    return o + "</svg>\n";
}

}  // namespace trainsim::html
