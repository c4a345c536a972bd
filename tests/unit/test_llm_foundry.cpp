// Composer / llm-foundry as its benchmark runs ran (docs/compute-model.md, framework table): flash-attn's
// fused cross entropy (its default `loss_fn: fused_crossentropy`) in the program and the memory walk, and the
// measured-runs reader taking MPT's zero dropout.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

namespace {

using trainsim::Framework;

/// 2 GeLU layers, hidden 512, vocab 32000, seq 1024 (small_mpt); TP 1 x DP 8 FSDP (ZeRO-3), micro-batch 4.
trainsim::Layout fsdp_layout(Framework f) {
    return trainsim::test::fsdp_layout(f, 8, 1, 32, 4);
}

trainsim::ModelSpec small_mpt() {
    trainsim::ModelSpec m = trainsim::test::small_gpt(2, 512, 4);
    m.vocab = 32000;
    m.seq_len = 1024;
    m.dropout = false;
    return m;
}

}  // namespace

TEST_CASE("llm-foundry: flash-attn's fused cross entropy, 2 E per logit each way, in the program") {
    const trainsim::ModelSpec m = small_mpt();
    const double logits = 4.0 * 1024 * 32000;  // micro-batch x seq x vocab
    int n = 0;
    const trainsim::Program composer = trainsim::build_program(m, fsdp_layout(Framework::composer));
    // The stage's program holds one micro-batch's kernels (its ops refer to them per micro-batch).
    CHECK(trainsim::test::stage0_kernel_bytes(composer, "flash_attn_cross_entropy", false, &n) ==
          doctest::Approx(2 * 2 * logits));  // 2 E per logit
    CHECK(n == 1);
    CHECK(trainsim::test::stage0_kernel_bytes(composer, "flash_attn_cross_entropy", true, &n) ==
          doctest::Approx(2 * 2 * logits));
    CHECK(trainsim::test::stage0_kernel_bytes(composer, "vocab_parallel_cross_entropy", false, &n) == 0);
    // Plain PyTorch keeps the eager fp32 loss (Megatron's 38 bytes per logit as the pattern).
    const trainsim::Program eager = trainsim::build_program(m, fsdp_layout(Framework::pytorch));
    CHECK(trainsim::test::stage0_kernel_bytes(eager, "vocab_parallel_cross_entropy", false, &n) ==
          doctest::Approx(38 * logits));
}

TEST_CASE("llm-foundry: the fused loss keeps the 16-bit logits, not the eager loss's fp32 copies") {
    const trainsim::ModelSpec m = small_mpt();
    const trainsim::GpuSpec& gpu = trainsim::find_gpu("A100-SXM4-80GB", "test");
    const trainsim::Layout composer = fsdp_layout(Framework::composer);
    const trainsim::Layout eager = fsdp_layout(Framework::pytorch);
    const auto rc = trainsim::simulate_memory(m, composer, trainsim::build_program(m, composer), gpu);
    const auto re = trainsim::simulate_memory(m, eager, trainsim::build_program(m, eager), gpu);
    const double TV = 4.0 * 1024 * 32000;
    // Eager: 16-bit logits + fp32 copy + fp32 log_softmax in forward, fp32 gradients in backward; fused: the
    // 16-bit logits and, in backward, their 16-bit gradient. At least the fp32 log_softmax (4 B) apart.
    CHECK(re.peak().peak_bytes - rc.peak().peak_bytes > 4 * TV);
    CHECK(rc.peak().peak_bytes > 2 * TV);  // the logits and their gradient are in it
}

TEST_CASE("llm-foundry: measured MPT rows train without dropout unless the row says") {
    nlohmann::json doc = trainsim::test::one_row_runs_file(nlohmann::json::object());
    nlohmann::json& row = doc["runs"][0];
    row["source"] = "mosaicml/llm-foundry scripts/train/benchmarking/README.md";
    row["model"]["mlp"] = "gelu";
    const trainsim::MeasuredRunsFile runs = trainsim::parse_measured_runs(doc, "f.json");
    REQUIRE(runs.runs.size() == 1);
    CHECK(runs.runs[0].layout.framework == Framework::composer);
    CHECK(runs.runs[0].layout.attention == trainsim::AttentionKernel::flash1);
    CHECK_FALSE(runs.runs[0].model.dropout);
    bool noted = false;
    for (const std::string& note : runs.runs[0].notes)
        noted = noted || trainsim::test::contains(note, "model.dropout = false");
    CHECK(noted);
    row["model"]["dropout"] = true;  // stated: kept
    CHECK(trainsim::parse_measured_runs(doc, "f.json").runs[0].model.dropout);
    // Other frameworks keep the format's default.
    row["model"].erase("dropout");
    row["source"] = "Megatron-LM README";
    CHECK(trainsim::parse_measured_runs(doc, "f.json").runs[0].model.dropout);
}
