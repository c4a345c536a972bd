// Sliding-window attention (ModelSpec::sliding_window, sliding_window_full_every): the keys a fused kernel
// computes per query by hand, the share of windowed layers, the attention kernels of the program (full and
// windowed calls, their FLOPs by hand; none under CP or unfused attention), MLA refused, and the
// measured-runs reader and the Hugging Face importer setting the fields.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/importers.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/program.hpp"

namespace ts = trainsim;

namespace {

/// Sum of the FLOPs of stage 0's kernels named exactly `name` over one step, and their count.
double stage0_flops(const ts::Program& p, const std::string& name, int* count) {
    double flops = 0;
    *count = 0;
    for (const ts::Op& op : p.stages[0].ops) {
        if (op.kind != ts::OpKind::compute || op.segment < 0) continue;
        for (const ts::Kernel& k : p.segments[static_cast<std::size_t>(op.segment)].kernels)
            if (name == k.name) {
                flops += k.flops;
                ++*count;
            }
    }
    return flops;
}

/// 4 layers, hidden 512, 8 heads of 64 (2 KV heads), seq 4096, one micro-batch of 1 on one GPU.
ts::ModelSpec windowed_model() {
    ts::ModelSpec m = ts::test::llama_style(4, 512, 8, 2, 1024, 1024, 4096);
    m.sliding_window = 128;
    m.sliding_window_full_every = 2;
    return m;
}

ts::Layout one_gpu() {
    ts::Layout l;
    l.micro_batch = 1;
    l.global_batch = 1;
    l.attention = ts::AttentionKernel::cudnn;
    return l;
}

}  // namespace

TEST_CASE("sliding window: keys per query a fused kernel computes, by hand") {
    // Query tile m of M = s / 128 computes min(m, W) whole key tiles and the diagonal one counted half;
    // the mean over the tiles: 128 (W + 1/2 - W (W + 1) / (2M)).
    CHECK(ts::window_key_span(4096, 128) == doctest::Approx(128 * (1.5 - 2.0 / 64)));  // M 32, W 1: 188
    CHECK(ts::window_key_span(4096, 100) == doctest::Approx(128 * (1.5 - 2.0 / 64)));  // W = ceil(100/128)
    CHECK(ts::window_key_span(8192, 4096) == doctest::Approx(128 * (32.5 - 32.0 * 33 / 128)));  // 3104
    CHECK(ts::window_key_span(16384, 4096) == doctest::Approx(128 * (32.5 - 32.0 * 33 / 256)));
    CHECK(ts::window_key_span(4096, 4096) == doctest::Approx(2048));  // W capped at M - 1: the causal s / 2
    CHECK(ts::window_key_span(4096, 1 << 20) == doctest::Approx(2048));
    CHECK(ts::window_key_span(256, 128) == doctest::Approx(128));
    CHECK(ts::window_key_span(100, 50) == doctest::Approx(50));  // shorter than a tile: s / 2
}

TEST_CASE("sliding window: the share of windowed layers") {
    ts::ModelSpec m = windowed_model();
    CHECK(m.windowed_layer_fraction() == 0.5);  // layers 2 and 4 attend fully
    m.sliding_window_full_every = 0;
    CHECK(m.windowed_layer_fraction() == 1.0);
    m.layers = 10;
    m.sliding_window_full_every = 3;  // layers 3, 6, 9 full
    CHECK(m.windowed_layer_fraction() == doctest::Approx(0.7));
    m.sliding_window = 0;
    CHECK(m.windowed_layer_fraction() == 0.0);
}

TEST_CASE("sliding window: the program's attention calls, FLOPs by hand") {
    const ts::ModelSpec m = windowed_model();
    const ts::Layout l = one_gpu();
    const ts::Program p = ts::build_program(m, l);
    // Per layer and micro-batch: 8 heads of 64 over 4096 queries; half of a layer's causal FLOPs, and half of
    // a band of window_key_span(4096, 128) keys per query; the backward 2.5x.
    const double causal = 0.5 * 4.0 * 0.5 * 8 * 4096.0 * 4096 * 64;
    const double band = 4.0 * 0.5 * 8 * 4096.0 * ts::window_key_span(4096, 128) * 64;
    int n = 0;
    CHECK(stage0_flops(p, "flash_attention_fwd", &n) == doctest::Approx(4 * causal));
    CHECK(n == 4);
    CHECK(stage0_flops(p, "flash_attention_window_fwd", &n) == doctest::Approx(4 * band));
    CHECK(n == 4);
    CHECK(stage0_flops(p, "flash_attention_window_bwd", &n) == doctest::Approx(4 * 2.5 * band));
    CHECK(n == 4);
    // Without the window: one causal call over all heads, more FLOPs in all.
    ts::ModelSpec full = m;
    full.sliding_window = 0;
    const ts::Program q = ts::build_program(full, l);
    CHECK(stage0_flops(q, "flash_attention_fwd", &n) == doctest::Approx(4 * 2 * causal));
    CHECK(stage0_flops(q, "flash_attention_window_fwd", &n) == 0);
    CHECK(q.stages[0].hardware_flops > p.stages[0].hardware_flops);
    // Every layer windowed: no causal call.
    ts::ModelSpec all = m;
    all.sliding_window_full_every = 0;
    CHECK(stage0_flops(ts::build_program(all, l), "flash_attention_fwd", &n) == 0);
    CHECK(stage0_flops(ts::build_program(all, l), "flash_attention_window_fwd", &n) ==
          doctest::Approx(4 * 2 * band));
}

TEST_CASE("sliding window: refused under CP and with MLA; unfused attention saves nothing") {
    const ts::ModelSpec m = windowed_model();
    int n = 0;
    for (ts::Framework f : {ts::Framework::megatron, ts::Framework::torchtitan}) {
        ts::Layout cp = one_gpu();
        cp.framework = f;
        cp.cp = 2;
        const std::string why = ts::test::message_of<ts::InputError>([&] { ts::check_layout(m, cp, 2); });
        CHECK(why.find("layout.cp = 2 with model.sliding_window = 128") != std::string::npos);
    }
    ts::Layout unfused = one_gpu();
    unfused.attention = ts::AttentionKernel::unfused;
    CHECK(stage0_flops(ts::build_program(m, unfused), "flash_attention_window_fwd", &n) == 0);
    ts::ModelSpec mla = m;
    mla.attention_type = ts::AttentionType::mla;
    mla.kv_heads = mla.heads;
    mla.kv_lora_rank = 64;
    mla.v_head_dim = 64;
    mla.qk_rope_head_dim = 32;
    const std::string why =
        ts::test::message_of<ts::InputError>([&] { ts::check_layout(mla, one_gpu(), 1); });
    CHECK(why.find("model.sliding_window = 128") != std::string::npos);
}

TEST_CASE("sliding window: the measured-runs reader reads extensions.attention") {
    using nlohmann::json;
    const json att = {
        {"sliding_window", 128},
        {"pattern", "alternating sliding-window (128) / full attention (window_attn_skip_freq 2)"},
        {"attention_sinks", true}};
    ts::MeasuredRun r =
        ts::parse_measured_runs(ts::test::one_row_runs_file({{"attention", att}}), "f").runs.at(0);
    REQUIRE_FALSE(r.error);
    CHECK(r.model.sliding_window == 128);
    CHECK(r.model.sliding_window_full_every == 2);
    // A pattern that names no frequency: which layers are windowed is unknown, so the window is not applied;
    // both are listed as ignored.
    json odd = att;
    odd["pattern"] = "every third layer";
    r = ts::parse_measured_runs(ts::test::one_row_runs_file({{"attention", odd}}), "f").runs.at(0);
    CHECK(r.model.sliding_window == 0);
    int listed = 0;
    for (const auto& i : r.ignored)
        listed += i.find("attention.pattern") != std::string::npos ||
                  i.find("attention.sliding_window") != std::string::npos;
    CHECK(listed == 2);
}

TEST_CASE("sliding window: the Hugging Face importer reads sliding_window and layer_types") {
    using nlohmann::json;
    ts::ImportTarget t;
    t.gpu = "H100-SXM5-80GB";
    t.cluster_gpus = 8;
    json c = {{"model_type", "mistral"},  {"num_hidden_layers", 4},          {"hidden_size", 512},
              {"num_attention_heads", 8}, {"num_key_value_heads", 2},        {"intermediate_size", 1024},
              {"vocab_size", 1024},       {"max_position_embeddings", 8192}, {"sliding_window", 4096}};
    json model = ts::import_hf_config(c, "config.json", t).workload.at("model");
    CHECK(model.at("sliding_window") == 4096);
    CHECK(model.value("sliding_window_full_every", 0) == 0);
    c["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
    model = ts::import_hf_config(c, "config.json", t).workload.at("model");
    CHECK(model.at("sliding_window_full_every") == 2);
    // Not every N-th: not applied (a note says so).
    c["layer_types"] = {"full_attention", "sliding_attention", "sliding_attention", "sliding_attention"};
    CHECK(ts::import_hf_config(c, "config.json", t).workload.at("model").value("sliding_window", 0) == 0);
    // Qwen2 / Qwen3 write a window they do not use: use_sliding_window false, their configs' default.
    c.erase("layer_types");
    c["use_sliding_window"] = false;
    CHECK(ts::import_hf_config(c, "config.json", t).workload.at("model").value("sliding_window", 0) == 0);
    json qwen = c;
    qwen.erase("use_sliding_window");
    qwen["model_type"] = "qwen2";
    CHECK(ts::import_hf_config(qwen, "config.json", t).workload.at("model").value("sliding_window", 0) == 0);
    qwen["use_sliding_window"] = true;
    CHECK(ts::import_hf_config(qwen, "config.json", t).workload.at("model").value("sliding_window", 0) ==
          4096);
    c.erase("use_sliding_window");
    c["layer_types"] = {"sliding_attention", "chunked_attention", "sliding_attention", "full_attention"};
    CHECK_THROWS_AS(ts::import_hf_config(c, "config.json", t), ts::InputError);
}

TEST_CASE("sliding window: the Megatron-LM importer reads --window-size and --window-attn-skip-freq") {
    ts::ImportTarget t;
    t.gpu = "H100-SXM5-80GB";
    t.cluster_gpus = 8;
    const std::vector<std::string> base = {"--num-layers",
                                           "4",
                                           "--hidden-size",
                                           "512",
                                           "--num-attention-heads",
                                           "8",
                                           "--seq-length",
                                           "8192",
                                           "--max-position-embeddings",
                                           "8192",
                                           "--vocab-size",
                                           "1024",
                                           "--bf16"};
    auto model_of = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = base;
        args.insert(args.end(), extra.begin(), extra.end());
        return ts::import_megatron(args, "m.args", t).workload.at("model");
    };
    CHECK(model_of({}).value("sliding_window", 0) == 0);
    const auto m = model_of({"--window-size", "(128,0)", "--window-attn-skip-freq", "2"});
    CHECK(m.at("sliding_window") == 128);
    CHECK(m.at("sliding_window_full_every") == 2);
    CHECK(model_of({"--window-size", "4096,0"}).value("sliding_window_full_every", 0) == 0);
    // A window that looks ahead, a list pattern: refused, naming the flag.
    const std::string ahead = ts::test::message_of<ts::InputError>([&] {
        model_of({"--window-size", "128,5"});
    });
    CHECK(ahead.find("--window-size") != std::string::npos);
    const std::string list = ts::test::message_of<ts::InputError>([&] {
        model_of({"--window-size", "128,0", "--window-attn-skip-freq", "[1,1,0]*2"});
    });
    CHECK(list.find("--window-attn-skip-freq") != std::string::npos);
}
