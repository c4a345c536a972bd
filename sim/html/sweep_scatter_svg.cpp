// The sweep's scatter: step time against peak memory of every simulated layout, the Pareto front drawn over
// it.
#include <algorithm>

#include <fmt/format.h>

#include "html_charts.hpp"
#include "html_svg.hpp"
#include "trainsim/units.hpp"

namespace trainsim::html {

namespace {
constexpr double kLeft = 80, kTop = 50, kPlotW = 800, kPlotH = 420;

double peak_gib(const SweepEntry& e) {
    return e.peak_memory_bytes / kGiB;
}

std::string point_title(const SweepEntry& e) {
    return escape(fmt::format("{}{}: {:.4f} s, {:.2f} GiB", e.gpus > 0 ? fmt::format("{} GPUs ", e.gpus) : "",
                              canonical_string(e.layout), e.report.step_time_s, peak_gib(e)));
}

/// Pixel position of a layout.
struct Plot {
    Axis x, y;
    double px(double step_s) const { return kLeft + kPlotW * x.at(step_s); }
    double py(double gib) const { return kTop + kPlotH - kPlotH * y.at(gib); }
};

/// The axes: every simulated point inside; the memory limit too when it is near (under 1.5 x the largest
/// peak), else it is off the chart (limit_shown false).
Plot plot_of(const SweepResult& r, double limit_gib, bool& limit_shown) {
    double t_lo = 1e300, t_hi = 0, m_lo = 1e300, m_hi = 0;
    for (const auto& e : r.entries) {
        if (e.status != SweepStatus::simulated) continue;
        t_lo = std::min(t_lo, e.report.step_time_s);
        t_hi = std::max(t_hi, e.report.step_time_s);
        m_lo = std::min(m_lo, peak_gib(e));
        m_hi = std::max(m_hi, peak_gib(e));
    }
    limit_shown = limit_gib <= 1.5 * m_hi;
    if (limit_shown) m_hi = std::max(m_hi, limit_gib);
    return Plot{round_range(t_lo, t_hi, 8), round_range(m_lo, m_hi)};
}

std::string front_line(const SweepResult& r, const std::vector<std::size_t>& front, const Plot& p) {
    std::string pts;
    for (auto i : front)
        pts += fmt::format("{:.1f},{:.1f} ", p.px(r.entries[i].report.step_time_s),
                           p.py(peak_gib(r.entries[i])));
    std::string o =
        fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"#e15759\" stroke-width=\"1.5\"/>\n", pts);
    for (auto i : front)
        o += fmt::format(
            "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"#e15759\"><title>Pareto front: "
            "{}</title></circle>\n",
            p.px(r.entries[i].report.step_time_s), p.py(peak_gib(r.entries[i])), point_title(r.entries[i]));
    return o;
}
}  // namespace

}  // namespace trainsim::html

namespace trainsim {

std::vector<std::size_t> sweep_pareto_front(const SweepResult& r) {
    std::vector<std::size_t> sim;
    for (std::size_t i = 0; i < r.entries.size(); ++i)
        if (r.entries[i].status == SweepStatus::simulated) sim.push_back(i);
    // By step time, then peak memory, then position (entries are already ranked; this makes it explicit).
    std::stable_sort(sim.begin(), sim.end(), [&](std::size_t a, std::size_t b) {
        const auto &ea = r.entries[a], &eb = r.entries[b];
        if (ea.report.step_time_s != eb.report.step_time_s)
            return ea.report.step_time_s < eb.report.step_time_s;
        return ea.peak_memory_bytes < eb.peak_memory_bytes;
    });
    std::vector<std::size_t> front;
    double best_mem = 1e300, last_t = -1;
    for (auto i : sim) {
        const auto& e = r.entries[i];
        const bool tie = !front.empty() && e.report.step_time_s == last_t &&
                         e.peak_memory_bytes == r.entries[front.back()].peak_memory_bytes;
        if (e.peak_memory_bytes < best_mem || tie) {
            front.push_back(i);
            best_mem = std::min(best_mem, e.peak_memory_bytes);
            last_t = e.report.step_time_s;
        }
    }
    return front;
}

}  // namespace trainsim

namespace trainsim::html {

std::string sweep_scatter_svg(const SweepResult& r) {
    if (r.simulated == 0) return {};
    const double limit_gib = r.hbm_bytes * (1 - r.min_headroom) / kGiB;
    bool limit_shown = false;
    const Plot p = plot_of(r, limit_gib, limit_shown);
    std::string o = svg_open(kLeft + kPlotW + 340, kTop + kPlotH + 60);
    o += fmt::format(
        "<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">Step time against peak memory per GPU "
        "of "
        "the {} simulated layouts</text>\n",
        kLeft, r.simulated);
    o += y_grid(p.y, kLeft, kTop, kPlotW, kPlotH, "peak memory per GPU (GiB)");
    o += x_ticks(p.x, kLeft, kTop, kPlotW, kPlotH, "step time (s)");
    if (limit_shown)
        o += fmt::format(
            "<line x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c00\" stroke-dasharray=\"6 "
            "3\"/>\n",
            kLeft, kLeft + kPlotW, p.py(limit_gib), p.py(limit_gib));
    for (const auto& e : r.entries)
        if (e.status == SweepStatus::simulated)
            o += fmt::format(
                "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"#4e79a7\" "
                "fill-opacity=\"0.6\"><title>{}</title>"
                "</circle>\n",
                p.px(e.report.step_time_s), p.py(peak_gib(e)), point_title(e));
    o += front_line(r, sweep_pareto_front(r), p);
    const auto& best = r.entries.front();
    o += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"9\" fill=\"none\" stroke=\"black\" "
        "stroke-width=\"2\"><title>best "
        "(fastest): {}</title></circle>\n",
        p.px(best.report.step_time_s), p.py(peak_gib(best)), point_title(best));
    o +=
        legend({{"simulated layout", "#4e79a7"},
                {"Pareto front (no layout both faster and smaller)", "#e15759"},
                {fmt::format("memory limit {:.1f} GiB{}{}", limit_gib,
                             r.min_headroom > 0 ? fmt::format(" (HBM less {:g}%)", 100 * r.min_headroom) : "",
                             limit_shown ? "" : ", above the chart"),
                 "#c00"},
                {"best layout (ringed)", "black"}},
               kLeft + kPlotW + 16, kTop);
    return o + "</svg>\n";
}

}  // namespace trainsim::html
