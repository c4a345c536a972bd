// trainsim-calibrate's device-independent part (tools/calibrate/plan.hpp, profile_writer.hpp, progress.hpp):
// the GEMM shapes a workload produces, the grid, the nccl-tests bandwidths, statistics, the GPU name guess
// and the trainsim-profile/1 document it writes.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>
#include <tuple>

#include "plan.hpp"
#include "profile_writer.hpp"
#include "progress.hpp"
#include "reference.hpp"
#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/units.hpp"

using namespace trainsim;
using namespace trainsim::calibrate;

namespace {

Layout tp2_layout() {
    Layout l;
    l.tp = 2;
    l.micro_batch = 1;
    l.global_batch = 1;
    return l;
}

bool has_shape(const std::vector<GemmShape>& v, std::int64_t m, std::int64_t n, std::int64_t k,
               std::int64_t batch, const std::string& label_part) {
    return std::any_of(v.begin(), v.end(), [&](const GemmShape& s) {
        return s.m == m && s.n == n && s.k == k && s.batch == batch && test::contains(s.label, label_part);
    });
}

}  // namespace

TEST_CASE("calibrate: the GEMM shapes of a tiny workload, forward, dgrad and wgrad, each once") {
    // h 256, 4 heads, ffn 1024, vocab 1000, seq 128, TP 2: T = 128 tokens per GPU.
    const ModelSpec m = test::small_gpt(2, 256, 4, 128, 1000);
    const auto shapes = workload_gemm_shapes(m, tp2_layout(), "tiny");
    // Column-parallel QKV: y[T, 3h/t] = x[T, h] . W^T; dgrad [T, h] from [T, 3h/t]; wgrad [3h/t, h] over T.
    CHECK(has_shape(shapes, 128, 384, 256, 1, "tiny qkv_gemm"));
    CHECK(has_shape(shapes, 128, 256, 384, 1, "tiny qkv_dgrad"));
    CHECK(has_shape(shapes, 384, 256, 128, 1, "tiny qkv_wgrad"));
    // Row-parallel projection and fc2, column-parallel fc1, vocab-parallel LM head.
    CHECK(has_shape(shapes, 128, 256, 128, 1, "attn_proj_gemm"));
    CHECK(has_shape(shapes, 128, 512, 256, 1, "fc1_gemm"));
    CHECK(has_shape(shapes, 128, 256, 512, 1, "fc2_gemm"));
    CHECK(has_shape(shapes, 512, 256, 128, 1, "fc1_wgrad"));
    CHECK(has_shape(shapes, 128, 500, 256, 1, "lm_head_gemm"));
    CHECK(has_shape(shapes, 500, 256, 128, 1, "lm_head_wgrad"));
    // fc2's dgrad [T, f/t] from [T, h] has fc1's forward shape: listed once, under its first occurrence.
    CHECK(std::none_of(shapes.begin(), shapes.end(),
                       [](const GemmShape& s) { return test::contains(s.label, "fc2_dgrad"); }));
    std::set<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool>> keys;
    for (const auto& s : shapes) {
        CHECK(keys.insert({s.m, s.n, s.k, s.batch, s.fp8}).second);
        CHECK_FALSE(s.fp8);
    }
    // Fused attention: no batched GEMMs. Unfused: the score and value bmm over b*a/t = 2 heads appear.
    CHECK(std::all_of(shapes.begin(), shapes.end(), [](const GemmShape& s) { return s.batch == 1; }));
    Layout unfused = tp2_layout();
    unfused.attention = AttentionKernel::unfused;
    const auto with_bmm = workload_gemm_shapes(m, unfused, "tiny");
    CHECK(has_shape(with_bmm, 128, 128, 64, 2, "attn_scores_bmm"));
    CHECK(has_shape(with_bmm, 128, 64, 128, 2, "attn_values_bmm"));
    // An FP8 layout marks the linear layers' GEMMs.
    Layout fp8 = tp2_layout();
    fp8.precision = Precision::fp8;
    const auto fp8_shapes = workload_gemm_shapes(m, fp8, "tiny");
    CHECK(std::any_of(fp8_shapes.begin(), fp8_shapes.end(),
                      [](const GemmShape& s) { return s.fp8 && test::contains(s.label, "qkv_gemm"); }));
}

TEST_CASE("calibrate: the generic grid and the planned GEMM jobs") {
    const auto grid = gemm_grid(false);
    CHECK(grid.size() == 6 * 5 * 5);
    for (const auto& s : grid) {
        CHECK((s.m >= 1024 && s.m <= 32768 && (s.m & (s.m - 1)) == 0));
        CHECK((s.n >= 1024 && s.n <= 16384 && (s.n & (s.n - 1)) == 0));
        CHECK((s.k >= 1024 && s.k <= 16384 && (s.k & (s.k - 1)) == 0));
    }
    CHECK(gemm_grid(true).size() == 27);

    const std::vector<GemmShape> work{{4096, 6144, 2048, 1, false, "w qkv"},
                                      {1024, 1024, 1024, 1, false, "w small"},
                                      {100, 64, 100, 8, false, "w bmm"}};
    const auto jobs = plan_gemm_jobs(work, gemm_grid(false), true, false);
    // 3 workload shapes + 150 grid shapes, the grid's 1024^3 already listed: bf16 and fp16 each, fp8 where
    // supported (not the batched, non-multiple-of-16 one).
    CHECK(jobs.size() == (3 + 149) * 2 + (2 + 149));
    const auto small = std::count_if(
        jobs.begin(), jobs.end(), [](const GemmJob& j) { return j.m == 1024 && j.n == 1024 && j.k == 1024; });
    CHECK(small == 3);
    CHECK(std::none_of(jobs.begin(), jobs.end(),
                       [](const GemmJob& j) { return j.dtype == GemmDtype::fp8 && j.batch > 1; }));
    CHECK(jobs.front().label == "w qkv");
    // Quick: bf16 (+ fp8); no FP8 on the device: none.
    const auto quick = plan_gemm_jobs(work, {}, false, true);
    CHECK(quick.size() == 3);
    CHECK(
        std::all_of(quick.begin(), quick.end(), [](const GemmJob& j) { return j.dtype == GemmDtype::bf16; }));
    CHECK(has_fp8(8, 9));
    CHECK(has_fp8(9, 0));
    CHECK_FALSE(has_fp8(8, 0));
}

TEST_CASE("calibrate: attention and memory-bound shapes of a workload") {
    const ModelSpec m = test::llama_style();  // 64 heads, 8 KV heads, head dim 128, seq 8192
    Layout l = tp2_layout();
    l.tp = 8;
    l.micro_batch = 2;
    const auto a = workload_attention(m, l, "llama");
    CHECK(a.batch == 2);
    CHECK(a.heads == 8);
    CHECK(a.kv_heads == 1);
    CHECK(a.seq == 8192);
    CHECK(a.head_dim == 128);
    CHECK(a.causal);

    const MemoryJob ln{"layernorm", 32768, 8192, ""};
    CHECK(memory_job_bytes(ln) == 4.0 * 32768 * 8192 + 4.0 * 8192 + 8.0 * 32768);
    CHECK(memory_job_bytes(MemoryJob{"copy", 65536, 8192, ""}) ==
          2.0 * 1024 * 1024 * 1024);  // 1 GiB each way
    CHECK(memory_job_bytes(MemoryJob{"gelu", 10, 8, ""}) == 320.0);
    const auto jobs = plan_memory_jobs(false, 16384, 8192, 3584);
    CHECK(jobs.size() == 6 + 2 + 2);
    CHECK(jobs.back().kernel == "gelu");
    CHECK(jobs.back().cols == 3584);
    CHECK(plan_memory_jobs(true).size() == 4);
}

TEST_CASE("calibrate: collective sizes and the nccl-tests bandwidth definitions") {
    const auto sizes = collective_sizes(false, std::int64_t{1} << 40);
    CHECK(sizes.size() == 23);
    CHECK(sizes.front() == 1024);
    CHECK(sizes.back() == (std::int64_t{4} << 30));
    CHECK(collective_sizes(false, 1 << 20).back() == (1 << 20));
    CHECK(collective_sizes(true, std::int64_t{1} << 40).size() == 6);

    // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n, send/recv 1.
    CHECK(busbw_factor(CollectiveOp::all_reduce, 8) == doctest::Approx(1.75));
    CHECK(busbw_factor(CollectiveOp::all_gather, 8) == doctest::Approx(0.875));
    CHECK(busbw_factor(CollectiveOp::reduce_scatter, 4) == doctest::Approx(0.75));
    CHECK(busbw_factor(CollectiveOp::send_recv, 8) == 1.0);
    CHECK(busbw_factor(CollectiveOp::all_reduce, 2) == doctest::Approx(1.0));
    // A sendrecv_perf line on 8 A100s: 1073741824 B in 5503.4 us -> algbw = busbw = 195.10 GB/s.
    CHECK(algbw_bytes_per_s(1073741824.0, 5503.4e-6) / 1e9 == doctest::Approx(195.10).epsilon(1e-4));
    // All-gather and reduce-scatter counts round down to a multiple of the ranks (nccl-tests'
    // AllGatherGetCollByteCount), all-reduce to whole elements.
    CHECK(collective_bytes(CollectiveOp::all_gather, 1024, 2, 3) == 1020);
    CHECK(collective_bytes(CollectiveOp::reduce_scatter, 1024, 2, 8) == 1024);
    CHECK(collective_bytes(CollectiveOp::all_reduce, 1025, 2, 3) == 1024);
}

TEST_CASE("calibrate: statistics and repetitions") {
    const auto odd = stats_of({3e-6, 1e-6, 2e-6});
    CHECK(odd.median_s == 2e-6);
    CHECK(odd.min_s == 1e-6);
    CHECK(odd.max_s == 3e-6);
    CHECK(odd.reps == 3);
    CHECK(stats_of({4.0, 1.0, 2.0, 3.0}).median_s == 2.5);
    CHECK_THROWS_AS(stats_of({}), InternalError);
    const RepPolicy p = rep_policy(false);
    CHECK(reps_for(1e-6, p) == p.reps_max);  // tiny kernel: the cap
    CHECK(reps_for(1.0, p) == p.reps_min);   // long kernel: the floor
    const int mid = reps_for(0.002, p);      // 0.2 s / 2 ms, up to rounding
    CHECK(mid >= 100);
    CHECK(mid <= 101);
    CHECK(rep_policy(true).reps_max < p.reps_max);
}

TEST_CASE("calibrate: the catalog GPU guessed from the CUDA device name") {
    const double GiB = 1024.0 * 1024.0 * 1024.0;
    CHECK(guess_catalog_gpu("NVIDIA H100 80GB HBM3", 79.2 * GiB) == "H100-SXM5-80GB");
    CHECK(guess_catalog_gpu("NVIDIA H100 80GB HBM3", 94.5 * GiB) == "H100-SXM5-96GB");
    CHECK(guess_catalog_gpu("NVIDIA A100-SXM4-80GB", 79.1 * GiB) == "A100-SXM4-80GB");
    CHECK(guess_catalog_gpu("NVIDIA A100-SXM4-40GB", 39.4 * GiB) == "A100-SXM4-40GB");
    CHECK(guess_catalog_gpu("NVIDIA H200", 139.8 * GiB) == "H200-SXM-141GB");
    CHECK_FALSE(guess_catalog_gpu("NVIDIA H100 PCIe", 79.2 * GiB));
    CHECK_FALSE(guess_catalog_gpu("NVIDIA H100 NVL", 93.0 * GiB));
    CHECK_FALSE(guess_catalog_gpu("NVIDIA A100-PCIE-40GB", 39.4 * GiB));
    CHECK_FALSE(guess_catalog_gpu("NVIDIA GeForce RTX 4090", 23.6 * GiB));
    CHECK_FALSE(guess_catalog_gpu("NVIDIA GH200 480GB", 95.0 * GiB));
    CHECK_FALSE(guess_catalog_gpu("NVIDIA GB200", 184.0 * GiB));
    // Every guess is a catalog name.
    for (const char* name : {"NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200", "NVIDIA B200"})
        CHECK_NOTHROW(find_gpu(*guess_catalog_gpu(name, 80 * GiB), "test"));
}

TEST_CASE("calibrate: version strings") {
    CHECK(cuda_version_string(13000) == "13.0");
    CHECK(cuda_version_string(12040) == "12.4");
    CHECK(cublas_version_string(130100) == "13.1.0");
    CHECK(nccl_version_string(22809) == "2.28.9");
    CHECK(nccl_version_string(2804) == "2.8.4");
    CHECK(driver_version_from_proc("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 "
                                   "01:15:15 UTC 2023\nGCC version:  gcc version 12.2.0") == "535.104.05");
    CHECK(driver_version_from_proc("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  "
                                   "Release Build") == "580.159.04");
    CHECK_FALSE(driver_version_from_proc(""));
}

TEST_CASE("calibrate: the profile written follows trainsim-profile/1") {
    calibrate::Profile p;  // the writer's, not the reader's trainsim::Profile (profile.hpp)
    p.gpu = "H100-SXM5-80GB";
    p.device = DeviceInfo{"NVIDIA H100 80GB HBM3",
                          132,
                          79.2 * kGiB,
                          "580.159.04",
                          "13.0",
                          {{"cublasLt", "13.1.0"}, {"nccl", "2.28.9"}}};
    p.date = "2026-11-22";
    p.source = "unit test";
    p.gemm.push_back(
        GemmRow{GemmDtype::fp8, 4096, 6144, 2048, 1, TimingStats{165.312e-6, 155e-6, 209e-6, 200}, "x"});
    AttentionShape shape{1, 16, 16, 4096, 128, true, "mcore"};
    p.attention.push_back(AttentionRow{"unfused", false, shape, TimingStats{1e-3, 0.9e-3, 1.1e-3, 50}});
    p.memory_bound.push_back(
        MemoryRow{"copy", 2 * kGiB, TimingStats{0.727872e-3, 0.72e-3, 0.74e-3, 80}, "copy"});
    p.collectives.push_back(CollectiveRow{CollectiveOp::all_reduce, 8, 1, 1 << 20, 15.6e-6, "bf16"});
    const auto j = profile_to_json(p);

    const std::set<std::string> top{"format", "gpu",       "device",       "date",        "source",
                                    "gemm",   "attention", "memory_bound", "collectives", "layers"};
    for (const auto& item : j.items()) {
        const std::string k = item.key();
        CHECK_MESSAGE(top.count(k), k);
    }
    CHECK(j["format"] == "trainsim-profile/1");
    CHECK(j["gpu"] == "H100-SXM5-80GB");
    CHECK(j["date"] == "2026-11-22");
    CHECK(j["device"]["sm_count"] == 132);
    CHECK(parse_bytes(j["device"]["memory"].get<std::string>(), "memory") == doctest::Approx(79.2 * kGiB));
    CHECK(j["device"]["libraries"]["nccl"] == "2.28.9");
    // Not structured bindings: doctest's CHECK expands to a lambda, and clang 14 refuses to capture a
    // binding.
    for (const auto& item : j["device"].items()) {
        const std::string k = item.key();
        const auto& v = item.value();
        CHECK((k == "sm_count" ? v.is_number_integer() : (k == "libraries" ? v.is_object() : v.is_string())));
    }

    auto check_keys = [](const nlohmann::ordered_json& row, const std::set<std::string>& allowed,
                         const std::set<std::string>& required) {
        for (const auto& item : row.items()) {
            const std::string k = item.key();
            CHECK_MESSAGE(allowed.count(k), k);
        }
        for (const auto& k : required)
            CHECK_MESSAGE(row.contains(k), k);
    };
    const auto& g = j["gemm"][0];
    check_keys(g, {"dtype", "m", "n", "k", "batch", "time", "min", "max", "reps", "label"},
               {"dtype", "m", "n", "k", "batch", "time"});
    CHECK(g["dtype"] == "fp8");
    CHECK(parse_time(g["time"].get<std::string>(), "time").to_seconds() == doctest::Approx(165.312e-6));
    CHECK(parse_time(g["min"].get<std::string>(), "min").to_seconds() == doctest::Approx(155e-6));
    CHECK(g["reps"] == 200);

    const auto& a = j["attention"][0];
    check_keys(a,
               {"backend", "pass", "batch", "heads", "kv_heads", "seq", "head_dim", "causal", "time", "min",
                "max", "reps", "label"},
               {"backend", "pass", "batch", "heads", "kv_heads", "seq", "head_dim", "causal", "time"});
    CHECK(a["pass"] == "bwd");
    CHECK(a["causal"] == true);
    CHECK(parse_time(a["time"].get<std::string>(), "time").to_seconds() == doctest::Approx(1e-3));

    const auto& mb = j["memory_bound"][0];
    check_keys(mb, {"kernel", "bytes", "time", "min", "max", "reps", "label"}, {"kernel", "bytes", "time"});
    CHECK(mb["bytes"] == "2GiB");

    const auto& c = j["collectives"][0];
    check_keys(c, {"op", "gpus", "nodes", "bytes", "time", "algbw", "busbw", "dtype"},
               {"op", "gpus", "nodes", "bytes", "time", "algbw", "busbw"});
    CHECK(c["bytes"] == "1MiB");
    const double algbw = parse_bandwidth(c["algbw"].get<std::string>(), "algbw").bytes_per_s;
    const double busbw = parse_bandwidth(c["busbw"].get<std::string>(), "busbw").bytes_per_s;
    CHECK(algbw == doctest::Approx(1048576.0 / 15.6e-6).epsilon(1e-5));
    CHECK(busbw == doctest::Approx(algbw * 1.75).epsilon(1e-5));

    // Empty sections are left out; a row without a positive time is never written.
    calibrate::Profile empty = p;
    empty.gemm.clear();
    empty.collectives.clear();
    const auto e = profile_to_json(empty);
    CHECK_FALSE(e.contains("gemm"));
    CHECK_FALSE(e.contains("collectives"));
    empty.memory_bound[0].time.median_s = 0;
    CHECK_THROWS_AS(profile_to_json(empty), InternalError);
}

TEST_CASE("calibrate: quantity formatting reads back exactly enough") {
    CHECK(format_bytes(1024) == "1KiB");
    CHECK(format_bytes(1536) == "1536B");
    CHECK(format_bytes(3.0 * 1024 * 1024) == "3MiB");
    CHECK(format_bytes(4 * kGiB) == "4GiB");
    CHECK(format_bytes(1020) == "1020B");
    CHECK(format_time(0.5e-6) == "0.5000us");
    CHECK(parse_time(format_time(1.23456e-3), "t").to_seconds() == doctest::Approx(1.23456e-3).epsilon(1e-7));
    CHECK(format_bandwidth(117.3e9) == "117.3000GBps");
    const auto d = today_utc();
    CHECK(d.size() == 10);
    CHECK(d[4] == '-');
    CHECK(d[7] == '-');
}

TEST_CASE("calibrate: progress lines in a log file") {
    std::ostringstream os;
    Progress p(os, false);
    p.section("gemm", 20);
    for (int i = 0; i < 20; ++i)
        p.step("shape");
    p.note("skipped one");
    p.done();
    const std::string s = os.str();
    CHECK(test::contains(s, "trainsim-calibrate: gemm (20 items)\n"));
    CHECK(test::contains(s, "[gemm 1/20] shape\n"));
    CHECK(test::contains(s, "[gemm 20/20] shape\n"));
    CHECK_FALSE(test::contains(s, "[gemm 3/20]"));
    CHECK(test::contains(s, "trainsim-calibrate: skipped one\n"));
    CHECK(s.find('\r') == std::string::npos);
}

TEST_CASE("calibrate: CPU references of --self-check") {
    namespace ref = trainsim::calibrate::reference;
    CHECK(ref::bf16_to_float(0x3F80) == 1.0f);
    CHECK(ref::bf16_to_float(0xC040) == -3.0f);
    CHECK(ref::fp16_to_float(0x3C00) == 1.0f);
    CHECK(ref::fp16_to_float(0xC000) == -2.0f);
    CHECK(ref::fp16_to_float(0x0001) == std::ldexp(1.0f, -24));
    CHECK(ref::fp16_to_float(0x7BFF) == 65504.0f);
    CHECK(ref::e4m3_to_float(0x38) == 1.0f);
    CHECK(ref::e4m3_to_float(0x7E) == 448.0f);  // the largest E4M3 value
    CHECK(ref::e4m3_to_float(0xB0) == -0.5f);
    CHECK(ref::e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
    CHECK(std::isnan(ref::e4m3_to_float(0x7F)));

    // y = x . W^T, two batches.
    const std::vector<float> x{1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0};  // [2][2, 3]
    const std::vector<float> w{1, 0, 0, 0, 1, 1, 2, 2, 2, 0, 0, 1};  // [2][2, 3]
    CHECK(ref::gemm_xwt(x, w, 2, 2, 3, 2) == std::vector<float>{1, 5, 4, 11, 2, 0, 2, 0});

    // Attention: the first query sees only the first key; the backward is the gradient of sum(O * dO).
    const std::int64_t bh = 2, seq = 3, d = 2;
    const std::vector<float> q{0.1f, -0.4f, 0.7f, 0.2f, -0.3f, 0.5f, 0.9f, -0.1f, 0.0f, 0.3f, -0.6f, 0.8f};
    const std::vector<float> k{0.5f, 0.1f, -0.2f, 0.4f, 0.3f, -0.7f, 0.2f, 0.6f, -0.5f, 0.1f, 0.4f, 0.4f};
    const std::vector<float> v{1.0f, -1.0f, 0.5f, 0.2f, -0.3f, 0.8f, 0.6f, 0.1f, -0.2f, 0.9f, 0.3f, -0.4f};
    const std::vector<float> dout{0.2f, 0.1f, -0.3f, 0.4f, 0.5f, -0.2f, 0.1f, 0.7f, -0.6f, 0.3f, 0.2f, 0.2f};
    const float alpha = 0.7f;
    const auto fwd = ref::attention_forward(q, k, v, bh, seq, d, alpha);
    CHECK(fwd.p[0] == doctest::Approx(1.0));
    CHECK(fwd.p[1] == 0.0f);
    CHECK(fwd.o[0] == doctest::Approx(v[0]));
    CHECK(fwd.p[3] + fwd.p[4] == doctest::Approx(1.0));
    const auto bwd = ref::attention_backward(q, k, v, fwd.p, dout, bh, seq, d, alpha);
    auto loss = [&](const std::vector<float>& qq, const std::vector<float>& kk,
                    const std::vector<float>& vv) {
        const auto f = ref::attention_forward(qq, kk, vv, bh, seq, d, alpha);
        double l = 0;
        for (std::size_t i = 0; i < f.o.size(); ++i)
            l += static_cast<double>(f.o[i]) * dout[i];
        return l;
    };
    const double eps = 1e-2;
    for (std::size_t i = 0; i < q.size(); ++i) {
        auto qp = q, qm = q, kp = k, km = k, vp = v, vm = v;
        qp[i] += eps, qm[i] -= eps, kp[i] += eps, km[i] -= eps, vp[i] += eps, vm[i] -= eps;
        CHECK(bwd.dq[i] ==
              doctest::Approx((loss(qp, k, v) - loss(qm, k, v)) / (2 * eps)).epsilon(1e-2).scale(0.1));
        CHECK(bwd.dk[i] ==
              doctest::Approx((loss(q, kp, v) - loss(q, km, v)) / (2 * eps)).epsilon(1e-2).scale(0.1));
        CHECK(bwd.dv[i] ==
              doctest::Approx((loss(q, k, vp) - loss(q, k, vm)) / (2 * eps)).epsilon(1e-2).scale(0.1));
    }

    const auto ln = ref::layernorm({1, 2, 3, 4}, {1, 1, 1, 1}, {0, 0, 0, 0}, 1, 4);
    CHECK(ln[0] == doctest::Approx(-1.5 / std::sqrt(1.25 + 1e-5)));
    CHECK(ln[3] == doctest::Approx(1.5 / std::sqrt(1.25 + 1e-5)));
    const auto g = ref::gelu({0.0f, 1.0f, -1.0f});
    CHECK(g[0] == 0.0f);
    CHECK(g[1] == doctest::Approx(0.8411920).epsilon(1e-6));
    CHECK(g[2] == doctest::Approx(-0.1588080).epsilon(1e-6));

    CHECK(ref::worst_error({1.0f, 2.0f}, {1.0f, 2.0f}, 0.01, 0) == 0.0);
    CHECK(ref::worst_error({1.0f, 2.04f}, {1.0f, 2.0f}, 0.01, 0) ==
          doctest::Approx(2.0));  // 0.04 / (0.01 * 2)
    CHECK(std::isinf(ref::worst_error({1.0f}, {1.0f, 2.0f}, 0.01, 0)));
}
