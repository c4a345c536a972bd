#include <doctest/doctest.h>

#include <string>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/layout.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

/// GPT-3 175B as Megatron-LM's README runs it: TP 8, PP 16, DP 8 on 1024 GPUs, global batch 1536.
Layout gpt3_layout() {
    Layout l;
    l.tp = 8;
    l.pp = 16;
    l.dp = 8;
    l.micro_batch = 1;
    l.global_batch = 1536;
    return l;
}

std::string layout_error(const ModelSpec& m, const Layout& l, int gpus) {
    return message_of<InputError>([&] { check_layout(m, l, gpus); });
}

}  // namespace

TEST_CASE("layout: a valid layout passes") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    const Layout l = gpt3_layout();
    CHECK_NOTHROW(check_layout(m, l, 1024));
    CHECK(l.micro_batches() == 192);
    CHECK(layers_on_stage(m, l, 0) == 6);
}

TEST_CASE("layout: GPU layer passes per step are layers x micro-batches x dp x cp x tp") {
    ModelSpec m = trainsim::test::gpt3_175b();
    m.layers = 4;
    Layout l;
    l.global_batch = 16;
    l.micro_batch = 1;
    l.dp = 2;
    l.cp = 2;
    l.tp = 2;
    CHECK(gpu_layer_passes_per_step(m, l) == 4 * 8 * 2 * 2 * 2);  // 16 / (1 x 2) = 8 micro-batches
    l.micro_batch = 2;
    CHECK(gpu_layer_passes_per_step(m, l) == 4 * 4 * 2 * 2 * 2);
    // One pipeline's program: layers x micro-batches, whatever the dp, cp and tp; an MTP layer weighs
    // limits::kMtpLayerProgramPassWeight = 3 layers (it builds an embedding, a layer and an output layer).
    CHECK(program_layer_passes(m, l) == 4 * 4);
    m.mtp_layers = 1;
    CHECK(program_layer_passes(m, l) == (4 + 3) * 4);
}

TEST_CASE("layout: tp must divide the heads") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    Layout l = gpt3_layout();
    l.tp = 7;
    l.dp = 1;  // keep the other checks happy where they can be
    CHECK_THROWS_AS(check_layout(m, l, 7 * 16), InputError);
    const auto msg = layout_error(m, l, 7 * 16);
    CHECK_MESSAGE(contains(msg, "layout.tp = 7 does not divide model.heads = 96"), msg);
}

TEST_CASE("layout: tp * pp * dp must equal the cluster's GPUs") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    const Layout l = gpt3_layout();
    CHECK_THROWS_AS(check_layout(m, l, 512), InputError);
    const auto msg = layout_error(m, l, 512);
    CHECK_MESSAGE(contains(msg, "1024"), msg);
    CHECK_MESSAGE(contains(msg, "512"), msg);
    CHECK_MESSAGE(contains(msg, "layout.tp * layout.pp * layout.dp"), msg);
}

TEST_CASE("layout: global batch must be divisible by micro_batch * dp") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    Layout l = gpt3_layout();
    l.global_batch = 1540;  // not a multiple of 1 * 8
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
    const auto msg = layout_error(m, l, 1024);
    CHECK_MESSAGE(contains(msg, "layout.global_batch = 1540"), msg);
    l.global_batch = 1536;
    l.micro_batch = 5;  // 1536 % 40 != 0
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
}

TEST_CASE("layout: pp must divide the layers unless layers_per_stage is given") {
    ModelSpec m = trainsim::test::gpt3_175b();
    m.layers = 90;
    Layout l = gpt3_layout();  // pp = 16 does not divide 90
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
    const auto msg = layout_error(m, l, 1024);
    CHECK_MESSAGE(contains(msg, "layout.pp = 16 does not divide model.layers = 90"), msg);
    CHECK_MESSAGE(contains(msg, "layers_per_stage"), msg);

    // An explicit uneven split is accepted, and layers_on_stage follows it.
    l.layers_per_stage.assign(16, 6);
    l.layers_per_stage[0] = 3;
    l.layers_per_stage[15] = 3;
    CHECK_NOTHROW(check_layout(m, l, 1024));
    CHECK(layers_on_stage(m, l, 0) == 3);
    CHECK(layers_on_stage(m, l, 7) == 6);
    CHECK(layers_on_stage(m, l, 15) == 3);
}

TEST_CASE("layout: layers_per_stage must sum to the layers and have pp entries") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    Layout l = gpt3_layout();
    l.layers_per_stage.assign(16, 6);
    l.layers_per_stage[3] = 7;  // sums to 97
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
    const auto msg = layout_error(m, l, 1024);
    CHECK_MESSAGE(contains(msg, "layout.layers_per_stage sums to 97"), msg);
    CHECK_MESSAGE(contains(msg, "model.layers = 96"), msg);

    l.layers_per_stage.assign(15, 6);  // wrong number of entries
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
    CHECK(contains(layout_error(m, l, 1024), "layout.layers_per_stage has 15 entries"));
}

TEST_CASE("layout: interleaving needs pp > 1, 1F1B and micro-batches a multiple of pp") {
    const ModelSpec m = trainsim::test::gpt3_175b();
    Layout l = gpt3_layout();
    l.vpp = 2;
    CHECK_NOTHROW(check_layout(m, l, 1024));
    l.schedule = Schedule::gpipe;
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
    l.schedule = Schedule::one_f_one_b;
    l.vpp = 4;  // 6 layers per stage
    CHECK(contains(layout_error(m, l, 1024), "layout.vpp = 4"));
    l.vpp = 2;
    l.global_batch = 8 * 24;  // 24 micro-batches, pp = 16
    CHECK_THROWS_AS(check_layout(m, l, 1024), InputError);
}

TEST_CASE("layout: rank coordinates follow Megatron-LM's tp-dp-pp order") {
    Layout l;
    l.tp = 2;
    l.dp = 3;
    l.pp = 4;
    for (int r = 0; r < l.gpus(); ++r) {
        const RankCoord c = coord_of(l, r);
        CHECK(rank_of(l, c) == r);
        CHECK(r == c.tp + l.tp * (c.dp + l.dp * c.pp));
    }
    CHECK(coord_of(l, 1).tp == 1);
    CHECK(coord_of(l, 2).dp == 1);
    CHECK(coord_of(l, 6).pp == 1);
}
