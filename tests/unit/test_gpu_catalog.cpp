// The GPU catalog: every entry cites its datasheet, uncalibrated entries say whose constants they reuse,
// every GPU type of the measured-runs format resolves, aliases resolve to one part.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"

using namespace trainsim;

TEST_CASE("gpu catalog: every entry cites a source and has its datasheet figures") {
    for (const auto& g : gpu_catalog()) {
        INFO("GPU ", g.name);
        // A citation names a document: a URL or a datasheet / data sheet / paper by name.
        const bool cites =
            g.source.find("http") != std::string::npos || g.source.find("datasheet") != std::string::npos ||
            g.source.find("data sheet") != std::string::npos || g.source.find("arXiv:") != std::string::npos;
        CHECK(cites);
        CHECK(g.peak_bf16_flops > 0);
        CHECK(g.peak_fp16_flops > 0);
        CHECK(g.hbm_bytes > 0);
        CHECK(g.hbm_bytes_per_s > 0);
        CHECK(g.scale_up_bytes_per_s > 0);
        CHECK(g.tdp_w > 0);
        CHECK(g.sm_count > 0);
        // Dense peaks: each narrower precision at most doubles the rate (a sparse figure would quadruple).
        if (g.peak_fp8_flops > 0) CHECK(g.peak_fp8_flops <= 2.0 * g.peak_bf16_flops * 1.0001);
        if (g.peak_fp4_flops > 0) {
            CHECK(g.peak_fp8_flops > 0);
            CHECK(g.peak_fp4_flops <= 3.0 * g.peak_fp8_flops * 1.0001);
        }
        CHECK_FALSE(g.constants_from.empty());
    }
}

TEST_CASE("gpu catalog: an uncalibrated entry reuses a calibrated part's constants, unchanged") {
    int uncalibrated = 0;
    for (const auto& g : gpu_catalog()) {
        INFO("GPU ", g.name);
        if (g.calibrated) {
            CHECK(uncalibrated_note(g).empty());
            continue;
        }
        ++uncalibrated;
        const GpuSpec& base = find_gpu(g.constants_from, "constants_from");
        CHECK(base.calibrated);
        CHECK(g.gemm_max_efficiency == base.gemm_max_efficiency);
        CHECK(g.gemm_k_half == base.gemm_k_half);
        CHECK(g.fp8_gemm_efficiency == base.fp8_gemm_efficiency);
        CHECK(g.cudnn_attention_efficiency == base.cudnn_attention_efficiency);
        CHECK(g.flash_attention_efficiency == base.flash_attention_efficiency);
        CHECK(g.hbm_efficiency == base.hbm_efficiency);
        CHECK(g.kernel_overhead_s == base.kernel_overhead_s);
        CHECK(g.nvlink_efficiency == base.nvlink_efficiency);
        const std::string note = uncalibrated_note(g);
        CHECK(note.find(g.name) != std::string::npos);
        CHECK(note.find("uncalibrated") != std::string::npos);
        CHECK(note.find(base.name) != std::string::npos);
    }
    CHECK(uncalibrated > 0);
    CHECK(find_gpu("H100-SXM5-80GB", "t").calibrated);
    CHECK(find_gpu("A100-SXM4-80GB", "t").calibrated);
    CHECK_FALSE(find_gpu("H200-SXM-141GB", "t").calibrated);
    CHECK(find_gpu("H200-SXM-141GB", "t").constants_from == "H100-SXM5-80GB");
    CHECK(find_gpu("H800-SXM5-80GB", "t").constants_from == "H100-SXM5-80GB");
}

TEST_CASE("gpu catalog: the parts of issue 15 with their datasheet figures") {
    const GpuSpec& h200 = find_gpu("H200", "t");
    CHECK(h200.name == "H200-SXM-141GB");
    CHECK(h200.hbm_bytes_per_s == doctest::Approx(4.8e12));
    CHECK(find_gpu("H800", "t").scale_up_bytes_per_s == doctest::Approx(200e9));  // 400 GB/s bidirectional
    CHECK(find_gpu("B200", "t").peak_fp4_flops == doctest::Approx(9e15));
    CHECK(find_gpu("GB300", "t").peak_fp4_flops == doctest::Approx(15e15));
    const GpuSpec& mi300x = find_gpu("MI300X", "t");
    CHECK(mi300x.peak_bf16_flops == doctest::Approx(1307.4e12));
    CHECK(mi300x.scale_up_bytes_per_s == doctest::Approx(448e9));  // 7 links x 64 GB/s per direction
    CHECK_FALSE(mi300x.nvlink_sharp);
    CHECK(find_gpu("MI325X", "t").hbm_bytes_per_s == doctest::Approx(6e12));
}

TEST_CASE("gpu catalog: every GPU type the measured-runs format lists resolves; aliases name one part") {
    // The format's list (shared/validation/README.md, cluster.gpu and the 2026 extensions).
    for (const char* name : {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-SXM5-96GB",
                             "H200-SXM-141GB", "B200", "B300", "GB200", "GB300"})
        CHECK_NOTHROW(find_gpu(name, "cluster.gpu"));
    std::set<std::string> names;
    for (const auto& g : gpu_catalog())
        CHECK(names.insert(g.name).second);
    for (const auto& entry : gpu_aliases()) {
        // Not a structured binding: INFO's lambda cannot capture one under clang 14 (the sanitizer build).
        const auto& alias = entry.first;
        const auto& canonical = entry.second;
        INFO("alias ", alias);
        CHECK_FALSE(names.count(alias));
        CHECK(find_gpu(alias, "t").name == canonical);
    }
    // Ambiguous short names are not aliases.
    CHECK_THROWS_AS(find_gpu("H100", "t"), InputError);
    CHECK_THROWS_AS(find_gpu("A100", "t"), InputError);
}
