#include "trainsim/calibration.hpp"

#include "strict_json.hpp"

namespace trainsim {

const std::vector<std::string>& calibratable_constants() {
    static const std::vector<std::string> names = {"gemm_max_efficiency",
                                                   "gemm_k_half",
                                                   "fp8_gemm_efficiency",
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
    throw InputError(fmt::format("\"{}\" is not a calibratable GPU constant", name));
}

Calibration parse_calibration(const nlohmann::json& j, const std::string& file) {
    detail::StrictObject o(j, file, "");
    const auto f = o.string("format");
    if (f != "trainsim-calibration/1")
        o.fail("format", fmt::format("= \"{}\" is not \"trainsim-calibration/1\"", f));
    Calibration c;
    c.source = o.string("source");
    if (o.has("fit")) o.raw("fit");
    const auto& gpus = o.raw("gpus");
    if (!gpus.is_object()) o.fail("gpus", "must be an object");
    for (auto it = gpus.begin(); it != gpus.end(); ++it) {
        try {
            find_gpu(it.key(), "gpus");
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", file, e.what()));
        }
        detail::StrictObject g(it.value(), file, "gpus." + it.key());
        for (const auto& name : calibratable_constants()) {
            if (!g.has(name)) continue;
            const double v = g.number(name);
            if (!(v > 0)) g.fail(g.field(name), fmt::format("= {} must be positive", v));
            if (name.find("efficiency") != std::string::npos && v > 1)
                g.fail(g.field(name), fmt::format("= {} is an efficiency, at most 1", v));
            c.gpus[it.key()][name] = v;
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

void apply_calibration(const Calibration& c, TopologySpec& topology) {
    if (!c.gpus.count(topology.gpu)) return;
    const GpuSpec& base =
        topology.gpu_calibrated ? *topology.gpu_calibrated : find_gpu(topology.gpu, "topology.gpu");
    topology.gpu_calibrated = apply_calibration(c, base);
}

}  // namespace trainsim
