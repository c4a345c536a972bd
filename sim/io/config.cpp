#include "trainsim/config.hpp"

#include <cctype>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "embedded_defaults.hpp"
#include "layout_fields.hpp"
#include "schema_reader.hpp"
#include "strict_json.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

using detail::StrictObject;
using nlohmann::json;

namespace {
/// Refuses JSON `text` nested deeper than kMaxJsonDepth, by a scan outside strings (before parsing: a
/// 100,000-deep value would overflow the stack wherever it is later printed or copied recursively).
void check_json_depth(std::string_view text, const std::string& name) {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > kMaxJsonDepth)
                throw InputError(
                    fmt::format("{}: arrays and objects nested deeper than {} levels (at byte {})", name,
                                kMaxJsonDepth, i));
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
}
}  // namespace

namespace {

/// The keys of each open object, for a key given twice in one object: JSON parsers keep one of the values
/// silently (nlohmann: the last), so an edit that adds a field already set further up would be lost without a
/// word. A SAX pass that builds nothing (nlohmann's callback parser rescans the enclosing array at every
/// object's end: quadratic on an array of objects); a set per open object (an object of a million keys stays
/// n log n), and the path to it for the message.
class DuplicateKeys final : public json::json_sax_t {
  public:
    explicit DuplicateKeys(const std::string& name) : name_(name) {}
    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(json::number_integer_t) override { return value(); }
    bool number_unsigned(json::number_unsigned_t) override { return value(); }
    bool number_float(json::number_float_t, const json::string_t&) override { return value(); }
    bool string(json::string_t&) override { return value(); }
    bool binary(json::binary_t&) override { return value(); }
    bool start_object(std::size_t) override {
        open();
        keys_.emplace_back();
        return true;
    }
    bool key(json::string_t& k) override {
        last_key_ = k;
        if (!keys_.back().insert(k).second) {
            std::string where;
            for (std::size_t i = 1; i < path_.size(); ++i)
                where += path_[i] == "[]" ? "[]" : (where.empty() ? "" : ".") + path_[i];
            throw InputError(fmt::format(
                "{}: key \"{}\" appears twice in {} (JSON keeps one value silently; "
                "remove one)",
                name_, clip_for_message(k), where.empty() ? "the top-level object" : "object " + where));
        }
        return true;
    }
    bool end_object() override {
        keys_.pop_back();
        return close();
    }
    bool start_array(std::size_t) override {
        open();
        return true;
    }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;  // json::parse below reports it
    }

  private:
    bool value() {
        last_key_.clear();
        return true;
    }
    /// The key of the value that opens in its parent ("[]" in an array or at the top).
    void open() {
        path_.push_back(keys_.empty() || last_key_.empty() ? "[]" : last_key_);
        last_key_.clear();
    }
    bool close() {
        path_.pop_back();
        last_key_.clear();
        return true;
    }
    const std::string& name_;
    std::vector<std::set<std::string>> keys_;
    std::vector<std::string> path_;
    std::string last_key_;
};

}  // namespace

json parse_json_text(std::string_view text, const std::string& name) {
    // A NUL byte ended nlohmann's input: `{...}` followed by a NUL and anything (garbage, a second document)
    // was read as the document alone, exit 0 (2026-11-29). JSON text holds none (a string's U+0000 is written
    // \u0000); UTF-16 and UTF-32 text holds one in every ASCII character, and is named so.
    const auto byte = [&](std::size_t i) {
        return i < text.size() ? static_cast<unsigned char>(text[i]) : 0;
    };
    if ((byte(0) == 0xff && byte(1) == 0xfe) || (byte(0) == 0xfe && byte(1) == 0xff))
        throw InputError(
            fmt::format("{}: not valid JSON: it starts with a UTF-16 byte-order mark ({:02X} {:02X}); "
                        "save it as UTF-8",
                        name, byte(0), byte(1)));
    if (const std::size_t nul = text.find('\0'); nul != std::string_view::npos)
        throw InputError(
            fmt::format("{}: not valid JSON: a NUL byte at offset {} (UTF-16 or UTF-32 text, or "
                        "binary data? JSON is UTF-8 text)",
                        name, nul));
    check_json_depth(text, name);
    DuplicateKeys duplicates(name);
    json::sax_parse(text, &duplicates);
    try {
        return json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
        throw InputError(fmt::format("{}: not valid JSON ({})", name, clip_for_message(e.what(), 200)));
    }
}

namespace {

/// An input that is not a regular file (a pipe, a FIFO, a device), read without blocking: to its end, within
/// kMaxInputFileBytes, for at most limits::kMaxInputStreamSeconds (a pipe never closed, a FIFO that a writer
/// holds open without writing, a terminal). A FIFO with no writer reads as empty.
std::string read_input_stream(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw InputError(fmt::format("{}: cannot open the file ({})", path, std::strerror(errno)));
    struct Close {
        int fd;
        ~Close() { ::close(fd); }
    } close_fd{fd};
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(limits::kMaxInputStreamSeconds);
    std::string text;
    char buf[65536];
    while (true) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n > 0) {
            text.append(buf, static_cast<std::size_t>(n));
            if (text.size() > kMaxInputFileBytes)
                throw InputError(fmt::format("{}: larger than the {} bytes an input file may have", path,
                                             kMaxInputFileBytes));
            continue;
        }
        if (n == 0) return text;  // the end of the input
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            throw InputError(fmt::format("{}: reading failed ({})", path, std::strerror(errno)));
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
                .count();
        if (left <= 0)
            throw InputError(
                fmt::format("{}: not a regular file, and its input did not end within {} s (a pipe "
                            "or FIFO left open?); give a file",
                            path, limits::kMaxInputStreamSeconds));
        pollfd p{fd, POLLIN, 0};
        (void)::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    }
}

}  // namespace

std::string read_input_file(const std::string& path, const char* kind) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw InputError(fmt::format("{}: cannot open the file ({})", path, std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory, not a {}", path, kind));
    if (!S_ISREG(st.st_mode)) return read_input_stream(path);
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxInputFileBytes)
        throw InputError(fmt::format("{}: {} bytes is larger than the {} bytes an input file may have", path,
                                     st.st_size, kMaxInputFileBytes));
    errno = 0;
    std::ifstream in(path, std::ios::binary);
    if (!in)  // the reason (Permission denied) where open() gave one
        throw InputError(fmt::format("{}: cannot open the file{}", path,
                                     errno != 0 ? fmt::format(" ({})", std::strerror(errno)) : ""));
    // Read at most one byte past the limit: a device or pipe (/dev/zero) is refused rather than read forever.
    std::string text;
    char buf[65536];
    while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, static_cast<std::size_t>(in.gcount()));
        if (text.size() > kMaxInputFileBytes)
            throw InputError(
                fmt::format("{}: larger than the {} bytes an input file may have", path, kMaxInputFileBytes));
    }
    if (in.bad()) throw InputError(fmt::format("{}: reading failed", path));
    return text;
}

json read_json_file(const std::string& path) {
    return parse_json_text(read_input_file(path, "JSON file"), path);
}

TopologySpec parse_topology(const json& j, const std::string& file) {
    StrictObject o(j, file, "topology");
    TopologySpec t;
    detail::read_fields(o, topology_fields(), t);
    // NVLink domain spanning hosts (GB200 NVL72): applied below, once the host figures are read.
    const int domain_gpus = t.scale_up_domain_gpus > 0 ? t.scale_up_domain_gpus : t.gpus_per_node;
    t.scale_up_domain_gpus = 0;
    o.finish();
    try {  // the counts together (GPU count, limits) here, so the error names this file
        apply_scale_up_domain(t, domain_gpus);
        check_topology(t);
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", file, e.what()));
    }
    return t;
}

ModelSpec parse_model(const json& j, const std::string& file, const std::string& path) {
    StrictObject o(j, file, path);
    ModelSpec m;
    m.dropout = true;
    detail::read_fields(o, model_fields(), m);
    o.finish();
    return m;
}

namespace {

Layout parse_layout(const json& j, const std::string& file) {
    StrictObject o(j, file, "layout");
    Layout l;
    detail::read_fields(o, layout_fields(), l);
    o.finish();
    return l;
}

}  // namespace

Workload parse_workload(const json& j, const std::string& file) {
    StrictObject o(j, file, "");
    Workload w;
    w.name = o.string("name");
    if (o.has("description")) o.string("description");
    w.model = parse_model(o.raw("model"), file, "model");
    if (w.model.name.empty()) w.model.name = w.name;
    w.layout = parse_layout(o.raw("layout"), file);
    if (o.has("measured")) {
        auto m = o.object("measured");
        Measured meas;
        meas.source = m.string("source");
        meas.step_time_s = m.number_in("step_time_s", 0, 1e6, "s");
        // As a measured-runs file's step time: 1 us and up (0 printed an error of null in --json, 1e-300 one
        // of 300 digits in the table).
        if (!(meas.step_time_s >= 1e-6))
            m.fail(m.field("step_time_s"),
                   fmt::format("= {:g} is below 1e-06 s, shorter than any training step", meas.step_time_s));
        meas.tflops_per_gpu = m.number_in("tflops_per_gpu", 0, 1e6);
        // 0: not reported (no measured column); else at least 0.001 TFLOP/s (1e-300 printed a 300-digit
        // error).
        if (meas.tflops_per_gpu > 0 && meas.tflops_per_gpu < 1e-3)
            m.fail(m.field("tflops_per_gpu"),
                   fmt::format("= {:g} is below 0.001 TFLOP/s (0: not reported)", meas.tflops_per_gpu));
        meas.tflops_convention = m.choice("tflops_convention", {"narayanan2021-eq3", "megatron-model-flops"});
        m.finish();
        w.measured = meas;
    }
    o.finish();
    return w;
}

namespace {
/// Whether `key` (after "topology." for the topology) names a field a --set may give: a field of the
/// topology, model or layout tables (`trainsim schema`), or the workload's name and description. Not the
/// measured block: a run with any --set is not compared with the preset's measured figures.
bool known_override_key(bool topology_key, const std::string& key) {
    if (topology_key) return schema::find(topology_fields(), key) != nullptr;
    auto under = [&](const char* prefix, std::string& rest) {
        const std::string p = prefix;
        if (key.compare(0, p.size(), p) != 0) return false;
        rest = key.substr(p.size());
        return true;
    };
    std::string rest;
    if (under("model.", rest)) return schema::find(model_fields(), rest) != nullptr;
    if (under("layout.", rest)) return schema::find(layout_fields(), rest) != nullptr;
    return key == "name" || key == "description";
}
}  // namespace

void apply_override(json& topology, json& workload, const std::string& assignment) {
    const auto eq = assignment.find('=');
    const std::string shown_assignment = clip_for_message(assignment);
    if (eq == std::string::npos || eq == 0)
        throw InputError(fmt::format("--set \"{}\": expected key=value, e.g. layout.tp=4", shown_assignment));
    std::string key = assignment.substr(0, eq);
    const std::string value = assignment.substr(eq + 1);
    // The same limits as a file's: nesting depth, and valid UTF-8 in a value taken as a string.
    if (value.size() > kMaxInputFileBytes)
        throw InputError(fmt::format("--set \"{}\": the value is too long", shown_assignment));
    json* doc = &workload;
    if (key.rfind("topology.", 0) == 0) {
        doc = &topology;
        key = key.substr(9);
    }
    // Refused here, naming the --set, rather than by the loader, which would blame the file.
    if (!known_override_key(doc == &topology, key))
        throw InputError(
            fmt::format("--set \"{}\": \"{}{}\" is not a known field (`trainsim schema` lists them)",
                        shown_assignment, doc == &topology ? "topology." : "", clip_for_message(key)));
    check_json_depth(value, fmt::format("--set \"{}\"", shown_assignment));
    json parsed;
    try {
        parsed = json::parse(value);
    } catch (const json::exception&) {  // not JSON (or a number out of range, e.g. "1e400GBps"): a string
        parsed = value;
        try {
            (void)parsed.dump();
        } catch (const json::exception&) {
            throw InputError(fmt::format("--set \"{}\": the value is not valid UTF-8", shown_assignment));
        }
    }
    json* at = doc;
    std::size_t start = 0;
    while (true) {
        const auto dot = key.find('.', start);
        const std::string part =
            key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        if (part.empty() || !at->is_object())
            throw InputError(fmt::format("--set \"{}\": \"{}\" does not name a field", shown_assignment,
                                         clip_for_message(key)));
        if (dot == std::string::npos) {
            (*at)[part] = parsed;
            return;
        }
        // An optional object that the file leaves out (the topology's `host`, `storage`, the workload's
        // `measured`) is created by the first --set of one of its fields (the key is a known field); its
        // other fields then take their defaults or are asked for.
        if (!at->contains(part)) (*at)[part] = json::object();
        at = &(*at)[part];
        start = dot + 1;
    }
}

void blame_set(const InputError& e, const std::vector<std::string>& sets, const std::string& file) {
    const std::string what = e.what();
    const std::string prefix = file + ": ";
    if (what.compare(0, prefix.size(), prefix) != 0) return;
    const std::string rest = what.substr(prefix.size());
    for (auto it = sets.rbegin(); it != sets.rend(); ++it) {
        const std::string key = it->substr(0, it->find('='));
        if (rest.compare(0, key.size(), key) != 0) continue;
        // "KEY = value ...", "KEY holds ...", "KEY is ...", "KEY must ...": about that field alone (not
        // "KEY * OTHER ...", which the file shares)
        const std::string after = rest.substr(key.size());
        for (const char* verb : {" = ", " holds ", " is ", " must "})
            if (after.rfind(verb, 0) == 0)
                throw InputError(fmt::format("--set \"{}\": {}", clip_for_message(*it), rest));
    }
    // A check over several fields ("layout.tp * layout.pp * layout.dp = 2 * 5 * 512 ..."), one of them given
    // by a --set: the file and that --set share it, and both are named.
    auto is_name_char = [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.';
    };
    for (auto it = sets.rbegin(); it != sets.rend(); ++it) {
        const std::string key = it->substr(0, it->find('='));
        if (key.empty()) continue;
        for (std::size_t at = rest.find(key); at != std::string::npos; at = rest.find(key, at + 1)) {
            const std::size_t end = at + key.size();
            if ((at > 0 && is_name_char(rest[at - 1])) || (end < rest.size() && is_name_char(rest[end])))
                continue;
            throw InputError(fmt::format("{} with --set \"{}\": {}", file, clip_for_message(*it), rest));
        }
    }
}

json default_topology_json() {
    return json::parse(embedded::kDefaultTopology);
}
json default_workload_json() {
    return json::parse(embedded::kDefaultWorkload);
}

}  // namespace trainsim
