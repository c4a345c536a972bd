// Fused attention's shape-dependent efficiency (compute.hpp, attention_efficiency) on hand-computed shapes.
#include <doctest/doctest.h>

#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;

namespace {
GpuSpec toy() {
    GpuSpec g;
    g.name = "toy";
    g.sm_count = 132;
    g.peak_fp16_flops = g.peak_bf16_flops = 1e15;
    g.hbm_bytes_per_s = 1e12;
    g.hbm_efficiency = 1;
    g.flash_attention_efficiency = 0.4;
    g.flash_attention_bwd_factor = 0.8;
    g.flash_attention_cta_half = 2;
    g.flash_attention_key_half = 512;
    g.cudnn_attention_efficiency = 0.6;  // no shape constants: neutral
    return g;
}
}  // namespace

TEST_CASE("attention efficiency: CTA fill and key saturation on hand-computed shapes") {
    const GpuSpec g = toy();
    const auto flash = AttentionKernel::flash;
    // 33 heads x 4096/128 query tiles = 1056 CTAs = 8 per SM: fill 8/10; causal: 2048 keys per tile on
    // average at head_dim 128: 2048/2560 = 0.8.
    CHECK(attention_efficiency(g, flash, {33, 4096, 4096, 128, true, false}) ==
          doctest::Approx(0.4 * 0.8 * 0.8));
    // Backward: the bwd factor on top.
    CHECK(attention_efficiency(g, flash, {33, 4096, 4096, 128, true, true}) ==
          doctest::Approx(0.4 * 0.8 * 0.8 * 0.8));
    // Context parallelism 2: 2048 queries (528 CTAs, 4 per SM: fill 4/6) against 4096 keys (2048 visited).
    CHECK(attention_efficiency(g, flash, {33, 2048, 4096, 128, true, false}) ==
          doctest::Approx(0.4 * (4.0 / 6.0) * 0.8));
    // Backward tiles the keys: 1056 CTAs again.
    CHECK(attention_efficiency(g, flash, {33, 2048, 4096, 128, true, true}) ==
          doctest::Approx(0.4 * 0.8 * 0.8 * 0.8));
    // Not causal, head_dim 256: 1024 keys x 256/128 = 2048 -> 0.8; 132 x 8 CTAs -> 0.8.
    CHECK(attention_efficiency(g, flash, {132, 1024, 1024, 256, false, false}) ==
          doctest::Approx(0.4 * 0.8 * 0.8));
    // A partial query tile still takes a CTA: 4097 queries = 33 tiles.
    CHECK(attention_efficiency(g, flash, {8, 4097, 4097, 128, true, false}) <
          attention_efficiency(g, flash, {8, 4224, 4224, 128, true, false}));
    // Neutral constants (cudnn here, every GPU not fitted): the efficiency whatever the shape.
    CHECK(attention_efficiency(g, AttentionKernel::cudnn, {1, 128, 128, 64, true, true}) == 0.6);
    CHECK(attention_efficiency(g, AttentionKernel::cudnn, {512, 65536, 65536, 128, true, false}) == 0.6);
}

TEST_CASE("attention efficiency: a FlashAttention-1-class kernel at half FlashAttention-2's rate") {
    const GpuSpec g = toy();
    // Dao 2023 (FlashAttention-2 is "around 2x" faster than FlashAttention): every shape, both directions.
    CHECK(kFlashAttention1RelativeSpeed == 0.5);
    for (const bool backward : {false, true})
        for (const FusedAttentionShape& shape : {FusedAttentionShape{33, 4096, 4096, 128, true, backward},
                                                 FusedAttentionShape{8, 65536, 65536, 128, true, backward},
                                                 FusedAttentionShape{132, 1024, 2048, 64, false, backward}})
            CHECK(attention_efficiency(g, AttentionKernel::flash1, shape) ==
                  doctest::Approx(0.5 * attention_efficiency(g, AttentionKernel::flash, shape)));
    CHECK(to_string(AttentionKernel::flash1) == "flash1");
}

TEST_CASE("attention efficiency: a kernel without its shape is an internal error") {
    const GpuSpec g = toy();
    CHECK_THROWS_AS(attention_efficiency(g, AttentionKernel::flash, {}), InternalError);
    CHECK_THROWS_AS(attention_efficiency(g, AttentionKernel::unfused, {1, 128, 128, 64, true, false}),
                    InternalError);
    const ComputeModel cm(g, Precision::bf16);
    CHECK_THROWS_AS(
        cm.analytic_seconds(Kernel::flash("flash_attention_fwd", 1e9, 1e6, AttentionKernel::flash, {})),
        InternalError);
}
