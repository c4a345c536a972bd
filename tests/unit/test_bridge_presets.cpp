// Megatron-Bridge v0.6.0 performance recipes named by a row's extensions.recipe_preset: the three that run
// HybridEP with full-iteration CUDA graphs (TE's op fuser) and the experts' all-to-all overlapped set those
// layout fields, unless the row states them; other presets and versions are left alone.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/measured_runs.hpp"

namespace {

trainsim::MeasuredRun bridge_preset_row(const std::string& preset,
                                        const nlohmann::json& more = nlohmann::json::object()) {
    nlohmann::json ext = {
        {"moe", {{"num_experts", 16}, {"top_k", 2}, {"moe_ffn_hidden", 512}, {"ep", 8}, {"etp", 1}}},
        {"recipe_preset", preset}};
    for (const auto& [k, v] : more.items())
        ext[k] = v;
    trainsim::MeasuredRun r =
        trainsim::parse_measured_runs(trainsim::test::one_row_runs_file(ext), "f").runs.at(0);
    REQUIRE_FALSE(r.error);
    return r;
}

}  // namespace

TEST_CASE("bridge presets: v0.6.0 HybridEP full-iteration recipes set the dispatcher, op fuser and overlap") {
    const std::string qwen =
        "src/megatron/bridge/perf_recipes/qwen/gb300/qwen3_moe.py@v0.6.0 "
        "qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config()";
    trainsim::MeasuredRun r = bridge_preset_row(qwen);
    CHECK(r.layout.moe_dispatcher == trainsim::MoeDispatcher::hybridep);
    CHECK(r.layout.moe_fused_grouped_mlp);
    CHECK(r.layout.moe_a2a_overlap);
    // A setting the row states is its own; the others still come from the recipe.
    r = bridge_preset_row(qwen, {{"moe_dispatcher_backend", "alltoall"}});
    CHECK(r.layout.moe_dispatcher == trainsim::MoeDispatcher::alltoall);
    CHECK(r.layout.moe_a2a_overlap);
    // DeepSeek-V3's GB200 recipe: TE-scoped graphs, then the full-iteration HybridEP settings; a row that
    // states cuda_graphs "transformer_engine" keeps the unfused experts.
    const std::string deepseek =
        "src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py@v0.6.0 "
        "deepseek_v3_pretrain_256gpu_gb200_fp8mx_config()";
    r = bridge_preset_row(deepseek, {{"cuda_graphs", "transformer_engine"}});
    CHECK(r.layout.moe_dispatcher == trainsim::MoeDispatcher::hybridep);
    CHECK(r.layout.moe_a2a_overlap);
    CHECK_FALSE(r.layout.moe_fused_grouped_mlp);
    // Another recipe or another tag is not read.
    r = bridge_preset_row(
        "src/megatron/bridge/perf_recipes/deepseek/gb200/deepseek_v3.py@v0.6.0 "
        "deepseek_v3_pretrain_256gpu_gb200_bf16_config()");
    CHECK(r.layout.moe_dispatcher == trainsim::MoeDispatcher::alltoall);
    CHECK_FALSE(r.layout.moe_fused_grouped_mlp);
    r = bridge_preset_row(
        "src/megatron/bridge/perf_recipes/qwen/gb300/qwen3_moe.py@v0.5.1 "
        "qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config()");
    CHECK_FALSE(r.layout.moe_a2a_overlap);
}
