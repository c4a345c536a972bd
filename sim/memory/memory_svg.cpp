// The per-phase peak of every stage, stacked by pile, as a self-contained SVG (no scripts, no external
// fonts or styles).
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "trainsim/memory.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

namespace {
std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '&')
            o += "&amp;";
        else if (c == '<')
            o += "&lt;";
        else if (c == '>')
            o += "&gt;";
        else if (c == '"')
            o += "&quot;";
        else
            o += c;
    }
    return o;
}
}  // namespace

std::string memory_svg(const MemoryReport& r, const std::string& title) {
    static const char* kColors[kPiles] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#bab0ac"};
    static const char* kPhaseLetter[kMemoryPhases] = {"L", "F", "B", "O", "C"};
    const double bar_w = 12, bar_gap = 2, group_gap = 14;
    const double left = 70, top = 60, plot_h = 320, bottom = 90;
    const double group_w = kMemoryPhases * (bar_w + bar_gap) + group_gap;
    const double plot_w = std::max(600.0, group_w * static_cast<double>(r.stages.size()));
    // A second panel when the peak stage's timeline was kept: its bytes by pile over simulated time.
    const auto& timeline = r.peak().timeline;
    double t_end = 0;
    for (const auto& x : timeline)
        t_end = std::max(t_end, x.time_s);
    const bool with_timeline = timeline.size() > 1 && t_end > 0;
    const double top2 = top + plot_h + bottom + 40, plot2_h = 240;
    const double width = left + plot_w + 190,
                 height = with_timeline ? top2 + plot2_h + 60 : top + plot_h + bottom;
    double ymax = r.capacity_bytes;
    for (const auto& st : r.stages)
        ymax = std::max(ymax, st.peak_bytes);
    ymax /= kGiB;
    // A round axis maximum: 1, 2 or 5 times a power of ten steps, 5 to 10 of them.
    const double raw_step = ymax / 6.0;
    const double p10 = std::pow(10.0, std::floor(std::log10(raw_step)));
    const double step = raw_step <= p10       ? p10
                        : raw_step <= 2 * p10 ? 2 * p10
                        : raw_step <= 5 * p10 ? 5 * p10
                                              : 10 * p10;
    const double axis_max = std::ceil(ymax / step) * step;
    auto y = [&](double gib) { return top + plot_h - plot_h * gib / axis_max; };

    std::string o = fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 {:.0f} "
        "{:.0f}\" "
        "font-family=\"sans-serif\" font-size=\"11\">\n",
        width, height, width, height);
    o += fmt::format("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    o += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", left,
                     escape(title));
    o += fmt::format(
        "<text x=\"{}\" y=\"40\">Peak memory per GPU of each phase (L load, F forward, B backward, O "
        "optimizer, "
        "C checkpoint), by pile</text>\n",
        left);
    for (double v = 0; v <= axis_max + 1e-9; v += step) {
        o += fmt::format("<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                         left, left + plot_w, y(v), y(v));
        o += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left - 6, y(v) + 4,
                         v);
    }
    o += fmt::format(
        "<text transform=\"translate(20 {:.1f}) rotate(-90)\" text-anchor=\"middle\">GiB per GPU</text>\n",
        top + plot_h / 2);
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
        const auto& st = r.stages[s];
        const double gx = left + group_gap / 2 + group_w * static_cast<double>(s);
        for (int ph = 0; ph < kMemoryPhases; ++ph) {
            const auto& pk = st.phase_peaks[static_cast<std::size_t>(ph)];
            const double x = gx + ph * (bar_w + bar_gap);
            double acc = 0;
            for (int p = 0; p < kPiles; ++p) {
                const double v = pk.piles[static_cast<std::size_t>(p)] / kGiB;
                if (v <= 0) continue;
                o += fmt::format(
                    "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.2f}\" fill=\"{}\"><title>stage "
                    "{} {}: "
                    "{} {:.2f} GiB</title></rect>\n",
                    x, y(acc + v), bar_w, y(acc) - y(acc + v), kColors[p], st.stage,
                    to_string(static_cast<MemoryPhase>(ph)), to_string(static_cast<Pile>(p)), v);
                acc += v;
            }
            o += fmt::format(
                "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"8\">{}</text>\n",
                x + bar_w / 2, top + plot_h + 11, kPhaseLetter[ph]);
        }
        o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                         gx + kMemoryPhases * (bar_w + bar_gap) / 2, top + plot_h + 26, st.stage);
    }
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">pipeline stage</text>\n",
                     left + plot_w / 2, top + plot_h + 44);
    const double cap = r.capacity_bytes / kGiB;
    o += fmt::format(
        "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c00\" stroke-dasharray=\"6 "
        "3\"/>\n",
        left, left + plot_w, y(cap), y(cap));
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c00\">HBM {:.1f} GiB</text>\n",
                     left + plot_w + 6, y(cap) + 4, cap);
    const double lx = left + plot_w + 16;
    for (int p = 0; p < kPiles; ++p) {
        const double ly = top + 30 + 18 * p;
        o += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", lx, ly,
                         kColors[p]);
        o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 18, ly + 10,
                         to_string(static_cast<Pile>(p)));
    }
    if (with_timeline) {
        // The highest sample of each of up to 400 time buckets, so that every peak survives the thinning.
        const std::size_t buckets = std::min<std::size_t>(400, timeline.size());
        std::vector<const MemorySample*> pick(buckets, nullptr);
        for (const auto& x : timeline) {
            const auto b = std::min(
                buckets - 1, static_cast<std::size_t>(x.time_s / t_end * static_cast<double>(buckets)));
            if (!pick[b] || total_bytes(x.piles) > total_bytes(pick[b]->piles)) pick[b] = &x;
        }
        std::vector<const MemorySample*> pts;
        for (const auto* x : pick)
            if (x) pts.push_back(x);
        auto y2 = [&](double gib) { return top2 + plot2_h - plot2_h * gib / axis_max; };
        auto x2 = [&](double t) { return left + plot_w * t / t_end; };
        o += fmt::format(
            "<text x=\"{}\" y=\"{:.1f}\">Stage {} (the peak stage) over one simulated iteration, by pile "
            "(GiB per GPU against time in s)</text>\n",
            left, top2 - 14, r.peak().stage);
        for (double v = 0; v <= axis_max + 1e-9; v += step)
            o += fmt::format(
                "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"{}\" "
                "y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
                left, left + plot_w, y2(v), y2(v), left - 6, y2(v) + 4, v);
        for (int i = 0; i <= 4; ++i)
            o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3g}</text>\n",
                             x2(t_end * i / 4), top2 + plot2_h + 16, t_end * i / 4);
        o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">simulated time (s)</text>\n",
                         left + plot_w / 2, top2 + plot2_h + 34);
        std::vector<double> base(pts.size(), 0.0);
        for (int p = 0; p < kPiles; ++p) {
            std::string upper, lower;
            bool any = false;
            for (std::size_t i = 0; i < pts.size(); ++i) {
                const double v = pts[i]->piles[static_cast<std::size_t>(p)] / kGiB;
                any = any || v > 0;
                upper += fmt::format("{:.1f},{:.1f} ", x2(pts[i]->time_s), y2(base[i] + v));
            }
            for (std::size_t i = pts.size(); i-- > 0;)
                lower += fmt::format("{:.1f},{:.1f} ", x2(pts[i]->time_s), y2(base[i]));
            for (std::size_t i = 0; i < pts.size(); ++i)
                base[i] += pts[i]->piles[static_cast<std::size_t>(p)] / kGiB;
            if (any)
                o += fmt::format("<polygon points=\"{}{}\" fill=\"{}\"><title>{}</title></polygon>\n", upper,
                                 lower, kColors[p], to_string(static_cast<Pile>(p)));
        }
        o += fmt::format(
            "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c00\" "
            "stroke-dasharray=\"6 3\"/>\n",
            left, left + plot_w, y2(cap), y2(cap));
    }
    const auto& pk = r.peak();
    o += fmt::format("<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", left, top + plot_h + bottom - 16,
                     escape(r.fits() ? fmt::format("peak: stage {} in {}: {:.1f} GiB of {:.1f} GiB", pk.stage,
                                                   to_string(pk.peak_phase), pk.peak_bytes / kGiB, cap)
                                     : r.oom_message()));
    o += "</svg>\n";
    return o;
}

}  // namespace trainsim
