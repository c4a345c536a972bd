// Mixture-of-experts in the measured-runs loader (extensions.moe / attention / head_dim), the memory piles
// per EP rank (weights, gradients, optimizer state), MoE activations, the sweep's EP axis and the MoE
// presets.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/config.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/sweep.hpp"

using namespace trainsim;
using nlohmann::json;
using trainsim::test::contains;
using trainsim::test::rel_diff;

namespace {

const std::string kSrc = TRAINSIM_SOURCE_DIR;

/// A DeepSeek-V3-like row (public_runs_2026.json shapes) on 256 GPUs.
json deepseek_row() {
    json r = {{"id", "dsv3"},
              {"source", "Megatron-Bridge performance summary"},
              {"cluster",
               {{"gpu", "H100-SXM5-80GB"},
                {"gpus", 256},
                {"gpus_per_node", 8},
                {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 450}}},
                {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 8}, {"nic_Gbps", 400}}}}},
              {"model",
               {{"layers", 61},
                {"hidden", 7168},
                {"heads", 128},
                {"kv_heads", 128},
                {"ffn_hidden", 18432},
                {"vocab", 129280},
                {"seq_len", 4096},
                {"mlp", "swiglu"}}},
              {"training",
               {{"tp", 1},
                {"pp", 1},
                {"dp", 256},
                {"cp", 1},
                {"vpp", 1},
                {"micro_batch", 1},
                {"global_batch", 2048},
                {"sequence_parallel", false},
                {"recompute", "selective"},
                {"zero_stage", 0},
                {"distributed_optimizer", true},
                {"precision", "bf16"}}},
              {"measured", {{"step_time_s", 10.0}, {"peak_memory_GiB", nullptr}}},
              {"extensions",
               {{"moe",
                 {{"num_experts", 256},
                  {"top_k", 8},
                  {"moe_ffn_hidden", 2048},
                  {"shared_experts", 1},
                  {"shared_expert_ffn_hidden", 2048},
                  {"dense_layers", 3},
                  {"moe_layer_pattern", "first 3 layers dense (ffn 18432), 58 MoE layers"},
                  {"dense_ffn_hidden", 18432},
                  {"router", "sigmoid"},
                  {"ep", 8},
                  {"etp", 1},
                  {"load_balance", "force-balanced token routing, token-dropless"}}},
                {"attention",
                 {{"type", "MLA"},
                  {"q_lora_rank", 1536},
                  {"kv_lora_rank", 512},
                  {"qk_head_dim", 128},
                  {"qk_rope_head_dim", 64},
                  {"v_head_dim", 128},
                  {"note", "MLA"}}},
                {"mtp_layers", 1}}}};
    return r;
}

MeasuredRun parse_one(const json& row) {
    json d = {{"format", "trainsim-measured-runs/1"}, {"runs", json::array({row})}};
    return parse_measured_runs(d, "f.json").runs.at(0);
}

}  // namespace

TEST_CASE("measured runs: extensions.moe, MLA and MTP read into the model and layout, and simulated") {
    const MeasuredRun r = parse_one(deepseek_row());
    REQUIRE_FALSE(r.error);
    const ModelSpec& m = r.model;
    CHECK(m.num_experts == 256);
    CHECK(m.moe_top_k == 8);
    CHECK(m.moe_ffn_hidden == 2048);
    CHECK(m.moe_shared_expert_ffn_hidden == 2048);
    CHECK(m.moe_first_dense_layers == 3);
    CHECK(m.moe_layer_count() == 58);
    CHECK(m.ffn_hidden == 18432);
    CHECK(m.moe_load_imbalance == 1.0);
    CHECK(m.moe_capacity_factor == 0);
    CHECK(m.mla());
    CHECK(m.q_lora_rank == 1536);
    CHECK(m.kv_lora_rank == 512);
    CHECK(m.qk_rope_head_dim == 64);
    CHECK(m.v_head_dim == 128);
    CHECK(m.head_dim() == 128);
    CHECK(r.layout.ep == 8);
    CHECK(r.layout.etp == 1);
    CHECK(layout_violations(m, r.layout, 256).empty());
    CHECK(m.mtp_layers == 1);
    CHECK_FALSE(r.unsupported);  // MoE, MLA (sim/program/mla_ops.cpp) and MTP are simulated
    // a pattern contradicting dense_layers, and an unknown balance, are refused
    json bad = deepseek_row();
    bad["extensions"]["moe"]["moe_layer_pattern"] = "first 3 layers dense, 57 MoE layers";
    bad["extensions"]["moe"]["load_balance"] = "whatever the router does";
    const MeasuredRun b = parse_one(bad);
    REQUIRE(b.unsupported);
    CHECK(contains(*b.unsupported, "57 MoE layers"));
    CHECK(contains(*b.unsupported, "load_balance"));
    // token dropping: capacity factor 1
    json drop = deepseek_row();
    drop["extensions"]["moe"]["load_balance"] =
        "token-dropping with capacity factor (25.09 \"tokendrop\" rows)";
    CHECK(parse_one(drop).model.moe_capacity_factor == 1.0);
}

TEST_CASE("memory: MoE parameters per rank, experts over EP x ETP and sharded over expert-DP, by hand") {
    ModelSpec m;
    m.layers = 4;
    m.hidden = 64;
    m.heads = 8;
    m.kv_heads = 8;
    m.ffn_hidden = 128;
    m.vocab = 1000;
    m.seq_len = 128;
    m.mlp = MlpKind::swiglu;
    m.tied_embeddings = false;
    m.num_experts = 8;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 32;
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.ep = 4;
    l.etp = 1;
    l.micro_batch = 1;
    l.global_batch = 8;
    REQUIRE(layout_violations(m, l, 16).empty());
    CHECK(l.expert_dp() == 2);
    const auto idx = stage_layer_indices(m, l, 1);
    REQUIRE(idx.size() == 2);
    CHECK(idx[0] == 2);
    CHECK(idx[1] == 3);
    // stage 1 holds layers 2, 3 and the output layer (1000 x 64 + the final norm 64)
    const double emb = 1000.0 * 64 + 64;
    const auto p = moe_stage_params(m, l, 1, emb);
    const double attn = 64.0 * (8 + 16) * 8 + 64.0 * 64, norms = 2 * 64.0, router = 64.0 * 8;
    CHECK(p.dense == (emb + 2 * (attn + norms + router)) / 2);  // / tp
    CHECK(p.experts == 2 * 8 * (3.0 * 64 * 32) / (4 * 1));      // 8 experts / ep 4, etp 1
    // with VPP 2 the stage holds layers 1 and 3
    l.vpp = 2;
    const auto v = stage_layer_indices(m, l, 1);
    REQUIRE(v.size() == 2);
    CHECK(v[0] == 1);
    CHECK(v[1] == 3);
}

TEST_CASE("memory: MoE activations grow with top-k and the hot-expert imbalance, bounded by ep") {
    ModelSpec m = trainsim::test::llama_style(4, 1024, 8, 8, 4096, 32000, 2048);
    m.num_experts = 8;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 1024;
    Layout l;
    l.ep = 4;
    l.dp = 4;
    const double base = layer_activations(m, l).stored;
    m.moe_top_k = 4;
    const double k4 = layer_activations(m, l).stored;
    CHECK(k4 > base);
    // tokens T = 2048; per routed token swiglu E*2f + G*f + G*h input + E*h output = (2*2*1024 + 2*1024 +
    // 2*1024 + 2*1024) B: doubling top-k adds 2048 * 2 routed tokens of that.
    const double per_routed = 2.0 * 2 * 1024 + 2.0 * 1024 + 2.0 * 1024 + 2.0 * 1024;
    CHECK(rel_diff(k4 - base, 2048.0 * 2 * per_routed) < 1e-12);
    m.moe_load_imbalance = 2.0;
    CHECK(rel_diff(layer_activations(m, l).stored - k4, 2048.0 * 4 * per_routed) < 1e-12);
    m.moe_load_imbalance = 100.0;  // at most every token: ep = 4
    CHECK(rel_diff(layer_activations(m, l).stored - k4, 3 * 2048.0 * 4 * per_routed) < 1e-12);
}

TEST_CASE("sweep: EP is an axis of MoE models only, rejected by the EP categories") {
    ModelSpec m = trainsim::test::llama_style(4, 1024, 8, 8, 4096, 32000, 2048);
    Layout base;
    base.global_batch = 64;
    SweepGrid g;
    restrict_sweep_grid(g, "tp=1", "--fix");
    restrict_sweep_grid(g, "pp=1", "--fix");
    const auto dense = enumerate_layouts(m, base, g, 8, 8);
    for (const auto& l : dense)
        CHECK(l.ep == 1);
    m.num_experts = 8;
    m.moe_top_k = 2;
    const auto moe = enumerate_layouts(m, base, g, 8, 8);
    CHECK(moe.size() == 4 * dense.size());  // ep 1, 2, 4, 8
    restrict_sweep_grid(g, "ep=3", "--fix");
    const auto three = enumerate_layouts(m, base, g, 8, 8);
    REQUIRE_FALSE(three.empty());
    CHECK(reject_reason(m, three.front(), 8) == "ep does not divide num_experts");
    CHECK(contains(canonical_string(three.front()), " ep3 "));
}

TEST_CASE("presets: the MoE workloads load and pass the layout checks on their documented clusters") {
    struct Case {
        const char* workload;
        const char* topology;
        int nodes;
    };
    for (const Case c : {Case{"qwen3-30b-a3b", "dgx-h100", 2}, Case{"mixtral-8x7b", "dgx-b200", 8},
                         Case{"deepseek-v3", "gb200-nvl72", 72}}) {  // 576 GB200, 8 per "node" here
        CAPTURE(c.workload);
        const std::string wf = kSrc + "/workloads/" + c.workload + ".json";
        const Workload w = parse_workload(read_json_file(wf), wf);
        CHECK(w.model.moe());
        CHECK(w.layout.ep > 1);
        CHECK(layout_violations(w.model, w.layout, c.nodes * 8).empty());
    }
    const std::string wf = kSrc + "/workloads/deepseek-v3.json";
    const Workload d = parse_workload(read_json_file(wf), wf);
    CHECK(d.model.mla());
    CHECK(d.model.moe_layer_count() == 58);
    // 671B parameters in all, 37B active (DeepSeek-V3 report, arXiv:2412.19437 Sec. 1; without the MTP
    // module's 14B, which with its own copies of the embedding and the output layer is 685B - 671B on
    // Hugging Face: the MTP layer shares them here)
    CHECK(d.model.mtp_layers == 1);
    CHECK(rel_diff(d.model.total_params() - d.model.mtp_params(), 671e9) < 0.01);
    CHECK(rel_diff(d.model.mtp_params() + d.model.embedding_params() + d.model.output_params(), 14e9) < 0.05);
    CHECK(rel_diff(d.model.active_params(), 37e9) < 0.03);
}
