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

namespace {

const char* const kColors[kPiles] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#bab0ac"};
const char* const kPhaseLetter[kMemoryPhases] = {"L", "F", "B", "O", "C"};

/// The chart's geometry (pixels; GiB on the y axes) and its panels, each written by one method.
class MemoryChart {
  public:
    explicit MemoryChart(const MemoryReport& r) : r_(r), timeline_(r.peak().timeline) {
        plot_w_ = std::max(600.0, group_w_ * static_cast<double>(r.stages.size()));
        // A second panel when the peak stage's timeline was kept: its bytes by pile over simulated time.
        for (const auto& x : timeline_)
            t_end_ = std::max(t_end_, x.time_s);
        with_timeline_ = timeline_.size() > 1 && t_end_ > 0;
        width_ = left_ + plot_w_ + 190;
        height_ = with_timeline_ ? top2_ + plot2_h_ + 60 : top_ + plot_h_ + bottom_;
        double ymax = r.capacity_bytes;
        for (const auto& st : r.stages)
            ymax = std::max(ymax, st.peak_bytes);
        ymax /= kGiB;
        // A round axis maximum: 1, 2 or 5 times a power of ten steps, 5 to 10 of them.
        const double raw_step = ymax / 6.0;
        const double p10 = std::pow(10.0, std::floor(std::log10(raw_step)));
        step_ = raw_step <= p10       ? p10
                : raw_step <= 2 * p10 ? 2 * p10
                : raw_step <= 5 * p10 ? 5 * p10
                                      : 10 * p10;
        axis_max_ = std::ceil(ymax / step_) * step_;
        cap_ = r.capacity_bytes / kGiB;
    }

    std::string draw(const std::string& title) {
        header(title);
        stage_bars();
        capacity_and_legend();
        if (with_timeline_) timeline_panel();
        const auto& pk = r_.peak();
        o_ += fmt::format(
            "<text x=\"{}\" y=\"{:.1f}\">{}</text>\n", left_, top_ + plot_h_ + bottom_ - 16,
            escape(r_.fits() ? fmt::format("peak: stage {} in {}: {:.1f} GiB of {:.1f} GiB", pk.stage,
                                           to_string(pk.peak_phase), pk.peak_bytes / kGiB, cap_)
                             : r_.oom_message()));
        o_ += "</svg>\n";
        return std::move(o_);
    }

  private:
    double y(double gib) const { return top_ + plot_h_ - plot_h_ * gib / axis_max_; }
    double y2(double gib) const { return top2_ + plot2_h_ - plot2_h_ * gib / axis_max_; }
    double x2(double t) const { return left_ + plot_w_ * t / t_end_; }

    void header(const std::string& title) {
        o_ = fmt::format(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 0 "
            "{:.0f} "
            "{:.0f}\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n",
            width_, height_, width_, height_);
        o_ += fmt::format("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
        o_ += fmt::format("<text x=\"{}\" y=\"22\" font-size=\"14\" font-weight=\"bold\">{}</text>\n", left_,
                          escape(title));
        o_ += fmt::format(
            "<text x=\"{}\" y=\"40\">Peak memory per GPU of each phase (L load, F forward, B backward, O "
            "optimizer, "
            "C checkpoint), by pile</text>\n",
            left_);
        for (double v = 0; v <= axis_max_ + 1e-9; v += step_) {
            o_ += fmt::format("<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n",
                              left_, left_ + plot_w_, y(v), y(v));
            o_ += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n", left_ - 6,
                              y(v) + 4, v);
        }
        o_ += fmt::format(
            "<text transform=\"translate(20 {:.1f}) rotate(-90)\" text-anchor=\"middle\">GiB per "
            "GPU</text>\n",
            top_ + plot_h_ / 2);
    }

    void stage_bars() {
        for (std::size_t s = 0; s < r_.stages.size(); ++s) {
            const auto& st = r_.stages[s];
            const double gx = left_ + group_gap_ / 2 + group_w_ * static_cast<double>(s);
            for (int ph = 0; ph < kMemoryPhases; ++ph) {
                const auto& pk = st.phase_peaks[static_cast<std::size_t>(ph)];
                const double x = gx + ph * (bar_w_ + bar_gap_);
                double acc = 0;
                for (int p = 0; p < kPiles; ++p) {
                    const double v = pk.piles[static_cast<std::size_t>(p)] / kGiB;
                    if (v <= 0) continue;
                    o_ += fmt::format(
                        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{:.2f}\" "
                        "fill=\"{}\"><title>stage "
                        "{} {}: "
                        "{} {:.2f} GiB</title></rect>\n",
                        x, y(acc + v), bar_w_, y(acc) - y(acc + v), kColors[p], st.stage,
                        to_string(static_cast<MemoryPhase>(ph)), to_string(static_cast<Pile>(p)), v);
                    acc += v;
                }
                o_ += fmt::format(
                    "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"8\">{}</text>\n",
                    x + bar_w_ / 2, top_ + plot_h_ + 11, kPhaseLetter[ph]);
            }
            o_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
                              gx + kMemoryPhases * (bar_w_ + bar_gap_) / 2, top_ + plot_h_ + 26, st.stage);
        }
        o_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">pipeline stage</text>\n",
                          left_ + plot_w_ / 2, top_ + plot_h_ + 44);
    }

    void capacity_and_legend() {
        o_ += fmt::format(
            "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c00\" stroke-dasharray=\"6 "
            "3\"/>\n",
            left_, left_ + plot_w_, y(cap_), y(cap_));
        o_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c00\">HBM {:.1f} GiB</text>\n",
                          left_ + plot_w_ + 6, y(cap_) + 4, cap_);
        const double lx = left_ + plot_w_ + 16;
        for (int p = 0; p < kPiles; ++p) {
            const double ly = top_ + 30 + 18 * p;
            o_ += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n",
                              lx, ly, kColors[p]);
            o_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", lx + 18, ly + 10,
                              to_string(static_cast<Pile>(p)));
        }
    }

    /// The highest sample of each of up to 400 time buckets, so that every peak survives the thinning.
    std::vector<const MemorySample*> thinned_timeline() const {
        const std::size_t buckets = std::min<std::size_t>(400, timeline_.size());
        std::vector<const MemorySample*> pick(buckets, nullptr);
        for (const auto& x : timeline_) {
            const auto b = std::min(
                buckets - 1, static_cast<std::size_t>(x.time_s / t_end_ * static_cast<double>(buckets)));
            if (!pick[b] || total_bytes(x.piles) > total_bytes(pick[b]->piles)) pick[b] = &x;
        }
        std::vector<const MemorySample*> pts;
        for (const auto* x : pick)
            if (x) pts.push_back(x);
        return pts;
    }

    void timeline_panel() {
        const auto pts = thinned_timeline();
        o_ += fmt::format(
            "<text x=\"{}\" y=\"{:.1f}\">Stage {} (the peak stage) over one simulated iteration, by pile "
            "(GiB per GPU against time in s)</text>\n",
            left_, top2_ - 14, r_.peak().stage);
        for (double v = 0; v <= axis_max_ + 1e-9; v += step_)
            o_ += fmt::format(
                "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text x=\"{}\" "
                "y=\"{:.1f}\" text-anchor=\"end\">{:g}</text>\n",
                left_, left_ + plot_w_, y2(v), y2(v), left_ - 6, y2(v) + 4, v);
        for (int i = 0; i <= 4; ++i)
            o_ += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{:.3g}</text>\n",
                              x2(t_end_ * i / 4), top2_ + plot2_h_ + 16, t_end_ * i / 4);
        o_ +=
            fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">simulated time (s)</text>\n",
                        left_ + plot_w_ / 2, top2_ + plot2_h_ + 34);
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
                o_ += fmt::format("<polygon points=\"{}{}\" fill=\"{}\"><title>{}</title></polygon>\n", upper,
                                  lower, kColors[p], to_string(static_cast<Pile>(p)));
        }
        o_ += fmt::format(
            "<line x1=\"{}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#c00\" "
            "stroke-dasharray=\"6 3\"/>\n",
            left_, left_ + plot_w_, y2(cap_), y2(cap_));
    }

    const MemoryReport& r_;
    const std::vector<MemorySample>& timeline_;
    const double bar_w_ = 12, bar_gap_ = 2, group_gap_ = 14;
    const double left_ = 70, top_ = 60, plot_h_ = 320, bottom_ = 90;
    const double group_w_ = kMemoryPhases * (bar_w_ + bar_gap_) + group_gap_;
    const double top2_ = top_ + plot_h_ + bottom_ + 40, plot2_h_ = 240;
    double plot_w_ = 0, t_end_ = 0, width_ = 0, height_ = 0, step_ = 1, axis_max_ = 1, cap_ = 0;
    bool with_timeline_ = false;
    std::string o_;
};

}  // namespace

std::string memory_svg(const MemoryReport& r, const std::string& title) {
    return MemoryChart(r).draw(title);
}

}  // namespace trainsim
