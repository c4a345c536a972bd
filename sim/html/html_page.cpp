// The HTML pages of run, memory and sweep: the page skeleton, the headline table, and the sections in order.
#include <fmt/format.h>

#include "html_charts.hpp"
#include "html_svg.hpp"
#include "trainsim/units.hpp"

namespace trainsim::html {

namespace {
const char* const kStyle =
    "body{font-family:sans-serif;margin:16px 24px;color:#222;background:#fff}"
    "h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}"
    "p.sub{margin:0 0 12px;color:#555}svg{max-width:100%;height:auto;display:block}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 10px;text-align:left}"
    "td.v{text-align:right;font-variant-numeric:tabular-nums}footer{margin-top:24px;color:#777;font-size:"
    "12px}";
}  // namespace

std::string page(const std::string& title, const std::string& subtitle, const std::string& sections) {
    return fmt::format(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>{0}</title>\n"
        "<style>{1}</style>\n</head>\n<body>\n<h1>{0}</h1>\n<p class=\"sub\">{2}</p>\n{3}<footer>Written by "
        "trainsim (self-contained: no script, nothing loaded).</footer>\n</body>\n</html>\n",
        escape(title), kStyle, escape(subtitle), sections);
}

std::string section(const std::string& id, const std::string& heading, const std::string& body) {
    return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}</section>\n", id, escape(heading), body);
}

std::string headline_table(const Report& r, const std::vector<std::pair<std::string, std::string>>& extra) {
    std::vector<std::pair<std::string, std::string>> rows = {
        {"step time", fmt::format("{:.3f} s", r.step_time_s)},
        {"MFU", fmt::format("{:.1f}%", 100 * r.mfu)},
        {"tokens/s per GPU", fmt::format("{:.0f}", r.tokens_per_s_per_gpu)},
    };
    if (!r.memory.stages.empty())
        rows.emplace_back(
            "peak memory per GPU",
            fmt::format("{:.1f} GiB of {:.1f} GiB (stage {})", r.memory.peak().peak_bytes / kGiB,
                        r.memory.capacity_bytes / kGiB, r.memory.peak_stage));
    rows.emplace_back("pipeline bubble",
                      fmt::format("{:.3f} s (bubble ratio {:.1f}%)", r.bubble_s, 100 * r.bubble_ratio));
    rows.emplace_back("tokens/day", count_text(r.tokens_per_day));
    rows.emplace_back("GPUs", fmt::format("{} x {}", r.gpus, r.gpu_name));
    rows.insert(rows.end(), extra.begin(), extra.end());
    std::string o = "<table>\n";
    for (const auto& [name, value] : rows)
        o += fmt::format("<tr><th>{}</th><td class=\"v\">{}</td></tr>\n", escape(name), escape(value));
    return o + "</table>\n";
}

namespace {
/// The breakdown and (when kept) the timeline sections of a simulated report.
std::string simulated_sections(const Report& r, const PipelineTimeline* t) {
    std::string o = section("breakdown", "Step breakdown per pipeline stage", stage_breakdown_svg(r));
    if (t && !t->empty() && t->step_time_s() > 0)
        o += section("timeline", "Pipeline timeline of one DP replica", pipeline_gantt_svg(*t));
    return o;
}

std::string layout_text(const Layout& l) {
    return fmt::format("TP {} x PP {} x DP {}{}{}, micro-batch {}, global batch {}", l.tp, l.pp, l.dp,
                       l.cp > 1 ? fmt::format(" x CP {}", l.cp) : "",
                       l.vpp > 1 ? fmt::format(", VPP {}", l.vpp) : "", l.micro_batch, l.global_batch);
}
}  // namespace

}  // namespace trainsim::html

namespace trainsim {

std::string run_html(const Report& r, const PipelineTimeline* timeline, const std::string& title) {
    using namespace html;
    std::string body = section("headline", "Headline figures", headline_table(r, {}));
    body += simulated_sections(r, timeline);
    if (!r.memory.stages.empty())
        body +=
            section("memory", "Memory per GPU", memory_svg(r.memory, "Memory per GPU by stage and phase"));
    return page(title, fmt::format("{}: {}", r.workload_name, layout_text(r.layout)), body);
}

std::string memory_html(const MemoryReport& memory, const Report* simulated, const PipelineTimeline* timeline,
                        const std::string& title) {
    using namespace html;
    std::string body;
    if (simulated) body += section("headline", "Headline figures", headline_table(*simulated, {}));
    body += section("memory", "Memory per GPU", memory_svg(memory, "Memory per GPU by stage and phase"));
    if (simulated)
        body += simulated_sections(*simulated, timeline);
    else
        body +=
            "<p>The iteration was not simulated (past --max-events): the memory is walked over the "
            "schedule's "
            "order, without times.</p>\n";
    return page(title, memory.fits() ? "fits" : memory.oom_message(), body);
}

std::string sweep_html(const SweepResult& r, const std::string& title) {
    using namespace html;
    std::string counts =
        fmt::format("{} simulated, {} out of memory, {} rejected", r.simulated, r.out_of_memory, r.rejected);
    if (r.pruned > 0)
        counts += fmt::format(", {} pruned (none can be in the top {}{}; --exhaustive simulates them)",
                              r.pruned, r.pruned_beyond_top,
                              r.pruned_keeps_pareto_front
                                  ? ", and a simulated layout is faster and no larger: on no Pareto front"
                                  : "");
    if (r.simulated == 0) return page(title, counts, "<p>No layout was simulated: nothing to draw.</p>\n");
    const auto& best = r.entries.front();
    std::vector<std::pair<std::string, std::string>> extra = {{"best layout", canonical_string(best.layout)},
                                                              {"layouts", counts}};
    if (best.report.memory.stages
            .empty())  // spread over processes: the peak is kept, the report's memory not
        extra.emplace_back(
            "peak memory per GPU",
            fmt::format("{:.1f} GiB (stage {})", best.peak_memory_bytes / kGiB, best.peak_stage));
    std::string body =
        section("headline", "Headline figures of the best layout", headline_table(best.report, extra));
    body += section("scatter", "Step time against peak memory", sweep_scatter_svg(r));
    body += simulated_sections(best.report, nullptr);
    if (!best.report.memory.stages.empty())
        body += section("memory", "Memory per GPU of the best layout",
                        memory_svg(best.report.memory, "Memory per GPU by stage and phase"));
    return page(title, fmt::format("{} on {}: {}", r.workload_name, r.topology_name, counts), body);
}

}  // namespace trainsim
