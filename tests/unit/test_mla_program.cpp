// Multi-head latent attention and multi-token prediction in the program (sim/program/mla_ops.cpp), and
// Megatron's pipeline layout strings (sim/model/pipeline_layout.cpp): the ops' FLOPs by hand against
// ModelSpec's Megatron-Core FLOPs, the TP split of the duplicated down-projections, parameters, and the
// layout parser's counts and errors.
#include <doctest/doctest.h>

#include <string>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::dense_mla;
using trainsim::test::rel_diff;

namespace {

Layout plain_layout(int tp, bool sp) {
    Layout l;
    l.tp = tp;
    l.pp = 1;
    l.dp = 1;
    l.micro_batch = 2;
    l.global_batch = 4;
    l.sequence_parallel = sp;
    l.recompute = Recompute::none;
    l.attention = AttentionKernel::flash;
    l.precision = Precision::bf16;
    return l;
}

}  // namespace

TEST_CASE(
    "mla program: the ops' FLOPs equal Megatron-Core's MLA FLOPs less the norms, plus flash's recompute") {
    const ModelSpec m = dense_mla();
    const Layout l = plain_layout(1, false);
    const Program p = build_program(m, l);
    const double B = 4, s = 256, L = 2, a = 8, dqk = 32 + 16, dv = 24, qr = 96, kr = 64;
    // Megatron counts the q and kv norms as 6·(qr + kr) FLOPs per token and layer (the "+ 1" terms), which
    // the program runs as memory-bound kernels; the flash backward recomputes the scores: 2.5x the
    // forward's s·a·(dqk + dv) per token where the model counts 2x.
    const double expected =
        m.model_flops(B) - 6 * L * B * s * (qr + kr) + 0.5 * L * B * s * s * a * (dqk + dv);
    CHECK(rel_diff(p.stages[0].hardware_flops, expected) < 1e-12);
}

TEST_CASE("mla program: the down-projections are duplicated over TP, on the sequence shard with SP") {
    const ModelSpec m = dense_mla();
    const double one = build_program(m, plain_layout(1, false)).stages[0].hardware_flops;
    // With SP each TP rank runs the down-projections on its s / t tokens: the work splits evenly.
    const double sp = build_program(m, plain_layout(2, true)).stages[0].hardware_flops;
    CHECK(rel_diff(2 * sp, one) < 1e-12);
    // Without SP every rank runs them on all tokens: 6·(h·qr + h·(kr + rope)) per token and layer, twice.
    const double nosp = build_program(m, plain_layout(2, false)).stages[0].hardware_flops;
    const double B = 4, s = 256, L = 2, h = 256;
    const double down = 6 * L * B * s * (h * 96 + h * (64 + 16));
    CHECK(rel_diff(nosp, (one - down) / 2 + down) < 1e-12);
}

TEST_CASE("mla program: parameters per GPU keep the duplicated down-projections whole") {
    const ModelSpec m = dense_mla();
    const Program p1 = build_program(m, plain_layout(1, false));
    CHECK(rel_diff(p1.stages[0].params, m.total_params()) < 1e-12);
    const Program p2 = build_program(m, plain_layout(2, true));
    // params is per GPU x tp: the split weights once, the duplicated ones tp times.
    const double dup = 256.0 * 96 + 96 + 256.0 * (64 + 16) + 64;
    CHECK(m.tp_replicated_attention_params() == doctest::Approx(dup));
    CHECK(rel_diff(p2.stages[0].params, m.total_params() + 2 * dup) < 1e-12);
}

TEST_CASE("mtp: one MTP layer adds a layer, eh_proj and the output layer once more on the last stage") {
    ModelSpec m = dense_mla();
    const Layout l = plain_layout(1, false);
    const double base = build_program(m, l).stages[0].hardware_flops;
    const double base_params = build_program(m, l).stages[0].params;
    m.mtp_layers = 1;
    const Program p = build_program(m, l);
    const double B = 4, s = 256, h = 256, V = 1000;
    const double T = B * s;
    // A layer like the others (its FLOPs: the two-layer model's less the logits, halved), eh_proj 2h x h
    // and the LM head: forward + backward = 3x forward for GEMMs, 3.5x for the flash core.
    ModelSpec one = dense_mla();
    one.layers = 1;
    const double layer = build_program(one, l).stages[0].hardware_flops - 6 * T * h * V;
    const double expected = base + layer + 6 * T * 2 * h * h + 6 * T * h * V;
    CHECK(rel_diff(p.stages[0].hardware_flops, expected) < 1e-12);
    // Parameters: the MTP layer (norms, eh_proj, a transformer layer); pp = 1 keeps one embedding.
    CHECK(rel_diff(p.stages[0].params, base_params + m.mtp_params()) < 1e-12);
    CHECK(rel_diff(m.mtp_params(), 3 * h + 2 * h * h + m.layer_params(1)) < 1e-12);
}

TEST_CASE("pipeline layout: Megatron's layout strings parse into per-stage layers") {
    const auto st = parse_pipeline_layout("Et*4|(t*4|)*14tmL");
    REQUIRE(st.size() == 16);
    CHECK(st.front().embedding);
    CHECK(st.front().decoder_layers == 4);
    CHECK(st[7].decoder_layers == 4);
    CHECK(st.back().decoder_layers == 1);
    CHECK(st.back().mtp_layers == 1);
    CHECK(st.back().loss);
    CHECK(st.back().layers == "tmL");
    // Megatron's docstring example: "Ettt|(tt|)*29,m|L" -> [E t t t] + [t t] x 29 + [m] + [L].
    const auto ex = parse_pipeline_layout("Ettt|(tt|)*29,m|L");
    REQUIRE(ex.size() == 32);
    CHECK(ex[30].layers == "m");
    CHECK(ex[31].layers == "L");
    for (const char* bad : {"Et*|L", "E(tt|L", "Ext|L", "Et)|L", "E((t)*2)*2|L", "*3t", "Et*99999|L"}) {
        CAPTURE(bad);
        const std::string msg = trainsim::test::message_of<InputError>([&] { parse_pipeline_layout(bad); });
        CHECK(msg.rfind("layout.pipeline_layout = \"", 0) == 0);
    }
    // Unexpanded characters are bounded as the expansion is: 60 M '|' of a workload file made 60 M stages
    // (17 s, 4 GB); the value is cut in the message.
    const std::string bars(16 * 4096 + 1, '|');
    const std::string msg = trainsim::test::message_of<InputError>([&] { parse_pipeline_layout(bars); });
    CHECK(msg.find("is longer than 65536 characters") != std::string::npos);
    CHECK(msg.find("(65537 characters)") != std::string::npos);
    CHECK(parse_pipeline_layout(std::string(16 * 4096, '|')).size() == 16 * 4096 + 1);
}

TEST_CASE("pipeline layout: checked against pp x vpp, the layers and the MTP layers") {
    ModelSpec m = dense_mla();
    m.layers = 5;
    m.mtp_layers = 1;
    Layout l = plain_layout(1, false);
    l.pp = 2;
    l.dp = 1;
    l.global_batch = 8;
    l.vpp = 2;
    l.pipeline_layout = "Ett|t|tt|mL";
    CHECK(layout_violations(m, l, 2).empty());
    CHECK(layers_on_virtual_stage(m, l, 1, 1) == 0);  // virtual stage 3 = chunk 1 of rank 1
    CHECK(layers_on_stage(m, l, 0) == 4);
    CHECK(stage_layer_indices(m, l, 1) == std::vector<std::int64_t>{2});
    // Every virtual stage at once (the string parsed once: a loop re-parsing it per stage took hours at pp 2
    // x vpp 4096), v = chunk * pp + stage.
    CHECK(virtual_stage_layers(m, l) == std::vector<std::int64_t>{2, 1, 2, 0});
    Layout even = l;
    even.pipeline_layout.clear();
    even.account_for_embedding_in_pipeline_split =
        true;  // 5 + 1 layers over 4 virtual stages: 1 fewer on v 0
    m.mtp_layers = 0;
    m.layers = 7;
    CHECK(virtual_stage_layers(m, even) == std::vector<std::int64_t>{1, 2, 2, 2});
    m.layers = 5;
    m.mtp_layers = 1;
    auto first = [&](const Layout& x) {
        const auto v = layout_violations(m, x, 2);
        return v.empty() ? std::string() : v.front().message;
    };
    Layout bad = l;
    bad.pipeline_layout = "Ett|t|ttmL";
    CHECK(first(bad) ==
          "layout.pipeline_layout = \"Ett|t|ttmL\" has 3 stages; layout.pp * layout.vpp = 2 * 2 = 4");
    bad.pipeline_layout = "Ett|t|t|mL";
    CHECK(first(bad) ==
          "layout.pipeline_layout = \"Ett|t|t|mL\" has 4 transformer layers 't'; model.layers = 5");
    bad.pipeline_layout = "Ett|t|tt|L";
    CHECK(first(bad) == "layout.pipeline_layout = \"Ett|t|tt|L\" has 0 MTP layers 'm'; model.mtp_layers = 1");
    bad.pipeline_layout = "tEt|t|tt|mL";
    CHECK(first(bad) == "layout.pipeline_layout = \"tEt|t|tt|mL\" must start with the embedding 'E', once");
    bad = l;
    bad.layers_per_stage = {3, 2};
    CHECK(first(bad).find("cannot be combined") != std::string::npos);
    // A program builds with it: the last rank's second chunk holds only the MTP layer and the loss.
    const Program p = build_program(m, l);
    CHECK(p.stages[1].layers == 1);
    CHECK(p.stages[1].has_head);
}
