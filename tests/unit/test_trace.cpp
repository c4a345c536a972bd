// The executor's observer interface (executor_observer.hpp) and the streamed Chrome trace (report.hpp,
// ChromeTraceWriter): the trace is valid trace-event JSON as Perfetto reads it, the observed slices add up to
// the time accounts, the memory timing subscribes to the same slices, the window and the size estimate.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/executor_observer.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/output_file.hpp"
#include "trainsim/report.hpp"
#include "trainsim/simulate.hpp"

using namespace trainsim;
using trainsim::test::small_gpt;
using trainsim::test::small_topology;

namespace {

/// 2 nodes x 8 A100, small GPT, TP 2 x PP 2 x DP 4, 4 micro-batches per pipeline (test_executor.cpp's).
Layout plain_layout() {
    return trainsim::test::tp2_pp2_dp4();
}

/// The same with interleaving (two sends in flight), overlapped DP and sequence parallelism.
Layout interleaved_layout() {
    Layout l = plain_layout();
    l.sequence_parallel = true;
    l.distributed_optimizer = true;
    l.overlap_grad_reduce = true;
    l.overlap_param_gather = true;
    l.vpp = 2;
    l.global_batch = 32;
    return l;
}

std::string trace_of(const Layout& l, const TraceSelection& sel, SimulationResult* out = nullptr) {
    std::string text;
    ChromeTraceWriter w(
        l, sel, [&](std::string_view s) { text += s; }, 4096);  // many small pieces
    SimulationResult r = simulate(small_topology(2), small_gpt(), l, "small", with_timeline({&w}));
    if (out) *out = std::move(r);
    return text;
}

/// Checks the trace-event format as Perfetto's JSON importer reads it; returns the number of X events.
std::size_t check_trace_format(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text);
    REQUIRE(j.is_object());
    REQUIRE(j.contains("traceEvents"));
    REQUIRE(j["traceEvents"].is_array());
    struct Span {
        double ts, end;
    };
    std::map<std::pair<int, int>, std::vector<Span>> by_thread;
    std::size_t slices = 0;
    for (const auto& e : j["traceEvents"]) {
        REQUIRE(e.is_object());
        for (const char* key : {"ph", "name", "ts", "pid", "tid"})
            REQUIRE_MESSAGE(e.contains(key), "event without ", key, ": ", e.dump());
        REQUIRE(e["ph"].is_string());
        REQUIRE(e["pid"].is_number_integer());
        REQUIRE(e["tid"].is_number_integer());
        REQUIRE(e["ts"].is_number());
        CHECK(e["ts"].get<double>() >= 0);
        const std::string ph = e["ph"];
        CHECK((ph == "X" || ph == "M"));
        if (ph != "X") continue;
        REQUIRE(e.contains("dur"));
        REQUIRE(e["dur"].is_number());
        CHECK(e["dur"].get<double>() >= 0);
        const double ts = e["ts"].get<double>();
        by_thread[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + e["dur"].get<double>()});
        ++slices;
    }
    // Per (pid, tid) the slices nest: sorted by start (the longer first), each one either starts after the
    // enclosing ones end or ends within the innermost that is still open. Times are whole nanoseconds written
    // with three decimals of a microsecond: compared in integer nanoseconds.
    auto ns = [](double us) { return std::llround(us * 1000.0); };
    for (auto& entry : by_thread) {
        // Not a structured binding: CAPTURE's lambda cannot capture one under clang 14 (the sanitizer build).
        const auto& thread = entry.first;
        auto& spans = entry.second;
        CAPTURE(thread.first);
        CAPTURE(thread.second);
        std::sort(spans.begin(), spans.end(),
                  [](const Span& a, const Span& b) { return a.ts != b.ts ? a.ts < b.ts : a.end > b.end; });
        std::vector<long long> open_ends;
        for (const Span& s : spans) {
            while (!open_ends.empty() && open_ends.back() <= ns(s.ts))
                open_ends.pop_back();
            if (!open_ends.empty()) CHECK(ns(s.end) <= open_ends.back());
            open_ends.push_back(ns(s.end));
        }
    }
    return slices;
}

/// Sum of the durations (s) of the recorded slices of `rank` on `track` named `name` (any name: empty).
double sum_s(const std::vector<RecordedSlice>& slices, int rank, Track track, const std::string& name = {}) {
    double s = 0;
    for (const RecordedSlice& x : slices)
        if (x.rank == rank && x.track == track && (name.empty() || x.name == name))
            s += (x.end - x.start).to_seconds();
    return s;
}

}  // namespace

TEST_CASE("trace: a small run's trace is valid trace-event JSON with properly nested slices per thread") {
    for (const Layout& l : {plain_layout(), interleaved_layout()}) {
        CAPTURE(l.vpp);
        const std::string text = trace_of(l, TraceSelection{TraceRanks::all});
        CHECK(text.back() == '\n');
        const std::size_t slices = check_trace_format(text);
        CHECK(slices > 100);
        // Every GPU has its process, every track its name.
        const nlohmann::json j = nlohmann::json::parse(text);
        int processes = 0, waits = 0;
        for (const auto& e : j["traceEvents"]) {
            if (e["name"] == "process_name") ++processes;
            if (e["ph"] == "X" && e["tid"] == static_cast<int>(Track::waits)) ++waits;
        }
        CHECK(processes == l.gpus());
        CHECK(waits > 0);
    }
}

TEST_CASE("trace: the observed slices add up to every rank's time accounts") {
    for (const Layout& l : {plain_layout(), interleaved_layout()}) {
        CAPTURE(l.vpp);
        SliceRecorder rec;
        const SimulationResult r =
            simulate(small_topology(2), small_gpt(), l, "small", with_timeline({&rec}));
        const double tol = 1e-9 * r.execution.step_time_s;
        for (int rank = 0; rank < l.gpus(); ++rank) {
            CAPTURE(rank);
            const RankTimes& t = r.execution.ranks[static_cast<std::size_t>(rank)];
            CHECK(std::abs(sum_s(rec.slices, rank, Track::compute) - t.compute_s) <= tol);
            CHECK(std::abs(sum_s(rec.slices, rank, Track::waits, "bubble") - t.bubble_s) <= tol);
            CHECK(std::abs(sum_s(rec.slices, rank, Track::waits, "TP exposed") +
                           sum_s(rec.slices, rank, Track::waits, "CP exposed") - t.tp_exposed_s) <= tol);
            CHECK(std::abs(sum_s(rec.slices, rank, Track::waits, "PP exposed") - t.pp_exposed_s) <= tol);
            CHECK(std::abs(sum_s(rec.slices, rank, Track::waits, "DP exposed") - t.dp_exposed_s) <= tol);
            CHECK(std::abs(sum_s(rec.slices, rank, Track::waits, "idle") - t.idle_s) <= tol);
            // compute + waits cover the step
            CHECK(std::abs(sum_s(rec.slices, rank, Track::compute) + sum_s(rec.slices, rank, Track::waits) -
                           r.execution.step_time_s) <= tol);
        }
    }
}

TEST_CASE("trace: the memory timing subscribes to the stage leaders' compute slices") {
    const Layout l = plain_layout();
    SliceRecorder rec;
    ComputeEndTimes times(l);
    SimulationOptions o;
    o.observers = {&rec, &times};
    (void)simulate(small_topology(2), small_gpt(), l, "small", o);
    for (int st = 0; st < l.pp; ++st) {
        CAPTURE(st);
        const int leader = rank_of(l, RankCoord{0, 0, st, 0});
        std::vector<double> ends;
        for (const RecordedSlice& s : rec.slices)
            if (s.rank == leader && s.track == Track::compute) ends.push_back(s.end.to_seconds());
        CHECK(!ends.empty());
        CHECK(times.seconds()[static_cast<std::size_t>(st)] == ends);
    }
}

TEST_CASE("trace: the window keeps the slices that overlap it; the selection its GPUs") {
    SimulationResult full;
    const std::string all = trace_of(plain_layout(), TraceSelection{TraceRanks::all}, &full);
    const double step = full.execution.step_time_s;
    TraceSelection sel{TraceRanks::all, Time::seconds(0.4 * step), Time::seconds(0.6 * step)};
    const std::string part = trace_of(plain_layout(), sel);
    const std::size_t n_all = check_trace_format(all), n_part = check_trace_format(part);
    CHECK(n_part > 0);
    CHECK(n_part < n_all / 2);
    const nlohmann::json part_json =
        nlohmann::json::parse(part);  // kept alive for the loop (not a temporary)
    for (const auto& e : part_json["traceEvents"]) {
        if (e["ph"] != "X") continue;
        const double ts = e["ts"], end = ts + e["dur"].get<double>();
        CHECK(end >= 0.4 * step * 1e6 - 1e-3);
        CHECK(ts <= 0.6 * step * 1e6 + 1e-3);
    }
    int processes = 0;
    const nlohmann::json stages =
        nlohmann::json::parse(trace_of(plain_layout(), TraceSelection{TraceRanks::stages}));
    for (const auto& e : stages["traceEvents"])
        if (e["name"] == "process_name") ++processes;
    CHECK(processes == plain_layout().pp);
}

TEST_CASE("trace: the size estimate is within a factor of two of the written trace") {
    const Layout l = interleaved_layout();
    for (TraceRanks ranks : {TraceRanks::all, TraceRanks::first_replica, TraceRanks::stages}) {
        const std::string text = trace_of(l, TraceSelection{ranks});
        const TraceEstimate e = estimate_trace(build_program(small_gpt(), l), l, ranks);
        CAPTURE(text.size());
        CAPTURE(e.bytes);
        CHECK(e.bytes > 0.5 * static_cast<double>(text.size()));
        CHECK(e.bytes < 2.0 * static_cast<double>(text.size()));
    }
}

TEST_CASE("OutputFile: streamed pieces land whole at commit; without commit the target is untouched") {
    namespace fs = std::filesystem;
    std::string templ = (fs::temp_directory_path() / "trainsim-trace-XXXXXX").string();
    const fs::path dir = ::mkdtemp(templ.data());
    const std::string target = (dir / "t.json").string();
    auto read = [&] {
        std::ifstream in(target);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    };
    auto entries = [&] { return std::distance(fs::directory_iterator(dir), fs::directory_iterator{}); };
    {
        OutputFile out(target);
        out.write("{\"a\":");
        out.write("1}");
        CHECK(entries() == 1);  // the temporary file only
        CHECK(!fs::exists(target));
        out.commit();
        CHECK(out.bytes() == 7);
    }
    CHECK(read() == "{\"a\":1}");
    {
        OutputFile out(target);
        out.write("half");
    }  // destroyed without commit: an error on the way
    CHECK(read() == "{\"a\":1}");
    CHECK(entries() == 1);
    fs::remove_all(dir);
}

TEST_CASE("trace: a slice that overlaps the previous one of its track partially goes to a second lane") {
    Layout l = plain_layout();
    std::string text;
    ChromeTraceWriter w(l, TraceSelection{TraceRanks::all}, [&](std::string_view s) { text += s; });
    auto us = [](double v) { return Time::seconds(v * 1e-6); };
    // Two sends in flight on GPU 3: [1, 5] and [2, 7] partially overlap; [6, 8] fits after the first.
    w.slice_end(TimelineSlice{3, Track::p2p_sends, "send_act mb0", us(1), us(5)});
    w.slice_end(TimelineSlice{3, Track::p2p_sends, "send_grad mb0", us(2), us(7)});
    w.slice_end(TimelineSlice{3, Track::p2p_sends, "send_act mb1", us(6), us(8)});
    w.finished(us(8));
    check_trace_format(text);
    const nlohmann::json j = nlohmann::json::parse(text);
    std::map<std::string, int> tid;
    bool lane_named = false;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] == "X") tid[e["name"]] = e["tid"];
        if (e["name"] == "thread_name" && e["args"]["name"] == "P2P sends (2)") lane_named = e["tid"] == 8;
    }
    CHECK(tid["send_act mb0"] == 3);
    CHECK(tid["send_grad mb0"] == 3 + kTracks);
    CHECK(tid["send_act mb1"] == 3);
    CHECK(lane_named);
}
