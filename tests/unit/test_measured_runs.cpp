// The measured-runs reader: per-row errors, null fields, notes for unknown top-level keys, extensions (read,
// ignored, unsupported), the GPUs of the format's list, NVLink domains used in parts, collective rows; and
// Megatron's account-for-embedding/loss pipeline split with uneven virtual stages.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"
#include "trainsim/validation.hpp"

using namespace trainsim;
using nlohmann::json;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

/// One valid run row: 8 layers, TP 2 x PP 2 x DP 2 on 8 GPUs of one node.
json run_row(const std::string& id, const std::string& gpu = "H100-SXM5-80GB") {
    return {{"id", id},
            {"source", "constructed for the unit test"},
            {"cluster",
             {{"gpu", gpu},
              {"gpus", 8},
              {"gpus_per_node", 8},
              {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 450}}},
              {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 8}, {"nic_Gbps", 400}}}}},
            {"model",
             {{"layers", 8},
              {"hidden", 1024},
              {"heads", 16},
              {"kv_heads", 16},
              {"ffn_hidden", 4096},
              {"vocab", 8192},
              {"seq_len", 512},
              {"mlp", "gelu"}}},
            {"training",
             {{"tp", 2},
              {"pp", 2},
              {"dp", 2},
              {"cp", 1},
              {"vpp", nullptr},
              {"micro_batch", 1},
              {"global_batch", 8},
              {"sequence_parallel", true},
              {"recompute", "none"},
              {"zero_stage", 0},
              {"distributed_optimizer", true},
              {"precision", "fp8"}}},
            {"measured", {{"step_time_s", 1.0}, {"peak_memory_GiB", nullptr}}},
            {"reported", {{"tflops_per_gpu", nullptr}}},
            {"confidence", "high"}};
}

json doc(std::initializer_list<json> runs) {
    json d = {{"format", "trainsim-measured-runs/1"}, {"runs", json::array()}};
    for (const auto& r : runs)
        d["runs"].push_back(r);
    return d;
}

MeasuredRun parse_one(const json& row) {
    return parse_measured_runs(doc({row}), "f.json").runs.at(0);
}

bool ignored(const MeasuredRun& r, const std::string& what) {
    for (const auto& x : r.ignored)
        if (contains(x, what)) return true;
    return false;
}

}  // namespace

TEST_CASE("measured runs: a malformed row is that row's error, the other rows parse") {
    json bad = run_row("bad");
    bad["training"]["tp"] = "two";
    json no_id = run_row("x");
    no_id.erase("id");
    const auto f = parse_measured_runs(doc({run_row("good"), bad, no_id}), "f.json");
    REQUIRE(f.runs.size() == 3);
    CHECK_FALSE(f.runs[0].error);
    REQUIRE(f.runs[1].error);
    const std::string& e = *f.runs[1].error;
    CHECK_MESSAGE(contains(e, "f.json"), e);
    CHECK_MESSAGE(contains(e, "run \"bad\""), e);
    CHECK_MESSAGE(contains(e, "training.tp"), e);
    CHECK_MESSAGE(contains(e, "\"two\""), e);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(f.runs[2].id == "runs[2]");
    REQUIRE(f.runs[2].error);
    CHECK_MESSAGE(contains(*f.runs[2].error, "runs[2].id"), *f.runs[2].error);
    // An unknown key inside a row is still refused, for that row only.
    json typo = run_row("typo");
    typo["measured"]["step_time"] = 1.0;
    const auto t = parse_one(typo);
    REQUIRE(t.error);
    CHECK_MESSAGE(contains(*t.error, "measured.step_time"), *t.error);
    // A row whose layout does not fit its cluster.
    json gpus = run_row("gpus");
    gpus["training"]["dp"] = 4;
    REQUIRE(parse_one(gpus).error);
    CHECK(contains(*parse_one(gpus).error, "does not equal cluster.gpus = 8"));
}

TEST_CASE("measured runs: an id with control characters or 100,000 characters is escaped and cut in errors") {
    // The id went raw into the row's error: a NUL cut the message there ("f.json: run \"x\ny"), a newline
    // broke the validate table's line.
    const std::string id("x\ny\0z", 5);
    json row = run_row(id);
    row["cluster"]["gpus_per_node"] = 0;
    const auto r = parse_one(row);
    REQUIRE(r.error);
    CHECK_MESSAGE(contains(*r.error, "f.json: run \"x\\ny\\x00z\".cluster.gpus_per_node = 0"), *r.error);
    json long_id = run_row(std::string(100000, 'a'));
    long_id["training"]["tp"] = "two";
    const auto l = parse_one(long_id);
    REQUIRE(l.error);
    CHECK_MESSAGE(contains(*l.error, "...(100000 characters)\".training.tp"), *l.error);
    CHECK(l.error->size() < 400);
}

TEST_CASE("measured runs: null means not reported") {
    json r = run_row("nulls");
    r["measured"]["step_time_s"] = nullptr;
    r["measured"]["peak_memory_GiB"] = nullptr;
    const auto run = parse_one(r);
    CHECK_FALSE(run.error);
    CHECK_FALSE(run.step_time_s);
    CHECK_FALSE(run.peak_memory_gib);
    r["measured"]["peak_memory_GiB"] = 61.5;
    r["measured"]["step_time_s"] = 2.5;
    const auto run2 = parse_one(r);
    CHECK(*run2.step_time_s == 2.5);
    CHECK(*run2.peak_memory_gib == 61.5);
    r["measured"]["step_time_s"] = 0;
    REQUIRE(parse_one(r).error);
    CHECK(contains(*parse_one(r).error, "measured.step_time_s"));
}

TEST_CASE("measured runs: unknown top-level keys are noted once and ignored; a non-runs file throws") {
    json d = doc({run_row("a")});
    d["about"] = "free text";
    d["provenance"] = {{"collected", "2026"}};
    const auto f = parse_measured_runs(d, "f.json");
    REQUIRE(f.notes.size() == 1);
    CHECK(contains(f.notes[0], "f.json"));
    CHECK(contains(f.notes[0], "\"provenance\""));
    CHECK(contains(f.notes[0], "ignored"));
    CHECK_FALSE(f.runs.at(0).error);
    json wrong = d;
    wrong["format"] = "something-else/2";
    CHECK(contains(message_of<InputError>([&] { parse_measured_runs(wrong, "f.json"); }), "format"));
    json not_array = d;
    not_array["runs"] = json::object();
    CHECK(contains(message_of<InputError>([&] { parse_measured_runs(not_array, "f.json"); }), "runs"));
}

TEST_CASE("measured runs: extensions are read where modelled, otherwise listed as ignored") {
    json r = run_row("ext");
    r["extensions"] = {{"table", {{"tokens_per_s_per_gpu", 1000}}},
                       {"recipe_preset", "x.yaml"},
                       {"cuda_graphs", "local"},
                       {"activation_cpu_offloading_layers", 20},
                       {"head_dim", 64},  // = hidden / heads: consistent, nothing ignored
                       {"precision_detail", "fp8_current_scaling"},
                       {"something_new", true}};
    const auto run = parse_one(r);
    CHECK_FALSE(run.error);
    CHECK_FALSE(run.unsupported);
    CHECK(ignored(run, "extensions.cuda_graphs"));
    CHECK(ignored(run, "extensions.activation_cpu_offloading_layers"));
    CHECK(ignored(run, "extensions.something_new"));
    CHECK_FALSE(ignored(run, "head_dim"));
    CHECK_FALSE(ignored(run, "table"));
    CHECK_FALSE(ignored(run, "recipe_preset"));
    CHECK(run.layout.fp8_recipe == Fp8Recipe::tensorwise);

    r["extensions"] = {{"head_dim", 128}, {"attention", {{"head_dim", 128}}}};
    const auto hd = parse_one(r);
    CHECK(ignored(hd, "extensions.head_dim = 128"));
    CHECK(ignored(hd, "extensions.attention.head_dim = 128"));

    // Recompute granularity: full / selective (core_attn) / selective with no module (nothing recomputed).
    r["extensions"] = {{"recompute", {{"granularity", "full"}}}};
    CHECK(parse_one(r).layout.recompute == Recompute::full);
    CHECK(parse_one(r).ignored.empty());
    r["extensions"] = {{"recompute", {{"granularity", "selective"}, {"modules", {"core_attn"}}}}};
    CHECK(parse_one(r).layout.recompute == Recompute::selective);
    r["training"]["recompute"] = "selective";
    r["extensions"] = {{"recompute", {{"granularity", "selective"}, {"modules", json::array()}}}};
    CHECK(parse_one(r).layout.recompute == Recompute::none);
    r["extensions"] = {{"recompute", {{"granularity", "selective"}, {"modules", {"mlp"}}}}};
    CHECK(parse_one(r).layout.recompute == Recompute::selective);
    CHECK(parse_one(r).layout.recompute_modules.mlp);  // Layout::recompute_modules
    CHECK_FALSE(ignored(parse_one(r), "extensions.recompute.modules"));
    r["extensions"] = {{"recompute", {{"granularity", "selective"}, {"modules", {"gdn_norm_out"}}}}};
    CHECK(parse_one(r).layout.recompute == Recompute::selective);
    CHECK(ignored(parse_one(r), "extensions.recompute.modules"));
    r["extensions"] = {
        {"recompute", {{"granularity", "full"}, {"method", "block"}, {"num_layers_per_pp_stage", 2}}}};
    CHECK(parse_one(r).layout.recompute == Recompute::full);
    CHECK(parse_one(r).layout.recompute_num_layers == 2);  // Megatron's block method, read
    CHECK_FALSE(ignored(parse_one(r), "partial full recompute"));
    r["extensions"] = {{"recompute", {{"granularity", "full"}, {"method", "uniform"}, {"num_layers", 2}}}};
    CHECK(parse_one(r).layout.recompute_num_layers == 0);
    CHECK(ignored(parse_one(r), "partial full recompute"));

    // Megatron-FSDP is ZeRO-3 run by Megatron.
    json fsdp = run_row("fsdp");
    fsdp["training"]["tp"] = 1;
    fsdp["training"]["pp"] = 1;
    fsdp["training"]["dp"] = 8;
    fsdp["training"]["sequence_parallel"] = false;
    fsdp["training"]["zero_stage"] = 3;
    fsdp["extensions"] = {{"megatron_fsdp", {{"enabled", true}, {"sharding", "optim_grads_params"}}}};
    const auto f = parse_one(fsdp);
    CHECK_FALSE(f.error);
    CHECK(f.layout.framework == Framework::megatron);
    CHECK(f.layout.zero_stage == 3);

    // Values of unexpected JSON types in extensions never throw past the row.
    json odd = run_row("odd");
    odd["extensions"] = {{"megatron_fsdp", {{"enabled", "yes"}, {"sharding", 3}}},
                         {"recompute", {{"granularity", 3}}},
                         {"cluster", {{"nvlink_domain_gpus", "72"}}}};
    const auto o = parse_one(odd);
    CHECK_FALSE(o.error);
    CHECK(ignored(o, "extensions.recompute"));

    json not_object = run_row("x");
    not_object["extensions"] = 3;
    REQUIRE(parse_one(not_object).error);
    CHECK(contains(*parse_one(not_object).error, "extensions"));
}

TEST_CASE("measured runs: activation_cpu_offloading_layers is Megatron-Core's --cpu-offloading-num-layers") {
    json r = run_row("offload");
    r["training"]["pp"] = 1;
    r["training"]["dp"] = 4;
    r["extensions"] = {{"activation_cpu_offloading_layers", 4}};
    auto run = parse_one(r);
    CHECK_FALSE(run.error);
    CHECK(run.layout.activation_offload_layers == 4);
    CHECK_FALSE(ignored(run, "extensions.activation_cpu_offloading_layers"));
    // With PP (or recompute) Megatron-Core refuses it: dropped, and said so.
    r["training"]["pp"] = 2;
    r["training"]["dp"] = 2;
    run = parse_one(r);
    CHECK(run.layout.activation_offload_layers == 0);
    CHECK(ignored(run, "extensions.activation_cpu_offloading_layers"));
}

TEST_CASE("measured runs: mixture of experts and MLA are read and simulated") {
    json moe = run_row("moe");
    moe["extensions"] = {{"moe", {{"num_experts", 128}, {"top_k", 8}}}};
    const auto m = parse_one(moe);
    CHECK_FALSE(m.error);
    CHECK_FALSE(m.unsupported);
    CHECK(m.model.num_experts == 128);
    CHECK(m.model.moe_top_k == 8);

    // A DeepSeek-V3-style row (MLA, MoE, mxfp8, MTP): all simulated.
    json mla = run_row("mla", "GB200");
    mla["extensions"] = {{"attention",
                          {{"type", "MLA"},
                           {"q_lora_rank", 96},
                           {"kv_lora_rank", 32},
                           {"qk_head_dim", 32},
                           {"qk_rope_head_dim", 16},
                           {"v_head_dim", 32}}},
                         {"moe", {{"num_experts", 256}, {"top_k", 8}}},
                         {"mtp_layers", 1},
                         {"precision_detail", "mxfp8"}};
    const auto d = parse_one(mla);
    CHECK_FALSE(d.error);
    CHECK_FALSE(d.unsupported);
    CHECK(d.model.mla());
    CHECK(d.model.q_lora_rank == 96);
    CHECK(d.model.head_dim() == 32);
    CHECK(d.model.mtp_layers == 1);
    CHECK(d.layout.fp8_recipe == Fp8Recipe::mxfp8);
    CHECK(d.layout.pipeline_layout.empty());  // pp 2 divides the 8 layers; not a Megatron-Bridge row
}

TEST_CASE("measured runs: Megatron-Bridge DeepSeek-V3 rows get the recipe's pipeline layout") {
    json r = run_row("ds", "GB200");
    r["source"] = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md";
    r["model"]["layers"] = 61;
    r["training"]["tp"] = 1;
    r["training"]["pp"] = 4;
    r["training"]["vpp"] = 4;
    r["training"]["dp"] = 2;
    r["training"]["global_batch"] = 16;
    r["training"]["sequence_parallel"] = false;
    r["extensions"] = {{"table", {{"model_label", "DeepSeekV3 (w/ MTP)"}}}, {"mtp_layers", 1}};
    const auto d = parse_one(r);
    CHECK_FALSE(d.error);
    CHECK_FALSE(d.unsupported);
    // (4, 4) in set_deepseek_v3_pipeline_model_parallel_layout: E + 4 layers, 14 x 4, 1 layer + MTP + loss.
    CHECK(d.layout.pipeline_layout == "Et*4|(t*4|)*14tmL");
    CHECK(layers_on_virtual_stage(d.model, d.layout, 0, 0) == 4);
    CHECK(layers_on_virtual_stage(d.model, d.layout, 3, 3) == 1);
    CHECK(layers_on_stage(d.model, d.layout, 3) == 13);
    CHECK(layers_on_stage(d.model, d.layout, 0) == 16);
    CHECK(layout_violations(d.model, d.layout, 8).empty());
    // The recipe's precision-aware optimizer: Adam's moments in bf16, said in a note.
    CHECK(d.layout.adam_moments_bf16);
    CHECK(std::any_of(d.notes.begin(), d.notes.end(),
                      [](const std::string& n) { return contains(n, "adam_moments_bf16 = true"); }));
    // 32 virtual stages without MTP: the PP 8 x VPP 4 preset's layout, the last stage only the loss.
    r["training"]["pp"] = 8;
    r["training"]["dp"] = 1;
    r["training"]["global_batch"] = 8;
    r["cluster"]["gpus"] = 8;
    r["extensions"] = {{"table", {{"model_label", "DeepSeekV3 (w/o MTP)"}}}, {"mtp_layers", 0}};
    const auto e = parse_one(r);
    CHECK_FALSE(e.unsupported);
    CHECK(e.layout.pipeline_layout == "Et|(tt|)*30L");
    CHECK(layers_on_virtual_stage(e.model, e.layout, 7, 3) == 0);
    // The row's own key wins.
    r["training"]["adam_moments_bf16"] = false;
    CHECK_FALSE(parse_one(r).layout.adam_moments_bf16);
    r["training"].erase("adam_moments_bf16");
    // Not a DeepSeek-V3 row: the old rule (no split divides 61 + 2 over 32 stages) leaves it unsupported.
    r["extensions"] = json::object();
    REQUIRE(parse_one(r).unsupported);
    CHECK(contains(*parse_one(r).unsupported, "uneven pipeline split"));
}

TEST_CASE("measured runs: mxfp8 and nvfp4 load as block-scaled recipes and simulate on Blackwell") {
    json mx = run_row("mx", "GB300");
    mx["source"] = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md";
    mx["extensions"] = {{"precision_detail", "mxfp8"}};
    const auto m = parse_one(mx);
    CHECK_FALSE(m.error);
    CHECK_FALSE(m.unsupported);
    CHECK(m.layout.precision == Precision::fp8);
    CHECK(m.layout.fp8_recipe == Fp8Recipe::mxfp8);
    // Megatron-Bridge's MXFP8 recipe sets fp8_param_gather, which for a block-scaled recipe gathers bf16 and
    // quantizes the weights after the gather.
    CHECK(m.layout.fp8_param_gather);
    CHECK_FALSE(m.layout.fp8_weights_gathered_in_fp8());
    CHECK(m.layout.tp_comm_overlap);  // Megatron's default with SP (unchanged for mxfp8)

    json fp4 = run_row("fp4", "GB200");
    fp4["source"] = "NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md";
    fp4["training"]["precision"] = "nvfp4";
    fp4["extensions"] = {{"precision_detail", "nvfp4"}};
    const auto f = parse_one(fp4);
    CHECK_FALSE(f.error);
    CHECK_FALSE(f.unsupported);
    CHECK(f.layout.precision == Precision::fp8);
    CHECK(f.layout.fp8_recipe == Fp8Recipe::nvfp4);
    CHECK_FALSE(f.layout.fp8_param_gather);
    CHECK_FALSE(f.layout.tp_comm_overlap);  // Megatron-Bridge's Llama nvfp4 configs

    // Both simulate. On Llama-3-70B-sized layers (GEMMs far above the GEMM floor) the same layout is faster
    // in NVFP4 (GEMMs at the FP4 rate, 3x FP8's on GB300) than in MXFP8, and MXFP8 faster than bf16; on the
    // test's small layers the floor and the casts dominate, so nothing is claimed there.
    CHECK(simulate(m.topology, m.model, m.layout, "mx").report.step_time_s > 0);
    CHECK(simulate(f.topology, f.model, f.layout, "fp4").report.step_time_s > 0);
    ModelSpec big = m.model;
    big.hidden = 8192;
    big.heads = 64;
    big.kv_heads = 8;
    big.ffn_hidden = 28672;
    big.seq_len = 4096;
    big.layers = 4;
    Layout l = m.layout;
    const double t_mx = simulate(m.topology, big, l, "mx").report.step_time_s;
    l.fp8_recipe = Fp8Recipe::nvfp4;
    const double t_fp4 = simulate(m.topology, big, l, "fp4").report.step_time_s;
    l.precision = Precision::bf16;
    const double t_bf16 = simulate(m.topology, big, l, "bf16").report.step_time_s;
    CHECK(t_fp4 < t_mx);
    CHECK(t_mx < t_bf16);

    // MXFP8 on Hopper: refused, naming the recipe and the GPU.
    json hopper = mx;
    hopper["cluster"]["gpu"] = "H100-SXM5-80GB";
    const auto h = parse_one(hopper);
    CHECK(contains(message_of<InputError>([&] { simulate(h.topology, h.model, h.layout, "h"); }),
                   "layout.fp8_recipe = \"mxfp8\" needs block-scaled tensor cores"));
}

TEST_CASE("measured runs: every GPU of the format's list is known, with sourced figures") {
    for (const char* name : {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H100-SXM5-96GB",
                             "H200-SXM-141GB", "B200", "B300", "GB200", "GB300"}) {
        CAPTURE(name);
        const GpuSpec& g = find_gpu(name, "test");
        CHECK(g.peak_bf16_flops > 0);
        CHECK(g.hbm_bytes > 0);
        CHECK(g.hbm_bytes_per_s > 0);
        CHECK(g.sm_count > 0);
        CHECK(g.gemm_max_efficiency > 0);
        // FP8 tensor cores from Hopper on, at twice the 16-bit rate (datasheets).
        if (std::string(name).rfind("A100", 0) != 0)
            CHECK(g.peak_fp8_flops == doctest::Approx(2 * g.peak_bf16_flops).epsilon(1e-3));
        CHECK_FALSE(parse_one(run_row("r", name)).error);
    }
    // Blackwell: GB200/GB300 run at 2.5 PFLOPS dense BF16, B200/B300 at 2.25.
    CHECK(find_gpu("GB200", "t").peak_bf16_flops > find_gpu("B200", "t").peak_bf16_flops);
    CHECK(find_gpu("B300", "t").hbm_bytes > find_gpu("B200", "t").hbm_bytes);
}

TEST_CASE("measured runs: NVLink domains used in parts, a job smaller than a node") {
    json r = run_row("nvl72", "GB200");
    r["cluster"]["gpus"] = 128;
    r["cluster"]["gpus_per_node"] = 72;
    r["cluster"]["scale_out"]["nics_per_node"] = 72;
    r["training"]["dp"] = 32;
    r["training"]["global_batch"] = 64;
    // Without the domain stated, 128 GPUs on 72-GPU nodes is an error.
    REQUIRE(parse_one(r).error);
    CHECK(contains(*parse_one(r).error, "nvlink_domain_gpus"));
    r["extensions"] = {
        {"cluster", {{"system", "DGX-GB200"}, {"nvlink_domain_gpus", 72}, {"gpus_per_tray", 4}}}};
    const auto run = parse_one(r);
    REQUIRE_FALSE(run.error);
    CHECK(run.topology.gpus_per_node == 64);
    CHECK(run.topology.nodes == 2);
    CHECK(run.topology.nics_per_node == 64);
    REQUIRE(run.notes.size() == 1);
    CHECK(contains(run.notes[0], "2 domains of 64 GPUs"));

    json small = run_row("small", "GB300");
    small["cluster"]["gpus_per_node"] = 72;
    small["cluster"]["scale_out"]["nics_per_node"] = 72;
    const auto s = parse_one(small);
    REQUIRE_FALSE(s.error);
    CHECK(s.topology.gpus_per_node == 8);
    CHECK(s.topology.nodes == 1);
    CHECK(s.topology.nics_per_node == 8);
}

TEST_CASE("measured runs: collective rows, null bandwidths, presets beyond A100/H100, per-row errors") {
    json d = doc({run_row("a")});
    auto coll = [](const std::string& id, const std::string& hardware) {
        return json{{"id", id},
                    {"op", "all_reduce"},
                    {"gpus", 8},
                    {"nodes", 1},
                    {"bytes", 1 << 30},
                    {"algbw_GBps", 200.0},
                    {"busbw_GBps", 350.0},
                    {"time_us", nullptr},
                    {"hardware", hardware}};
    };
    d["collectives"] = json::array();
    d["collectives"].push_back(coll("h100", "DGX H100, 8x H100 80GB HBM3"));
    d["collectives"].push_back(coll("b200", "DGX B200"));
    d["collectives"].push_back(coll("h200", "HGX H200 141GB"));
    json only_time = coll("time", "DGX A100");
    only_time["algbw_GBps"] = nullptr;
    only_time["busbw_GBps"] = nullptr;
    only_time["time_us"] = 10000.0;
    d["collectives"].push_back(only_time);
    json none = coll("none", "DGX A100");
    none["algbw_GBps"] = nullptr;
    none["busbw_GBps"] = nullptr;
    d["collectives"].push_back(none);
    d["collectives"].push_back(coll("unknown", "a TPU pod"));
    json by_gpu = coll("gb300", "rack-scale system");
    by_gpu["gpu"] = "GB300";
    d["collectives"].push_back(by_gpu);
    // One GPU moves nothing: its predicted bus bandwidth was NaN ("-nan GB/s", exit 0); now the row's error.
    json one_gpu = coll("one", "DGX A100");
    one_gpu["gpus"] = 1;
    d["collectives"].push_back(one_gpu);
    const auto f = parse_measured_runs(d, "f.json");
    REQUIRE(f.collectives.size() == 8);
    REQUIRE(f.collectives[7].error);
    CHECK(contains(*f.collectives[7].error,
                   "f.json: collective \"one\".gpus = 1: a collective needs at least 2 GPUs"));
    CHECK_FALSE(f.collectives[6].error);
    CHECK(f.collectives[6].topology.gpu == "GB300");
    CHECK(f.collectives[6].topology.nic_bandwidth.bytes_per_s == doctest::Approx(100e9));
    CHECK(f.collectives[0].topology.gpu == "H100-SXM5-80GB");
    CHECK(f.collectives[1].topology.gpu == "B200");
    CHECK(f.collectives[1].topology.nvlink_bandwidth.bytes_per_s == doctest::Approx(900e9));
    CHECK(f.collectives[2].topology.gpu == "H200-SXM-141GB");
    CHECK(*f.collectives[0].measured_busbw_GBps() == 350.0);
    // bytes / time x busbw factor 2(n-1)/n of an 8-GPU all-reduce.
    CHECK(*f.collectives[3].measured_busbw_GBps() == doctest::Approx((1 << 30) / 1e-2 / 1e9 * 2 * 7 / 8));
    CHECK_FALSE(f.collectives[4].measured_busbw_GBps());
    CHECK_FALSE(f.collectives[4].error);
    REQUIRE(f.collectives[5].error);
    CHECK(contains(*f.collectives[5].error, "hardware"));
    CHECK(contains(*f.collectives[5].error, "a TPU pod"));
}

TEST_CASE(
    "measured runs: a denormal peak memory, bus bandwidth or time is the row's error, not an error of inf%") {
    // Round 11: 1e-320 made validate print +inf% and a MAPE of inf% (null in --json).
    json r = run_row("tiny");
    r["measured"]["peak_memory_GiB"] = 1e-320;
    const auto run = parse_one(r);
    REQUIRE(run.error);
    CHECK_MESSAGE(contains(*run.error, "measured.peak_memory_GiB = 9.99989e-321 is below 1 MiB"), *run.error);
    r["measured"]["peak_memory_GiB"] = 1.0 / 1024;  // 1 MiB: the floor itself is taken
    CHECK_FALSE(parse_one(r).error);
    json d = doc({run_row("a")});
    d["collectives"] = json::array();
    for (const char* key : {"algbw_GBps", "busbw_GBps", "time_us"}) {
        json c = {{"id", key},          {"op", "all_reduce"}, {"gpus", 8},
                  {"nodes", 1},         {"bytes", 1 << 20},   {"algbw_GBps", 40.0},
                  {"busbw_GBps", 70.0}, {"time_us", 27.0},    {"hardware", "DGX A100"}};
        c[key] = 1e-320;
        d["collectives"].push_back(c);
    }
    const auto f = parse_measured_runs(d, "f.json");
    REQUIRE(f.collectives.size() == 3);
    for (const auto& c : f.collectives) {
        REQUIRE(c.error);
        CHECK_MESSAGE(contains(*c.error, "\"." + c.id + " = 9.99989e-321 is below 0.001"), *c.error);
    }
}

TEST_CASE("pipeline split: account for embedding and loss, 126 layers on PP 16 x VPP 8 (Llama 3 405B)") {
    const ModelSpec m = test::llama_style(126, 16384, 128, 8, 53248, 128256, 8192);
    Layout l;
    l.tp = 8;
    l.pp = 16;
    l.dp = 8;
    l.vpp = 8;
    l.micro_batch = 1;
    l.global_batch = 128;  // 16 micro-batches, a multiple of pp
    l.sequence_parallel = true;
    // Without the flags 126 layers do not divide over 16 stages.
    CHECK(contains(message_of<InputError>([&] { check_layout(m, l, 1024); }), "does not divide"));
    l.account_for_embedding_in_pipeline_split = true;
    l.account_for_loss_in_pipeline_split = true;
    check_layout(m, l, 1024);
    CHECK(pipeline_split_layers(m, l) == 128);
    std::int64_t total = 0;
    for (int s = 0; s < l.pp; ++s)
        for (int c = 0; c < l.vpp; ++c) {
            const auto n = layers_on_virtual_stage(m, l, s, c);
            const bool first = s == 0 && c == 0, last = s == l.pp - 1 && c == l.vpp - 1;
            CHECK(n == (first || last ? 0 : 1));
            total += n;
        }
    CHECK(total == 126);
    CHECK(layers_on_stage(m, l, 0) == 7);
    CHECK(layers_on_stage(m, l, 7) == 8);
    CHECK(layers_on_stage(m, l, 15) == 7);
    const Program p = build_program(m, l);
    REQUIRE(p.stages.size() == 16);
    CHECK(p.stages[0].layers == 7);
    CHECK(p.stages[0].has_embedding);
    CHECK(p.stages[15].layers == 7);
    CHECK(p.stages[15].has_head);
    CHECK(p.stages[8].layers == 8);

    // Megatron refuses the flags together with an explicit split; 125 layers + 2 do not divide.
    Layout both = l;
    both.layers_per_stage.assign(16, 8);
    CHECK(contains(message_of<InputError>([&] { check_layout(m, both, 1024); }), "cannot be combined"));
    const ModelSpec m125 = test::llama_style(125, 16384, 128, 8, 53248, 128256, 8192);
    const auto msg = message_of<InputError>([&] { check_layout(m125, l, 1024); });
    CHECK_MESSAGE(contains(msg, "127 layers of the split"), msg);
}

TEST_CASE("pipeline split: a small interleaved run with empty first and last virtual stages simulates") {
    // 6 layers + embedding + loss = 8 over PP 4 x VPP 2: one per virtual stage, none on the first and last.
    const ModelSpec m = test::small_gpt(6);
    Layout l;
    l.tp = 1;
    l.pp = 4;
    l.dp = 2;
    l.vpp = 2;
    l.micro_batch = 1;
    l.global_batch = 8;
    l.account_for_embedding_in_pipeline_split = true;
    l.account_for_loss_in_pipeline_split = true;
    const auto res = simulate(test::small_topology(1), m, l, "split-test");
    CHECK(res.report.step_time_s > 0);
    const Program p = build_program(m, l);
    CHECK(p.stages[0].layers == 1);
    CHECK(p.stages[1].layers == 2);
    CHECK(p.stages[3].layers == 1);
    // The same run from a measured-runs row: the loader picks the Megatron split by itself.
    json r = run_row("split");
    r["model"]["layers"] = 6;
    r["training"]["tp"] = 1;
    r["training"]["pp"] = 4;
    r["training"]["vpp"] = 2;
    r["training"]["sequence_parallel"] = false;
    const auto run = parse_one(r);
    REQUIRE_FALSE(run.error);
    REQUIRE_FALSE(run.unsupported);
    CHECK(run.layout.account_for_embedding_in_pipeline_split);
    CHECK(run.layout.account_for_loss_in_pipeline_split);
    // 5 layers: no Megatron rule divides 5 + 2 over 8 virtual stages: unsupported, with the reason.
    r["model"]["layers"] = 5;
    REQUIRE(parse_one(r).unsupported);
    CHECK(contains(*parse_one(r).unsupported, "uneven pipeline split of 5 layers"));
}

TEST_CASE("pipeline split: the sweep keeps the account_for_* flags and counts them in the pp it tries") {
    const ModelSpec m = test::small_gpt(6);
    Layout base;
    base.global_batch = 64;
    base.account_for_embedding_in_pipeline_split = true;
    base.account_for_loss_in_pipeline_split = true;
    SweepGrid grid;
    grid.tp = {1};
    grid.micro_batch = {1};
    std::set<int> pps;
    for (const auto& l : enumerate_layouts(m, base, grid, 8, 8)) {
        pps.insert(l.pp);
        CHECK(l.account_for_loss_in_pipeline_split);
    }
    CHECK(pps == std::set<int>{1, 2, 4, 8});  // divisors of 6 + 2 (6 layers alone: 1, 2, 3, 6)
    Layout l = base;
    l.pp = 3;
    l.dp = 2;
    l.tp = 1;
    CHECK(reject_reason(m, l, 6) == "pp does not divide layers");
    l.pp = 4;
    l.dp = 2;
    CHECK(reject_reason(m, l, 8).empty());
}

TEST_CASE(
    "measured runs: a torchtitan row's notes naming torch.compile or async TP set compile and async_tp") {
    auto row = [](const std::string& id, const std::string& notes) {
        json r = run_row(id);
        r["source"] = "pytorch/torchtitan benchmarks (constructed for the unit test)";
        r["notes"] = notes;
        r["training"]["pp"] = 1;
        r["training"]["dp"] = 4;
        r["training"]["zero_stage"] = 3;
        r["training"]["distributed_optimizer"] = false;
        return r;
    };
    const json doc = {
        {"format", "trainsim-measured-runs/1"},
        {"runs",
         {row("eager", "Table 1: FSDP + Float8."), row("compiled", "Table 1: FSDP + torch.compile."),
          row("async", "asyncTP; torch.compile"), row("vanilla", "vanillaTP; torch.compile")}}};
    const auto f = parse_measured_runs(doc, "runs.json");
    REQUIRE(f.runs.size() == 4);
    for (const auto& r : f.runs) {
        REQUIRE_FALSE(r.error);
        CHECK(r.layout.framework == Framework::torchtitan);
    }
    CHECK_FALSE(f.runs[0].layout.torch_compile);
    CHECK(f.runs[0].layout.eager_elementwise());
    CHECK(f.runs[1].layout.torch_compile);
    CHECK_FALSE(f.runs[1].layout.tp_comm_overlap);
    CHECK(f.runs[2].layout.torch_compile);
    CHECK(f.runs[2].layout.tp_comm_overlap);  // async TP overlaps the SP collectives (TP 2, SP on)
    CHECK_FALSE(f.runs[3].layout.tp_comm_overlap);
    // A row that states the field keeps it whatever its notes say.
    json stated = row("stated", "torch.compile");
    stated["training"]["compile"] = false;
    const auto g =
        parse_measured_runs(json{{"format", "trainsim-measured-runs/1"}, {"runs", {stated}}}, "runs.json");
    CHECK_FALSE(g.runs[0].layout.torch_compile);
}

TEST_CASE("measured runs: torchtitan's async TP runs compiled; its 2024-08 405B rows ran the compiled toml") {
    auto row = [](const std::string& id, const std::string& source, std::int64_t layers) {
        json r = run_row(id);
        r["source"] = source;
        r["model"]["layers"] = layers;
        r["training"]["pp"] = 1;
        r["training"]["dp"] = 4;
        r["training"]["zero_stage"] = 3;
        r["training"]["distributed_optimizer"] = false;
        return r;
    };
    const std::string page =
        "pytorch/torchtitan docs/performance.md @ 3faaa1a0dee68ce028400e3dafd1735d152cb4f8";
    json async = row("async", "pytorch/torchtitan benchmarks (unit test)", 8);
    async["training"]["async_tp"] = true;
    json stated = row("stated", page, 126);
    stated["training"]["compile"] = false;
    const json doc = {{"format", "trainsim-measured-runs/1"},
                      {"runs",
                       {async, row("page_405b", page, 126), row("page_8b", page, 32),
                        row("other_405b", "pytorch/torchtitan benchmarks (unit test)", 126), stated}}};
    const auto f = parse_measured_runs(doc, "runs.json");
    REQUIRE(f.runs.size() == 5);
    for (const auto& r : f.runs)
        REQUIRE_FALSE(r.error);
    CHECK(f.runs[0].layout.torch_compile);        // torchtitan raises "Async TP requires --training.compile"
    CHECK(f.runs[1].layout.torch_compile);        // train_configs/llama3_405b.toml @3faaa1a: compile = true
    CHECK_FALSE(f.runs[2].layout.torch_compile);  // llama3_8b.toml there: compile = false
    CHECK_FALSE(f.runs[3].layout.torch_compile);  // another source: trainsim's default
    CHECK_FALSE(f.runs[4].layout.torch_compile);  // a row that states it keeps it
    bool noted = false;
    for (const auto& n : f.runs[1].notes)
        noted = noted || n.find("llama3_405b.toml") != std::string::npos;
    CHECK(noted);
    // Async TP stated with compile off is a run torchtitan refuses: that row's error, not the file's.
    json eager_async = row("eager_async", "pytorch/torchtitan benchmarks (unit test)", 8);
    eager_async["training"]["async_tp"] = true;
    eager_async["training"]["compile"] = false;
    const auto g = parse_measured_runs(
        json{{"format", "trainsim-measured-runs/1"}, {"runs", {eager_async, row("ok", page, 32)}}},
        "runs.json");
    REQUIRE(g.runs.size() == 2);
    REQUIRE(g.runs[0].error);
    CHECK(g.runs[0].error->find("training.async_tp") != std::string::npos);
    CHECK(g.runs[0].error->find("only compiled") != std::string::npos);
    CHECK_FALSE(g.runs[1].error);
}

TEST_CASE("measured runs: an NVLink domain or tray size that is no GPU count is listed as ignored") {
    for (const nlohmann::json& bad : {nlohmann::json(-5), nlohmann::json(1e300), nlohmann::json("72")}) {
        CAPTURE(bad.dump());
        const MeasuredRun r =
            parse_measured_runs(
                trainsim::test::one_row_runs_file({{"cluster", {{"nvlink_domain_gpus", bad}}}}), "f")
                .runs.at(0);
        REQUIRE_FALSE(r.error);
        bool listed = false;
        for (const std::string& i : r.ignored)
            listed = listed || i.find("extensions.cluster.nvlink_domain_gpus = " + bad.dump()) == 0;
        CHECK(listed);
    }
    const MeasuredRun ok =
        parse_measured_runs(trainsim::test::one_row_runs_file(
                                {{"cluster", {{"nvlink_domain_gpus", 8}, {"gpus_per_tray", nullptr}}}}),
                            "f")
            .runs.at(0);
    for (const std::string& i : ok.ignored)
        CHECK(i.find("extensions.cluster") == std::string::npos);
}

TEST_CASE("validate_runs: runs with equal inputs share one simulation, with the prediction of each") {
    // a, b and d are the same simulation under three ids; c differs in one layout field (micro-batch 2),
    // e in one model field (seq 1024), f in the topology (NIC rate). Each must get what its own
    // simulation predicts, whatever the order the distinct simulations ran in and the thread count.
    json c = run_row("c");
    c["training"]["micro_batch"] = 2;
    json e = run_row("e");
    e["model"]["seq_len"] = 1024;
    json f = run_row("f");
    f["cluster"]["scale_out"]["nic_Gbps"] = 100;
    f["cluster"]["gpus"] = 16;
    f["training"]["dp"] = 4;
    f["training"]["global_batch"] = 16;
    const MeasuredRunsFile file =
        parse_measured_runs(doc({run_row("a"), run_row("b"), c, run_row("d"), e, f}), "f.json");
    CHECK(file.runs[0].layout == file.runs[1].layout);
    CHECK_FALSE(file.runs[0].layout == file.runs[2].layout);
    CHECK_FALSE(file.runs[0].model == file.runs[4].model);
    CHECK_FALSE(file.runs[0].topology == file.runs[5].topology);
    for (int jobs : {1, 2}) {
        ValidationOptions options;
        options.jobs = jobs;
        const ValidationResult r = validate_runs({file}, options);
        REQUIRE(r.files.at(0).runs.size() == 6);
        CHECK(r.simulations == 4);  // a, b and d (named apart: their models carry their ids) simulated once
        for (std::size_t i = 0; i < 6; ++i) {
            const MeasuredRun& run = file.runs[i];
            const SimulationResult alone = simulate(run.topology, run.model, run.layout, run.id);
            const RunValidation& v = r.files[0].runs[i];
            CHECK(v.id == run.id);
            CHECK(*v.predicted_step_s == alone.report.step_time_s);
            // Where the step goes: the report's mean over the GPUs, which adds up to the step time.
            REQUIRE(v.predicted_breakdown);
            const PredictedBreakdown& b = *v.predicted_breakdown;
            CHECK(b.compute_s == alone.report.compute_s);
            CHECK(b.dp_exposed_s == alone.report.dp_exposed_s);
            CHECK(b.mfu == alone.report.mfu);
            CHECK(b.compute_s + b.bubble_s + b.tp_exposed_s + b.pp_exposed_s + b.dp_exposed_s + b.idle_s ==
                  doctest::Approx(*v.predicted_step_s).epsilon(1e-6));
        }
        CHECK(*r.files[0].runs[0].predicted_step_s == *r.files[0].runs[1].predicted_step_s);
        CHECK(*r.files[0].runs[0].predicted_step_s != *r.files[0].runs[2].predicted_step_s);
        CHECK(*r.files[0].runs[0].predicted_step_s != *r.files[0].runs[4].predicted_step_s);
        CHECK(*r.files[0].runs[0].predicted_step_s != *r.files[0].runs[5].predicted_step_s);
    }
}

TEST_CASE("measured runs: the documentary fields are checked for their type, null allowed") {
    // Round 12: reported, derivation, confidence, notes and assumed were ignored whatever their type.
    json ok = run_row("ok");
    ok["derivation"] = "step_time_s = 8 * 512 / tokens_per_s";
    ok["notes"] = "free text";
    ok["assumed"] = json::array({"cluster.scale_out"});
    ok["reported"] = {{"tflops_per_gpu", 148}, {"flops_convention", "narayanan2021-eq3"}, {"mfu", nullptr}};
    CHECK_FALSE(parse_one(ok).error);
    json nulls = run_row("nulls");
    for (const char* key : {"reported", "derivation", "confidence", "notes", "assumed"})
        nulls[key] = nullptr;
    CHECK_FALSE(parse_one(nulls).error);
    const auto error_of = [](const char* key, const json& value) {
        json row = run_row("r");
        row[key] = value;
        const MeasuredRun r = parse_one(row);
        return r.error ? *r.error : std::string();
    };
    CHECK(contains(error_of("confidence", "certain"), "confidence = \"certain\" is not one of \"high\""));
    CHECK(contains(error_of("confidence", 1), "confidence = 1 must be a string"));
    CHECK(contains(error_of("derivation", 2.5), "run \"r\".derivation = 2.5 must be a string"));
    CHECK(contains(error_of("notes", json::array({"x"})), "notes = [\"x\"] must be a string"));
    CHECK(contains(error_of("reported", "148 TFLOP/s"), "reported = \"148 TFLOP/s\" must be an object"));
    CHECK(contains(error_of("reported", {{"mfu", true}}), "reported.mfu = true must be a number, a string"));
    CHECK(contains(error_of("assumed", json::array({1})), "assumed holds 1, which must be a string"));
}
