// Private: the charts and tables of the HTML pages (sim/html), each a self-contained fragment.
#pragma once

#include <string>

#include "trainsim/html_report.hpp"

namespace trainsim::html {

/// <svg>: the stacked bar of each stage's accounts (html_report.hpp, "breakdown").
std::string stage_breakdown_svg(const Report& r);

/// <svg>: the Gantt of one GPU per stage (html_report.hpp, "timeline"). `t.step_time_s()` > 0.
std::string pipeline_gantt_svg(const PipelineTimeline& t);

/// <svg>: step time against peak memory of every simulated layout, the Pareto front (html_report.hpp,
/// "scatter"). Empty when nothing was simulated.
std::string sweep_scatter_svg(const SweepResult& r);

/// <table>: the headline figures of a report (html_report.hpp, "headline"), with extra (name, value) rows
/// after them.
std::string headline_table(const Report& r, const std::vector<std::pair<std::string, std::string>>& extra);

/// A page: <!DOCTYPE html>, head with `title` and the inline style, <h1>, the body `sections`, the footer.
std::string page(const std::string& title, const std::string& subtitle, const std::string& sections);

/// <section id="`id`"><h2>`heading`</h2>`body`</section>.
std::string section(const std::string& id, const std::string& heading, const std::string& body);

}  // namespace trainsim::html
