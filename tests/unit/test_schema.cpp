#include <doctest/doctest.h>

#include <string>

#include "test_helpers.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/schema_json.hpp"
#include "trainsim/sweep.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

nlohmann::json small_workload() {
    return nlohmann::json::parse(R"({"name": "w",
        "model": {"layers": 8, "hidden": 1024, "heads": 16, "ffn_hidden": 4096, "vocab": 8192, "seq_len": 512,
                  "mlp": "swiglu"},
        "layout": {"tp": 2, "pp": 2, "dp": 4, "micro_batch": 1, "global_batch": 32}})");
}

std::string load_error(const nlohmann::json& w) {
    return message_of<InputError>([&] { parse_workload(w, "w.json"); });
}

}  // namespace

TEST_CASE("schema: a workload's layout written by the schema reads back equal, every field") {
    Layout l;
    l.tp = 4;
    l.cp = 2;
    l.recompute = Recompute::full;
    l.recompute_num_layers = 3;
    l.precision = Precision::fp8;
    l.fp8_recipe = Fp8Recipe::mxfp8;
    l.dp_bucket_bytes = 2e8;
    l.layers_per_stage = {3, 5};
    l.lora_targets = LoraTargets{true, false, false, true};
    l.framework = Framework::torchtitan;
    l.torch_compile = true;
    l.checkpoint_save = CheckpointSave::rank0;
    auto w = small_workload();
    w["layout"] = schema::to_json(layout_fields(), l);
    w["layout"]["dp_bucket_size"] = "200MB";  // a quantity is written with its unit
    const Layout back = parse_workload(w, "w.json").layout;
    for (const auto& f : layout_fields())
        CHECK_MESSAGE(schema::to_json(f.get(back)) == schema::to_json(f.get(l)), f.name);
}

TEST_CASE("schema: defaults and derived defaults of the model") {
    const Workload w = parse_workload(small_workload(), "w.json");
    CHECK(w.model.kv_heads == 16);         // kv_heads defaults to heads
    CHECK_FALSE(w.model.tied_embeddings);  // swiglu: untied
    CHECK(w.model.dropout);
    CHECK(w.model.name == "w");
    const Layout def;
    for (const auto& f : layout_fields())
        if (!f.required)
            CHECK_MESSAGE(schema::to_json(f.get(w.layout)) == schema::to_json(f.get(def)), f.name);
}

TEST_CASE("schema: the loader checks each field's range and names file, field, value and range") {
    auto w = small_workload();
    w["layout"]["cp"] = 0;
    CHECK(load_error(w) == "w.json: layout.cp = 0 must be positive (range 1 .. 131072)");
    w = small_workload();
    w["layout"]["zero_stage"] = 4;
    CHECK(load_error(w) == "w.json: layout.zero_stage = 4 is above the maximum of 3 (range 0 .. 3)");
    w = small_workload();
    w["model"]["layers"] = 5000;
    CHECK(load_error(w) == "w.json: model.layers = 5000 is above the limit of 4096 (trainsim/limits.hpp)");
    w = small_workload();
    w["layout"]["layers_per_stage"] = {4, -4};
    CHECK(
        contains(load_error(w), "w.json: layout.layers_per_stage holds -4, which is below the minimum of 0"));
    w = small_workload();
    w["layout"]["recompute"] = "partial";
    CHECK(contains(load_error(w), "w.json: layout.recompute = \"partial\" is not one of \"none\""));
    w = small_workload();
    w["layout"]["tpp"] = 1;
    CHECK(load_error(w) == "w.json: layout.tpp is not a known field");
}

TEST_CASE("schema: every sweep axis is a layout field") {
    for (const auto& key : sweep_keys())
        CHECK_MESSAGE(schema::find(layout_fields(), key) != nullptr, key);
}

TEST_CASE("schema: the run --json layout summary holds the fields marked summary") {
    int n = 0;
    for (const auto& f : layout_fields())
        n += f.summary ? 1 : 0;
    CHECK(schema::to_json(layout_fields(), Layout{}, true).size() == static_cast<std::size_t>(n));
    CHECK(schema::to_json(layout_fields(), Layout{}, true).contains("attention"));
}

TEST_CASE("layout_violations: typed, in check order, the sweep's category from the first grid check") {
    const ModelSpec m = trainsim::test::gpt3_175b();  // 96 layers, 96 heads, seq 2048
    Layout l;
    l.tp = 5;  // divides neither heads nor layers' stages below
    l.pp = 7;
    l.dp = 1;
    l.micro_batch = 1;
    l.global_batch = 8;
    const auto v = layout_violations(m, l, 35);
    REQUIRE(v.size() >= 3);
    CHECK(v[0].check == LayoutCheck::tp_heads);
    CHECK(v[0].message == "layout.tp = 5 does not divide model.heads = 96");
    bool pp = false;
    for (const auto& x : v)
        pp = pp || x.check == LayoutCheck::pp_layers;
    CHECK(pp);
    CHECK(reject_reason(m, l, 35) == "tp does not divide heads");
    CHECK(message_of<InputError>([&] { check_layout(m, l, 35); }) == v[0].message);
    // dp = 0 (the sweep's tp * pp * cp not dividing the GPUs): the checks stop at the sizes
    l.tp = 8;
    l.pp = 16;
    l.dp = 0;
    const auto z = layout_violations(m, l, 1000);
    REQUIRE(z.size() == 1);
    CHECK(z[0].check == LayoutCheck::gpu_count);
    CHECK(reject_reason(m, l, 1000) == "tp*pp*cp does not divide the GPUs");
    // only a non-grid check: the message with its numbers as N
    l.dp = 8;
    l.zero_stage = 5;
    CHECK(layout_violations(m, l, 1024).front().check == LayoutCheck::zero_stage);
    CHECK(reject_reason(m, l, 1024) == "layout.zero_stage = N must be N, N, N or N");
    CHECK(layout_violations(m, Layout{}, 1).empty());  // the defaults on one GPU pass
}
