// TransformerEngine's FP8 fused attention (Layout::fp8_attention): the attention calls at the FP8 rate, the
// quantize / dequantize passes around them by hand, the layout check, and the measured-runs reader (the
// extension and the Megatron-Bridge presets that set it).
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;

namespace {

/// 2 layers, hidden 1024, 8 heads of 128 (GQA: 2 K/V heads), seq 2048; one GPU, fp8 with cuDNN attention.
ModelSpec small_model() {
    ModelSpec m;
    m.name = "small";
    m.layers = 2;
    m.hidden = 1024;
    m.heads = 8;
    m.kv_heads = 2;
    m.ffn_hidden = 4096;
    m.vocab = 32000;
    m.seq_len = 2048;
    return m;
}
Layout fp8_layout() {
    Layout l;
    l.micro_batch = 1;
    l.global_batch = 1;
    l.precision = Precision::fp8;
    l.attention = AttentionKernel::cudnn;
    return l;
}

/// Stage 0's kernels named `name`: their count and bytes; `fp8` counts those marked FP8.
struct Found {
    int count = 0, fp8 = 0;
    double bytes = 0;
};
Found kernels_named(const Program& p, const std::string& name) {
    Found f;
    for (const Op& op : p.stages[0].ops) {
        if (op.kind != OpKind::compute || op.segment < 0) continue;
        for (const Kernel& k : p.segments[static_cast<std::size_t>(op.segment)].kernels)
            if (name == k.name) {
                ++f.count;
                f.fp8 += k.fp8 ? 1 : 0;
                f.bytes += k.bytes;
            }
    }
    return f;
}

}  // namespace

TEST_CASE("fp8 attention: a compute-bound attention call runs at the FP8 peak times fp8_gemm_efficiency") {
    const GpuSpec& h100 = find_gpu("H100-SXM5-80GB", "test");
    const ComputeModel cm(h100, Precision::fp8);
    // 32 batch-heads of 8192 queries x 8192 keys, head 128, causal: far past the memory bound.
    Kernel k = Kernel::flash("attn", 0.5 * 4.0 * 32 * 8192.0 * 8192.0 * 128, 1e6, AttentionKernel::cudnn,
                             {32, 8192, 8192, 128, true, false});
    const double t16 = cm.seconds(k) - h100.kernel_overhead_s;
    k.fp8 = true;
    const double t8 = cm.seconds(k) - h100.kernel_overhead_s;
    // (t16) / (t8) = FP8 peak x fp8_gemm_efficiency / bf16 peak = 2 x 0.848 on H100.
    CHECK(t16 / t8 == doctest::Approx(h100.peak_flops(Precision::fp8) * h100.fp8_gemm_efficiency /
                                      h100.peak_flops(Precision::bf16)));
    CHECK(t16 / t8 > 1.6);
    CHECK(t16 / t8 < 1.8);
}

TEST_CASE(
    "fp8 attention: the calls are FP8 and the casts around them move the bytes TE's FusedAttnFunc does") {
    const ModelSpec m = small_model();
    Layout l = fp8_layout();
    Program off = build_program(m, l);
    CHECK(kernels_named(off, "fp8_attention_cast_qkv").count == 0);
    CHECK(kernels_named(off, "flash_attention_fwd").fp8 == 0);
    l.fp8_attention = true;
    Program on = build_program(m, l);
    CHECK(kernels_named(on, "flash_attention_fwd").count == 2);  // two layers, one micro-batch
    CHECK(kernels_named(on, "flash_attention_fwd").fp8 == 2);
    CHECK(kernels_named(on, "flash_attention_bwd").fp8 == 2);
    // Per layer: Q 2048 x 8 x 128, K and V 2048 x 2 x 128 each, O 2048 x 8 x 128; E + 1 = 3 bytes each.
    const double q = 2048.0 * 8 * 128, kv = 2.0 * 2048 * 2 * 128, o = q;
    CHECK(kernels_named(on, "fp8_attention_cast_qkv").bytes == doctest::Approx(2 * 3 * (q + kv)));
    CHECK(kernels_named(on, "fp8_attention_dequantize_out").bytes == doctest::Approx(2 * 3 * o));
    CHECK(kernels_named(on, "fp8_attention_cast_grad_out").bytes == doctest::Approx(2 * 3 * o));
    CHECK(kernels_named(on, "fp8_attention_dequantize_grads").bytes == doctest::Approx(2 * 3 * (q + kv)));
}

TEST_CASE("fp8 attention: needs precision fp8 and cuDNN attention") {
    const ModelSpec m = small_model();
    Layout l = fp8_layout();
    l.fp8_attention = true;
    CHECK(layout_violations(m, l, 1).empty());
    l.attention = AttentionKernel::flash;
    REQUIRE(layout_violations(m, l, 1).size() == 1);
    CHECK(layout_violations(m, l, 1)[0].check == LayoutCheck::fp8_attention);
    l = fp8_layout();
    l.fp8_attention = true;
    l.precision = Precision::bf16;
    REQUIRE(layout_violations(m, l, 1).size() == 1);
    CHECK(layout_violations(m, l, 1)[0].message.find("layout.fp8_attention") != std::string::npos);
}

TEST_CASE("fp8 attention: read from the extension and from the Megatron-Bridge presets that set it") {
    using nlohmann::json;
    auto read = [](const json& ext) {
        return parse_measured_runs(trainsim::test::one_row_runs_file(ext, "fp8", 4096), "f").runs.at(0);
    };
    CHECK_FALSE(read(json::object()).layout.fp8_attention);
    CHECK(read({{"fp8_dot_product_attention", true}}).layout.fp8_attention);
    CHECK_FALSE(read({{"fp8_dot_product_attention", false}}).layout.fp8_attention);
    const std::string v05 = "scripts/performance/configs/qwen/qwen3_workload_base_configs.py@v0.5.1 ";
    CHECK(read({{"recipe_preset", v05 + "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1"}})
              .layout.fp8_attention);
    // The same preset name at v0.4.0 did not set it; DeepSeek-V3's GB200 preset does not either.
    const std::string v04 = "scripts/performance/configs/qwen/qwen3_workload_base_configs.py@v0.4.0 ";
    CHECK_FALSE(read({{"recipe_preset", v04 + "QWEN3_30B_A3B_PRETRAIN_CONFIG_GB200_FP8_MX_V1"}})
                    .layout.fp8_attention);
    CHECK_FALSE(read({{"recipe_preset",
                       "scripts/performance/configs/deepseek/deepseek_workload_base_configs.py@v0.5.0 "
                       "DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2"}})
                    .layout.fp8_attention);
    CHECK(read({{"recipe_preset",
                 "src/megatron/bridge/perf_recipes/gpt_oss/gb300/gpt_oss.py@v0.6.0 "
                 "gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config()"}})
              .layout.fp8_attention);
}

TEST_CASE("fp8 attention: the attention core saves its FP8 copies of Q, K, V and O (1 byte, not 2)") {
    const ModelSpec m = small_model();
    Layout l = fp8_layout();
    const double off = layer_activations(m, l).stored;
    l.fp8_attention = true;
    const double on = layer_activations(m, l).stored;
    // Per layer and micro-batch: Q and O 2048 x 8 x 128, K and V 2048 x 2 x 128 each; one byte less each.
    CHECK(off - on == doctest::Approx(2048.0 * (8 + 2 + 2 + 8) * 128));
}
