#include "trainsim/calibration.hpp"

#include <set>
#include <string>
#include <utility>

#include "strict_json.hpp"
#include "trainsim/cluster.hpp"

namespace trainsim {

const std::vector<std::string>& calibratable_constants() {
    static const std::vector<std::string> names = {"gemm_max_efficiency",
                                                   "gemm_k_half",
                                                   "fp8_gemm_efficiency",
                                                   "fp4_gemm_efficiency",
                                                   "gemm_min_time_s",
                                                   "flash_attention_efficiency",
                                                   "flash_attention_bwd_factor",
                                                   "flash_attention_cta_half",
                                                   "flash_attention_key_half",
                                                   "cudnn_attention_efficiency",
                                                   "cudnn_attention_bwd_factor",
                                                   "cudnn_attention_cta_half",
                                                   "cudnn_attention_key_half",
                                                   "hbm_efficiency",
                                                   "kernel_overhead_s",
                                                   "nvlink_efficiency"};
    return names;
}

double& gpu_constant(GpuSpec& g, const std::string& name) {
    if (name == "gemm_max_efficiency") return g.gemm_max_efficiency;
    if (name == "gemm_k_half") return g.gemm_k_half;
    if (name == "fp8_gemm_efficiency") return g.fp8_gemm_efficiency;
    if (name == "fp4_gemm_efficiency") return g.fp4_gemm_efficiency;
    if (name == "gemm_min_time_s") return g.gemm_min_time_s;
    if (name == "flash_attention_efficiency") return g.flash_attention_efficiency;
    if (name == "cudnn_attention_efficiency") return g.cudnn_attention_efficiency;
    if (name == "flash_attention_bwd_factor") return g.flash_attention_bwd_factor;
    if (name == "flash_attention_cta_half") return g.flash_attention_cta_half;
    if (name == "flash_attention_key_half") return g.flash_attention_key_half;
    if (name == "cudnn_attention_bwd_factor") return g.cudnn_attention_bwd_factor;
    if (name == "cudnn_attention_cta_half") return g.cudnn_attention_cta_half;
    if (name == "cudnn_attention_key_half") return g.cudnn_attention_key_half;
    if (name == "hbm_efficiency") return g.hbm_efficiency;
    if (name == "kernel_overhead_s") return g.kernel_overhead_s;
    if (name == "nvlink_efficiency") return g.nvlink_efficiency;
    throw InputError(fmt::format("\"{}\" is not a calibratable GPU constant", clip_for_message(name)));
}

namespace {
/// The supported range of a calibratable constant (docs/inputs.md): efficiencies from 1% (below, one kernel
/// would take hours), backward factors 0.1-100, half-saturation sizes up to 10^9, times up to 1 s.
std::pair<double, double> constant_range(const std::string& name) {
    if (name.find("efficiency") != std::string::npos) return {0.01, 1.0};
    if (name.find("bwd_factor") != std::string::npos) return {0.1, 100.0};
    if (name.find("_half") != std::string::npos) return {1e-9, 1e9};
    return {1e-12, 1.0};  // gemm_min_time_s, kernel_overhead_s
}
}  // namespace

Calibration parse_calibration(const nlohmann::json& j, const std::string& file) {
    detail::StrictObject o(j, file, "");
    const auto f = o.string("format");
    if (f != "trainsim-calibration/1")
        o.fail("format", fmt::format("= \"{}\" is not \"trainsim-calibration/1\"", clip_for_message(f)));
    Calibration c;
    c.source = o.string("source");
    if (o.has("fit")) o.raw("fit");
    const auto& gpus = o.raw("gpus");
    if (!gpus.is_object()) o.fail("gpus", "must be an object");
    std::set<std::string> named;  // catalog names
    for (auto it = gpus.begin(); it != gpus.end(); ++it) {
        std::string gpu_name;  // the catalog name of a GPU named by an alias
        try {
            gpu_name = find_gpu(it.key(), "gpus").name;
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", file, e.what()));
        }
        // Two names of one GPU (an alias and its catalog name): which constants held depended on the keys'
        // order (round 12).
        if (!named.insert(gpu_name).second)
            o.fail("gpus", fmt::format("names GPU {} twice (\"{}\" is one of its names); give its constants "
                                       "once",
                                       gpu_name, clip_for_message(it.key())));
        detail::StrictObject g(it.value(), file, "gpus." + it.key());
        for (const auto& name : calibratable_constants()) {
            if (!g.has(name)) continue;
            const double v = g.number(name);
            if (!(v > 0)) g.fail(g.field(name), fmt::format("= {} must be positive", v));
            if (name.find("efficiency") != std::string::npos && v > 1)
                g.fail(g.field(name), fmt::format("= {} is an efficiency, at most 1", v));
            const auto [lo, hi] = constant_range(name);
            g.number_in(name, lo, hi);
            c.gpus[gpu_name][name] = v;
        }
        g.finish();
    }
    o.finish();
    return c;
}

nlohmann::json to_json(const Calibration& c) {
    nlohmann::json j = {
        {"format", "trainsim-calibration/1"}, {"source", c.source}, {"gpus", nlohmann::json::object()}};
    for (const auto& [gpu, consts] : c.gpus)
        for (const auto& [name, v] : consts)
            j["gpus"][gpu][name] = v;
    return j;
}

GpuSpec apply_calibration(const Calibration& c, const GpuSpec& gpu) {
    GpuSpec g = gpu;
    auto it = c.gpus.find(gpu.name);
    if (it == c.gpus.end()) return g;
    for (const auto& [name, v] : it->second)
        gpu_constant(g, name) = v;
    return g;
}

void check_calibration_gpu(const Calibration& c, const std::string& file, const std::string& gpu,
                           const std::string& cluster_label) {
    if (c.gpus.count(gpu)) return;
    std::string names;
    for (const auto& entry : c.gpus)
        names += (names.empty() ? "" : ", ") + entry.first;
    throw InputError(
        fmt::format("{}: the calibration has constants for {}, none for GPU {} of {}: it would "
                    "change nothing",
                    file, names.empty() ? "no GPU" : names, gpu, cluster_label));
}

void apply_calibration(const Calibration& c, TopologySpec& topology) {
    if (!c.gpus.count(topology.gpu)) return;
    const GpuSpec& base = topology_gpu(topology);
    topology.gpu_calibrated = apply_calibration(c, base);
}

}  // namespace trainsim
