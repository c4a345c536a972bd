// NeMo 2's performance-summary rows (extensions.nemo_release_branch r2.2.0 and later): the performance
// scripts' FP8 weights gathered in FP8, bf16 gradient reduction and, from r2.3.0, TE's fused cross entropy,
// unless the row states them; rows of other sources and older releases are left as they are.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/measured_runs.hpp"

using namespace trainsim;

namespace {

MeasuredRun nemo2_row(const std::string& branch, const std::string& precision,
                      const nlohmann::json& training = {},
                      const std::string& source =
                          "NVIDIA NeMo Framework User Guide, Performance Summary, "
                          "Container NeMo 25.02, System DGX-B200") {
    nlohmann::json doc = trainsim::test::one_row_runs_file({{"nemo_release_branch", branch}}, precision);
    doc["runs"][0]["source"] = source;
    for (const auto& [k, v] : training.items())
        doc["runs"][0]["training"][k] = v;
    MeasuredRun r = parse_measured_runs(doc, "f").runs.at(0);
    REQUIRE_FALSE(r.error);
    return r;
}

}  // namespace

TEST_CASE("nemo2 performance defaults: read from the release branch") {
    MeasuredRun r =
        nemo2_row("r2.2.0", "fp8");  // pretrain_*.py: bf16_with_fp8_mixed, grad_reduce_in_fp32 False
    CHECK(r.layout.fp8_param_gather);
    CHECK(r.layout.grad_reduce_in_bf16);
    CHECK_FALSE(r.layout.cross_entropy_fusion);  // Megatron-Core's native loss before r2.3.0: not TE's kernel
    r = nemo2_row("r2.3.0", "fp8");
    CHECK(r.layout.fp8_param_gather);
    CHECK(r.layout.grad_reduce_in_bf16);
    CHECK(r.layout.cross_entropy_fusion);  // set_primary_perf_configs: cross_entropy_fusion_impl "te"
    r = nemo2_row("r2.3.0", "bf16");       // the FP8 branch sets the gradient dtype before r2.4.0
    CHECK_FALSE(r.layout.fp8_param_gather);
    CHECK_FALSE(r.layout.grad_reduce_in_bf16);
    r = nemo2_row("r2.4.0", "bf16");  // set_precision_configs: always
    CHECK(r.layout.grad_reduce_in_bf16);
    // A key the row states wins.
    r = nemo2_row("r2.4.0", "fp8", {{"fp8_param_gather", false}, {"grad_reduce_in_bf16", false}});
    CHECK_FALSE(r.layout.fp8_param_gather);
    CHECK_FALSE(r.layout.grad_reduce_in_bf16);
    // NeMo 1 releases, a malformed branch and other sources keep the framework's defaults.
    for (const char* b : {"r1.23.0", "r2", "main", "", "r2.99999999999999999999", "r2.3x", "r2.-3.0"}) {
        CAPTURE(b);
        r = nemo2_row(b, "fp8");
        CHECK_FALSE(r.layout.fp8_param_gather);
        CHECK_FALSE(r.layout.grad_reduce_in_bf16);
        // Listed as ignored, not dropped without a word (round 15); an overflowing minor is no release.
        bool listed = false;
        for (const std::string& x : r.ignored)
            listed = listed || x.rfind("extensions.nemo_release_branch", 0) == 0;
        CHECK(listed);
    }
    CHECK(nemo2_row("r2.3.0", "fp8").ignored.empty());
    CHECK(nemo2_row("r2.1.0", "fp8").ignored.empty());  // a release before these defaults: read, none apply
    // Block-scaled recipes and Megatron-FSDP gather no FP8 weights; the gradient dtype still applies.
    nlohmann::json doc = trainsim::test::one_row_runs_file(
        {{"nemo_release_branch", "r2.3.0"}, {"precision_detail", "mxfp8"}}, "fp8");
    doc["runs"][0]["source"] = "NVIDIA NeMo Framework User Guide, Performance Summary, Container NeMo 25.04";
    r = parse_measured_runs(doc, "f").runs.at(0);
    CHECK_FALSE(r.layout.fp8_param_gather);
    CHECK(r.layout.grad_reduce_in_bf16);
    doc["runs"][0]["extensions"] = {{"nemo_release_branch", "r2.3.0"},
                                    {"megatron_fsdp", {{"enabled", true}}}};
    doc["runs"][0]["training"]["zero_stage"] = 3;
    r = parse_measured_runs(doc, "f").runs.at(0);
    CHECK_FALSE(r.layout.fp8_param_gather);
    r = nemo2_row("r2.2.0", "fp8", {}, "a NeMo blog post");
    CHECK_FALSE(r.layout.fp8_param_gather);
}
