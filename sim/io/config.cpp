#include "trainsim/config.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "embedded_defaults.hpp"
#include "layout_fields.hpp"
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

json parse_json_text(std::string_view text, const std::string& name) {
    check_json_depth(text, name);
    try {
        return json::parse(text);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers like 1e400
        throw InputError(fmt::format("{}: not valid JSON ({})", name, clip_for_message(e.what(), 200)));
    }
}

json read_json_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw InputError(fmt::format("{}: cannot open the file ({})", path, std::strerror(errno)));
    if (S_ISDIR(st.st_mode)) throw InputError(fmt::format("{}: is a directory, not a JSON file", path));
    if (S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) > kMaxInputFileBytes)
        throw InputError(fmt::format("{}: {} bytes is larger than the {} bytes an input file may have", path,
                                     st.st_size, kMaxInputFileBytes));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw InputError(fmt::format("{}: cannot open the file", path));
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
    return parse_json_text(text, path);
}

TopologySpec parse_topology(const json& j, const std::string& file) {
    StrictObject o(j, file, "topology");
    TopologySpec t;
    t.name = o.string("name");
    if (o.has("description")) o.string("description");
    t.gpu = o.string("gpu");
    try {
        t.gpu = find_gpu(t.gpu, o.field("gpu")).name;  // an alias read as the catalog name
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", file, e.what()));
    }
    t.nodes = static_cast<int>(o.positive("nodes"));
    t.gpus_per_node = static_cast<int>(o.positive("gpus_per_node"));
    int domain_gpus = t.gpus_per_node;  // scale_up.domain_gpus (cluster.hpp, apply_scale_up_domain)
    {
        auto su = o.object("scale_up");
        t.scale_up_kind = su.choice("kind", {"nvswitch"});
        t.nvlink_bandwidth = Bandwidth{su.quantity("bandwidth_per_gpu", Dimension::bandwidth)};
        t.nvlink_latency = Time::seconds(su.quantity("latency", Dimension::time, true));
        // NVLink domain spanning hosts (GB200 NVL72): applied below, once the host figures are read.
        if (su.has("domain_gpus")) domain_gpus = static_cast<int>(su.positive("domain_gpus"));
        su.finish();
    }
    {
        auto so = o.object("scale_out");
        t.scale_out_kind = so.choice("kind", {"infiniband", "roce"});
        t.nics_per_node = static_cast<int>(so.positive("nics_per_node"));
        t.nic_bandwidth = Bandwidth{so.quantity("nic_rate", Dimension::bandwidth)};
        t.pcie_bandwidth = Bandwidth{so.quantity("pcie_bandwidth", Dimension::bandwidth)};
        t.nic_latency = Time::seconds(so.quantity("nic_latency", Dimension::time, true));
        t.switch_latency = Time::seconds(so.quantity("switch_latency", Dimension::time, true));
        so.choice("topology", {"rail-optimized-fat-tree"});
        t.nodes_per_leaf = static_cast<int>(so.positive("nodes_per_leaf"));
        t.oversubscription = so.number_in("oversubscription", 1.0, limits::kMaxOversubscription);
        if (!(t.oversubscription >= 1.0))
            so.fail(so.field("oversubscription"), fmt::format("= {} must be >= 1", t.oversubscription));
        // Spine-layer routing: InfiniBand fabrics route adaptively, RoCE hashes flows (ECMP) unless told.
        const bool ecmp = so.has("routing") ? so.choice("routing", {"adaptive", "ecmp"}) == "ecmp"
                                            : t.scale_out_kind == "roce";
        t.routing = ecmp ? ScaleOutRouting::ecmp : ScaleOutRouting::adaptive;
        so.finish();
    }
    if (o.has("host")) {
        auto ho = o.object("host");
        t.host_memory_bandwidth = Bandwidth{ho.quantity("memory_bandwidth", Dimension::bandwidth)};
        t.nvme_bandwidth = Bandwidth{ho.quantity("nvme_bandwidth", Dimension::bandwidth)};
        ho.finish();
    }
    if (o.has("storage")) {  // shared storage for checkpoints (optional; default in cluster.hpp)
        auto st = o.object("storage");
        if (st.has("read_bandwidth_per_node"))
            t.storage_read_bandwidth_per_node =
                Bandwidth{st.quantity("read_bandwidth_per_node", Dimension::bandwidth)};
        if (st.has("write_bandwidth_per_node"))
            t.storage_write_bandwidth_per_node =
                Bandwidth{st.quantity("write_bandwidth_per_node", Dimension::bandwidth)};
        st.finish();
    }
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
    if (o.has("name")) m.name = o.string("name");
    m.layers = o.positive("layers");
    m.hidden = o.positive("hidden");
    m.heads = o.positive("heads");
    m.kv_heads = o.has("kv_heads") ? o.positive("kv_heads") : m.heads;
    m.ffn_hidden = o.positive("ffn_hidden");
    m.vocab = o.positive("vocab");
    m.seq_len = o.positive("seq_len");
    m.mlp = o.choice("mlp", {"gelu", "swiglu"}) == "swiglu" ? MlpKind::swiglu : MlpKind::gelu;
    m.tied_embeddings = o.boolean_or("tied_embeddings", m.mlp == MlpKind::gelu);
    m.dropout = o.boolean_or("dropout", true);
    o.finish();
    return m;
}

namespace {

Layout parse_layout(const json& j, const std::string& file) {
    StrictObject o(j, file, "layout");
    Layout l;
    l.tp = static_cast<int>(o.positive("tp"));
    l.pp = static_cast<int>(o.positive("pp"));
    l.dp = static_cast<int>(o.positive("dp"));
    l.cp = static_cast<int>(o.integer_or("cp", 1));
    l.vpp = static_cast<int>(o.integer_or("vpp", 1));
    l.micro_batch = o.positive("micro_batch");
    l.global_batch = o.positive("global_batch");
    if (o.has("schedule"))
        l.schedule =
            o.choice("schedule", {"1f1b", "gpipe"}) == "gpipe" ? Schedule::gpipe : Schedule::one_f_one_b;
    if (o.has("sequence_parallel")) l.sequence_parallel = o.boolean("sequence_parallel");
    if (o.has("recompute")) {
        const auto r = o.choice("recompute", {"none", "selective", "selective_op", "full"});
        l.recompute = r == "full"           ? Recompute::full
                      : r == "selective"    ? Recompute::selective
                      : r == "selective_op" ? Recompute::selective_op
                                            : Recompute::none;
    }
    if (o.has("recompute_num_layers")) {
        l.recompute_num_layers = o.integer("recompute_num_layers");
        if (l.recompute_num_layers < 0)
            o.fail(o.field("recompute_num_layers"),
                   fmt::format("= {} must be 0 (every layer) or positive", l.recompute_num_layers));
    }
    if (o.has("precision")) {
        const auto p = o.choice("precision", {"bf16", "fp16", "fp8"});
        l.precision = p == "fp16" ? Precision::fp16 : p == "fp8" ? Precision::fp8 : Precision::bf16;
    }
    l.distributed_optimizer = o.boolean_or("distributed_optimizer", false);
    l.zero_stage = static_cast<int>(o.integer_or("zero_stage", 0));
    if (o.has("dp_bucket_size")) l.dp_bucket_bytes = o.quantity("dp_bucket_size", Dimension::bytes);
    l.overlap_grad_reduce = o.boolean_or("overlap_grad_reduce", false);
    l.overlap_param_gather = o.boolean_or("overlap_param_gather", false);
    l.tp_comm_overlap = o.boolean_or("tp_comm_overlap", false);
    detail::read_kernel_choices(o, l);
    l.torch_compile = o.boolean_or("compile", false);
    // null: the even split (lets `--set layout.layers_per_stage=null` drop a workload's uneven split).
    if (o.has("layers_per_stage") && !o.raw("layers_per_stage").is_null()) {
        const auto& v = o.raw("layers_per_stage");
        if (!v.is_array())
            o.fail(o.field("layers_per_stage"), fmt::format("= {} must be an array", detail::shown(v)));
        for (const auto& x : v) {
            if (!x.is_number_integer())
                o.fail(o.field("layers_per_stage"), fmt::format("= {} must hold integers", detail::shown(v)));
            l.layers_per_stage.push_back(x.get<std::int64_t>());
        }
    }
    l.account_for_embedding_in_pipeline_split =
        o.boolean_or("account_for_embedding_in_pipeline_split", false);
    l.account_for_loss_in_pipeline_split = o.boolean_or("account_for_loss_in_pipeline_split", false);
    if (o.has("optimizer")) {
        const auto v = o.choice("optimizer", {"adam", "adam_8bit", "sgd_momentum", "sgd"});
        l.optimizer = v == "adam_8bit"      ? Optimizer::adam_8bit
                      : v == "sgd_momentum" ? Optimizer::sgd_momentum
                      : v == "sgd"          ? Optimizer::sgd
                                            : Optimizer::adam;
    }
    if (o.has("offload_optimizer")) {
        const auto v = o.choice("offload_optimizer", {"none", "cpu", "nvme"});
        l.offload_optimizer = v == "cpu" ? Offload::cpu : v == "nvme" ? Offload::nvme : Offload::none;
    }
    if (o.has("adapter")) {
        const auto v = o.choice("adapter", {"none", "lora", "qlora"});
        l.adapter = v == "lora" ? Adapter::lora : v == "qlora" ? Adapter::qlora : Adapter::none;
    }
    l.lora_rank = o.integer_or("lora_rank", l.lora_rank);
    if (o.has("lora_targets")) {
        const auto& v = o.raw("lora_targets");
        if (!v.is_array())
            o.fail(o.field("lora_targets"), fmt::format("= {} must be an array", detail::shown(v)));
        l.lora_targets = LoraTargets{false, false, false, false};
        for (const auto& x : v) {
            const std::string name = x.is_string() ? x.get<std::string>() : detail::shown(x);
            if (name == "qkv")
                l.lora_targets.qkv = true;
            else if (name == "proj")
                l.lora_targets.proj = true;
            else if (name == "fc1")
                l.lora_targets.fc1 = true;
            else if (name == "fc2")
                l.lora_targets.fc2 = true;
            else
                o.fail(o.field("lora_targets"),
                       fmt::format("holds {}; expected qkv, proj, fc1 or fc2", detail::shown(x)));
        }
    }
    if (o.has("framework")) l.framework = *framework_from_string(o.choice("framework", framework_names()));
    if (o.has("checkpoint_save"))
        l.checkpoint_save = o.choice("checkpoint_save", {"sharded", "rank0"}) == "rank0"
                                ? CheckpointSave::rank0
                                : CheckpointSave::sharded;
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
        meas.tflops_per_gpu = m.number_in("tflops_per_gpu", 0, 1e6);
        meas.tflops_convention = m.choice("tflops_convention", {"narayanan2021-eq3", "megatron-model-flops"});
        m.finish();
        w.measured = meas;
    }
    o.finish();
    return w;
}

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
        at = &(*at)[part];
        start = dot + 1;
    }
}

json default_topology_json() {
    return json::parse(embedded::kDefaultTopology);
}
json default_workload_json() {
    return json::parse(embedded::kDefaultWorkload);
}

}  // namespace trainsim
