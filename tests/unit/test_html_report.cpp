// The HTML pages (include/trainsim/html_report.hpp): the timeline's classification and rasterization, the
// Pareto front, and pages that are well formed, hold their sections, load nothing and are deterministic.
#include <doctest/doctest.h>

#include <regex>
#include <string>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/html_report.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"

using namespace trainsim;
using trainsim::test::contains;

namespace {

/// The tags of `html` are balanced: every element opened is closed in order, void elements (meta, br) and
/// self-closed ones (<rect .../>) excepted; the doctype and comments skipped. Returns "" or the first error.
std::string tag_balance_error(const std::string& html) {
    static const std::regex tag(R"(<(/?)([a-zA-Z][a-zA-Z0-9]*)[^>]*?(/?)>)");
    std::vector<std::string> open;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), tag); it != std::sregex_iterator(); ++it) {
        const auto& m = *it;
        const std::string name = m[2];
        if (m[3] == "/" || name == "meta" || name == "br") continue;
        if (m[1] == "/") {
            if (open.empty() || open.back() != name)
                return "</" + name + "> closes " +
                       (open.empty() ? std::string("nothing") : "<" + open.back() + ">");
            open.pop_back();
        } else {
            open.push_back(name);
        }
    }
    return open.empty() ? std::string() : "<" + open.back() + "> not closed";
}

/// What a self-contained page must not hold: scripts, external styles, fonts, images or frames, and any
/// http(s) address but the SVG namespace name (an identifier, never fetched).
void check_self_contained(const std::string& html) {
    for (const char* bad : {"<script", "<link", "<img", "<iframe", "src=", "href=", "url(", "@import"})
        CHECK_MESSAGE(!contains(html, bad), bad);
    std::string rest = html;
    const std::string ns = "http://www.w3.org/2000/svg";
    for (auto p = rest.find(ns); p != std::string::npos; p = rest.find(ns))
        rest.erase(p, ns.size());
    CHECK_FALSE(contains(rest, "http://"));
    CHECK_FALSE(contains(rest, "https://"));
}

Layout pipeline_layout() {
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.micro_batch = 1;
    l.global_batch = 16;
    return l;
}

}  // namespace

TEST_CASE("html: slices are classified by track and by the account their name gives") {
    CHECK(classify_slice(Track::compute, "layer 3 fwd") == TimelineKind::compute);
    CHECK(classify_slice(Track::tp_stream, "tp all_reduce") == TimelineKind::tp);
    CHECK(classify_slice(Track::tp_stream, "embedding all_reduce") == TimelineKind::tp);
    CHECK(classify_slice(Track::tp_stream, "cp all_gather") == TimelineKind::cp);
    CHECK(classify_slice(Track::tp_stream, "ep all_to_all") == TimelineKind::ep);
    CHECK(classify_slice(Track::dp_stream, "dp reduce_scatter") == TimelineKind::dp);
    CHECK(classify_slice(Track::p2p_sends, "send_act mb3") == TimelineKind::pp);
    CHECK(classify_slice(Track::waits, "bubble") == TimelineKind::bubble);
    CHECK(classify_slice(Track::waits, "TP exposed") == TimelineKind::tp);
    CHECK(classify_slice(Track::waits, "CP exposed") == TimelineKind::cp);
    CHECK(classify_slice(Track::waits, "EP exposed") == TimelineKind::ep);
    CHECK(classify_slice(Track::waits, "PP exposed") == TimelineKind::pp);
    CHECK(classify_slice(Track::waits, "DP exposed") == TimelineKind::dp);
    CHECK(classify_slice(Track::waits, "idle") == TimelineKind::idle);
    CHECK(std::string(html_kind_name(TimelineKind::bubble)) == "bubble");
}

TEST_CASE("html: a lane is drawn per pixel column by the kind that ran longest in it") {
    using K = TimelineKind;
    // 10 columns of 1 s: compute 0-4.5, a short TP wait 4.5-4.7, bubble 4.7-6, nothing 6-8, DP 8-8.1.
    const std::vector<TimelineSpan> spans = {
        {0, 4.5, K::compute}, {4.5, 4.7, K::tp}, {4.7, 6, K::bubble}, {8, 8.1, K::dp}};
    const auto runs = rasterize_lane(spans, 10, 10);
    REQUIRE(runs.size() == 3);
    CHECK(runs[0].first == 0);
    CHECK(runs[0].count == 5);  // column 4: compute 0.5 s beats bubble 0.3 s and TP 0.2 s
    CHECK(runs[0].kind == K::compute);
    CHECK(runs[1].first == 5);
    CHECK(runs[1].count == 1);
    CHECK(runs[1].kind == K::bubble);  // 6.0 ends on column 6's edge: column 6 stays empty
    CHECK(runs[2].first == 8);
    CHECK(runs[2].count == 1);
    CHECK(runs[2].kind == K::dp);  // 0.1 s of DP in an otherwise empty column still shows
    // Spans past the end are clipped; nothing at all gives no run.
    CHECK(rasterize_lane({{9.5, 20, K::pp}}, 10, 10).size() == 1);
    CHECK(rasterize_lane({}, 10, 10).empty());
    CHECK_THROWS_AS(rasterize_lane(spans, 0, 10), InternalError);
}

TEST_CASE("html: the run page is well formed, complete, self-contained and deterministic") {
    const Layout l = pipeline_layout();
    PipelineTimeline t(l);
    CHECK(t.observes(0));        // tp 0, dp 0, stage 0
    CHECK_FALSE(t.observes(1));  // tp 1
    const SimulationResult res =
        simulate(test::small_topology(2), test::small_gpt(), l, "small", with_timeline({&t}));
    REQUIRE(t.stages() == 2);
    CHECK(t.step_time_s() == doctest::Approx(res.report.step_time_s));
    CHECK_FALSE(t.spans(1, TimelineLane::main_stream).empty());
    CHECK_FALSE(t.spans(0, TimelineLane::p2p_sends).empty());
    const std::string html = run_html(res.report, &t, "small <run> & test");
    CHECK(html.rfind("<!DOCTYPE html>\n<html lang=\"en\">", 0) == 0);
    CHECK(tag_balance_error(html).empty());
    INFO(tag_balance_error(html));
    for (const char* id : {"headline", "breakdown", "timeline", "memory"})
        CHECK_MESSAGE(contains(html, std::string("<section id=\"") + id + "\">"), id);
    CHECK(contains(html, "<title>small &lt;run&gt; &amp; test</title>"));
    for (const char* s : {"step time", "MFU", "tokens/s per GPU", "peak memory per GPU", "pipeline stage",
                          "seconds per iteration (s)", "simulated time since the iteration began (s)", "GiB"})
        CHECK_MESSAGE(contains(html, s), s);
    check_self_contained(html);
    CHECK(run_html(res.report, &t, "small <run> & test") == html);
    // Without a timeline the section is left out and the page stays well formed.
    const std::string bare = run_html(res.report, nullptr, "t");
    CHECK_FALSE(contains(bare, "<section id=\"timeline\">"));
    CHECK(tag_balance_error(bare).empty());
}

TEST_CASE("html: the memory page, simulated or walked without times") {
    const Layout l = pipeline_layout();
    PipelineTimeline t(l);
    const SimulationResult res =
        simulate(test::small_topology(2), test::small_gpt(), l, "small", with_timeline({&t}));
    const std::string html = memory_html(res.report.memory, &res.report, &t, "memory");
    CHECK(tag_balance_error(html).empty());
    for (const char* id : {"headline", "memory", "breakdown", "timeline"})
        CHECK_MESSAGE(contains(html, std::string("<section id=\"") + id + "\">"), id);
    check_self_contained(html);
    const std::string walked = memory_html(res.report.memory, nullptr, nullptr, "memory");
    CHECK(tag_balance_error(walked).empty());
    CHECK_FALSE(contains(walked, "<section id=\"breakdown\">"));
    CHECK(contains(walked, "not simulated"));
}

TEST_CASE("html: the sweep page draws every simulated layout and its Pareto front") {
    SweepOptions opt;
    opt.jobs = 2;
    Layout base;
    base.global_batch = 16;
    SweepGrid g;
    for (const char* v : {"micro_batch=1,2", "recompute=none,full", "sequence_parallel=false",
                          "distributed_optimizer=false", "tp=1,2", "pp=1"})
        restrict_sweep_grid(g, v, "--vary");
    const SweepResult r =
        run_sweep(test::small_topology(1), test::small_gpt(4, 256, 16, 128, 1024), base, g, "tiny", opt);
    REQUIRE(r.simulated >= 4);
    const std::string html = sweep_html(r, "tiny sweep");
    CHECK(tag_balance_error(html).empty());
    for (const char* id : {"headline", "scatter", "breakdown", "memory"})
        CHECK_MESSAGE(contains(html, std::string("<section id=\"") + id + "\">"), id);
    CHECK(contains(html, "step time (s)"));
    CHECK(contains(html, "peak memory per GPU (GiB)"));
    CHECK(contains(html, "Pareto front"));
    check_self_contained(html);
    // One point per simulated layout (its <title> names the layout), the best ringed.
    std::size_t points = 0;
    for (auto p = html.find("fill=\"#4e79a7\" fill-opacity"); p != std::string::npos;
         p = html.find("fill=\"#4e79a7\" fill-opacity", p + 1))
        ++points;
    CHECK(points == r.simulated);
    const auto best = html.find("best (fastest): ");
    REQUIRE(best != std::string::npos);
    CHECK(contains(html.substr(best, html.find('\n', best) - best),
                   canonical_string(r.entries.front().layout)));
}

TEST_CASE("html: the Pareto front keeps exactly the layouts no other beats in both step time and memory") {
    SweepResult r;
    const auto add = [&](double step_s, double peak) {
        SweepEntry e;
        e.status = SweepStatus::simulated;
        e.report.step_time_s = step_s;
        e.peak_memory_bytes = peak;
        r.entries.push_back(e);
        ++r.simulated;
    };
    add(1.0, 50);  // 0: fastest, on the front
    add(1.0, 60);  // 1: as fast, larger: dominated by 0
    add(1.5, 40);  // 2: slower, smaller: on the front
    add(1.6, 40);  // 3: slower, as large as 2: dominated
    add(2.0, 10);  // 4: on the front
    add(2.0, 10);  // 5: a tie with 4: kept
    add(3.0, 45);  // 6: dominated by 2
    SweepEntry oom;
    oom.status = SweepStatus::out_of_memory;
    oom.peak_memory_bytes = 1;
    r.entries.push_back(oom);  // 7: not simulated, never on the front
    CHECK(sweep_pareto_front(r) == std::vector<std::size_t>{0, 2, 4, 5});
}
