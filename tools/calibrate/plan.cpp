#include "plan.hpp"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim::calibrate {

namespace {
std::int64_t dim(double v) {
    return static_cast<std::int64_t>(std::llround(v));
}
std::vector<std::int64_t> powers_of_two(std::int64_t from, std::int64_t to) {
    std::vector<std::int64_t> v;
    for (std::int64_t x = from; x <= to; x *= 2)
        v.push_back(x);
    return v;
}
}  // namespace

std::vector<GemmShape> collect_gemm_shapes(const Program& program, const std::string& workload_name) {
    std::vector<GemmShape> out;
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>> seen;
    for (const auto& seg : program.segments)
        for (const auto& k : seg.kernels) {
            if (k.kind != KernelKind::gemm) continue;
            GemmShape s{dim(k.m), dim(k.n), dim(k.k), dim(k.batch), k.fp8, ""};
            if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) continue;
            if (!seen.insert({s.m, s.n, s.k, s.batch, s.fp8}).second) continue;
            s.label = fmt::format("{} {}", workload_name, k.name);
            out.push_back(std::move(s));
        }
    return out;
}

std::vector<GemmShape> workload_gemm_shapes(const ModelSpec& model, const Layout& layout,
                                            const std::string& workload_name) {
    return collect_gemm_shapes(build_program(model, layout), workload_name);
}

std::vector<GemmShape> gemm_grid(bool quick) {
    const std::vector<std::int64_t> ms =
        quick ? std::vector<std::int64_t>{1024, 4096, 16384} : powers_of_two(1024, 32768);
    const std::vector<std::int64_t> nk =
        quick ? std::vector<std::int64_t>{1024, 4096, 16384} : powers_of_two(1024, 16384);
    std::vector<GemmShape> out;
    for (auto m : ms)
        for (auto n : nk)
            for (auto k : nk)
                out.push_back(GemmShape{m, n, k, 1, false, "grid"});
    return out;
}

std::string to_string(GemmDtype d) {
    switch (d) {
        case GemmDtype::bf16:
            return "bf16";
        case GemmDtype::fp16:
            return "fp16";
        case GemmDtype::fp8:
            return "fp8";
    }
    throw InternalError("unknown GemmDtype");
}

bool has_fp8(int cc_major, int cc_minor) {
    return cc_major > 8 || (cc_major == 8 && cc_minor >= 9);
}

bool fp8_shape_supported(const GemmShape& s) {
    return s.batch == 1 && s.m % 16 == 0 && s.n % 16 == 0 && s.k % 16 == 0;
}

std::vector<GemmJob> plan_gemm_jobs(const std::vector<GemmShape>& workload,
                                    const std::vector<GemmShape>& grid, bool fp8_available, bool quick) {
    std::vector<GemmJob> out;
    std::set<std::tuple<GemmDtype, std::int64_t, std::int64_t, std::int64_t, std::int64_t>> seen;
    auto add = [&](const GemmShape& s) {
        std::vector<GemmDtype> dtypes{GemmDtype::bf16};
        if (!quick) dtypes.push_back(GemmDtype::fp16);
        if (fp8_available && fp8_shape_supported(s)) dtypes.push_back(GemmDtype::fp8);
        for (auto d : dtypes)
            if (seen.insert({d, s.m, s.n, s.k, s.batch}).second)
                out.push_back(GemmJob{d, s.m, s.n, s.k, s.batch, s.label});
    };
    for (const auto& s : workload)
        add(s);
    for (const auto& s : grid)
        add(s);
    return out;
}

AttentionShape workload_attention(const ModelSpec& model, const Layout& layout, const std::string& name) {
    AttentionShape a;
    a.batch = layout.micro_batch;
    a.heads = model.heads / layout.tp;
    a.kv_heads = std::max<std::int64_t>(1, model.kv_heads / layout.tp);
    a.seq = model.seq_len;
    a.head_dim = model.head_dim();
    a.causal = true;
    a.label = fmt::format("{} tp={}", name, layout.tp);
    return a;
}

std::vector<AttentionShape> generic_attention(bool quick) {
    std::vector<AttentionShape> out;
    for (std::int64_t seq :
         quick ? std::vector<std::int64_t>{4096} : std::vector<std::int64_t>{2048, 4096, 8192})
        out.push_back(AttentionShape{1, 16, 16, seq, 128, true, "generic"});
    return out;
}

double memory_job_bytes(const MemoryJob& j) {
    const double e = static_cast<double>(j.rows) * static_cast<double>(j.cols);
    if (j.kernel == "copy") return 4 * e;
    if (j.kernel == "gelu") return 4 * e;
    if (j.kernel == "layernorm")
        return 4 * e + 4.0 * static_cast<double>(j.cols) + 8.0 * static_cast<double>(j.rows);
    throw InternalError(fmt::format("unknown memory-bound kernel \"{}\"", j.kernel));
}

std::vector<MemoryJob> plan_memory_jobs(bool quick, std::int64_t tokens, std::int64_t hidden,
                                        std::int64_t ffn_per_gpu) {
    std::vector<MemoryJob> out;
    const std::int64_t MiB = 1024 * 1024;
    const std::vector<std::int64_t> copy_bytes =
        quick ? std::vector<std::int64_t>{16 * MiB, 1024 * MiB}
              : std::vector<std::int64_t>{MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 1024 * MiB};
    // A copy of B bytes: [B / 2 / 8192, 8192] bf16 (the row length is immaterial to a copy).
    for (auto b : copy_bytes)
        out.push_back(MemoryJob{"copy", b / 2 / 8192, 8192, fmt::format("copy {}MiB", b / MiB)});
    out.push_back(MemoryJob{"layernorm", 32768, 8192, "layernorm 32768x8192"});
    out.push_back(MemoryJob{"gelu", 32768, 8192, "gelu 32768x8192"});
    if (tokens > 0 && hidden > 0)
        out.push_back(MemoryJob{"layernorm", tokens, hidden, fmt::format("layernorm {}x{}", tokens, hidden)});
    if (tokens > 0 && ffn_per_gpu > 0)
        out.push_back(MemoryJob{"gelu", tokens, ffn_per_gpu, fmt::format("gelu {}x{}", tokens, ffn_per_gpu)});
    return out;
}

std::string to_string(CollectiveOp op) {
    switch (op) {
        case CollectiveOp::all_reduce:
            return "all_reduce";
        case CollectiveOp::all_gather:
            return "all_gather";
        case CollectiveOp::reduce_scatter:
            return "reduce_scatter";
        case CollectiveOp::send_recv:
            return "send_recv";
    }
    throw InternalError("unknown CollectiveOp");
}

std::vector<std::int64_t> collective_sizes(bool quick, std::int64_t max_bytes) {
    const std::int64_t last = quick ? (std::int64_t{1} << 30) : (std::int64_t{4} << 30);
    const std::int64_t factor = quick ? 16 : 2;
    std::vector<std::int64_t> out;
    for (std::int64_t b = 1024; b <= last && b <= max_bytes; b *= factor)
        out.push_back(b);
    return out;
}

std::int64_t collective_bytes(CollectiveOp op, std::int64_t bytes, int elem_bytes, int ranks) {
    if (elem_bytes <= 0 || ranks <= 0)
        throw InternalError("collective_bytes: elem_bytes and ranks must be > 0");
    std::int64_t count = bytes / elem_bytes;
    if (op == CollectiveOp::all_gather || op == CollectiveOp::reduce_scatter) count = (count / ranks) * ranks;
    return count * elem_bytes;
}

double busbw_factor(CollectiveOp op, int ranks) {
    const double n = ranks;
    switch (op) {
        case CollectiveOp::all_reduce:
            return 2 * (n - 1) / n;
        case CollectiveOp::all_gather:
        case CollectiveOp::reduce_scatter:
            return (n - 1) / n;
        case CollectiveOp::send_recv:
            return 1;
    }
    throw InternalError("unknown CollectiveOp");
}

double algbw_bytes_per_s(double bytes, double seconds) {
    if (!(seconds > 0)) throw InternalError("algbw_bytes_per_s: time must be > 0");
    return bytes / seconds;
}

RepPolicy rep_policy(bool quick) {
    RepPolicy p;
    if (quick) {
        p.warmup_min = 2;
        p.warmup_s = 0.005;
        p.reps_min = 5;
        p.reps_max = 30;
        p.target_s = 0.02;
        p.nccl_warmup = 2;
        p.nccl_iters = 5;
    }
    return p;
}

int reps_for(double estimate_s, const RepPolicy& p) {
    if (!(estimate_s > 0)) return p.reps_max;
    const double want = std::ceil(p.target_s / estimate_s);
    return static_cast<int>(
        std::clamp(want, static_cast<double>(p.reps_min), static_cast<double>(p.reps_max)));
}

TimingStats stats_of(std::vector<double> samples_s) {
    if (samples_s.empty()) throw InternalError("stats_of: no samples");
    std::sort(samples_s.begin(), samples_s.end());
    const std::size_t n = samples_s.size();
    TimingStats t;
    t.median_s = n % 2 ? samples_s[n / 2] : 0.5 * (samples_s[n / 2 - 1] + samples_s[n / 2]);
    t.min_s = samples_s.front();
    t.max_s = samples_s.back();
    t.reps = static_cast<int>(n);
    return t;
}

std::optional<std::string> guess_catalog_gpu(const std::string& device_name, double memory_bytes) {
    auto has = [&](const char* s) { return device_name.find(s) != std::string::npos; };
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    if (has("PCIe") || has("NVL") || has("GH200")) return std::nullopt;
    if (has("A100")) {
        if (!has("SXM4") && !has("A100 80GB") && !has("A100 40GB")) {
            // "NVIDIA A100-SXM4-80GB" is the usual spelling; anything else is a PCIe or unknown part.
            return std::nullopt;
        }
        if (has("80GB")) return "A100-SXM4-80GB";
        if (has("40GB")) return "A100-SXM4-40GB";
        return memory_bytes > 50 * GiB ? "A100-SXM4-80GB" : "A100-SXM4-40GB";
    }
    if (has("H100")) {
        if (!has("HBM3") && !has("SXM")) return std::nullopt;
        return memory_bytes > 88 * GiB ? "H100-SXM5-96GB" : "H100-SXM5-80GB";
    }
    if (has("H200")) return "H200-SXM-141GB";
    if (has("B200") && !has("GB200")) return "B200";
    return std::nullopt;
}

std::string cuda_version_string(int v) {
    return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::string cublas_version_string(std::int64_t v) {
    return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

std::string nccl_version_string(int v) {
    if (v >= 10000) return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
    return fmt::format("{}.{}.{}", v / 1000, (v % 1000) / 100, v % 100);
}

std::optional<std::string> driver_version_from_proc(const std::string& text) {
    static const std::regex re(R"(Kernel Module(?:\s+for\s+\S+)?\s+([0-9]+(?:\.[0-9]+)+))");
    std::smatch m;
    if (std::regex_search(text, m, re)) return m[1].str();
    return std::nullopt;
}

}  // namespace trainsim::calibrate
