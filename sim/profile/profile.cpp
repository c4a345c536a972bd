// trainsim-profile/1: reader and writer (format: include/trainsim/profile.hpp, docs/calibration.md).
#include "trainsim/profile.hpp"

#include <fmt/format.h>

#include "io/strict_json.hpp"
#include "layer_shape.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"

namespace trainsim {

namespace {

using detail::StrictObject;

double positive_count(StrictObject& o, const std::string& key) {
    return static_cast<double>(o.positive(key));
}

ProfileTiming timing(StrictObject& o) {
    ProfileTiming t;
    t.time_s = o.quantity("time", Dimension::time);
    if (o.has("min")) t.min_s = o.quantity("min", Dimension::time);
    if (o.has("max")) t.max_s = o.quantity("max", Dimension::time);
    if (o.has("reps")) t.reps = static_cast<int>(o.positive("reps"));
    if (o.has("label")) t.label = o.string("label");
    if (t.min_s && *t.min_s > t.time_s)
        o.fail(o.field("min"), fmt::format("= {}s is above the median time {}s", *t.min_s, t.time_s));
    if (t.max_s && *t.max_s < t.time_s)
        o.fail(o.field("max"), fmt::format("= {}s is below the median time {}s", *t.max_s, t.time_s));
    return t;
}

AttentionKernel backend_of(StrictObject& o, const std::string& key) {
    const std::string b = o.choice(key, {"cudnn", "flash", "unfused"});
    return b == "cudnn"   ? AttentionKernel::cudnn
           : b == "flash" ? AttentionKernel::flash
                          : AttentionKernel::unfused;
}

/// Calls `row(StrictObject&)` for each element of the optional array `key`.
template <class F>
void each_row(StrictObject& top, const std::string& key, F row) {
    if (!top.has(key)) return;
    const auto& arr = top.raw(key);
    if (!arr.is_array()) top.fail(key, "must be an array");
    for (std::size_t i = 0; i < arr.size(); ++i) {
        StrictObject o(arr[i], top.file(), fmt::format("{}[{}]", key, i));
        row(o);
        o.finish();
    }
}

std::string time_text(double s) {
    return fmt::format("{:.9g}us", s * 1e6);
}

nlohmann::json timing_json(nlohmann::json j, const ProfileTiming& t) {
    j["time"] = time_text(t.time_s);
    if (t.min_s) j["min"] = time_text(*t.min_s);
    if (t.max_s) j["max"] = time_text(*t.max_s);
    if (t.reps) j["reps"] = *t.reps;
    if (!t.label.empty()) j["label"] = t.label;
    return j;
}

}  // namespace

std::string to_string(GemmDtype d) {
    return d == GemmDtype::bf16 ? "bf16" : d == GemmDtype::fp16 ? "fp16" : "fp8";
}

namespace {

ProfileDevice read_device(StrictObject d) {
    ProfileDevice dev;
    dev.name = d.string("name");
    dev.sm_count = static_cast<int>(d.positive("sm_count"));
    dev.memory_bytes = d.quantity("memory", Dimension::bytes);
    dev.driver = d.string("driver");
    dev.cuda = d.string("cuda");
    if (d.has("libraries")) {
        const auto& libs = d.raw("libraries");
        if (!libs.is_object()) d.fail(d.field("libraries"), "must be an object of library: version strings");
        for (auto it = libs.begin(); it != libs.end(); ++it) {
            if (!it->is_string())
                d.fail(d.field("libraries." + it.key()),
                       fmt::format("= {} must be a string", detail::shown(*it)));
            dev.libraries[it.key()] = it->get<std::string>();
        }
    }
    d.finish();
    return dev;
}

void check_iso_date(StrictObject& top, const std::string& s) {
    const bool iso =
        s.size() == 10 && s[4] == '-' && s[7] == '-' &&
        std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || c == '-'; });
    if (!iso) top.fail("date", fmt::format("= \"{}\" is not an ISO date (YYYY-MM-DD)", clip_for_message(s)));
}

ProfileGemm read_gemm(StrictObject& o) {
    ProfileGemm g;
    const std::string dt = o.choice("dtype", {"bf16", "fp16", "fp8"});
    g.dtype = dt == "bf16" ? GemmDtype::bf16 : dt == "fp16" ? GemmDtype::fp16 : GemmDtype::fp8;
    g.m = positive_count(o, "m");
    g.n = positive_count(o, "n");
    g.k = positive_count(o, "k");
    g.batch = positive_count(o, "batch");
    g.timing = timing(o);
    return g;
}

/// A GEMM or memory-bound row faster than the GPU can run it (a unit slip, "us" for "ms"; a profile of a
/// faster GPU) is refused: `run --profile` with every time divided by 10^9 reported an MFU of 242% (round
/// 12). Times at the datasheet peak pass; an FP8 row of a GPU without FP8 is not checked here.
void check_gemm_speed(StrictObject& o, const ProfileGemm& g, const GpuSpec& gpu) {
    const double peak = g.dtype == GemmDtype::fp8    ? gpu.peak_fp8_flops
                        : g.dtype == GemmDtype::fp16 ? gpu.peak_fp16_flops
                                                     : gpu.peak_bf16_flops;
    const double flops = 2 * g.m * g.n * g.k * g.batch / g.timing.time_s;
    if (peak > 0 && flops > peak)
        o.fail(
            o.field("time"),
            fmt::format("= {:g} s gives 2 * m * n * k * batch / time = {:.4g} TFLOP/s, above the {} {} peak "
                        "of {:.4g} TFLOP/s",
                        g.timing.time_s, flops / 1e12, gpu.name, to_string(g.dtype), peak / 1e12));
}

void check_memory_speed(StrictObject& o, const ProfileMemoryBound& m, const GpuSpec& gpu) {
    const double rate = m.bytes / m.timing.time_s;
    if (gpu.hbm_bytes_per_s > 0 && rate > gpu.hbm_bytes_per_s)
        o.fail(o.field("time"),
               fmt::format("= {:g} s gives bytes / time = {:.4g} GB/s, above the {} HBM bandwidth "
                           "of {:.4g} GB/s",
                           m.timing.time_s, rate / 1e9, gpu.name, gpu.hbm_bytes_per_s / 1e9));
}

ProfileAttention read_attention(StrictObject& o) {
    ProfileAttention a;
    a.backend = backend_of(o, "backend");
    a.backward = o.choice("pass", {"fwd", "bwd"}) == "bwd";
    a.batch = positive_count(o, "batch");
    a.heads = positive_count(o, "heads");
    a.kv_heads = positive_count(o, "kv_heads");
    a.seq = positive_count(o, "seq");
    a.head_dim = positive_count(o, "head_dim");
    a.causal = o.boolean("causal");
    if (static_cast<long>(a.heads) % static_cast<long>(a.kv_heads) != 0)
        o.fail(o.field("kv_heads"), fmt::format("= {} does not divide heads = {}", a.kv_heads, a.heads));
    a.timing = timing(o);
    return a;
}

ProfileMemoryBound read_memory_bound(StrictObject& o) {
    ProfileMemoryBound m;
    m.kernel = o.string("kernel");
    if (m.kernel.empty()) o.fail(o.field("kernel"), "must not be empty");
    m.bytes = o.quantity("bytes", Dimension::bytes);
    m.timing = timing(o);
    return m;
}

ProfileCollective read_collective(StrictObject& o) {
    ProfileCollective c;
    c.op = o.choice("op", {"all_reduce", "all_gather", "reduce_scatter", "send_recv"});
    c.gpus = static_cast<int>(o.positive("gpus"));
    c.nodes = static_cast<int>(o.positive("nodes"));
    c.bytes = o.quantity("bytes", Dimension::bytes);
    c.time_s = o.quantity("time", Dimension::time);
    c.algbw_bytes_per_s = o.quantity("algbw", Dimension::bandwidth);
    c.busbw_bytes_per_s = o.quantity("busbw", Dimension::bandwidth);
    if (o.has("dtype")) c.dtype = o.string("dtype");
    return c;
}

ProfileLayer read_layer(StrictObject& o) {
    ProfileLayer l;
    l.label = o.string("label");
    l.attention_backend = backend_of(o, "attention_backend");
    detail::read_layer_shape(o, l);
    l.fwd_s = o.quantity("fwd", Dimension::time);
    l.fwd_bwd_s = o.quantity("fwd_bwd", Dimension::time);
    if (l.fwd_bwd_s < l.fwd_s)
        o.fail(o.field("fwd_bwd"), fmt::format("= {}s is below fwd = {}s", l.fwd_bwd_s, l.fwd_s));
    return l;
}

}  // namespace

Profile parse_profile(const nlohmann::json& j, const std::string& file) {
    StrictObject top(j, file, "");
    const std::string format = top.string("format");
    if (format != "trainsim-profile/1")
        top.fail("format", fmt::format("= \"{}\" is not \"trainsim-profile/1\"", format));
    Profile p;
    p.file = file;
    p.gpu = top.string("gpu");
    const GpuSpec* gpu = nullptr;
    try {
        gpu = &find_gpu(p.gpu, "gpu");
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", file, e.what()));
    }
    p.device = read_device(top.object("device"));
    p.date = top.string("date");
    check_iso_date(top, p.date);
    p.source = top.string("source");
    each_row(top, "gemm", [&](StrictObject& o) {
        p.gemm.push_back(read_gemm(o));
        check_gemm_speed(o, p.gemm.back(), *gpu);
    });
    each_row(top, "attention", [&](StrictObject& o) { p.attention.push_back(read_attention(o)); });
    each_row(top, "memory_bound", [&](StrictObject& o) {
        p.memory_bound.push_back(read_memory_bound(o));
        check_memory_speed(o, p.memory_bound.back(), *gpu);
    });
    each_row(top, "collectives", [&](StrictObject& o) { p.collectives.push_back(read_collective(o)); });
    each_row(top, "layers", [&](StrictObject& o) { p.layers.push_back(read_layer(o)); });
    top.finish();
    return p;
}

Profile read_profile(const std::string& path) {
    return parse_profile(read_json_file(path), path);
}

nlohmann::json to_json(const Profile& p) {
    nlohmann::json j = nlohmann::json::object();
    j["format"] = "trainsim-profile/1";
    j["gpu"] = p.gpu;
    nlohmann::json dev = {{"name", p.device.name},
                          {"sm_count", p.device.sm_count},
                          {"memory", fmt::format("{:.6g}GiB", p.device.memory_bytes / kGiB)},
                          {"driver", p.device.driver},
                          {"cuda", p.device.cuda}};
    if (!p.device.libraries.empty()) dev["libraries"] = p.device.libraries;
    j["device"] = dev;
    j["date"] = p.date;
    j["source"] = p.source;
    auto arr = [&](const char* key, auto rows, auto fn) {
        if (rows.empty()) return;
        nlohmann::json a = nlohmann::json::array();
        for (const auto& r : rows)
            a.push_back(fn(r));
        j[key] = a;
    };
    arr("gemm", p.gemm, [](const ProfileGemm& g) {
        return timing_json({{"dtype", to_string(g.dtype)},
                            {"m", static_cast<long long>(g.m)},
                            {"n", static_cast<long long>(g.n)},
                            {"k", static_cast<long long>(g.k)},
                            {"batch", static_cast<long long>(g.batch)}},
                           g.timing);
    });
    arr("attention", p.attention, [](const ProfileAttention& a) {
        return timing_json({{"backend", to_string(a.backend)},
                            {"pass", a.backward ? "bwd" : "fwd"},
                            {"batch", static_cast<long long>(a.batch)},
                            {"heads", static_cast<long long>(a.heads)},
                            {"kv_heads", static_cast<long long>(a.kv_heads)},
                            {"seq", static_cast<long long>(a.seq)},
                            {"head_dim", static_cast<long long>(a.head_dim)},
                            {"causal", a.causal}},
                           a.timing);
    });
    arr("memory_bound", p.memory_bound, [](const ProfileMemoryBound& m) {
        return timing_json({{"kernel", m.kernel}, {"bytes", fmt::format("{:.0f}B", m.bytes)}}, m.timing);
    });
    arr("collectives", p.collectives, [](const ProfileCollective& c) {
        nlohmann::json r = {{"op", c.op},
                            {"gpus", c.gpus},
                            {"nodes", c.nodes},
                            {"bytes", fmt::format("{:.0f}B", c.bytes)},
                            {"time", time_text(c.time_s)},
                            {"algbw", fmt::format("{:.6g}GBps", c.algbw_bytes_per_s / 1e9)},
                            {"busbw", fmt::format("{:.6g}GBps", c.busbw_bytes_per_s / 1e9)}};
        if (!c.dtype.empty()) r["dtype"] = c.dtype;
        return r;
    });
    arr("layers", p.layers, [](const ProfileLayer& l) {
        return nlohmann::json{{"label", l.label},
                              {"attention_backend", to_string(l.attention_backend)},
                              {"hidden", l.hidden},
                              {"heads", l.heads},
                              {"kv_heads", l.kv_heads},
                              {"ffn_hidden", l.ffn_hidden},
                              {"mlp", l.mlp},
                              {"seq", l.seq},
                              {"micro_batch", l.micro_batch},
                              {"tp", l.tp},
                              {"fwd", time_text(l.fwd_s)},
                              {"fwd_bwd", time_text(l.fwd_bwd_s)}};
    });
    return j;
}

}  // namespace trainsim
