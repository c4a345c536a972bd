// Megatron-Core's selective recompute modules (Layout::recompute_modules, --recompute-modules): the stored
// activations each module discards and the forward work it adds before the backward, by hand; the schema
// field, the layout checks and the measured-runs reader (extensions.recompute.modules).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/config.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::rel_diff;

namespace {

/// Dense SwiGLU model: 2 layers, h 256, 8 heads (GQA 4), f 512, vocab 1000, s 256.
ModelSpec dense_model() {
    return trainsim::test::llama_style(2, 256, 8, 4, 512, 1000, 256);
}

/// The same with MoE layers: 8 experts of 128, top-2.
ModelSpec moe_model() {
    ModelSpec m = dense_model();
    m.num_experts = 8;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 128;
    return m;
}

Layout selective(RecomputeModules r) {
    Layout l;
    l.micro_batch = 2;
    l.global_batch = 4;
    l.attention = AttentionKernel::flash;
    l.precision = Precision::bf16;
    l.recompute = Recompute::selective;
    l.recompute_modules = r;
    return l;
}

}  // namespace

TEST_CASE("recompute modules: mlp drops exactly the dense MLP's tensors and adds its forward FLOPs") {
    const ModelSpec m = dense_model();
    const Layout base = selective(RecomputeModules{});
    RecomputeModules r;
    r.mlp = true;
    const Layout mlp = selective(r);
    const LayerActivations a = layer_activations(m, base), b = layer_activations(m, mlp);
    // T = 2 * 256 tokens; bf16 (E = G = 2 B): fc1's input G·h, gate and up outputs 2·E·f, fc2's input G·f.
    const double T = 512, h = 256, f = 512;
    const double mlp_bytes = T * (2 * h + 2 * 2 * f + 2 * f);
    CHECK(rel_diff(a.stored - b.stored, mlp_bytes) < 1e-12);
    CHECK(rel_diff(b.recomputed - a.recomputed, mlp_bytes) < 1e-12);
    // FLOPs: the MLP's forward GEMMs once more per layer and micro-batch: 2·T·h·(2f + f), 2 layers, 2
    // micro-batches (global 4 / micro 2).
    const double added = 2 * 2 * 2 * T * h * 3 * f;
    const double fa = build_program(m, base).stages[0].hardware_flops;
    const double fb = build_program(m, mlp).stages[0].hardware_flops;
    CHECK(rel_diff(fb - fa, added) < 1e-12);
}

TEST_CASE(
    "recompute modules: moe_act drops the experts' fc2 input, moe the whole MoE block, layernorm the "
    "pre-MLP norm output") {
    const ModelSpec m = moe_model();
    const double T = 512, h = 256, fe = 128, k = 2, n = 8;
    const Layout base = selective(RecomputeModules{});
    const double stored = layer_activations(m, base).stored;
    RecomputeModules act;
    act.moe_act = true;
    // the activation's output: T·k routed tokens x fe, 2 B
    CHECK(rel_diff(stored - layer_activations(m, selective(act)).stored, T * k * 2 * fe) < 1e-12);
    RecomputeModules ln;
    ln.layernorm = true;
    // the pre-MLP norm's output T·h·2 B (the input norm is fused into linear_qkv: nothing more)
    CHECK(rel_diff(stored - layer_activations(m, selective(ln)).stored, T * h * 2) < 1e-12);
    RecomputeModules moe;
    moe.moe = true;
    // router logits and probabilities (fp32) T·2·4·n; per routed token the permuted input G·h, fc1's outputs
    // 2·E·fe, fc2's input G·fe and the expert output E·h
    const double moe_bytes = T * 8 * n + T * k * (2 * h + 4 * fe + 2 * fe + 2 * h);
    const LayerActivations mo = layer_activations(m, selective(moe));
    CHECK(rel_diff(stored - mo.stored, moe_bytes) < 1e-12);
    CHECK(rel_diff(mo.recomputed, moe_bytes) < 1e-12);
    // moe_act adds the experts' activation pass; moe the whole block, more
    const double f0 = build_program(m, base).stages[0].hardware_flops;
    CHECK(build_program(m, selective(moe)).stages[0].hardware_flops > f0);
    // a dense layer of an MoE model stores the dense MLP's tensors, and mlp recomputes them there only
    RecomputeModules mlp;
    mlp.mlp = true;
    CHECK(layer_activations(m, selective(mlp), true).stored == stored);
    const double dense = layer_activations(m, base, false).stored;
    CHECK(rel_diff(dense - layer_activations(m, selective(mlp), false).stored,
                   T * (2 * h + 2 * 2 * 512 + 2 * 512)) < 1e-12);
}

TEST_CASE("recompute modules: layout checks, the schema field and the measured-runs reader") {
    const ModelSpec m = dense_model();
    RecomputeModules r;
    r.mlp = true;
    Layout l = selective(r);
    CHECK(layout_violations(m, l, 1).empty());
    l.recompute = Recompute::full;
    CHECK_FALSE(layout_violations(m, l, 1).empty());  // modules only with selective
    RecomputeModules a;
    a.moe_act = true;
    CHECK_FALSE(layout_violations(m, selective(a), 1).empty());  // moe_act needs an MoE model
    CHECK(layout_violations(moe_model(), selective(a), 1).empty());

    nlohmann::json row = {
        {"id", "r"},
        {"source", "Megatron-Bridge"},
        {"cluster",
         {{"gpu", "H100-SXM5-80GB"},
          {"gpus", 8},
          {"gpus_per_node", 8},
          {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 450}}},
          {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 8}, {"nic_Gbps", 400}}}}},
        {"model",
         {{"layers", 2},
          {"hidden", 256},
          {"heads", 8},
          {"kv_heads", 4},
          {"ffn_hidden", 512},
          {"vocab", 1000},
          {"seq_len", 256},
          {"mlp", "swiglu"}}},
        {"training",
         {{"tp", 1},
          {"pp", 1},
          {"dp", 8},
          {"cp", 1},
          {"vpp", nullptr},
          {"micro_batch", 1},
          {"global_batch", 8},
          {"sequence_parallel", false},
          {"recompute", "none"},
          {"zero_stage", 0},
          {"distributed_optimizer", true},
          {"precision", "bf16"}}},
        {"measured", {{"step_time_s", 1.0}, {"peak_memory_GiB", nullptr}}},
        {"extensions",
         {{"moe", {{"num_experts", 8}, {"top_k", 2}, {"moe_ffn_hidden", 128}, {"ep", 8}}},
          {"recompute", {{"granularity", "selective"}, {"modules", {"layernorm", "moe_act"}}}}}}};
    nlohmann::json d = {{"format", "trainsim-measured-runs/1"}, {"runs", nlohmann::json::array({row})}};
    const MeasuredRun run = parse_measured_runs(d, "f.json").runs.at(0);
    REQUIRE_MESSAGE(!run.error, run.error.value_or(""));
    CHECK(run.layout.recompute == Recompute::selective);
    CHECK_FALSE(run.layout.recompute_modules.core_attn);  // the list replaces Megatron's default
    CHECK(run.layout.recompute_modules.layernorm);
    CHECK(run.layout.recompute_modules.moe_act);
    CHECK_FALSE(run.layout.recompute_modules.mlp);
    for (const auto& note : run.ignored)
        CHECK_FALSE(trainsim::test::contains(note, "recompute"));
}
