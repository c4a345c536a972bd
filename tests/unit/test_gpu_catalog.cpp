// The GPU catalog: every entry cites its datasheet, uncalibrated entries say whose constants they reuse,
// every GPU type of the measured-runs format resolves, aliases resolve to one part.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
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

namespace {

/// The constants of the fit record an entry's `fitted` names ("... (calibration/<name>.json)") for its GPU.
std::map<std::string, double> fit_record(const GpuSpec& g) {
    const auto at = g.fitted.find("calibration/");
    const auto end = g.fitted.find(".json", at);
    REQUIRE(at != std::string::npos);
    REQUIRE(end != std::string::npos);
    const std::string path = g.fitted.substr(at, end + 5 - at);
    const Calibration c =
        parse_calibration(read_json_file(std::string(TRAINSIM_SOURCE_DIR) + "/" + path), path);
    REQUIRE(c.gpus.count(g.name) == 1);
    return c.gpus.at(g.name);
}

}  // namespace

TEST_CASE(
    "gpu catalog: an uncalibrated entry reuses a calibrated part's constants, unchanged, but those fitted") {
    int uncalibrated = 0, fitted = 0;
    for (const auto& g : gpu_catalog()) {
        INFO("GPU ", g.name);
        if (g.calibrated) {
            CHECK(uncalibrated_note(g).empty());
            CHECK(g.fitted.empty());
            continue;
        }
        ++uncalibrated;
        const GpuSpec& base = find_gpu(g.constants_from, "constants_from");
        CHECK(base.calibrated);
        // A fitted constant holds its record's value (to the 3 decimals the catalog writes); the rest are
        // the calibrated part's.
        std::map<std::string, double> fit;
        if (!g.fitted.empty()) {
            ++fitted;
            fit = fit_record(g);
            CHECK_FALSE(fit.empty());
            GpuSpec entry = g;
            for (const auto& constant : fit) {  // no structured binding: clang cannot capture one in CHECK
                const std::string& name = constant.first;
                INFO("fitted constant ", name);
                CHECK(gpu_constant(entry, name) == doctest::Approx(constant.second).epsilon(1e-3));
                CHECK(g.fitted.find(name) != std::string::npos);
            }
        }
        auto reused = [&](const char* name, double a, double b) {
            INFO("constant ", name);
            if (fit.count(name) == 0) CHECK(a == b);
        };
        reused("gemm_max_efficiency", g.gemm_max_efficiency, base.gemm_max_efficiency);
        reused("gemm_k_half", g.gemm_k_half, base.gemm_k_half);
        reused("fp8_gemm_efficiency", g.fp8_gemm_efficiency, base.fp8_gemm_efficiency);
        reused("cudnn_attention_efficiency", g.cudnn_attention_efficiency, base.cudnn_attention_efficiency);
        reused("flash_attention_efficiency", g.flash_attention_efficiency, base.flash_attention_efficiency);
        reused("hbm_efficiency", g.hbm_efficiency, base.hbm_efficiency);
        reused("kernel_overhead_s", g.kernel_overhead_s, base.kernel_overhead_s);
        reused("nvlink_efficiency", g.nvlink_efficiency, base.nvlink_efficiency);
        const std::string note = uncalibrated_note(g);
        CHECK(note.find(g.name) != std::string::npos);
        CHECK(note.find("uncalibrated") != std::string::npos);
        CHECK(note.find(base.name) != std::string::npos);
        if (!g.fitted.empty()) CHECK(note.find(g.fitted) != std::string::npos);
    }
    CHECK(fitted == 3);  // B200, GB200 and GB300 (calibration/README.md)
    CHECK(uncalibrated > 0);
    CHECK(find_gpu("H100-SXM5-80GB", "t").calibrated);
    CHECK(find_gpu("A100-SXM4-80GB", "t").calibrated);
    CHECK_FALSE(find_gpu("H200-SXM-141GB", "t").calibrated);
    CHECK(find_gpu("H200-SXM-141GB", "t").constants_from == "H100-SXM5-80GB");
    CHECK(find_gpu("H800-SXM5-80GB", "t").constants_from == "H100-SXM5-80GB");
}

TEST_CASE("gpu catalog: H100 SXM5 96GB's two tensor-core constants hold its fit record, the rest H100's") {
    // calibration/h100-96gb-fit.json (calibration/README.md): fitted to the part's 8 step times.
    const std::string path = "calibration/h100-96gb-fit.json";
    const Calibration c =
        parse_calibration(read_json_file(std::string(TRAINSIM_SOURCE_DIR) + "/" + path), path);
    REQUIRE(c.gpus.count("H100-SXM5-96GB") == 1);
    const std::map<std::string, double>& fit = c.gpus.at("H100-SXM5-96GB");
    CHECK(fit.size() == 2);
    GpuSpec g = find_gpu("H100-SXM5-96GB", "t");
    const GpuSpec& h100 = find_gpu("H100-SXM5-80GB", "t");
    CHECK(g.calibrated);
    CHECK(g.constants_from.find(path) != std::string::npos);
    CHECK(gpu_constant(g, "gemm_max_efficiency") ==
          doctest::Approx(fit.at("gemm_max_efficiency")).epsilon(1e-3));
    CHECK(gpu_constant(g, "flash_attention_efficiency") ==
          doctest::Approx(fit.at("flash_attention_efficiency")).epsilon(1e-3));
    // Slower than the 80 GB part's kernel-fitted values, the other constants the same.
    CHECK(g.gemm_max_efficiency < h100.gemm_max_efficiency);
    CHECK(g.flash_attention_efficiency < h100.flash_attention_efficiency);
    CHECK(g.cudnn_attention_efficiency == h100.cudnn_attention_efficiency);
    CHECK(g.fp8_gemm_efficiency == h100.fp8_gemm_efficiency);
    CHECK(g.hbm_efficiency == h100.hbm_efficiency);
    CHECK(g.gemm_k_half == h100.gemm_k_half);
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
