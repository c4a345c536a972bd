#include "trainsim/measured_runs.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "layout_fields.hpp"
#include "strict_json.hpp"
#include "trainsim/limits.hpp"

#include "trainsim/collectives.hpp"
#include "trainsim/config.hpp"
#include "trainsim/framework_defaults.hpp"

namespace trainsim {

using detail::StrictObject;
using nlohmann::json;

namespace {

bool is_ampere(const std::string& gpu) {
    return gpu.rfind("A100", 0) == 0;
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
}

bool contains(const std::string& s, const char* what) {
    return s.find(what) != std::string::npos;
}

/// True when `o` is an object whose `key` is the boolean true.
bool is_true(const json& o, const char* key) {
    return o.is_object() && o.contains(key) && o.at(key).is_boolean() && o.at(key).get<bool>();
}

/// `o[key]` when it is a string, else "".
std::string string_or_empty(const json& o, const char* key) {
    return o.is_object() && o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>() : "";
}

/// A JSON value for a one-line message, cut to 80 characters.
std::string short_dump(const json& v) {
    return detail::shown(v);
}

}  // namespace

TopologySpec dgx_topology(const std::string& gpu, int gpus, int gpus_per_node, double nvlink_GBps,
                          int nics_per_node, double nic_Gbps, const std::string& scale_out_kind) {
    TopologySpec t;
    t.name = fmt::format("dgx-style {} x {}", gpus, gpu);
    t.gpu = gpu;
    t.gpus_per_node = gpus_per_node;
    t.nodes = gpus / gpus_per_node;
    t.nvlink_bandwidth = Bandwidth::GBps(nvlink_GBps);
    t.nvlink_latency = Time::seconds(1e-6);
    t.scale_out_kind = scale_out_kind;
    t.nics_per_node = nics_per_node;
    t.nic_bandwidth = Bandwidth::Gbps(nic_Gbps);
    t.pcie_bandwidth = Bandwidth::GBps(is_ampere(gpu) ? 32.0 : 64.0);
    t.nic_latency = Time::seconds(2e-6);
    t.switch_latency = Time::seconds(0.5e-6);
    t.nodes_per_leaf = 32;
    t.oversubscription = 1.0;
    // InfiniBand fabrics route adaptively, RoCE hashes flows over the spines (TopologySpec::routing).
    t.routing = scale_out_kind == "roce" ? ScaleOutRouting::ecmp : ScaleOutRouting::adaptive;
    return t;
}

namespace {

/// The DGX-style system of each GPU type: NVLink rate per GPU and direction, compute NIC line rate (one NIC
/// per GPU). Sources: DGX A100 user guide (NVLink3 600 GB/s bidirectional, 8x ConnectX-6 HDR 200 Gb/s);
/// DGX H100 / H200 user guides (NVLink4 900 GB/s bidirectional, 8x ConnectX-7 NDR 400 Gb/s); DGX B200
/// datasheet (NVLink5 1.8 TB/s bidirectional, 8x ConnectX-7 400 Gb/s); DGX B300 datasheet (8x ConnectX-8
/// 800 Gb/s); GB200 NVL72 datasheet (NVLink5 1.8 TB/s per GPU, ConnectX-7 400 Gb/s per GPU); GB300 NVL72
/// datasheet (72x ConnectX-8 800 Gb/s); H800 nodes (H800 datasheet: NVLink 400 GB/s bidirectional;
/// DeepSeek-V3 report arXiv:2412.19437 Sec. 3.1 and 3.2.2: 8 GPUs per node on NVSwitch, InfiniBand at 50 GB/s
/// = 400 Gb/s per GPU across nodes); MI300X / MI325X platforms (AMD data sheets: 7
/// Infinity Fabric links of 64 GB/s per direction, summed as topologies/mi300x.json does; 400 Gb/s per GPU).
struct DgxPreset {
    const char* token;  ///< matched in a collective row's `hardware` text, first match wins
    const char* gpu;    ///< catalog name
    double nvlink_GBps;
    double nic_Gbps;
};
constexpr DgxPreset kDgxPresets[] = {
    {"GB300", "GB300", 900, 800},
    {"GB200", "GB200", 900, 400},
    {"B300", "B300", 900, 800},
    {"B200", "B200", 900, 400},
    {"H200", "H200-SXM-141GB", 450, 400},
    {"H800", "H800-SXM5-80GB", 200, 400},
    {"MI325X", "MI325X", 448, 400},
    {"MI300X", "MI300X", 448, 400},
    {"H100 96GB", "H100-SXM5-96GB", 450, 400},
    {"H100-SXM5-96GB", "H100-SXM5-96GB", 450, 400},
    {"H100", "H100-SXM5-80GB", 450, 400},
    {"A100 40GB", "A100-SXM4-40GB", 300, 200},
    {"A100-SXM4-40GB", "A100-SXM4-40GB", 300, 200},
    {"A100", "A100-SXM4-80GB", 300, 200},
};

/// What the run's extensions.cluster says about the scale-up domain.
struct DomainInfo {
    std::optional<int> nvlink_domain_gpus;
    std::optional<int> gpus_per_tray;
};

/// GPUs per compute tray of an NVL72 rack: 4 (GB200 and GB300 NVL72 datasheets: 18 compute trays, 72 GPUs);
/// 1 for other GPUs (no tray constraint).
int default_gpus_per_tray(const std::string& gpu) {
    return gpu == "GB200" || gpu == "GB300" ? 4 : 1;
}

TopologySpec parse_cluster(StrictObject c, const DomainInfo& domain, std::vector<std::string>& notes) {
    std::string gpu = c.string("gpu");
    try {
        gpu = find_gpu(gpu, c.field("gpu")).name;  // an alias read as the catalog name
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", c.file(), e.what()));
    }
    const int gpus = static_cast<int>(c.positive("gpus"));
    if (gpus > limits::kMaxGpus)
        c.fail(c.field("gpus"),
               fmt::format("= {} is above the limit of {} (trainsim/limits.hpp)", gpus, limits::kMaxGpus));
    int gpn = static_cast<int>(c.positive("gpus_per_node"));
    auto su = c.object("scale_up");
    su.choice("kind", {"nvswitch"});
    const double nvlink = su.number_in("bandwidth_GBps_per_gpu", 1e-3, 1e6, "GBps");
    if (!(nvlink > 0))
        su.fail(su.field("bandwidth_GBps_per_gpu"), fmt::format("= {} must be positive", nvlink));
    su.finish();
    auto so = c.object("scale_out");
    const std::string kind = so.choice("kind", {"infiniband", "roce"});
    int nics = static_cast<int>(so.positive("nics_per_node"));
    const double nic = so.number_in("nic_Gbps", 1e-3, 1e7, "Gbps");
    if (!(nic > 0)) so.fail(so.field("nic_Gbps"), fmt::format("= {} must be positive", nic));
    so.finish();
    c.finish();
    if (gpus % gpn != 0) {
        // A job smaller than one node, or NVLink domains the job does not fill evenly: equal parts.
        const bool domain_stated = domain.nvlink_domain_gpus && *domain.nvlink_domain_gpus == gpn;
        if (gpus > gpn && !domain_stated)
            c.fail(
                c.field("gpus"),
                fmt::format("= {} is not a multiple of gpus_per_node = {} (state "
                            "extensions.cluster.nvlink_domain_gpus = {} for an NVLink domain used in parts)",
                            gpus, gpn, gpn));
        const int tray = gpus > gpn ? domain.gpus_per_tray.value_or(default_gpus_per_tray(gpu)) : 1;
        int part = 0;
        for (int d = std::min(gpus, gpn); d >= 1 && part == 0; --d)
            if (gpus % d == 0 && d % tray == 0) part = d;
        if (part == 0)
            c.fail(c.field("gpus"), fmt::format("= {} cannot be split into equal parts of whole trays of {} "
                                                "GPUs within gpus_per_node = {}",
                                                gpus, tray, gpn));
        const int part_nics = std::max(1, static_cast<int>(std::lround(1.0 * nics * part / gpn)));
        notes.push_back(
            gpus < gpn ? fmt::format("{} GPUs of one {}-GPU node, {} NICs", gpus, gpn, part_nics)
                       : fmt::format(
                             "{} GPUs on NVLink domains of {}: {} domains of {} GPUs (the largest divisor of "
                             "{} in whole trays of {}), {} NICs each",
                             gpus, gpn, gpus / part, part, gpus, tray, part_nics));
        gpn = part;
        nics = part_nics;
    }
    if (nics > gpn)
        c.fail(c.field("scale_out.nics_per_node"),
               fmt::format("= {} exceeds the GPUs per node = {}", nics, gpn));
    return dgx_topology(gpu, gpus, gpn, nvlink, nics, nic, kind);
}

/// The framework a run ran on when its row does not say (`training.framework`): "torchtitan" named in the
/// source -> torchtitan; "llm-foundry" or "composer" -> composer; "DeepSpeed" or zero_stage >= 1 (Megatron-LM
/// has no ZeRO stages, it has the distributed optimizer) -> deepspeed; otherwise megatron.
Framework framework_from_source(const std::string& source, int zero_stage) {
    const std::string source_lower = lower(source);
    auto names = [&](const char* word) { return contains(source_lower, word); };
    if (names("torchtitan")) return Framework::torchtitan;
    if (names("llm-foundry") || names("composer")) return Framework::composer;
    if (names("deepspeed") || zero_stage >= 1) return Framework::deepspeed;
    return Framework::megatron;
}

/// Megatron-Bridge's recipe defaults where they differ from Megatron-LM's (see the header). Called before the
/// row's own keys are read, so a row may state them otherwise.
void apply_recipe_defaults(Layout& l, const std::string& source) {
    if (l.framework != Framework::megatron || source.find("Megatron-Bridge") == std::string::npos) return;
    l.cross_entropy_fusion = true;
    l.grad_reduce_in_bf16 = true;
    l.fp8_param_gather = l.precision == Precision::fp8 &&
                         (l.fp8_recipe == Fp8Recipe::delayed || l.fp8_recipe == Fp8Recipe::tensorwise ||
                          l.fp8_recipe == Fp8Recipe::mxfp8);
    // NVFP4: the performance configs switch TP communication overlap off (scripts/performance/configs/llama/
    // llama3_llm_pretrain.py and llama31_llm_pretrain.py, v0.3.0-v0.4.0: `tp_comm_overlap = False if
    // precision == "nvfp4"`; the rows' only nvfp4 pre-training configs).
    if (l.precision == Precision::fp8 && l.fp8_recipe == Fp8Recipe::nvfp4) l.tp_comm_overlap = false;
}

Layout parse_training(StrictObject o, [[maybe_unused]] const ModelSpec& m, const std::string& gpu,
                      const std::string& source, [[maybe_unused]] std::optional<std::string>& unsupported) {
    Layout l;
    l.tp = static_cast<int>(o.positive("tp"));
    l.pp = static_cast<int>(o.positive("pp"));
    l.dp = static_cast<int>(o.positive("dp"));
    l.cp = o.has("cp") && !o.raw("cp").is_null() ? static_cast<int>(o.positive("cp")) : 1;
    l.vpp = o.has("vpp") && !o.raw("vpp").is_null() ? static_cast<int>(o.positive("vpp")) : 1;
    l.micro_batch = o.positive("micro_batch");
    l.global_batch = o.positive("global_batch");
    l.sequence_parallel = o.boolean("sequence_parallel");
    l.zero_stage = static_cast<int>(o.integer("zero_stage"));
    if (l.zero_stage < 0 || l.zero_stage > 3)
        o.fail(o.field("zero_stage"), fmt::format("= {} must be 0, 1, 2 or 3", l.zero_stage));
    l.framework = framework_from_source(source, l.zero_stage);
    if (o.has("framework")) l.framework = *framework_from_string(o.choice("framework", framework_names()));
    // torchtitan's per-op selective checkpointing is what its rows call "selective" (AC mode selective,
    // option "op"); "selective_op" may also be stated.
    const auto r = o.choice("recompute", {"none", "selective", "selective_op", "full"});
    l.recompute = r == "full"           ? Recompute::full
                  : r == "selective_op" ? Recompute::selective_op
                  : r == "selective"    ? (l.framework == Framework::torchtitan ? Recompute::selective_op
                                                                                : Recompute::selective)
                                        : Recompute::none;
    l.distributed_optimizer = o.boolean("distributed_optimizer");
    const auto p = o.choice("precision", {"fp16", "bf16", "fp8", "nvfp4"});
    // "nvfp4" (outside the format's enum, used by the 2026 file): the linear layers' GEMMs in NVFP4, i.e.
    // precision fp8 with the nvfp4 recipe (include/trainsim/layout.hpp, Fp8Recipe).
    l.precision = p == "fp16" ? Precision::fp16 : p == "bf16" ? Precision::bf16 : Precision::fp8;
    // The framework's defaults for what the format does not carry (include/trainsim/framework_defaults.hpp),
    // each overridable per run.
    const bool async_tp = o.boolean_or("async_tp", false);
    l.torch_compile = o.boolean_or("compile", false);
    if (const std::string why = async_tp_refusal(l.framework, async_tp, l.tp, l.torch_compile); !why.empty())
        o.fail(o.field("async_tp"), "= true with compile = false: " + why);
    apply_framework_defaults(l, find_gpu(gpu, "cluster.gpu"), async_tp);
    if (p == "nvfp4") l.fp8_recipe = Fp8Recipe::nvfp4;
    apply_recipe_defaults(l, source);
    detail::read_kernel_choices(o, l);
    l.overlap_grad_reduce = o.boolean_or("overlap_grad_reduce", l.overlap_grad_reduce);
    l.overlap_param_gather = o.boolean_or("overlap_param_gather", l.overlap_param_gather);
    l.tp_comm_overlap = o.boolean_or("tp_comm_overlap", l.tp_comm_overlap);
    if (o.has("layers_per_stage")) {
        const auto& v = o.raw("layers_per_stage");
        if (!v.is_array())
            o.fail(o.field("layers_per_stage"),
                   fmt::format("= {} must be an array of integers", short_dump(v)));
        for (const auto& x : v) {
            if (!x.is_number_integer())
                o.fail(o.field("layers_per_stage"),
                       fmt::format("= {} must be an array of integers", short_dump(v)));
            l.layers_per_stage.push_back(x.get<std::int64_t>());
        }
    }
    l.account_for_embedding_in_pipeline_split =
        o.boolean_or("account_for_embedding_in_pipeline_split", false);
    l.account_for_loss_in_pipeline_split = o.boolean_or("account_for_loss_in_pipeline_split", false);
    if (o.has("pipeline_layout")) l.pipeline_layout = o.string("pipeline_layout");
    o.finish();
    return l;
}

/// Megatron-Bridge's DeepSeek-V3 pipeline layouts (Megatron --pipeline-model-parallel-layout) by the number
/// of virtual stages pp·vpp, MTP layers before the loss: 4, 8 and 16 stages as
/// set_deepseek_v3_pipeline_model_parallel_layout's layout_map (src/megatron/bridge/recipes/deepseek/
/// deepseek_v3.py, v0.2.0-v0.5.1: (4,1); (8,1) and (4,2); (16,1), (8,2) and (4,4) -- the same per stage
/// count), which the GB300 PP 2 x VPP 8 preset states as "Et*4|(t*4|)*14tmL"
/// (deepseek_workload_base_configs.py pp_layout, v0.3.0+); 32 stages as the PP 8 x VPP 4 preset
/// "Et|(tt|)*30mL" (deepseek_llm_pretrain.py deepseek_v3_h100_config, v0.2.0). Empty for other counts.
std::string bridge_deepseek_v3_layout(std::int64_t stages, std::int64_t mtp_layers) {
    const std::string tail =
        std::string(static_cast<std::size_t>(std::max<std::int64_t>(mtp_layers, 0)), 'm') + "L";
    switch (stages) {
        case 4:
            return "Et*16|t*16|t*16|t*13" + tail;
        case 8:
            return "Et*8|(t*8|)*6t*5" + tail;
        case 16:
            return "Et*4|(t*4|)*14t" + tail;
        case 32:
            return "Et|(tt|)*30" + tail;
        default:
            return "";
    }
}

/// The pipeline split of a run whose layout states none, where pp (x vpp) does not divide the layers: the
/// framework's rule (see the header). Sets `unsupported` when no rule applies.
void choose_pipeline_split(const ModelSpec& m, Layout& l, std::optional<std::string>& unsupported,
                           std::vector<std::string>& notes, bool bridge_deepseek_v3) {
    if (!l.layers_per_stage.empty() || l.account_for_embedding_in_pipeline_split ||
        l.account_for_loss_in_pipeline_split || !l.pipeline_layout.empty())
        return;
    const std::int64_t stages = static_cast<std::int64_t>(l.pp) * l.vpp;
    if (bridge_deepseek_v3 && l.pp > 1) {
        l.pipeline_layout = bridge_deepseek_v3_layout(stages, m.mtp_layers);
        if (!l.pipeline_layout.empty()) {
            notes.push_back(fmt::format(
                "pipeline split: Megatron-Bridge's DeepSeek-V3 layout for pp {} x vpp {}: \"{}\"{}", l.pp,
                l.vpp, l.pipeline_layout,
                stages == 8 && l.pp == 2
                    ? " (the recipe's 8-stage layout; pp 2 x vpp 4 is not in its layout_map)"
                    : ""));
            return;
        }
    }
    if (m.layers % l.pp == 0 && (m.layers / l.pp) % l.vpp == 0) return;
    if (l.framework == Framework::megatron) {
        if ((m.layers + 2) % stages == 0) {
            l.account_for_embedding_in_pipeline_split = true;
            l.account_for_loss_in_pipeline_split = true;
            notes.push_back(
                fmt::format("pipeline split: Megatron account_for_embedding/loss_in_pipeline_split, {} + 2 "
                            "layers over pp {} x vpp {} = {} per virtual stage, one fewer on the first and "
                            "the last",
                            m.layers, l.pp, l.vpp, (m.layers + 2) / stages));
            return;
        }
    } else if (l.vpp == 1 && l.pp >= 2 && (m.layers + 2) % l.pp == 0) {
        const std::int64_t per = (m.layers + 2) / l.pp;
        l.layers_per_stage.assign(static_cast<std::size_t>(l.pp), per);
        l.layers_per_stage.front() = per - 1;
        l.layers_per_stage.back() = per - 1;
        return;
    }
    unsupported = fmt::format(
        "uneven pipeline split of {} layers over pp = {}{} (no {} split rule divides it; "
        "state training.layers_per_stage)",
        m.layers, l.pp, l.vpp > 1 ? fmt::format(" x vpp = {}", l.vpp) : "", to_string(l.framework));
}

/// Keys of `extensions` that only document where the row came from.
const std::set<std::string>& provenance_keys() {
    static const std::set<std::string> k = {
        "table",  "source_row",          "source_row_variant",       "recipe_preset", "recipe_match",
        "mlperf", "nemo_release_branch", "precision_recipe_matched", "note",          "notes"};
    return k;
}

/// True when the run's extensions.mlperf names a NeMo submission of MLPerf Training v4.0 or later.
bool mlperf_nemo_fp8_params(const json& ext) {
    if (!ext.is_object() || !ext.contains("mlperf") || !ext.at("mlperf").is_object()) return false;
    const json& m = ext.at("mlperf");
    const std::string framework = m.contains("framework") && m.at("framework").is_string()
                                      ? lower(m.at("framework").get<std::string>())
                                      : "";
    const std::string version =
        m.contains("version") && m.at("version").is_string() ? m.at("version").get<std::string>() : "";
    if (framework.find("nemo") == std::string::npos || version.size() < 2 || version[0] != 'v') return false;
    int major = 0;
    for (std::size_t i = 1; i < version.size() && std::isdigit(static_cast<unsigned char>(version[i])); ++i)
        major = major * 10 + (version[i] - '0');
    return major >= 4;
}

/// extensions.cluster's NVLink domain and tray sizes: a GPU count in 1 .. limits::kMaxGpusPerNode is read;
/// any other value (a negative, a fraction, 1e300, text) is listed in `ignored` (null: not stated).
DomainInfo read_domain(const json& ext, std::vector<std::string>& ignored) {
    DomainInfo d;
    if (!ext.is_object() || !ext.contains("cluster") || !ext.at("cluster").is_object()) return d;
    const auto& c = ext.at("cluster");
    auto count = [&](const char* key) -> std::optional<int> {
        if (!c.contains(key) || c.at(key).is_null()) return std::nullopt;
        const json& v = c.at(key);
        if (v.is_number_integer() && v.get<std::int64_t>() >= 1 &&
            v.get<std::int64_t>() <= limits::kMaxGpusPerNode)
            return static_cast<int>(v.get<std::int64_t>());
        ignored.push_back(fmt::format("extensions.cluster.{} = {} (not a GPU count in 1 .. {})", key,
                                      clip_for_message(v.dump()), limits::kMaxGpusPerNode));
        return std::nullopt;
    };
    d.nvlink_domain_gpus = count("nvlink_domain_gpus");
    d.gpus_per_tray = count("gpus_per_tray");
    return d;
}

}  // namespace

bool moe_supported() {
    return true;
}

namespace {

/// Reads one run's `extensions` object key by key: what trainsim models is set on the run, what it does not
/// simulate marks the run unsupported, the rest is listed in run.ignored.
class ExtensionReader {
  public:
    ExtensionReader(MeasuredRun& run, const std::string& training_recompute, bool sparse_or_latent)
        : run_(run),
          l_(run.layout),
          m_(run.model),
          training_recompute_(training_recompute),
          sparse_or_latent_(sparse_or_latent) {}

    void read(const std::string& k, const json& v) {
        if (provenance_keys().count(k)) return;
        if (k == "moe")
            moe(v);
        else if (k == "precision_detail")
            precision_detail(k, v);
        else if (k == "recompute")
            recompute(k, v);
        else if (k == "head_dim") {
            head_dim(k, v);
        } else if (k == "attention")
            attention(k, v);
        else if (k == "megatron_fsdp")
            megatron_fsdp(k, v);
        else if (k == "cluster")
            cluster(k, v);
        else if (k == "cuda_graphs") {
            if (!(v == false || v == "none" || v.is_null())) ignore(k, v, "CUDA graphs are not modelled");
            if (v == "full_iteration" && sparse_or_latent_) full_iteration_moe();
        } else if (k == "activation") {
            activation(k, v);
        } else if (k == "mtp_layers") {
            if (v.is_number_integer() && v.get<std::int64_t>() >= 0 &&
                v.get<std::int64_t>() <= limits::kMaxLayers)
                m_.mtp_layers = v.get<std::int64_t>();
            else if (!v.is_null())
                ignore(k, v, "not a layer count");
        } else if (k == "fp8_dot_product_attention") {
            // Megatron-Bridge mixed_precision.fp8_dot_product_attention (Layout::fp8_attention).
            if (v == true)
                l_.fp8_attention = true;
            else if (!(v == false || v.is_null()))
                ignore(k, v, "not a boolean");
        } else if (k == "moe_a2a_overlap") {
            // Megatron-Core --overlap-moe-expert-parallel-comm (Layout::moe_a2a_overlap).
            if (v == true)
                l_.moe_a2a_overlap = true;
            else if (!(v == false || v.is_null()))
                ignore(k, v, "not a boolean");
        } else if (k == "moe_dispatcher_backend") {
            // Megatron --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend
            // (Layout::moe_dispatcher).
            if (v == "deepep")
                l_.moe_dispatcher = MoeDispatcher::deepep;
            else if (v == "hybridep")
                l_.moe_dispatcher = MoeDispatcher::hybridep;
            else if (!(v == "alltoall" || v.is_null()))
                ignore(k, v, "not a dispatcher trainsim reads (alltoall, deepep, hybridep)");
        } else if (k == "activation_cpu_offloading_layers") {
            // Megatron-Core --cpu-offloading-num-layers (Layout::activation_offload_layers); finish() drops
            // it, noted, where Megatron-Core would refuse it.
            if (v.is_number_integer() && v.get<std::int64_t>() > 0 && v.get<std::int64_t>() < m_.layers)
                l_.activation_offload_layers = v.get<std::int64_t>();
            else if (!(v == 0 || v.is_null()))
                ignore(k, v, "not a layer count below model.layers");
        } else if (k == "qk_layernorm") {
            // Megatron-Core --qk-layernorm (ModelSpec::qk_layernorm); MLA's latent norms are part of its
            // attention (read_extensions).
            if (v == true)
                m_.qk_layernorm = true;
            else if (v != false)
                ignore(k, v);
        } else {
            ignore(k, v);
        }
    }

  private:
    void ignore(const std::string& key, const json& v, const std::string& why = "") {
        run_.ignored.push_back(
            fmt::format("extensions.{} = {}{}", key, short_dump(v), why.empty() ? "" : " (" + why + ")"));
    }
    // Every reason is kept, mixture of experts first (a DeepSeek-V3 row is MoE before it is MLA).
    void set_unsupported(const std::string& why) {
        const std::string head = why.substr(0, why.find(" ("));  // "precision nvfp4" once, not twice
        if (run_.unsupported && contains(*run_.unsupported, head.c_str())) return;
        run_.unsupported = run_.unsupported ? *run_.unsupported + "; " + why : why;
    }

    /// extensions.head_dim: the head width of MoE / MLA rows (Megatron-Core --kv-channels); on dense rows
    /// only hidden / heads is accepted (the validated dense figures use it), anything else is ignored.
    void head_dim(const std::string& k, const json& v) {
        if (v.is_number_integer() && v.get<std::int64_t>() == m_.head_dim()) return;
        if (sparse_or_latent_ && v.is_number_integer() && v.get<std::int64_t>() > 0 &&
            v.get<std::int64_t>() <= limits::kMaxHidden) {
            m_.head_dim_override = v.get<std::int64_t>();
            return;
        }
        ignore(k, v, fmt::format("trainsim uses hidden / heads = {}", m_.head_dim()));
    }

    /// A positive integer `key` of extensions.moe / extensions.attention, or nullopt (with a reason) when
    /// absent or not one.
    std::optional<std::int64_t> count(const json& o, const char* key, std::int64_t hi, bool zero_ok = false) {
        if (!o.contains(key)) return std::nullopt;
        const json& x = o.at(key);
        if (!x.is_number_integer() || x.get<std::int64_t>() < (zero_ok ? 0 : 1) ||
            x.get<std::int64_t>() > hi) {
            set_unsupported(
                fmt::format("extensions value {} = {} is not a count trainsim reads", key, short_dump(x)));
            return std::nullopt;
        }
        return x.get<std::int64_t>();
    }

    /// extensions.moe.moe_layer_pattern: documentation of dense_layers, e.g. "first 3 layers dense (ffn
    /// 18432), 58 MoE layers"; the MoE layer count it names (checked against dense_layers by the caller), or
    /// nullopt (and the key ignored as documentation) when it names none.
    std::optional<std::int64_t> stated_moe_layers(const json& x) {
        const std::string text = x.is_string() ? x.get<std::string>() : "";
        const auto at = text.find(" MoE layers");
        std::size_t b = at;
        while (b != std::string::npos && b > 0 && std::isdigit(static_cast<unsigned char>(text[b - 1])))
            --b;
        if (at != std::string::npos && b < at) return std::stoll(text.substr(b, at - b));
        ignore("moe.moe_layer_pattern", x, "read as documentation of dense_layers");
        return std::nullopt;
    }

    /// extensions.moe.load_balance: force-balanced routing, or token dropping (a capacity factor).
    void read_load_balance(const json& x) {
        const std::string lb = x.is_string() ? lower(x.get<std::string>()) : "";
        if (contains(lb, "force-balanced") || contains(lb, "force balanced")) {
            m_.moe_load_imbalance = 1.0;
            m_.moe_capacity_factor = 0;
        } else if (contains(lb, "capacity factor") || contains(lb, "tokendrop") ||
                   contains(lb, "token-dropping")) {
            // Megatron-Bridge's "tokendrop" recipes: moe_expert_capacity_factor 1.0 with
            // moe_pad_expert_input_to_capacity.
            m_.moe_capacity_factor = 1.0;
            run_.notes.push_back(
                "extensions.moe.load_balance: token dropping read as capacity factor 1.0 "
                "(Megatron-Bridge tokendrop recipes)");
        } else {
            set_unsupported(fmt::format("extensions.moe.load_balance = {} is not a balance trainsim reads",
                                        short_dump(x)));
        }
    }

    /// extensions.moe into the model's MoE fields and the layout's ep / etp (see the header).
    void read_moe_fields(const json& v) {
        if (!v.is_object()) {
            set_unsupported("extensions.moe is not an object");
            return;
        }
        std::int64_t shared_count = 0, shared_width = 0;
        std::optional<std::int64_t> moe_layers_stated;
        for (auto a = v.begin(); a != v.end(); ++a) {
            const std::string& key = a.key();
            const json& x = a.value();
            if (key == "note" || key == "notes") continue;
            if (key == "num_experts") {
                if (auto n = count(v, "num_experts", limits::kMaxExperts)) m_.num_experts = *n;
            } else if (key == "top_k") {
                if (auto n = count(v, "top_k", limits::kMaxExperts)) m_.moe_top_k = *n;
            } else if (key == "moe_ffn_hidden") {
                if (auto n = count(v, "moe_ffn_hidden", limits::kMaxHidden)) m_.moe_ffn_hidden = *n;
            } else if (key == "shared_experts") {
                if (auto n = count(v, "shared_experts", limits::kMaxExperts, true)) shared_count = *n;
            } else if (key == "shared_expert_ffn_hidden") {
                if (auto n = count(v, "shared_expert_ffn_hidden", limits::kMaxHidden)) shared_width = *n;
            } else if (key == "dense_layers") {
                if (auto n = count(v, "dense_layers", limits::kMaxLayers, true))
                    m_.moe_first_dense_layers = *n;
            } else if (key == "dense_ffn_hidden") {
                // The dense layers' width; model.ffn_hidden then holds it (ModelSpec's meaning).
                if (auto n = count(v, "dense_ffn_hidden", limits::kMaxHidden)) m_.ffn_hidden = *n;
            } else if (key == "moe_layer_pattern") {
                moe_layers_stated = stated_moe_layers(x);
            } else if (key == "ep") {
                if (auto n = count(v, "ep", limits::kMaxGpus)) l_.ep = static_cast<int>(*n);
            } else if (key == "etp") {
                if (auto n = count(v, "etp", limits::kMaxGpus)) l_.etp = static_cast<int>(*n);
            } else if (key == "router") {
                ignore("moe.router", x,
                       "the router's scoring is not modelled; its GEMM and the token counts are");
            } else if (key == "load_balance") {
                read_load_balance(x);
            } else if (key == "capacity_factor") {
                if (x.is_number() && x.get<double>() >= 0 && x.get<double>() <= 1024 &&
                    !(x.get<double>() > 0 && x.get<double>() < std::numeric_limits<double>::min()))
                    m_.moe_capacity_factor = x.get<double>();
                else
                    set_unsupported(
                        fmt::format("extensions.moe.capacity_factor = {} is not a factor", short_dump(x)));
            } else {
                ignore("moe." + key, x);
            }
        }
        if (shared_count > 0)
            m_.moe_shared_expert_ffn_hidden =
                shared_count * (shared_width > 0 ? shared_width : m_.expert_ffn());
        if (moe_layers_stated && *moe_layers_stated != m_.moe_layer_count())
            set_unsupported(
                fmt::format("extensions.moe.moe_layer_pattern names {} MoE layers; dense_layers = {} "
                            "of {} layers gives {}",
                            *moe_layers_stated, m_.moe_first_dense_layers, m_.layers, m_.moe_layer_count()));
    }

    void moe(const json& v) {
        read_moe_fields(v);
        if (moe_supported()) return;
        std::string what = "mixture of experts (extensions.moe";
        if (v.is_object() && v.contains("num_experts"))
            what += ": " + detail::shown(v.at("num_experts")) + " experts";
        if (v.is_object() && v.contains("top_k")) what += ", top-" + detail::shown(v.at("top_k"));
        what += ") is not simulated";
        run_.unsupported = run_.unsupported ? what + "; " + *run_.unsupported : what;
    }

    void precision_detail(const std::string& k, const json& v) {
        const std::string d = v.is_string() ? lower(v.get<std::string>()) : "";
        const bool nvfp4 = contains(d, "nvfp4");
        const bool mxfp8 = contains(d, "mxfp8") || contains(d, "fp8_mx") || contains(d, "fp8-mx");
        if (nvfp4 || mxfp8) {
            block_scaled_recipe(nvfp4 ? Fp8Recipe::nvfp4 : Fp8Recipe::mxfp8);
        } else if (l_.precision == Precision::fp8) {
            const bool current = contains(d, "current") || contains(d, "fp8_cs") || contains(d, "tensorwise");
            const bool delayed = contains(d, "delayed") || contains(d, "fp8_ds");
            if (current && !delayed)
                l_.fp8_recipe = Fp8Recipe::tensorwise;
            else if (delayed && !current)
                l_.fp8_recipe = Fp8Recipe::delayed;
            else
                ignore(k, v, "names no single FP8 scaling recipe; the framework's default is kept");
        }
    }

    /// precision_detail naming a block-scaled recipe: the linear layers' GEMMs in MXFP8 or NVFP4
    /// (Fp8Recipe). Megatron-Bridge's mxfp8 recipe (bf16_with_mxfp8_mixed) sets fp8_param_gather with
    /// reuse_grad_buf_for_mxfp8_param_ag (a 16-bit gather, the MXFP8 weights quantized after it:
    /// Layout::fp8_weights_gathered_in_fp8); its nvfp4 recipe before v0.4.2 (the rows' releases) sets no
    /// fp4_param_gather (bf16_with_nvfp4_mixed).
    void block_scaled_recipe(Fp8Recipe r) {
        if (l_.precision != Precision::fp8) {
            set_unsupported(
                fmt::format("precision {} (extensions.precision_detail) with training.precision = "
                            "{}: the recipe applies to fp8 (or nvfp4) runs",
                            to_string(r), to_string(l_.precision)));
            return;
        }
        l_.fp8_recipe = r;
        const bool bridge = run_.source.find("Megatron-Bridge") != std::string::npos;
        if (bridge) {
            l_.fp8_param_gather = r == Fp8Recipe::mxfp8;
            if (r == Fp8Recipe::nvfp4) l_.tp_comm_overlap = false;  // as apply_recipe_defaults
        }
    }

    /// Megatron --recompute-granularity full, with --recompute-method block --recompute-num-layers N (per
    /// model chunk) where stated.
    void full_recompute(const json& v) {
        const bool block = v.contains("method") && v.at("method") == "block";
        const char* n_key = v.contains("num_layers_per_pp_stage") ? "num_layers_per_pp_stage"
                            : v.contains("num_layers")            ? "num_layers"
                                                                  : nullptr;
        if (block && n_key && v.at(n_key).is_number_integer() && v.at(n_key).get<std::int64_t>() > 0) {
            l_.recompute_num_layers = v.at(n_key).get<std::int64_t>();
            run_.notes.push_back(
                fmt::format("extensions.recompute: block method, the first {} layers of each "
                            "model chunk recomputed",
                            l_.recompute_num_layers));
        } else if (block || n_key) {
            ignore("recompute", v,
                   "a partial full recompute other than the block method with a layer count is not "
                   "modelled: every layer is recomputed");
        }
    }

    /// Megatron's --recompute-modules list as Layout::recompute_modules, or nothing when a name is not one
    /// trainsim models for this model (mla_up_proj needs MLA; moe and moe_act an MoE model;
    /// shared_experts shared experts).
    std::optional<RecomputeModules> recompute_modules(const json& list) const {
        if (!list.is_array()) return std::nullopt;
        RecomputeModules r;
        r.core_attn = false;
        for (const json& x : list) {
            if (x == "core_attn")
                r.core_attn = true;
            else if (x == "layernorm")
                r.layernorm = true;
            else if (x == "mlp")
                r.mlp = true;
            else if (x == "moe" && m_.moe())
                r.moe = true;
            else if (x == "moe_act" && m_.moe())
                r.moe_act = true;
            else if (x == "shared_experts" && m_.moe_shared_expert_ffn_hidden > 0)
                r.shared_experts = true;
            else if (!(x == "mla_up_proj" && m_.mla()))
                return std::nullopt;
        }
        return r;
    }

    void recompute(const std::string& k, const json& v) {
        if (!v.is_object()) {
            ignore(k, v, "not an object");
            return;
        }
        const std::string g = string_or_empty(v, "granularity");
        Recompute rc = l_.recompute;
        if (g == "full") {
            rc = Recompute::full;
            full_recompute(v);
        } else if (g == "selective") {
            if (!v.contains("modules") || v.at("modules") == json::array({"core_attn"})) {
                rc = Recompute::selective;
            } else if (v.at("modules").is_array() && v.at("modules").empty()) {
                rc = Recompute::none;  // selective with no module: nothing recomputed
            } else if (const auto modules = recompute_modules(v.at("modules"))) {
                rc = Recompute::selective;  // Layout::recompute_modules (and recompute_mla_up_proj)
                l_.recompute_modules = *modules;
                l_.recompute_mla_up_proj = std::find(v.at("modules").begin(), v.at("modules").end(),
                                                     json("mla_up_proj")) != v.at("modules").end();
            } else {
                ignore("recompute.modules", v.at("modules"),
                       "a module trainsim does not model (it models core_attn, layernorm, mlp, moe, moe_act, "
                       "shared_experts and mla_up_proj where the model has them); simulated as "
                       "training.recompute = \"" +
                           training_recompute_ + "\"");
            }
        } else {
            ignore(k, v, "granularity neither full nor selective");
        }
        if (rc != l_.recompute) {
            run_.notes.push_back(
                fmt::format("extensions.recompute: recompute {} (training.recompute = \"{}\")", to_string(rc),
                            training_recompute_));
            l_.recompute = rc;
        }
    }

    void attention(const std::string& k, const json& v) {
        if (!v.is_object()) {
            ignore(k, v);
            return;
        }
        std::optional<std::int64_t> window;
        bool unknown_pattern = false;
        for (auto a = v.begin(); a != v.end(); ++a) {
            if (a.key() == "note") continue;
            if (a.key() == "head_dim" && a.value().is_number_integer() &&
                a.value().get<std::int64_t>() == m_.head_dim())
                continue;
            if (a.key() == "type" && a.value() == "MLA") {
                m_.attention_type = AttentionType::mla;  // sim/program/mla_ops.cpp
                continue;
            }
            if (a.key() == "q_lora_rank" || a.key() == "kv_lora_rank" || a.key() == "qk_rope_head_dim" ||
                a.key() == "v_head_dim" || a.key() == "qk_head_dim") {
                const auto n = count(v, a.key().c_str(), limits::kMaxHidden);
                if (!n) continue;
                if (a.key() == "q_lora_rank") m_.q_lora_rank = *n;
                if (a.key() == "kv_lora_rank") m_.kv_lora_rank = *n;
                if (a.key() == "qk_rope_head_dim") m_.qk_rope_head_dim = *n;
                if (a.key() == "v_head_dim") m_.v_head_dim = *n;
                if (a.key() == "qk_head_dim") m_.head_dim_override = *n;
                continue;
            }
            if (a.key() == "head_dim" && sparse_or_latent_) {
                head_dim("attention.head_dim", a.value());
                continue;
            }
            if (a.key() == "sliding_window") {
                // Megatron-Core --window-size (w, 0) (ModelSpec::sliding_window), set after the loop.
                window = count(v, "sliding_window", limits::kMaxSeqLen);
                continue;
            }
            if (a.key() == "pattern" && a.value().is_string() && sliding_window_full_every(a.value()))
                continue;
            if (a.key() == "pattern") unknown_pattern = true;
            ignore("attention." + a.key(), a.value(),
                   a.key() == "pattern"    ? "names no window_attn_skip_freq"
                   : a.key() == "head_dim" ? fmt::format("trainsim uses hidden / heads = {}", m_.head_dim())
                                           : "");
        }
        // A window whose layers are unknown is not applied (the pattern is listed as ignored, above).
        if (window && !unknown_pattern) m_.sliding_window = *window;
        if (window && unknown_pattern)
            ignore("attention.sliding_window", v.at("sliding_window"),
                   "the pattern names no window_attn_skip_freq: which layers attend through the window is "
                   "unknown, so none does");
    }

    /// extensions.attention.pattern naming Megatron-Core's window_attn_skip_freq ("... (window_attn_skip_freq
    /// 2)", gpt-oss): every N-th layer attends fully (ModelSpec::sliding_window_full_every). False when the
    /// text names no such frequency (the pattern is then listed as ignored).
    bool sliding_window_full_every(const json& pattern) {
        static const std::string key = "window_attn_skip_freq ";
        const auto& text = pattern.get_ref<const std::string&>();
        const auto at = text.find(key);
        if (at == std::string::npos) return false;
        std::int64_t n = 0;
        const char* first = text.data() + at + key.size();
        const auto [end, ec] = std::from_chars(first, text.data() + text.size(), n);
        if (ec != std::errc() || end == first || n < 1 || n > limits::kMaxLayers) return false;
        m_.sliding_window_full_every = n;
        return true;
    }

    /// extensions.activation: gpt-oss's clamped quick-GeGLU ("clamped SwiGLU variant (quick_gelu gate, ...").
    /// Megatron-Bridge's GPTOSSProvider (models/gpt_oss/gpt_oss_provider.py, v0.2.0-v0.6.0) pairs it with
    /// add_bias_linear = True and bias_activation_fusion = True: TEGroupedMLP runs it as the fused
    /// weighted_bias_quick_geglu_impl (fused_bias_geglu.py), one pass as the SwiGLU kernel (model.mlp
    /// swiglu), and the experts carry biases (ModelSpec::moe_expert_bias); the provider's
    /// activation_func_clamp_value = 7.0 clamps the activation's inputs eagerly before it
    /// (ModelSpec::moe_activation_clamp). The same provider sets YaRN RoPE with scaling factor 32 and no
    /// yarn_mscale / yarn_mscale_all_dim (gpt_oss_provider.py@v0.3.0 lines 59-67, gpt_oss_bridge.py@v0.4.0 /
    /// v0.6.0 lines 65-100): Megatron-Core's concentration factor 0.1 ln 32 + 1
    /// (ModelSpec::yarn_concentration_factor). Anything else is ignored.
    void activation(const std::string& k, const json& v) {
        if (v.is_string() && v.get<std::string>().rfind("clamped SwiGLU variant (quick_gelu gate", 0) == 0 &&
            m_.mlp == MlpKind::swiglu && sparse_or_latent_) {
            constexpr double kGptOssYarnScalingFactor = 32.0;  // GPTOSSProvider yarn_rotary_scaling_factor
            m_.moe_expert_bias = true;
            m_.moe_activation_clamp = true;
            // gpt-oss-20b (GPTOSSProvider20B: 24 layers): its performance configs run plain RoPE in the fused
            // single-QKV kernel (position_embedding_type = "rope", fused_single_qkv_rope: configs/gpt_oss/
            // gpt_oss_llm_pretrain.py@v0.5.0 set_gpt_oss_20b_common_configs,
            // perf_recipes/gpt_oss/common.py@v0.6.0).
            constexpr std::int64_t kGptOss20bLayers = 24;
            if (m_.layers != kGptOss20bLayers)
                m_.yarn_concentration_factor = 0.1 * std::log(kGptOssYarnScalingFactor) + 1.0;
            run_.notes.push_back(
                "extensions.activation: gpt-oss's fused quick-GeGLU, timed as SwiGLU; its experts' linear "
                "biases (GPTOSSProvider add_bias_linear) read as model.moe_expert_bias, its clamp "
                "(activation_func_clamp_value 7.0) as model.moe_activation_clamp" +
                std::string(
                    m_.yarn_concentration_factor != 1.0
                        ? ", its YaRN RoPE (scaling factor 32) as model.yarn_concentration_factor 1.3466"
                        : "; gpt-oss-20b's performance configs run plain fused RoPE"));
            return;
        }
        ignore(k, v);
    }

    /// extensions.cuda_graphs = "full_iteration" on an MoE row: a whole-iteration graph cannot hold the
    /// dropless experts' host-side token counts (Megatron-Bridge v0.5.1 scripts/performance
    /// set_full_iter_cg_configs: "Dropless MoE produces variable-shaped per-expert tensors that CG cannot
    /// capture"), and the full-iteration recipes run the experts through TE's op fuser
    /// (use_transformer_engine_op_fuser = True: configs/gpt_oss/gpt_oss_llm_pretrain.py@v0.5.1,
    /// perf_recipes/gpt_oss/common.py@v0.6.0): Layout::moe_fused_grouped_mlp.
    void full_iteration_moe() {
        l_.moe_fused_grouped_mlp = true;
        run_.notes.push_back(
            "extensions.cuda_graphs = full_iteration: experts as TE fused ops "
            "(layout.moe_fused_grouped_mlp)");
    }

    void megatron_fsdp(const std::string& k, const json& v) {
        if (!v.is_object() || !v.contains("enabled") || !v.at("enabled").is_boolean()) {
            ignore(k, v, "must be an object with a boolean \"enabled\"");
            return;
        }
        if (!is_true(v, "enabled")) return;
        const std::string sharding = string_or_empty(v, "sharding");
        // Megatron-FSDP sharding parameters, gradients and state is ZeRO-3 (the framework was set to
        // megatron before the training block was read, see parse_run).
        if (sharding != "optim_grads_params" || l_.zero_stage != 3) {
            ignore(k, v,
                   fmt::format("only optim_grads_params with training.zero_stage = 3 is read; "
                               "zero_stage = {}",
                               l_.zero_stage));
        }
    }

    void cluster(const std::string& k, const json& v) {
        if (!v.is_object()) {
            ignore(k, v);
            return;
        }
        for (auto a = v.begin(); a != v.end(); ++a)
            if (a.key() != "system" && a.key() != "nvlink_domain_gpus" && a.key() != "gpus_per_tray")
                ignore("cluster." + a.key(), a.value());
    }

    MeasuredRun& run_;
    Layout& l_;
    ModelSpec& m_;
    const std::string& training_recompute_;
    bool sparse_or_latent_;  ///< the row has extensions.moe or MLA attention
};

/// Reads the run's `extensions` (see the header): sets what trainsim models, `unsupported` for what it does
/// not simulate, and lists the rest in run.ignored.
void read_extensions(const json& ext, const std::string& file, const std::string& where, MeasuredRun& run,
                     const std::string& training_recompute) {
    if (!ext.is_object())
        throw InputError(
            fmt::format("{}: {} extensions = {} must be an object", file, where, short_dump(ext)));
    const bool mla = ext.contains("attention") && ext.at("attention").is_object() &&
                     ext.at("attention").contains("type") && ext.at("attention").at("type") == "MLA";
    ExtensionReader reader(run, training_recompute, ext.contains("moe") || mla);
    for (auto it = ext.begin(); it != ext.end(); ++it)
        reader.read(it.key(), it.value());
    if (run.model.mla() && run.model.qk_layernorm) {
        run.model.qk_layernorm = false;  // MLA's q / kv norms (Megatron-Core qk_layernorm) are in mla_ops.cpp
        run.notes.push_back("extensions.qk_layernorm: MLA's q / kv latent norms, part of its attention");
    }
    Layout& l = run.layout;
    if (l.activation_offload_layers > 0 && (l.pp != 1 || l.recompute != Recompute::none ||
                                            l.framework != Framework::megatron || l.moe_a2a_overlap)) {
        run.ignored.push_back(
            fmt::format("extensions.activation_cpu_offloading_layers = {} (Megatron-Core offloads "
                        "activations only with pp 1 "
                        "and no recompute)",
                        l.activation_offload_layers));
        l.activation_offload_layers = 0;
    }
}

/// The row's own `notes` as the documented default for two torchtitan settings the format has no field for,
/// when `training` does not state them: `compile` when the notes name torch.compile ("torch.compile",
/// "+ compile"; torchtitan's benchmark tables list it per row), `async_tp` when they name async TP
/// ("asyncTP", "async TP"). Each use is added to the run's notes.
void apply_notes_defaults(const json& notes, json& training, std::vector<std::string>& run_notes) {
    if (!notes.is_string() || !training.is_object()) return;
    const std::string notes_lower = lower(notes.get<std::string>());
    auto names = [&](std::initializer_list<const char*> words) {
        return std::any_of(words.begin(), words.end(),
                           [&](const char* w) { return contains(notes_lower, w); });
    };
    if (!training.contains("compile") && names({"torch.compile", "+ compile"})) {
        training["compile"] = true;
        run_notes.push_back("training.compile = true: the row's notes name torch.compile");
    }
    if (!training.contains("async_tp") && names({"asynctp", "async tp"})) {
        training["async_tp"] = true;
        run_notes.push_back("training.async_tp = true: the row's notes name async TP");
    }
}

/// torchtitan's own settings for the rows of its 2024-08 performance page, where `training` does not state
/// them:
/// - async TP runs compiled: torchtitan refuses it otherwise (torchtitan/parallelisms/parallelize_llama.py
///   @3faaa1a: `raise RuntimeError("Async TP requires --training.compile")`; Inductor's micro-pipeline TP
///   pass is what overlaps it), so a row with async_tp is compiled unless it says otherwise;
/// - the Llama 3.1 405B rows of docs/performance.md @3faaa1a (and of 9515a14, the PR #554 that published
///   them) ran train_configs/llama3_405b.toml, which that same PR set to `compile = true` (with Float8, its
///   FSDP float8 all-gather and async TP); every other train config of that commit (llama2 7B/13B/70B,
///   llama3 8B/70B) keeps `compile = false`, trainsim's default. The 405B model is the one with 126 layers.
/// Each use is added to the run's notes.
void apply_torchtitan_defaults(const MeasuredRun& run, json& training, std::vector<std::string>& run_notes) {
    if (!training.is_object() || training.contains("compile")) return;
    // The framework as parse_training will take it: the row's own, else the source's.
    const bool torchtitan = training.contains("framework")
                                ? training.at("framework") == "torchtitan"
                                : framework_from_source(run.source, 0) == Framework::torchtitan;
    if (!torchtitan) return;
    if (training.contains("async_tp") && training.at("async_tp") == true) {
        training["compile"] = true;
        run_notes.push_back(
            "training.compile = true: torchtitan runs async TP only compiled (parallelize_llama.py raises "
            "\"Async TP requires --training.compile\")");
        return;
    }
    const std::string source_lower = lower(run.source);
    const bool page_2024_08 = contains(source_lower, "pytorch/torchtitan docs/performance.md @ 3faaa1a0") ||
                              contains(source_lower, "pytorch/torchtitan docs/performance.md @ 9515a140");
    if (page_2024_08 && run.model.layers == 126) {
        training["compile"] = true;
        run_notes.push_back(
            "training.compile = true: the 405B rows of torchtitan's 2024-08 performance page ran "
            "train_configs/llama3_405b.toml, which their PR (#554) set to compile = true");
    }
}

/// NeMo 24.07's performance summary (the source names NVIDIA/NeMo's performance_summary.md and NeMo 24.07):
/// NeMo 1 driven by NeMo-Framework-Launcher 24.07, whose training configs for every model of the table
/// (launcher_scripts/conf/training/{gpt3,llama,nemotron}/*.yaml) set optim.name distributed_fused_adam
/// (apex_distributed_adam), and whose H100 FP8 example scripts for GPT-3 and Llama
/// (examples/training/{gpt,llama}/h100/*_fp8*.sh) add `+training.model.optim.grad_sync_dtype=bf16`
/// (grad_reduce_in_bf16; the Nemotron scripts do not: the apex default, fp32). A key the row states wins.
void apply_nemo_launcher_defaults(MeasuredRun& run, const json& notes, json& training) {
    if (!training.is_object() ||
        run.source.find("NVIDIA/NeMo docs/source/performance/performance_summary.md") == std::string::npos ||
        run.source.find("NeMo 24.07") == std::string::npos)
        return;
    if (!training.contains("apex_distributed_adam")) {
        training["apex_distributed_adam"] = true;
        run.notes.push_back(
            "training.apex_distributed_adam = true: NeMo-Framework-Launcher 24.07 configs set "
            "optim.name distributed_fused_adam");
    }
    const std::string model =
        lower(run.id + " " + (notes.is_string() ? notes.get<std::string>().substr(0, 40) : ""));
    // examples/training/{gpt,llama}/h100/*_fp8*.sh pass +training.model.optim.grad_sync_dtype=bf16 (the
    // Nemotron 8B / 22B scripts do not); conf/training/nemotron/nemotron_340b.yaml sets it itself.
    const bool launcher_bf16_sync =
        model.find("gpt3") != std::string::npos || model.find("llama") != std::string::npos ||
        (model.find("nemotron") != std::string::npos && model.find("340b") != std::string::npos);
    if (!training.contains("grad_reduce_in_bf16") && string_or_empty(training, "precision") == "fp8" &&
        launcher_bf16_sync) {
        training["grad_reduce_in_bf16"] = true;
        run.notes.push_back(
            "training.grad_reduce_in_bf16 = true: the launcher's H100 FP8 GPT-3 / Llama scripts and its "
            "Nemotron-340B config set optim.grad_sync_dtype=bf16");
    }
}

/// NeMo 2's performance summary (the source names the NeMo Framework User Guide's Performance Summary; the
/// row's extensions.nemo_release_branch "r2.N.x", N >= 2: containers 25.02-25.07): the runs of NeMo's
/// performance scripts, which with FP8 use bf16_with_fp8_mixed or bf16_with_fp8_current_scaling_mixed,
/// both keeping FP8 weights gathered in FP8 (fp8_params / fp8_param_gather = True,
/// nemo/collections/llm/recipes/precision/mixed_precision.py), and set grad_reduce_in_fp32 = False
/// (r2.2.0: scripts/llm/performance/pretrain_*.py, FP8 only; r2.3.0: scripts/performance/utils.py
/// set_primary_perf_configs, FP8 only; r2.4.0: scripts/performance/helpers.py set_precision_configs,
/// always); from r2.3.0 they set cross_entropy_fusion_impl = "te" (GPTConfig's cross_entropy_loss_fusion
/// is True: nemo/collections/llm/gpt/model/base.py; r2.2.0 ran Megatron-Core's native fused loss, timed as
/// the unfused one). Not for MXFP8 / NVFP4 / sub-channel recipes or Megatron-FSDP: no FP8 weight gather.
/// A key the row states wins. Not modelled: r2.4.0's MXFP8 runs turn overlap_param_gather off.
void apply_nemo2_perf_defaults(MeasuredRun& run, const json& ext, json& training) {
    if (!training.is_object() || !ext.is_object() ||
        run.source.find("NeMo Framework User Guide, Performance Summary") == std::string::npos)
        return;
    const std::string branch = string_or_empty(ext, "nemo_release_branch");
    int minor = -1;
    if (branch.size() >= 4 && branch.rfind("r2.", 0) == 0) {
        const char* first = branch.c_str() + 3;
        const auto [end, ec] = std::from_chars(first, branch.c_str() + branch.size(), minor);
        if (ec != std::errc() || end == first || (*end != '\0' && *end != '.')) minor = -1;
    }
    if (minor < 0 && ext.contains("nemo_release_branch"))
        run.ignored.push_back(fmt::format(
            "extensions.nemo_release_branch = {} (not a NeMo release branch \"r2.N\" or \"r2.N.x\": the "
            "NeMo 2 performance-script defaults are not applied)",
            short_dump(ext.at("nemo_release_branch"))));
    if (minor < 2) return;
    const bool fp8 = string_or_empty(training, "precision") == "fp8";
    // Not for the block-scaled and sub-channel recipes (bf16_with_mxfp8_mixed sets fp8_param_gather = False
    // at v2.3.0; bf16_with_fp8_subchannel_scaling_mixed at v2.4.0) nor with Megatron-FSDP
    // (set_primary_perf_configs@v2.3.0: "FSDP does not support FP8 param gather").
    const std::string detail = lower(string_or_empty(ext, "precision_detail"));
    const bool per_tensor = !contains(detail, "mxfp8") && !contains(detail, "nvfp4") &&
                            !contains(detail, "blockwise") && !contains(detail, "sub-channel") &&
                            !contains(detail, "subchannel");
    const bool fsdp = ext.contains("megatron_fsdp") && is_true(ext.at("megatron_fsdp"), "enabled");
    const auto set = [&](const char* key, const std::string& why) {
        if (training.contains(key)) return;
        training[key] = true;
        run.notes.push_back(
            fmt::format("training.{} = true: NeMo {}'s performance scripts {}", key, branch, why));
    };
    if (fp8 && per_tensor && !fsdp)
        set("fp8_param_gather", "keep FP8 weights (fp8_params / fp8_param_gather)");
    if (fp8 || minor >= 4) set("grad_reduce_in_bf16", "set grad_reduce_in_fp32 = False");
    if (minor >= 3) set("cross_entropy_fusion", "set cross_entropy_fusion_impl = \"te\"");
}

/// A row's extensions.recipe_preset, "FILE@TAG NAME", split into its FILE@TAG and NAME; nullopt when the
/// row has none or it is not of that form.
std::optional<std::pair<std::string, std::string>> recipe_preset(const json& ext) {
    if (!ext.is_object() || !ext.contains("recipe_preset") || !ext["recipe_preset"].is_string())
        return std::nullopt;
    const std::string preset = ext["recipe_preset"].get<std::string>();
    const auto space = preset.rfind(' ');
    if (space == std::string::npos) return std::nullopt;
    return std::make_pair(preset.substr(0, space), preset.substr(space + 1));
}

/// A row whose extensions.recipe_preset ("FILE@TAG NAME") names a Megatron-Bridge performance preset that
/// sets mixed_precision.fp8_dot_product_attention = True, each read at its tag:
///   scripts/performance/configs/qwen/qwen3_workload_base_configs.py@v0.5.0, v0.5.1:
///     QWEN3_30B_A3B_PRETRAIN_CONFIG_{GB300,GB200,B300}_FP8_MX_V1,
///     QWEN3_235B_A22B_..._{GB300,GB200}_FP8_MX_V2;
///   scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py@v0.5.x:
///     GPT_OSS_120B_PRETRAIN_CONFIG_{GB300,GB200}_FP8_MX_V2;
///   scripts/performance/configs/deepseek/deepseek_workload_base_configs.py@v0.5.x:
///     DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V1 and _V2 (= V1 with GBS 4096); not GB200's;
///   src/megatron/bridge/perf_recipes@v0.6.0: gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config()
///     (gpt_oss/common.py _apply_gpt_oss_120b_full_iter_fp8mx_configs), qwen3_30b_a3b_pretrain_8gpu_gb300_
///     fp8mx_config() and qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config() (qwen/common.py
///     _enable_hybridep_full_iteration_mxfp8); not deepseek_v3_pretrain_256gpu_gb200_fp8mx_config().
/// No preset at v0.4.x or before sets it (the field is never assigned in scripts/performance there).
bool bridge_fp8_attention_preset(const json& ext) {
    const auto preset = recipe_preset(ext);
    if (!preset) return false;
    const auto& [where, name] = *preset;
    static const std::set<std::string> v05 = {
        "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1",   "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1",
        "QWEN3_30B_A3B_PRETRAIN_CONFIG_B300_FP8_MX_V1",    "QWEN3_235B_A22B_PRETRAIN_CONFIG_GB300_FP8_MX_V2",
        "QWEN3_235B_A22B_PRETRAIN_CONFIG_GB200_FP8_MX_V2", "GPT_OSS_120B_PRETRAIN_CONFIG_GB300_FP8_MX_V2",
        "GPT_OSS_120B_PRETRAIN_CONFIG_GB200_FP8_MX_V2",    "DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V1",
        "DEEPSEEK_V3_PRETRAIN_CONFIG_GB300_FP8_MX_V2"};
    static const std::set<std::string> v06 = {"gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config()",
                                              "qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config()",
                                              "qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config()"};
    return (where.find("@v0.5.") != std::string::npos && v05.count(name)) ||
           (where.find("@v0.6.0") != std::string::npos && v06.count(name));
}

/// A row whose extensions.recipe_preset names one of Megatron-Bridge v0.6.0's performance recipes that run
/// their MoE layers with HybridEP, full-iteration CUDA graphs (and so TE's op fuser) and the experts'
/// all-to-all overlapped (CommOverlapConfig overlap_moe_expert_parallel_comm = True), each read at v0.6.0:
///   gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config() (perf_recipes/gpt_oss/common.py
///     _apply_gpt_oss_120b_full_iter_fp8mx_configs: cuda_graph_impl "full_iteration",
///     moe_flex_dispatcher_backend "hybridep", use_transformer_engine_op_fuser,
///     overlap_moe_expert_parallel_comm);
///   qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config(), qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config()
///     (perf_recipes/qwen/{gb300,gb200}/qwen3_moe.py: moe_flex_dispatcher_backend "hybridep", then
///     qwen/common.py _enable_hybridep_full_iteration_mxfp8: the same three);
///   deepseek_v3_pretrain_256gpu_gb200_fp8mx_config() (perf_recipes/deepseek/gb200/deepseek_v3.py: TE-scoped
///     graphs first, then deepseek/common.py _enable_deepseek_full_iteration_mxfp8 sets the same three).
/// The v0.5.x presets' rows carry these settings as extensions (cuda_graphs, moe_dispatcher_backend,
/// moe_a2a_overlap).
bool bridge_v06_hybridep_full_iteration_preset(const json& ext) {
    const auto preset = recipe_preset(ext);
    if (!preset || preset->first.find("@v0.6.0") == std::string::npos) return false;
    static const std::set<std::string> names = {"gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config()",
                                                "qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config()",
                                                "qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config()",
                                                "deepseek_v3_pretrain_256gpu_gb200_fp8mx_config()"};
    return names.count(preset->second) > 0;
}

/// The settings of a Megatron-Bridge v0.6.0 HybridEP full-iteration recipe
/// (bridge_v06_hybridep_full_iteration_preset) that the row does not state itself, each noted.
void apply_bridge_v06_recipe(MeasuredRun& run, const json& ext) {
    if (!run.model.moe() || !bridge_v06_hybridep_full_iteration_preset(ext)) return;
    std::vector<std::string> set;
    if (!ext.contains("moe_dispatcher_backend")) {
        run.layout.moe_dispatcher = MoeDispatcher::hybridep;
        set.push_back("moe_dispatcher = hybridep");
    }
    if (!ext.contains("cuda_graphs")) {
        run.layout.moe_fused_grouped_mlp = true;
        set.push_back("moe_fused_grouped_mlp (full-iteration CUDA graphs with TE's op fuser)");
    }
    if (!ext.contains("moe_a2a_overlap")) {
        run.layout.moe_a2a_overlap = true;
        set.push_back("moe_a2a_overlap (overlap_moe_expert_parallel_comm)");
    }
    if (!set.empty())
        run.notes.push_back(fmt::format("layout.{}: the row's Megatron-Bridge v0.6.0 recipe sets them",
                                        fmt::join(set, ", ")));
}

/// A Megatron-Bridge DeepSeek-V3 row: the source names Megatron-Bridge and the table's model label (or the
/// run id) DeepSeek-V3 ("DeepSeekV3 (w/ MTP)", "deepseek_v3").
bool bridge_deepseek_v3(const MeasuredRun& run, const json& ext) {
    if (run.source.find("Megatron-Bridge") == std::string::npos) return false;
    std::string label = run.id;
    if (ext.is_object() && ext.contains("table") && ext.at("table").is_object() &&
        ext.at("table").contains("model_label") && ext.at("table").at("model_label").is_string())
        label = ext.at("table").at("model_label").get<std::string>();
    std::string key;
    for (char c : label)
        if (std::isalnum(static_cast<unsigned char>(c)) != 0)
            key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return key.find("deepseekv3") != std::string::npos;
}

/// The run's `measured` block: step time and peak memory (null: not reported).
void parse_measured(StrictObject& m, MeasuredRun& run) {
    if (!m.raw("step_time_s").is_null()) {
        run.step_time_s = m.number_in("step_time_s", 0, 1e6, "s");
        // 1 us and up: a smaller step (a denormal such as 1e-320) made the error +inf% and the MAPE inf%.
        if (*run.step_time_s > 0 && *run.step_time_s < 1e-6)
            m.fail(m.field("step_time_s"),
                   fmt::format("= {:g} is below 1e-06 s, shorter than any training step", *run.step_time_s));
        if (!(*run.step_time_s > 0))
            m.fail(m.field("step_time_s"),
                   fmt::format("= {} must be positive (null: not reported)", *run.step_time_s));
    }
    if (m.has("peak_memory_GiB") && !m.raw("peak_memory_GiB").is_null()) {
        run.peak_memory_gib = m.number_in("peak_memory_GiB", 0, 1e6, "GiB");
        if (!(*run.peak_memory_gib > 0))
            m.fail(m.field("peak_memory_GiB"),
                   fmt::format("= {} must be positive (null: not reported)", *run.peak_memory_gib));
        // 1 MiB and up, as the step time's floor: a denormal (1e-320) made the error +inf% and the
        // peak-memory MAPE inf% (null in --json; round 11).
        if (*run.peak_memory_gib < 1.0 / 1024)
            m.fail(m.field("peak_memory_GiB"),
                   fmt::format("= {:g} is below 1 MiB (0.0009765625 GiB), less than any training run holds",
                               *run.peak_memory_gib));
    }
}

/// A run's fields that document it (the measured-runs README), not simulated: each of its type, or null.
/// They were ignored whatever their type (round 11's open item; `notes` is read for the defaults it names,
/// apply_notes_defaults, so a number there was silently no notes). `reported` holds the source's figures
/// (numbers, strings or null), `derivation` and `notes` are text, `confidence` is high, medium or low and
/// `assumed` lists the fields filled with standard values.
void check_documentary_fields(StrictObject& rr) {
    const auto value_of = [&](const char* key) -> const json* {
        return rr.has(key) && !rr.raw(key).is_null() ? &rr.raw(key) : nullptr;
    };
    if (const json* v = value_of("reported")) {
        if (!v->is_object())
            rr.fail(rr.field("reported"), fmt::format("= {} must be an object", detail::shown(*v)));
        for (auto it = v->begin(); it != v->end(); ++it)
            if (!(it->is_number() || it->is_string() || it->is_null()))
                rr.fail(clip_for_message(rr.field("reported." + it.key())),
                        fmt::format("= {} must be a number, a string or null", detail::shown(*it)));
    }
    for (const char* key : {"derivation", "notes"})
        if (const json* v = value_of(key); v && !v->is_string())
            rr.fail(rr.field(key), fmt::format("= {} must be a string", detail::shown(*v)));
    if (value_of("confidence")) rr.choice("confidence", {"high", "medium", "low"});
    if (const json* v = value_of("assumed")) {
        if (!v->is_array())
            rr.fail(rr.field("assumed"), fmt::format("= {} must be an array", detail::shown(*v)));
        for (const auto& x : *v)
            if (!x.is_string())
                rr.fail(rr.field("assumed"),
                        fmt::format("holds {}, which must be a string", detail::shown(x)));
    }
}

/// Parses one run row into `run` (whose id is set). Throws InputError naming the file, the run and the field.
void parse_run(const json& row, const std::string& file, MeasuredRun& run) {
    const std::string where = fmt::format("run \"{}\"", clip_for_message(run.id));
    StrictObject rr(row, file, where);
    rr.string("id");
    run.source = rr.string("source");
    const json no_ext;
    const json& ext = rr.has("extensions") ? rr.raw("extensions") : no_ext;
    run.topology = parse_cluster(rr.object("cluster"), read_domain(ext, run.ignored), run.notes);
    run.model = parse_model(rr.raw("model"), file, where + " model");
    run.model.name = run.id;
    json training = rr.raw("training");
    std::string training_recompute = "none";
    if (training.is_object() && training.contains("recompute") && training.at("recompute").is_string())
        training_recompute = training.at("recompute").get<std::string>();
    // Megatron-FSDP (extensions.megatron_fsdp) is Megatron running ZeRO-3: the framework, and so its
    // defaults, are Megatron's unless the row names another.
    if (training.is_object() && !training.contains("framework") && ext.is_object() &&
        ext.contains("megatron_fsdp") && is_true(ext.at("megatron_fsdp"), "enabled"))
        training["framework"] = "megatron";
    // NVIDIA's MLPerf Training NeMo submissions from v4.0 on keep FP8 weights (their config_common.sh:
    // FP8_PARAMS=True, e.g. training_results_v4.1 NVIDIA/benchmarks/gpt3/implementations/*/config_common.sh;
    // absent from v3.1's conf/custom.yaml), unless the row states fp8_param_gather.
    if (training.is_object() && !training.contains("fp8_param_gather") &&
        string_or_empty(training, "precision") == "fp8" && mlperf_nemo_fp8_params(ext)) {
        training["fp8_param_gather"] = true;
        run.notes.push_back(
            "training.fp8_param_gather = true: NVIDIA's MLPerf NeMo submissions from v4.0 set "
            "FP8_PARAMS=True");
    }
    apply_notes_defaults(rr.has("notes") ? rr.raw("notes") : json(), training, run.notes);
    apply_torchtitan_defaults(run, training, run.notes);
    apply_nemo_launcher_defaults(run, rr.has("notes") ? rr.raw("notes") : json(), training);
    apply_nemo2_perf_defaults(run, ext, training);
    run.layout = parse_training(StrictObject(training, file, rr.field("training")), run.model,
                                run.topology.gpu, run.source, run.unsupported);
    // llm-foundry's MPT trains without dropout (MPTConfig: resid_pdrop = emb_pdrop = 0.0, attn_config
    // attn_pdrop 0.0; llmfoundry/models/mpt/configuration_mpt.py, which its pretrain yamls keep), unless the
    // row's model states it.
    const json& model_row = rr.raw("model");
    if (run.layout.framework == Framework::composer && model_row.is_object() &&
        !model_row.contains("dropout") && run.model.dropout) {
        run.model.dropout = false;
        run.notes.push_back(
            "model.dropout = false: llm-foundry's MPTConfig sets resid_pdrop, emb_pdrop and attn_pdrop to 0");
    }
    auto m = rr.object("measured");
    parse_measured(m, run);
    m.finish();
    check_documentary_fields(rr);
    rr.finish();
    if (!ext.is_null()) read_extensions(ext, file, where, run, training_recompute);
    if (run.unsupported) return;  // nothing else matters for a run that is not simulated
    const bool deepseek = bridge_deepseek_v3(run, ext);
    // Megatron-Bridge's DeepSeek-V3 recipes (src/megatron/bridge/recipes/deepseek/deepseek_v3.py from
    // v0.2.0, the base of scripts/performance's DeepSeek configs; perf_recipes/deepseek/common.py
    // _enable_deepseek_precision_aware_optimizer in v0.6.0) keep Adam's moments in bf16, unless the row
    // states it.
    if (deepseek && !training.contains("adam_moments_bf16") && run.layout.optimizer == Optimizer::adam &&
        run.layout.offload_optimizer == Offload::none && !run.layout.apex_distributed_adam &&
        run.layout.zero_stage == 0) {
        run.layout.adam_moments_bf16 = true;
        run.notes.push_back(
            "training.adam_moments_bf16 = true: Megatron-Bridge's DeepSeek-V3 recipes set "
            "use_precision_aware_optimizer with exp_avg_dtype = exp_avg_sq_dtype = bfloat16");
    }
    apply_bridge_v06_recipe(run, ext);
    if (!run.layout.fp8_attention && run.layout.precision == Precision::fp8 &&
        run.layout.attention == AttentionKernel::cudnn && bridge_fp8_attention_preset(ext)) {
        run.layout.fp8_attention = true;
        run.notes.push_back(
            "layout.fp8_attention = true: the row's Megatron-Bridge preset sets "
            "mixed_precision.fp8_dot_product_attention");
    }
    choose_pipeline_split(run.model, run.layout, run.unsupported, run.notes, deepseek);
    const int cluster_gpus = run.topology.gpus();
    if (run.layout.gpus() != cluster_gpus)
        rr.fail(where + " training", fmt::format("tp * pp * dp * cp = {} does not equal cluster.gpus = {}",
                                                 run.layout.gpus(), cluster_gpus));
}

CollectiveKind parse_op(StrictObject& o) {
    const auto op = o.choice("op", {"all_reduce", "all_gather", "reduce_scatter"});
    return op == "all_reduce"   ? CollectiveKind::all_reduce
           : op == "all_gather" ? CollectiveKind::all_gather
                                : CollectiveKind::reduce_scatter;
}

/// A number that may be null (not reported); when given, at least `floor` (in `unit`).
std::optional<double> reported(StrictObject& o, const std::string& key, double floor, const char* unit) {
    if (!o.has(key) || o.raw(key).is_null()) return std::nullopt;
    const double v = o.number_in(key, 0, 1e18);
    if (!(v > 0)) o.fail(o.field(key), fmt::format("= {} must be positive (null: not reported)", v));
    // A denormal bus bandwidth (1e-320) made the row's error +inf% and the collectives' MAPE inf% (round 11).
    if (v < floor) o.fail(o.field(key), fmt::format("= {:g} is below {:g} {}", v, floor, unit));
    return v;
}

void parse_collective(const json& row, const std::string& file, CollectiveRow& out) {
    StrictObject r(row, file, fmt::format("collective \"{}\"", clip_for_message(out.id)));
    r.string("id");
    out.op = parse_op(r);
    const std::int64_t gpus = r.positive("gpus");
    const std::int64_t nodes = r.positive("nodes");
    // The size limits of a topology (include/trainsim/limits.hpp), checked before the preset cluster is built
    // (2^31 - 1 GPUs on one node took 22 s and 8 GB before the topology check refused it).
    if (gpus > limits::kMaxGpus)
        r.fail(r.field("gpus"),
               fmt::format("= {} is above the limit of {} (trainsim/limits.hpp)", gpus, limits::kMaxGpus));
    // One GPU moves nothing: its time and bus bandwidth are 0 and NaN (printed "-nan GB/s", exit 0).
    if (gpus < 2) r.fail(r.field("gpus"), fmt::format("= {}: a collective needs at least 2 GPUs", gpus));
    if (nodes > gpus) r.fail(r.field("nodes"), fmt::format("= {} is more than gpus = {}", nodes, gpus));
    if (gpus / nodes > limits::kMaxGpusPerNode)
        r.fail(r.field("gpus"), fmt::format("= {} on {} nodes is above the limit of {} GPUs per node "
                                            "(trainsim/limits.hpp)",
                                            gpus, nodes, limits::kMaxGpusPerNode));
    out.gpus = static_cast<int>(gpus);
    out.nodes = static_cast<int>(nodes);
    out.bytes = r.number_in("bytes", 0, 1e15, "B");
    if (!(out.bytes > 0)) r.fail(r.field("bytes"), fmt::format("= {} must be positive", out.bytes));
    out.algbw_GBps = reported(r, "algbw_GBps", 1e-3, "GB/s");
    out.busbw_GBps = reported(r, "busbw_GBps", 1e-3, "GB/s");
    out.time_us = reported(r, "time_us", 1e-3, "us");
    if (out.gpus % out.nodes != 0)
        r.fail(r.field("gpus"), fmt::format("= {} is not a multiple of nodes = {}", out.gpus, out.nodes));
    std::string hardware;
    if (r.has("hardware")) hardware = r.string("hardware");
    if (r.has("gpu")) {  // a catalog name: its DGX-style system, as if `hardware` named it
        std::string gpu = r.string("gpu");
        try {
            gpu = find_gpu(gpu, r.field("gpu")).name;
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", file, e.what()));
        }
        if (r.has("cluster")) r.fail(r.field("gpu"), "and cluster cannot both be given");
        hardware = gpu;
    }
    if (r.has("cluster")) {
        std::vector<std::string> notes;
        out.topology = parse_cluster(r.object("cluster"), DomainInfo{}, notes);
        if (out.topology.gpus() != out.gpus)
            r.fail(r.field("cluster.gpus"),
                   fmt::format("= {} does not equal the row's gpus = {}", out.topology.gpus(), out.gpus));
    } else {
        out.topology = dgx_preset_topology(hardware, out.gpus, out.gpus / out.nodes,
                                           fmt::format("{}: {}", file, r.field("hardware")));
    }
    // Documentary text, not simulated: a string or null (ignored whatever its type before round 12).
    for (const char* k : {"dtype", "algorithm", "source", "notes"})
        if (r.has(k) && !r.raw(k).is_null() && !r.raw(k).is_string())
            r.fail(r.field(k), fmt::format("= {} must be a string", detail::shown(r.raw(k))));
    r.finish();
}

const std::set<std::string>& top_level_keys() {
    static const std::set<std::string> k = {"format", "about", "runs", "collectives"};
    return k;
}

}  // namespace

TopologySpec dgx_preset_topology(const std::string& hardware, int gpus, int gpus_per_node,
                                 const std::string& where) {
    for (const auto& p : kDgxPresets)
        if (hardware == p.gpu || contains(hardware, p.token))
            return dgx_topology(p.gpu, gpus, gpus_per_node, p.nvlink_GBps, gpus_per_node, p.nic_Gbps,
                                "infiniband");
    std::string known;
    for (const auto& p : kDgxPresets)
        known += (known.empty() ? "" : ", ") + std::string(p.token);
    throw InputError(fmt::format("{} = \"{}\" names no known system ({}); add a cluster block", where,
                                 clip_for_message(hardware), known));
}

std::optional<double> CollectiveRow::measured_busbw_GBps() const {
    if (busbw_GBps) return busbw_GBps;
    const double factor = busbw_factor(op, gpus);
    if (algbw_GBps) return *algbw_GBps * factor;
    if (time_us) return bytes / (*time_us * 1e-6) / 1e9 * factor;
    return std::nullopt;
}

namespace {

/// Refuses a `runs` or `collectives` array of more than limits::kMaxMeasuredRows rows (each is held parsed).
void check_row_count(const StrictObject& top, const char* key, const json& rows) {
    if (static_cast<std::int64_t>(rows.size()) > limits::kMaxMeasuredRows)
        top.fail(key, fmt::format("has {} rows, above the limit of {} (trainsim/limits.hpp)", rows.size(),
                                  limits::kMaxMeasuredRows));
}

}  // namespace

MeasuredRunsFile parse_measured_runs(const json& j, const std::string& file) {
    StrictObject top(j, file, "");
    const auto fmt_name = top.string("format");
    if (fmt_name != "trainsim-measured-runs/1")
        top.fail("format",
                 fmt::format("= \"{}\" is not \"trainsim-measured-runs/1\"", clip_for_message(fmt_name)));
    MeasuredRunsFile out;
    for (auto it = j.begin(); it != j.end(); ++it)
        if (!top_level_keys().count(it.key()))
            out.notes.push_back(
                fmt::format("{}: top-level key \"{}\" is not defined by trainsim-measured-runs/1; ignored",
                            file, it.key()));
    const auto& runs = top.raw("runs");
    if (!runs.is_array()) top.fail("runs", "must be an array");
    check_row_count(top, "runs", runs);
    // A repeated id is the later row's error: which run `run --id` and `validate --only` meant is not
    // guessed.
    std::map<std::string, std::size_t> first_with_id;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        MeasuredRun run;
        const json& row = runs[i];
        run.id = row.is_object() && row.contains("id") && row.at("id").is_string()
                     ? row.at("id").get<std::string>()
                     : fmt::format("runs[{}]", i);
        try {
            if (!row.is_object() || !row.contains("id") || !row.at("id").is_string())
                StrictObject(row, file, fmt::format("runs[{}]", i)).string("id");
            if (const auto [at, first] = first_with_id.emplace(run.id, i); !first)
                throw InputError(
                    fmt::format("{}: runs[{}].id = \"{}\" is also the id of runs[{}]; ids must be unique",
                                file, i, clip_for_message(run.id), at->second));
            parse_run(row, file, run);
        } catch (const InputError& e) {
            run.error = e.what();
        } catch (const json::exception& e) {  // a value of an unexpected JSON type deep in the row
            run.error = fmt::format("{}: run \"{}\": {}", file, clip_for_message(run.id), e.what());
        }
        out.runs.push_back(std::move(run));
    }
    if (top.has("collectives")) {
        const auto& rows = top.raw("collectives");
        if (!rows.is_array()) top.fail("collectives", "must be an array");
        check_row_count(top, "collectives", rows);
        for (std::size_t i = 0; i < rows.size(); ++i) {
            CollectiveRow row;
            const json& rj = rows[i];
            row.id = rj.is_object() && rj.contains("id") && rj.at("id").is_string()
                         ? rj.at("id").get<std::string>()
                         : fmt::format("collectives[{}]", i);
            try {
                if (!rj.is_object() || !rj.contains("id") || !rj.at("id").is_string())
                    StrictObject(rj, file, fmt::format("collectives[{}]", i)).string("id");
                parse_collective(rj, file, row);
            } catch (const InputError& e) {
                row.error = e.what();
            } catch (const json::exception& e) {
                row.error =
                    fmt::format("{}: collective \"{}\": {}", file, clip_for_message(row.id), e.what());
            }
            out.collectives.push_back(std::move(row));
        }
    }
    return out;
}

}  // namespace trainsim
