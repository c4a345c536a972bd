// ModelSpec::qk_layernorm (Megatron-Core --qk-layernorm; Qwen3's q_norm / k_norm): the query and key norm
// kernels with hand-computed bytes, their weights, their stored inputs, and where the flag is read from
// (measured runs, Hugging Face and Megatron imports); refused with MLA.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/importers.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

/// 2 dense layers, hidden 256, 4 query heads of 64, 2 KV heads, seq 128, SwiGLU; TP 2, one micro-batch.
ModelSpec tiny_gqa() {
    ModelSpec m;
    m.name = "tiny-gqa";
    m.layers = 2;
    m.hidden = 256;
    m.heads = 4;
    m.kv_heads = 2;
    m.ffn_hidden = 512;
    m.vocab = 1024;
    m.seq_len = 128;
    m.mlp = MlpKind::swiglu;
    m.dropout = false;
    return m;
}
Layout tiny_tp2() {
    Layout l;
    l.tp = 2;
    l.micro_batch = 1;
    l.global_batch = 1;
    return l;
}

/// Bytes and count of stage 0's kernels named `name`.
double kernel_bytes(const Program& p, const std::string& name, int* count) {
    double bytes = 0;
    *count = 0;
    for (const Op& op : p.stages[0].ops) {
        if (op.kind != OpKind::compute || op.segment < 0) continue;
        for (const Kernel& k : p.segments[static_cast<std::size_t>(op.segment)].kernels)
            if (k.name == name) {
                bytes += k.bytes;
                ++*count;
            }
    }
    return bytes;
}

}  // namespace

TEST_CASE("qk_layernorm: query and key norm kernels, bytes by hand") {
    ModelSpec m = tiny_gqa();
    const Layout l = tiny_tp2();
    int n = 0;
    for (const char* name : {"q_norm", "k_norm", "q_norm_bwd", "k_norm_bwd"}) {
        CHECK(kernel_bytes(build_program(m, l), name, &n) == 0);
        CHECK(n == 0);
    }
    m.qk_layernorm = true;
    const Program p = build_program(m, l);
    // Per layer on one TP rank: queries T·a·d / t = 128·4·64 / 2 = 16,384 elements, keys 128·2·64 / 2 =
    // 8,192; a fused norm moves 2E = 4 B per element forward, 4E = 8 B backward; two layers.
    CHECK(kernel_bytes(p, "q_norm", &n) == doctest::Approx(2 * 4.0 * 16384));
    CHECK(n == 2);
    CHECK(kernel_bytes(p, "k_norm", &n) == doctest::Approx(2 * 4.0 * 8192));
    CHECK(n == 2);
    CHECK(kernel_bytes(p, "q_norm_bwd", &n) == doctest::Approx(2 * 8.0 * 16384));
    CHECK(n == 2);
    CHECK(kernel_bytes(p, "k_norm_bwd", &n) == doctest::Approx(2 * 8.0 * 8192));
    CHECK(n == 2);
}

TEST_CASE("qk_layernorm: two head_dim weights per layer, whole on every TP rank; inputs stored") {
    ModelSpec m = tiny_gqa();
    const double attn = m.attention_params(), total = m.total_params();
    const LayerActivations before = layer_activations(m, tiny_tp2(), false);
    m.qk_layernorm = true;
    CHECK(m.attention_params() == attn + 2 * 64);
    CHECK(m.total_params() == total + 2 * 2 * 64);
    CHECK(m.tp_replicated_attention_params() == 2 * 64);
    // Stored per layer and micro-batch: the norms' inputs, E·(a + g)·d / t per token = 2·6·64 / 2 bytes, 128
    // tokens.
    const LayerActivations after = layer_activations(m, tiny_tp2(), false);
    CHECK(after.stored - before.stored == doctest::Approx(128.0 * 2 * 6 * 64 / 2));
}

TEST_CASE("qk_layernorm: read from measured runs and imports; refused with MLA") {
    MeasuredRun r =
        parse_measured_runs(trainsim::test::one_row_runs_file({{"qk_layernorm", true}}), "f").runs.at(0);
    REQUIRE_FALSE(r.error);
    CHECK(r.model.qk_layernorm);
    for (const std::string& i : r.ignored)
        CHECK(i.find("qk_layernorm") == std::string::npos);
    r = parse_measured_runs(trainsim::test::one_row_runs_file({{"qk_layernorm", false}}), "f").runs.at(0);
    CHECK_FALSE(r.model.qk_layernorm);
    r = parse_measured_runs(trainsim::test::one_row_runs_file({{"qk_layernorm", "yes"}}), "f").runs.at(0);
    CHECK_FALSE(r.model.qk_layernorm);
    CHECK(r.ignored.size() == 1);

    ImportTarget t;
    t.gpu = "H100-SXM5-80GB";
    t.cluster_gpus = 8;
    const std::vector<std::string> args = {"--num-layers",
                                           "2",
                                           "--hidden-size",
                                           "256",
                                           "--num-attention-heads",
                                           "4",
                                           "--seq-length",
                                           "128",
                                           "--max-position-embeddings",
                                           "128",
                                           "--vocab-size",
                                           "1024",
                                           "--bf16",
                                           "--qk-layernorm"};
    CHECK(import_megatron(args, "m.args", t).workload.at("model").at("qk_layernorm") == true);

    ModelSpec mla = tiny_gqa();
    mla.kv_heads = mla.heads;
    mla.attention_type = AttentionType::mla;
    mla.kv_lora_rank = 64;
    mla.qk_rope_head_dim = 32;
    mla.v_head_dim = 64;
    Layout l = tiny_tp2();
    l.tp = 1;
    CHECK_NOTHROW(check_layout(mla, l, 1));
    mla.qk_layernorm = true;
    CHECK(contains(message_of<InputError>([&] { check_layout(mla, l, 1); }),
                   "model.qk_layernorm = true with model.attention_type = \"mla\""));
}
