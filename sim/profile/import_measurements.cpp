// trainsim-kernel-measurements/1 -> trainsim-profile/1 (`trainsim profile import`). The input's layout is
// described in ../shared/calibration/README.md; every key is read and unknown keys are refused.
#include <cmath>
#include <regex>

#include <fmt/format.h>

#include "io/strict_json.hpp"
#include "layer_shape.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/profile.hpp"

namespace trainsim {

namespace {

using detail::StrictObject;

/// {median_ms, min_ms, max_ms, reps} (a row, or its fwd/bwd object).
ProfileTiming timing_ms(StrictObject& o) {
    ProfileTiming t;
    auto ms = [&](const char* key) {
        const double v = o.number(key);
        if (!(v > 0)) o.fail(o.field(key), fmt::format("= {} must be positive", v));
        o.number_in(key, 0, 1e9, "ms");
        return v * 1e-3;
    };
    t.time_s = ms("median_ms");
    t.min_s = ms("min_ms");
    t.max_s = ms("max_ms");
    t.reps = static_cast<int>(o.positive("reps"));
    return t;
}

double count(StrictObject& o, const char* key) {
    return static_cast<double>(o.positive(key));
}

AttentionKernel backend(StrictObject& o, const char* key) {
    return o.choice(key, {"cudnn", "flash"}) == "cudnn" ? AttentionKernel::cudnn : AttentionKernel::flash;
}

template <class F>
void rows(StrictObject& top, const std::string& key, F fn) {
    const auto& arr = top.raw(key);
    if (!arr.is_array()) top.fail(key, "must be an array");
    for (std::size_t i = 0; i < arr.size(); ++i) {
        StrictObject o(arr[i], top.file(), fmt::format("{}[{}]", key, i));
        fn(o);
        o.finish();
    }
}

/// One GEMM row: M, N, K of Megatron's linear, its kind mapped to the y[m,n] = x[m,k]·W[n,k]^T convention.
ProfileGemm gemm_row(StrictObject& o, GemmDtype dtype, const std::string& kind, const std::string& label) {
    ProfileGemm g;
    g.dtype = dtype;
    const double M = count(o, "M"), N = count(o, "N"), K = count(o, "K");
    if (kind == "fwd") {  // y[M,N] = x[M,K]·W[N,K]^T
        g.m = M, g.n = N, g.k = K;
    } else if (kind == "dgrad") {  // dx[M,K] = dy[M,N]·W[N,K]
        g.m = M, g.n = K, g.k = N;
    } else {  // wgrad: dW[N,K] = dy[M,N]^T·x[M,K]
        g.m = N, g.n = K, g.k = M;
    }
    g.batch = 1;
    g.timing = timing_ms(o);
    g.timing.label = label;
    const double tflops = o.number_in("tflops", 0, 1e9);
    const double expect = 2.0 * M * N * K / g.timing.time_s / 1e12;
    if (std::fabs(tflops - expect) > 0.01 * expect)
        o.fail(o.field("tflops"),
               fmt::format("= {} disagrees with 2MNK / median_ms = {:.1f}", tflops, expect));
    return g;
}

/// A memory-bound reference `name` = copy_<N>GiB (N GiB copied: 2N GiB moved) or <kernel>_<R>x<C> (a bf16
/// [R, C] tensor read and written: 4·R·C bytes).
ProfileMemoryBound memory_row(StrictObject& top, const std::string& name) {
    static const std::regex copy_re("copy_([0-9]+)GiB"), shape_re("([a-z_]+)_([0-9]+)x([0-9]+)");
    std::smatch m;
    ProfileMemoryBound r;
    if (std::regex_match(name, m, copy_re)) {
        r.kernel = "copy";
        r.bytes = 2.0 * std::stod(m[1]) * kGiB;
    } else if (std::regex_match(name, m, shape_re)) {
        r.kernel = m[1];
        r.bytes = 4.0 * std::stod(m[2]) * std::stod(m[3]);
    } else {
        top.fail(name, "is not a known field");
    }
    StrictObject o = top.object(name);
    r.timing = timing_ms(o);
    r.timing.label = name;
    const double gbps = o.number_in("GBps_read_plus_write", 0, 1e9);
    const double expect = r.bytes / r.timing.time_s / 1e9;
    if (std::fabs(gbps - expect) > 0.01 * expect)
        o.fail(o.field("GBps_read_plus_write"),
               fmt::format("= {} disagrees with the {} bytes of \"{}\" in median_ms ({:.1f} GBps)", gbps,
                           r.bytes, name, expect));
    o.finish();
    return r;
}

}  // namespace

namespace {

/// The measurement's `device` block: GPU name, SMs, memory, CUDA, torch, cuDNN and the nvidia-smi line; the
/// nvidia-smi line is appended to `source`.
ProfileDevice import_device(StrictObject d, std::string& source) {
    ProfileDevice dev;
    dev.name = d.string("gpu");
    dev.sm_count = static_cast<int>(d.positive("sm_count"));
    const double gib = d.number_in("memory_GiB", 0, 1e6, "GiB");
    if (!(gib > 0)) d.fail(d.field("memory_GiB"), fmt::format("= {} must be positive", gib));
    dev.memory_bytes = gib * kGiB;
    dev.cuda = d.string("cuda");
    dev.libraries["torch"] = d.string("torch");
    const auto cudnn = d.positive("cudnn");  // cudnnGetVersion(): major*10000 + minor*100 + patch (cuDNN 9)
    dev.libraries["cudnn"] = fmt::format("{}.{}.{}", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100);
    // nvidia-smi --query-gpu=driver_version,clocks.max.sm,clocks.max.mem,power.limit,clocks.sm
    const std::string smi = d.string("nvidia_smi");
    const auto comma = smi.find(',');
    if (comma == std::string::npos || comma == 0)
        d.fail(d.field("nvidia_smi"),
               fmt::format("= \"{}\" does not start with the driver version", clip_for_message(smi)));
    dev.driver = smi.substr(0, comma);
    source +=
        fmt::format(" nvidia-smi (driver, max SM clock, max memory clock, power limit, SM clock): {}.", smi);
    d.finish();
    return dev;
}

/// An attention row: one profile row per pass (fwd, bwd).
void import_attention(StrictObject& o, std::vector<ProfileAttention>& out) {
    ProfileAttention a;
    const std::string config = o.string("config");
    a.backend = backend(o, "backend");
    a.batch = count(o, "batch");
    a.heads = count(o, "heads");
    a.kv_heads = count(o, "kv_heads");
    a.seq = count(o, "seq");
    a.head_dim = count(o, "head_dim");
    a.causal = true;  // the README: causal self-attention
    o.number("fwd_tflops");
    o.number("bwd_tflops");
    for (const char* pass : {"fwd", "bwd"}) {
        StrictObject t = o.object(pass);
        ProfileAttention r = a;
        r.backward = std::string(pass) == "bwd";
        r.timing = timing_ms(t);
        r.timing.label = fmt::format("{} {}", config, pass);
        t.finish();
        out.push_back(r);
    }
}

ProfileLayer import_layer(StrictObject& o) {
    ProfileLayer l;
    l.label = o.string("config");
    l.attention_backend = backend(o, "attention_backend");
    detail::read_layer_shape(o, l);
    {
        StrictObject f = o.object("fwd");
        l.fwd_s = timing_ms(f).time_s;
        f.finish();
    }
    {
        StrictObject f = o.object("fwd_bwd");
        l.fwd_bwd_s = timing_ms(f).time_s;
        f.finish();
    }
    o.number("model_flops_fwd_bwd");
    o.number("tflops_fwd_bwd");
    return l;
}

}  // namespace

Profile import_kernel_measurements(const nlohmann::json& j, const std::string& file, const std::string& gpu,
                                   const std::string& source) {
    StrictObject top(j, file, "");
    const std::string format = top.string("format");
    if (format != "trainsim-kernel-measurements/1")
        top.fail("format",
                 fmt::format("= \"{}\" is not \"trainsim-kernel-measurements/1\"", clip_for_message(format)));
    {
        const auto& errors = top.raw("errors");
        if (!errors.is_array()) top.fail("errors", "must be an array");
        if (!errors.empty())
            top.fail("errors", fmt::format("= {}: the measurement reported errors", detail::shown(errors)));
    }
    Profile p;
    p.gpu = gpu;
    p.source = source;
    p.device = import_device(top.object("device"), p.source);
    {
        const std::string about = top.string("about");
        static const std::regex date_re("[0-9]{4}-[0-9]{2}-[0-9]{2}");
        std::smatch m;
        if (!std::regex_search(about, m, date_re))
            top.fail("about", "names no date (YYYY-MM-DD) of the measurement");
        p.date = m[0];
        p.source += fmt::format(" Measurements: {}", about);
    }
    rows(top, "gemm", [&](StrictObject& o) {
        const std::string config = o.string("config"), linear = o.string("linear");
        const std::string kind = o.choice("kind", {"fwd", "dgrad", "wgrad"});
        p.gemm.push_back(gemm_row(o, GemmDtype::bf16, kind, fmt::format("{} {} {}", config, linear, kind)));
    });
    rows(top, "gemm_grid",
         [&](StrictObject& o) { p.gemm.push_back(gemm_row(o, GemmDtype::bf16, "fwd", "grid fwd")); });
    rows(top, "gemm_fp8", [&](StrictObject& o) {
        const std::string config = o.string("config"), linear = o.string("linear");
        p.gemm.push_back(gemm_row(o, GemmDtype::fp8, "fwd", fmt::format("{} {} fwd", config, linear)));
    });
    rows(top, "attention", [&](StrictObject& o) { import_attention(o, p.attention); });
    rows(top, "layers", [&](StrictObject& o) { p.layers.push_back(import_layer(o)); });
    for (auto it = j.begin(); it != j.end(); ++it) {
        const std::string& key = it.key();
        if (key == "format" || key == "errors" || key == "device" || key == "about" || key == "gemm" ||
            key == "gemm_grid" || key == "gemm_fp8" || key == "attention" || key == "layers")
            continue;
        p.memory_bound.push_back(memory_row(top, key));
    }
    top.finish();
    // Round trip through the reader: the profile written is one parse_profile accepts.
    return parse_profile(to_json(p), file + " (imported)");
}

}  // namespace trainsim
