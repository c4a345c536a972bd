// Private helpers of the HTML pages (sim/html): escaping, round axis steps, the colour of each TimelineKind,
// and the pieces every chart draws (title, y axis with grid, legend).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trainsim/html_report.hpp"

namespace trainsim::html {

/// Text for an HTML or SVG element or attribute: & < > " escaped.
std::string escape(const std::string& s);

/// The fill colour of a kind ("#4e79a7"...), shared by the breakdown and the timeline.
const char* kind_colour(TimelineKind k);

/// A round axis: a step of 1, 2 or 5 times a power of ten giving about `ticks` steps up to `max_value`
/// (> 0), and the axis maximum (a whole number of steps >= max_value).
struct Axis {
    double step = 1, max = 1, min = 0;
    /// The fraction of the axis at `v` (0 at min, 1 at max).
    double at(double v) const { return (v - min) / (max - min); }
};
Axis round_axis(double max_value, int ticks = 6);
/// The same over [lo, hi] (lo <= hi, finite): min a whole number of steps <= lo, max one >= hi, at least
/// one step apart.
Axis round_range(double lo, double hi, int ticks = 6);

/// The opening <svg> tag (width x height pixels, viewBox the same, sans-serif 11 px) and a white background.
std::string svg_open(double width, double height);

/// A horizontal grid with labels at each step of `axis` for a plot [left, left + w] x [top, top + h], and
/// the y axis title rotated beside it.
std::string y_grid(const Axis& axis, double left, double top, double w, double h, const std::string& title);

/// Tick labels and a title under a plot's x axis, values axis.min .. axis.max at each step.
std::string x_ticks(const Axis& axis, double left, double top, double w, double h, const std::string& title);

/// A legend of coloured squares, one row each, from (x, y): (label, colour) pairs.
std::string legend(const std::vector<std::pair<std::string, std::string>>& items, double x, double y);

/// A number formatted with `digits` significant digits in plain notation ("0.25", "1200").
std::string num(double v, int digits = 3);

}  // namespace trainsim::html
