// The Chrome trace writer (report.hpp, ChromeTraceWriter): trace-event JSON streamed as the executor reports
// slices. The format: https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU (the
// Trace Event Format: "X" complete events with ts and dur in microseconds, "M" metadata events), as
// Perfetto's JSON importer reads it.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "trainsim/report.hpp"

namespace trainsim {

namespace {

/// Appends `s` as the inside of a JSON string.
void append_escaped(std::string& out, std::string_view s) {
    if (std::none_of(s.begin(), s.end(),
                     [](char c) { return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20; })) {
        out.append(s);
        return;
    }
    for (const char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20)
                    fmt::format_to(std::back_inserter(out), "\\u{:04x}", static_cast<unsigned>(c));
                else
                    out += c;
        }
    }
}

/// Time floored to the nanosecond.
std::int64_t floor_ns(Time t) {
    const std::int64_t ps = t.picoseconds();
    return ps >= 0 ? ps / 1000 : -((-ps + 999) / 1000);
}

void append_int(std::string& out, std::int64_t v) {
    char digits[24];
    const auto r = std::to_chars(digits, digits + sizeof digits, v);
    out.append(digits, r.ptr);
}

/// Appends nanoseconds (>= 0) as microseconds with three decimals ("12.345").
void append_us(std::string& out, std::int64_t ns) {
    append_int(out, ns / 1000);
    const auto frac = static_cast<int>(ns % 1000);
    const char d[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                       static_cast<char>('0' + frac % 10)};
    out.append(d, 4);
}

/// The bytes of a slice's event beside its name: {"ph":"X","name":"","pid":N,"tid":T,"ts":...,"dur":...},
/// with a 4-digit pid, a 9-digit ts and a 6-digit dur (estimate_trace).
constexpr double kEventFixedBytes = 76;

}  // namespace

bool trace_holds(TraceRanks ranks, const Layout& l, int rank) {
    const RankCoord c = coord_of(l, rank);
    switch (ranks) {
        case TraceRanks::all:
            return true;
        case TraceRanks::first_replica:
            return c.dp == 0;
        case TraceRanks::stages:
            return c.dp == 0 && c.tp == 0 && c.cp == 0;
    }
    return false;
}

ChromeTraceWriter::ChromeTraceWriter(const Layout& l, const TraceSelection& selection, Sink sink,
                                     std::size_t buffer_bytes)
    : layout_(l),
      sel_(selection),
      sink_(std::move(sink)),
      buffer_bytes_(std::max<std::size_t>(buffer_bytes, 1024)),
      slot_(static_cast<std::size_t>(l.gpus()), -1) {
    buf_.reserve(buffer_bytes_ + 4096);
    buf_ += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
}

bool ChromeTraceWriter::observes(int rank) const {
    return trace_holds(sel_.ranks, layout_, rank);
}

void ChromeTraceWriter::event_prefix() {
    if (!first_) buf_ += ",\n";
    first_ = false;
}

void ChromeTraceWriter::thread_name(int rank, int tid, std::string_view name) {
    event_prefix();
    fmt::format_to(
        std::back_inserter(buf_),
        "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"ts\":0,\"args\":{{\"name\":\"", rank,
        tid);
    append_escaped(buf_, name);
    buf_ += "\"}}";
}

void ChromeTraceWriter::open_rank(int rank, RankState& st) {
    st.opened = true;
    const RankCoord c = coord_of(layout_, rank);
    event_prefix();
    fmt::format_to(
        std::back_inserter(buf_),
        "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"tid\":0,\"ts\":0,\"args\":{{\"name\":"
        "\"GPU {0} (tp {1} cp {2} dp {3} pp {4})\"}}}}",
        rank, c.tp, c.cp, c.dp, c.pp);
    for (int t = 0; t < kTracks; ++t)
        thread_name(rank, t, to_string(static_cast<Track>(t)));
}

void ChromeTraceWriter::slice_end(const TimelineSlice& s) {
    if (s.end < sel_.window_start || s.start > sel_.window_end) return;
    int& slot = slot_[static_cast<std::size_t>(s.rank)];
    if (slot < 0) {
        slot = static_cast<int>(states_.size());
        states_.emplace_back();
    }
    RankState& st = states_[static_cast<std::size_t>(slot)];
    if (!st.opened) open_rank(s.rank, st);
    const std::int64_t ts = std::max<std::int64_t>(0, floor_ns(s.start)), end = std::max(ts, floor_ns(s.end));
    // The first lane of the track where the slice starts after everything written there.
    const int track = static_cast<int>(s.track);
    auto& lanes = st.lane_end_ns[track];
    std::size_t lane = 0;
    while (lane < lanes.size() && lanes[lane] > ts)
        ++lane;
    if (lane == lanes.size()) {
        lanes.push_back(0);
        if (lane > 0)
            thread_name(s.rank, track + kTracks * static_cast<int>(lane),
                        fmt::format("{} ({})", to_string(s.track), lane + 1));
    }
    lanes[lane] = end;
    event_prefix();
    buf_ += "{\"ph\":\"X\",\"name\":\"";
    append_escaped(buf_, s.name);
    buf_ += "\",\"pid\":";
    append_int(buf_, s.rank);
    buf_ += ",\"tid\":";
    append_int(buf_, track + kTracks * static_cast<int>(lane));
    buf_ += ",\"ts\":";
    append_us(buf_, ts);
    buf_ += ",\"dur\":";
    append_us(buf_, end - ts);
    buf_ += '}';
    ++slices_;
    if (buf_.size() >= buffer_bytes_) flush();
}

void ChromeTraceWriter::finished(Time) {
    buf_ += "\n]}\n";
    flush();
}

void ChromeTraceWriter::flush() {
    if (buf_.empty()) return;
    sink_(buf_);
    buf_.clear();
}

TraceEstimate estimate_trace(const Program& p, const Layout& l, TraceRanks ranks) {
    // Per stage: the events of one GPU and their bytes.
    std::vector<double> stage_events(static_cast<std::size_t>(l.pp), 0.0),
        stage_bytes(static_cast<std::size_t>(l.pp), 0.0);
    for (std::size_t st = 0; st < p.stages.size() && st < stage_events.size(); ++st)
        for (const Op& op : p.stages[st].ops) {
            double name = 0;
            switch (op.kind) {
                case OpKind::compute:
                    name = static_cast<double>(p.segments[static_cast<std::size_t>(op.segment)].name.size());
                    break;
                case OpKind::tp_launch:
                case OpKind::dp_launch:
                    name = 14;
                    break;  // "tp all_reduce", "dp reduce_scatter"
                case OpKind::send:
                    name = 14;
                    break;  // "send_act mb12"
                case OpKind::tp_wait:
                case OpKind::dp_wait:
                case OpKind::recv:
                    name = 10;
                    break;  // "TP exposed", "bubble"
            }
            stage_events[st] += 1;
            stage_bytes[st] += name + kEventFixedBytes;
        }
    TraceEstimate e;
    for (int r = 0; r < l.gpus(); ++r) {
        if (!trace_holds(ranks, l, r)) continue;
        const auto st = static_cast<std::size_t>(coord_of(l, r).pp);
        ++e.gpus;
        e.events += static_cast<std::uint64_t>(stage_events[st]);
        e.bytes += stage_bytes[st];
    }
    return e;
}

}  // namespace trainsim
