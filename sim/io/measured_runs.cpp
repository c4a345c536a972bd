#include "trainsim/measured_runs.hpp"

#include <cctype>
#include "strict_json.hpp"

#include "trainsim/config.hpp"
#include "trainsim/framework_defaults.hpp"

namespace trainsim {

using detail::StrictObject;
using nlohmann::json;

namespace {

bool is_ampere(const std::string& gpu) {
    return gpu.rfind("A100", 0) == 0;
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

TopologySpec parse_cluster(StrictObject c) {
    const std::string gpu = c.string("gpu");
    try {
        find_gpu(gpu, c.field("gpu"));
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", c.file(), e.what()));
    }
    const int gpus = static_cast<int>(c.positive("gpus"));
    const int gpn = static_cast<int>(c.positive("gpus_per_node"));
    if (gpus % gpn != 0)
        c.fail(c.field("gpus"), fmt::format("= {} is not a multiple of gpus_per_node = {}", gpus, gpn));
    auto su = c.object("scale_up");
    su.choice("kind", {"nvswitch"});
    const double nvlink = su.number("bandwidth_GBps_per_gpu");
    if (!(nvlink > 0))
        su.fail(su.field("bandwidth_GBps_per_gpu"), fmt::format("= {} must be positive", nvlink));
    su.finish();
    auto so = c.object("scale_out");
    const std::string kind = so.choice("kind", {"infiniband", "roce"});
    const int nics = static_cast<int>(so.positive("nics_per_node"));
    const double nic = so.number("nic_Gbps");
    if (!(nic > 0)) so.fail(so.field("nic_Gbps"), fmt::format("= {} must be positive", nic));
    so.finish();
    c.finish();
    return dgx_topology(gpu, gpus, gpn, nvlink, nics, nic, kind);
}

/// The framework a run ran on when its row does not say (`training.framework`): "torchtitan" named in the
/// source -> torchtitan; "llm-foundry" or "composer" -> composer; "DeepSpeed" or zero_stage >= 1 (Megatron-LM
/// has no ZeRO stages, it has the distributed optimizer) -> deepspeed; otherwise megatron.
Framework framework_from_source(const std::string& source, int zero_stage) {
    auto names = [&](const char* word) {
        std::string lower = source;
        for (auto& c : lower)
            c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return lower.find(word) != std::string::npos;
    };
    if (names("torchtitan")) return Framework::torchtitan;
    if (names("llm-foundry") || names("composer")) return Framework::composer;
    if (names("deepspeed") || zero_stage >= 1) return Framework::deepspeed;
    return Framework::megatron;
}

Layout parse_training(StrictObject o, const ModelSpec& m, const std::string& gpu, const std::string& source,
                      std::optional<std::string>& unsupported) {
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
    const auto p = o.choice("precision", {"fp16", "bf16", "fp8"});
    l.precision = p == "fp16" ? Precision::fp16 : p == "fp8" ? Precision::fp8 : Precision::bf16;
    // The framework's defaults for what the format does not carry (include/trainsim/framework_defaults.hpp),
    // each overridable per run.
    const bool async_tp = o.boolean_or("async_tp", false);
    l.torch_compile = o.boolean_or("compile", false);
    apply_framework_defaults(l, find_gpu(gpu, "cluster.gpu"), async_tp);
    if (o.has("attention")) {
        const auto a = o.choice("attention", {"flash", "cudnn", "unfused"});
        l.attention = a == "unfused" ? AttentionKernel::unfused
                      : a == "cudnn" ? AttentionKernel::cudnn
                                     : AttentionKernel::flash;
    }
    if (o.has("fp8_recipe")) {
        const auto v = o.choice("fp8_recipe", {"delayed", "tensorwise", "rowwise", "mxfp8"});
        l.fp8_recipe = v == "tensorwise" ? Fp8Recipe::tensorwise
                       : v == "rowwise"  ? Fp8Recipe::rowwise
                       : v == "mxfp8"    ? Fp8Recipe::mxfp8
                                         : Fp8Recipe::delayed;
    }
    l.reshard_after_forward = o.boolean_or("reshard_after_forward", l.reshard_after_forward);
    l.overlap_grad_reduce = o.boolean_or("overlap_grad_reduce", l.overlap_grad_reduce);
    l.overlap_param_gather = o.boolean_or("overlap_param_gather", l.overlap_param_gather);
    l.tp_comm_overlap = o.boolean_or("tp_comm_overlap", l.tp_comm_overlap);
    if (o.has("layers_per_stage")) {
        for (const auto& x : o.raw("layers_per_stage")) {
            if (!x.is_number_integer()) o.fail(o.field("layers_per_stage"), "must be an array of integers");
            l.layers_per_stage.push_back(x.get<std::int64_t>());
        }
    } else if (m.layers % l.pp != 0) {
        if ((m.layers + 2) % l.pp == 0 && l.pp >= 2) {
            const std::int64_t per = (m.layers + 2) / l.pp;
            l.layers_per_stage.assign(static_cast<std::size_t>(l.pp), per);
            l.layers_per_stage.front() = per - 1;
            l.layers_per_stage.back() = per - 1;
        } else {
            unsupported = fmt::format(
                "uneven pipeline split of {} layers over pp = {} without layers_per_stage", m.layers, l.pp);
        }
    }
    o.finish();
    return l;
}

CollectiveKind parse_op(StrictObject& o) {
    const auto op = o.choice("op", {"all_reduce", "all_gather", "reduce_scatter"});
    return op == "all_reduce"   ? CollectiveKind::all_reduce
           : op == "all_gather" ? CollectiveKind::all_gather
                                : CollectiveKind::reduce_scatter;
}

}  // namespace

MeasuredRunsFile parse_measured_runs(const json& j, const std::string& file) {
    StrictObject top(j, file, "");
    const auto fmt_name = top.string("format");
    if (fmt_name != "trainsim-measured-runs/1")
        top.fail("format", fmt::format("= \"{}\" is not \"trainsim-measured-runs/1\"", fmt_name));
    if (top.has("about")) top.string("about");
    MeasuredRunsFile out;
    const auto& runs = top.raw("runs");
    if (!runs.is_array()) top.fail("runs", "must be an array");
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const std::string fallback = fmt::format("runs[{}]", i);
        StrictObject r(runs[i], file, fallback);
        MeasuredRun run;
        run.id = r.string("id");
        const std::string where = fmt::format("run \"{}\"", run.id);
        StrictObject rr(runs[i], file, where);
        rr.string("id");
        run.source = rr.string("source");
        run.topology = parse_cluster(rr.object("cluster"));
        run.model = parse_model(rr.raw("model"), file, where + " model");
        run.model.name = run.id;
        run.layout =
            parse_training(rr.object("training"), run.model, run.topology.gpu, run.source, run.unsupported);
        auto m = rr.object("measured");
        run.step_time_s = m.number("step_time_s");
        if (!(run.step_time_s > 0))
            m.fail(m.field("step_time_s"), fmt::format("= {} must be positive", run.step_time_s));
        if (m.has("peak_memory_GiB") && !m.raw("peak_memory_GiB").is_null())
            run.peak_memory_gib = m.number("peak_memory_GiB");
        m.finish();
        for (const char* k : {"reported", "derivation", "confidence", "assumed", "notes"})
            rr.has(k);
        rr.finish();
        const int cluster_gpus = run.topology.gpus();
        if (run.layout.gpus() != cluster_gpus && !run.unsupported)
            rr.fail(where + " training",
                    fmt::format("tp * pp * dp * cp = {} does not equal cluster.gpus = {}", run.layout.gpus(),
                                cluster_gpus));
        out.runs.push_back(std::move(run));
    }
    if (top.has("collectives")) {
        const auto& rows = top.raw("collectives");
        if (!rows.is_array()) top.fail("collectives", "must be an array");
        for (std::size_t i = 0; i < rows.size(); ++i) {
            StrictObject r0(rows[i], file, fmt::format("collectives[{}]", i));
            CollectiveRow row;
            row.id = r0.string("id");
            StrictObject r(rows[i], file, fmt::format("collective \"{}\"", row.id));
            r.string("id");
            row.op = parse_op(r);
            row.gpus = static_cast<int>(r.positive("gpus"));
            row.nodes = static_cast<int>(r.positive("nodes"));
            row.bytes = r.number("bytes");
            row.algbw_GBps = r.number("algbw_GBps");
            row.busbw_GBps = r.number("busbw_GBps");
            if (row.gpus % row.nodes != 0)
                r.fail(r.field("gpus"),
                       fmt::format("= {} is not a multiple of nodes = {}", row.gpus, row.nodes));
            std::string hardware;
            if (r.has("hardware")) hardware = r.string("hardware");
            if (r.has("cluster")) {
                row.topology = parse_cluster(r.object("cluster"));
            } else {
                // No cluster block: the DGX preset of the GPU named in `hardware`.
                const bool hopper = hardware.find("H100") != std::string::npos;
                const bool ampere = hardware.find("A100") != std::string::npos;
                if (!hopper && !ampere)
                    r.fail(r.field("hardware"),
                           "names no known DGX system (A100 or H100); add a cluster block");
                row.topology = hopper ? dgx_topology("H100-SXM5-80GB", row.gpus, row.gpus / row.nodes, 450, 8,
                                                     400, "infiniband")
                                      : dgx_topology("A100-SXM4-80GB", row.gpus, row.gpus / row.nodes, 300, 8,
                                                     200, "infiniband");
            }
            for (const char* k : {"time_us", "dtype", "algorithm", "source", "notes"})
                r.has(k);
            r.finish();
            out.collectives.push_back(std::move(row));
        }
    }
    top.finish();
    return out;
}

}  // namespace trainsim
