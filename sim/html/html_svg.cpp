// Private helpers of the HTML pages: escaping, axes, legends.
#include "html_svg.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace trainsim::html {

std::string escape(const std::string& s) {
    std::string o;
    o.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                o += "&amp;";
                break;
            case '<':
                o += "&lt;";
                break;
            case '>':
                o += "&gt;";
                break;
            case '"':
                o += "&quot;";
                break;
            default:
                o += c;
        }
    }
    return o;
}

const char* kind_colour(TimelineKind k) {
    // Tableau 10 (the memory chart's palette), one hue per account.
    static const char* const kColours[kTimelineKinds] = {"#4e79a7", "#f28e2b", "#edc948", "#b07aa1",
                                                         "#e15759", "#59a14f", "#9c9c9c", "#d9d9d9"};
    return kColours[static_cast<int>(k)];
}

Axis round_axis(double max_value, int ticks) {
    if (!(max_value > 0) || !std::isfinite(max_value)) return Axis{};
    const double raw = max_value / ticks;
    const double p10 = std::pow(10.0, std::floor(std::log10(raw)));
    const double step = raw <= p10 ? p10 : raw <= 2 * p10 ? 2 * p10 : raw <= 5 * p10 ? 5 * p10 : 10 * p10;
    return Axis{step, std::ceil(max_value / step - 1e-9) * step};
}

Axis round_range(double lo, double hi, int ticks) {
    if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return Axis{};
    const double span = hi - lo > 0 ? hi - lo : std::max(std::fabs(hi), 1.0) * 0.1;
    Axis a = round_axis(span, ticks);
    a.min = std::floor(lo / a.step + 1e-9) * a.step;
    a.max = std::max(a.min + a.step, std::ceil(hi / a.step - 1e-9) * a.step);
    return a;
}

std::string svg_open(double width, double height) {
    return fmt::format(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 "
        "{0:.0f} "
        "{1:.0f}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" "
        "fill=\"white\"/>\n",
        width, height);
}

std::string y_grid(const Axis& axis, double left, double top, double w, double h, const std::string& title) {
    std::string o;
    const int steps = static_cast<int>(std::lround((axis.max - axis.min) / axis.step));
    for (int i = 0; i <= steps; ++i) {
        const double v = axis.min + axis.step * i, y = top + h - h * axis.at(v);
        o += fmt::format(
            "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/><text "
            "x=\"{:.1f}\" "
            "y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
            left, left + w, y, y, left - 6, y + 4, num(v));
    }
    o += fmt::format(
        "<text transform=\"translate({:.1f} {:.1f}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        left - 44, top + h / 2, escape(title));
    return o;
}

std::string x_ticks(const Axis& axis, double left, double top, double w, double h, const std::string& title) {
    std::string o;
    const int steps = static_cast<int>(std::lround((axis.max - axis.min) / axis.step));
    for (int i = 0; i <= steps; ++i) {
        const double v = axis.min + axis.step * i, x = left + w * axis.at(v);
        o += fmt::format(
            "<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/><text "
            "x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\">{4}</text>\n",
            x, top + h, top + h + 4, top + h + 16, num(v));
    }
    o += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n", left + w / 2,
                     top + h + 34, escape(title));
    return o;
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& items, double x, double y) {
    std::string o;
    for (std::size_t i = 0; i < items.size(); ++i) {
        const double ly = y + 18.0 * static_cast<double>(i);
        o += fmt::format(
            "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1f}\" "
            "y=\"{:.1f}\">{}</text>\n",
            x, ly, items[i].second, x + 18, ly + 10, escape(items[i].first));
    }
    return o;
}

std::string num(double v, int digits) {
    if (v == 0) return "0";
    if (std::fabs(v) >= std::pow(10.0, digits)) return fmt::format("{:.0f}", v);
    return fmt::format("{:.{}g}", v, digits);
}

}  // namespace trainsim::html
