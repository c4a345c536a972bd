// The memory model against its references: Megatron-LM's theoretical_memory_usage.py, Korthikanti et al.
// 2022 Table 2, the ZeRO paper's 16 bytes per parameter, and the behaviour of each sharding, optimizer,
// offload and adapter option.
#include <doctest/doctest.h>

#include <algorithm>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"

using namespace trainsim;
using namespace trainsim::test;

namespace {

constexpr std::size_t kParams = 0, kGrads = 1, kOptim = 2, kActiv = 3, kBuffers = 4;

/// Megatron-LM's megatron/training/theoretical_memory_usage.py (core_r0.8.0), transcribed: weights and
/// optimizer state of the most loaded shard, and activations of the first stage (it supports only sequence
/// parallelism with selective recomputation).
struct MegatronArgs {
    double layers, hidden, heads, query_groups, ffn, vocab, seq, micro_batch, tp, pp, dp, microbatches;
    double vpp = 0;  ///< 0: None
    bool swiglu = false, untied = false, distributed_optimizer = false;
};
double megatron_weight_and_optimizer_bytes(const MegatronArgs& a) {
    const double qr = 1.0;  // kv_channels * heads / hidden
    const double transformer =
        2 * a.layers * a.hidden * a.hidden *
        ((1 + a.query_groups / a.heads) * qr + (a.ffn / a.hidden) * (a.swiglu ? 1.5 : 1.0) + 2 / a.hidden +
         1 / (a.layers * a.hidden));
    const double embedding = a.hidden * a.vocab;
    double most_loaded = (transformer / a.pp + embedding) / a.tp;
    if (a.untied && a.pp == 1) most_loaded += embedding / a.tp;
    const double bytes_per_param = a.distributed_optimizer ? 6 + 12 / a.dp : 18;
    return most_loaded * bytes_per_param;
}
double megatron_activation_bytes(const MegatronArgs& a) {
    double act = a.seq * a.micro_batch * a.hidden * (18 + 4 * (a.ffn / a.hidden));
    act *= a.layers;
    act += 8 * a.seq * a.micro_batch * a.pp;
    act += a.seq * a.micro_batch * a.hidden * a.pp;
    if (a.vpp > 0) act *= 1 + (a.pp - 1) / (a.pp * a.vpp);
    if (a.vpp == 0 && a.pp > 1) act *= std::min(1.0, a.microbatches / a.pp);
    if (a.pp == 1) act += a.seq * a.micro_batch * a.hidden * 4 * (1 + a.vocab / a.hidden);
    return act / a.tp;
}

Layout megatron_layout(int tp, int pp, int dp, std::int64_t mb, std::int64_t gbs, bool dist_opt) {
    Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = dp;
    l.micro_batch = mb;
    l.global_batch = gbs;
    l.sequence_parallel = true;
    l.recompute = Recompute::selective;
    l.precision = Precision::bf16;
    l.distributed_optimizer = dist_opt;
    l.attention = AttentionKernel::unfused;
    return l;
}

/// The largest activations pile over the forward-phase samples of stage `st` (what is stored, without the
/// set a recomputation rebuilds during the backward).
double stored_activation_peak(const MemoryReport& r, int st) {
    double best = 0;
    for (const auto& s : r.stages.at(static_cast<std::size_t>(st)).timeline)
        if (s.phase == MemoryPhase::forward) best = std::max(best, s.piles[kActiv]);
    return best;
}

PileBytes load(const MemoryReport& r, int st = 0) {
    return r.stages.at(static_cast<std::size_t>(st)).phase_peaks[0].piles;
}

MemoryReport walk(const ModelSpec& m, const Layout& l) {
    return simulate_memory(m, l, build_program(m, l), find_gpu("A100-SXM4-80GB", "test"), nullptr, true);
}

/// Llama-3 70B's layout at TP 8 with sequence parallelism and FP8 GEMMs (the recipe set by the caller).
Layout llama_tp8_fp8() {
    Layout l;
    l.tp = 8;
    l.sequence_parallel = true;
    l.precision = Precision::fp8;
    return l;
}

}  // namespace

TEST_CASE("memory: Megatron-LM theoretical_memory_usage within 1% (weights + optimizer, activations)") {
    struct Case {
        const char* name;
        ModelSpec model;
        Layout layout;
        MegatronArgs args;
    };
    const ModelSpec gpt175 = gpt3_175b();
    ModelSpec gpt530 = small_gpt(105, 20480, 128, 2048, 51200);  // Korthikanti et al. 2022, Table 3
    ModelSpec gpt22 = small_gpt(48, 6144, 64, 2048, 51200);      // ibid.
    const std::vector<Case> cases = {
        {"GPT-3 175B, TP 8 x PP 16 x DP 8",
         gpt175,
         megatron_layout(8, 16, 8, 1, 1536, false),
         {96, 12288, 96, 96, 49152, 51200, 2048, 1, 8, 16, 8, 192}},
        {"GPT 530B, TP 8 x PP 35 x DP 8, distributed optimizer",
         gpt530,
         megatron_layout(8, 35, 8, 1, 2240, true),
         {105, 20480, 128, 128, 81920, 51200, 2048, 1, 8, 35, 8, 280, 0, false, false, true}},
        {"GPT 22B, TP 8 x PP 1 x DP 4, micro-batch 4",
         gpt22,
         megatron_layout(8, 1, 4, 4, 64, false),
         {48, 6144, 64, 64, 24576, 51200, 2048, 4, 8, 1, 4, 4}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        const MemoryReport r = walk(c.model, c.layout);
        const auto& ld = load(r);
        CHECK(rel_diff(ld[kParams] + ld[kGrads] + ld[kOptim], megatron_weight_and_optimizer_bytes(c.args)) <
              0.01);
        CHECK(rel_diff(stored_activation_peak(r, 0), megatron_activation_bytes(c.args)) < 0.01);
    }
    // Interleaved 1F1B: Megatron multiplies by 1 + (p - 1)/(p·v); the simulated schedule gives the same on
    // stage 0.
    Layout l = megatron_layout(8, 16, 8, 1, 1536, false);
    l.vpp = 2;
    MegatronArgs a{96, 12288, 96, 96, 49152, 51200, 2048, 1, 8, 16, 8, 192, 2};
    CHECK(rel_diff(stored_activation_peak(walk(gpt175, l), 0), megatron_activation_bytes(a)) < 0.01);
}

TEST_CASE("memory: Korthikanti et al. 2022 Table 2, per layer and micro-batch") {
    const ModelSpec m = small_gpt(8, 1024, 16, 512, 8192);
    const double s = 512, b = 2, h = 1024, a = 16;
    Layout l;
    l.micro_batch = 2;
    l.attention = AttentionKernel::unfused;
    l.tp = 1;
    CHECK(layer_activations(m, l).stored == doctest::Approx(s * b * h * (34 + 5 * a * s / h)));
    l.tp = 4;
    const double t = 4;
    CHECK(layer_activations(m, l).stored == doctest::Approx(s * b * h * (10 + 24 / t + 5 * a * s / (h * t))));
    l.sequence_parallel = true;
    CHECK(layer_activations(m, l).stored == doctest::Approx(s * b * h / t * (34 + 5 * a * s / h)));
    l.recompute = Recompute::selective;
    CHECK(layer_activations(m, l).stored == doctest::Approx(s * b * h / t * 34));
    CHECK(layer_activations(m, l).recomputed == doctest::Approx(s * b * h / t * 5 * a * s / h));
    l.recompute = Recompute::full;
    CHECK(layer_activations(m, l).stored == doctest::Approx(2 * s * b * h / t));
    CHECK(layer_activations(m, l).recomputed == doctest::Approx(s * b * h / t * (34 + 5 * a * s / h)));
}

TEST_CASE("memory: GQA, SwiGLU and no dropout change the terms (Llama-3 70B layer, flash, TP 8 + SP)") {
    const ModelSpec m = llama_style();
    Layout l;
    l.tp = 8;
    l.sequence_parallel = true;
    const double T = 8192, h = 8192, a = 64, g = 8, d = 128, f = 28672, t = 8;
    // rep: two norm inputs + QKV and fc1 GEMM inputs, 16-bit; tp: Q, K and V at GQA width, O, the fp32
    // log-sum-exp, SwiGLU input (gate and up) and output.
    const double expected = T * (8 * h / t + (2 * a * d + 4 * g * d + 2 * a * d + 4 * a + 4 * f + 2 * f) / t);
    CHECK(layer_activations(m, l).stored == doctest::Approx(expected));
}

TEST_CASE(
    "memory: quantized GEMM inputs are kept at the recipe's size (TransformerEngine's column-wise copy)") {
    // The Llama-3 70B layer above with fp8 GEMMs: the QKV, fc1, projection and fc2 inputs are kept quantized
    // (G bytes per element; the projection's quantized input is a copy beside the flash output O), the rest
    // in 16 bits. G: per-tensor fp8 1 B; MXFP8 1 B + one E8M0 scale per 32; NVFP4 0.5 B + one E4M3 scale per
    // 16 (transformer_engine/pytorch/module/linear.py saves the column-wise data only).
    const ModelSpec m = llama_style();
    Layout l = llama_tp8_fp8();
    const double T = 8192, h = 8192, a = 64, g = 8, d = 128, f = 28672, t = 8;
    auto expected = [&](double G) {
        return T * ((4 * h + 2 * G * h) / t +
                    (2 * a * d + 4 * g * d + 2 * a * d + 4 * a + G * a * d + 4 * f + G * f) / t);
    };
    const std::pair<Fp8Recipe, double> recipes[] = {{Fp8Recipe::delayed, 1.0},
                                                    {Fp8Recipe::tensorwise, 1.0},
                                                    {Fp8Recipe::mxfp8, 1.0 + 1.0 / 32},
                                                    {Fp8Recipe::nvfp4, 0.5625}};
    for (const auto& r : recipes) {
        l.fp8_recipe = r.first;
        INFO(to_string(r.first));
        CHECK(layer_activations(m, l).stored == doctest::Approx(expected(r.second)));
    }
}

TEST_CASE("memory: a 7B model in mixed precision holds 16 bytes per parameter before activations") {
    // ZeRO (Rajbhandari et al. 2020) Sec. 3.1: fp16 weights and gradients (2 + 2 B) and Adam's fp32 master
    // weight, momentum and variance (12 B): 16 B per parameter, 112 GB for 7B parameters.
    ModelSpec m = small_gpt(32, 4096, 32, 4096, 32000);  // LLaMA-7B (Touvron et al. 2023): 6.7 B parameters
    m.ffn_hidden = 11008;
    m.mlp = MlpKind::swiglu;
    m.tied_embeddings = false;
    Layout l;
    l.precision = Precision::fp16;
    const MemoryReport r = walk(m, l);
    const auto& ld = load(r);
    const double state = ld[kParams] + ld[kGrads] + ld[kOptim];
    CHECK(state / m.total_params() == doctest::Approx(16.0));
    CHECK(state == doctest::Approx(112e9).epsilon(0.05));  // 6.7 B parameters: 108 GB
    // ZeRO-3 on 8 GPUs: each sharded pile is 1/8 of it.
    l.dp = 8;
    l.global_batch = 8;
    l.zero_stage = 3;
    const auto& z = load(walk(m, l));
    CHECK(z[kParams] == doctest::Approx(ld[kParams] / 8));
    CHECK(z[kGrads] == doctest::Approx(ld[kGrads] / 8));
    CHECK(z[kOptim] == doctest::Approx(ld[kOptim] / 8));
}

TEST_CASE("memory: micro-batches in flight come from the simulated schedule") {
    const ModelSpec m = small_gpt(8);
    Layout l;
    l.pp = 4;
    l.global_batch = 8;
    const double per_mb = layer_activations(m, l).stored * 2;  // two layers per stage
    const MemoryReport f1b = walk(m, l);
    for (int st = 0; st < 4; ++st)
        CHECK(f1b.stages[static_cast<std::size_t>(st)].peak_in_flight_microbatches == 4 - st);
    CHECK(stored_activation_peak(f1b, 1) == doctest::Approx(3 * per_mb));
    l.schedule = Schedule::gpipe;
    const MemoryReport gp = walk(m, l);
    CHECK(stored_activation_peak(gp, 1) == doctest::Approx(8 * per_mb));
}

TEST_CASE(
    "memory: TransformerEngine's cached FP8 weight has no transpose on Blackwell (per-tensor recipes)") {
    // Llama-3 70B, TP 8, delayed-scaling FP8 under Megatron: the cached FP8 copy of each linear weight is
    // 1 + 1 B on Hopper (TN-only FP8 GEMMs) and 1 B on B200, whose FP8 GEMMs take any layout. The catalog's
    // two parts differ in HBM only otherwise; the parameters pile differs by 1 B per linear weight per GPU.
    const ModelSpec m = llama_style();
    Layout l = llama_tp8_fp8();
    l.dp = 1;
    l.global_batch = 1;
    l.fp8_recipe = Fp8Recipe::delayed;
    const double h = 8192, a = 64, g = 8, d = 128, f = 28672, t = 8, L = 80;
    const double linear_per_gpu = L * (h * (a + 2 * g) * d + a * d * h + 3 * h * f) / t;
    const Program p = build_program(m, l);
    const MemoryReport hopper = simulate_memory(m, l, p, find_gpu("H100-SXM5-80GB", "test"));
    const MemoryReport blackwell = simulate_memory(m, l, p, find_gpu("B200", "test"));
    CHECK(load(hopper)[kParams] - load(blackwell)[kParams] == doctest::Approx(linear_per_gpu));
    // The report says so.
    auto says = [](const MemoryReport& r, const char* what) {
        return std::any_of(r.notes.begin(), r.notes.end(),
                           [&](const std::string& n) { return contains(n, what); });
    };
    CHECK(says(hopper, "1 B and its transpose, 1 B"));
    CHECK(says(blackwell, "1 B, no transpose"));
    // MXFP8 keeps a row-wise and a column-wise copy on every GPU (memory only: Hopper cannot run it).
    l.fp8_recipe = Fp8Recipe::mxfp8;
    const Program q = build_program(m, l);
    CHECK(load(simulate_memory(m, l, q, find_gpu("B200", "test")))[kParams] ==
          doctest::Approx(load(simulate_memory(m, l, q, find_gpu("H100-SXM5-80GB", "test")))[kParams]));
}

TEST_CASE("memory: a layout that cannot fit names the stage, the phase and the pile") {
    const ModelSpec m = llama_style();  // Llama-3 70B on 8 GPUs, tp = pp = 1, no sharding
    Layout l;
    l.dp = 8;
    l.global_batch = 64;
    const MemoryReport r = simulate_memory(m, l, build_program(m, l), find_gpu("H100-SXM5-80GB", "test"));
    CHECK_FALSE(r.fits());
    CHECK(r.blamed_pile() == Pile::optimizer);
    CHECK(contains(r.oom_message(), "stage 0 runs out of memory in "));
    CHECK(contains(r.oom_message(), "of 80.0 GiB; optimizer state "));
    // The same model with ZeRO-3 over 64 GPUs and full recomputation fits in parameters, gradients and
    // optimizer state (16 B x 70.6 B / 64 = 17.6 GB).
    l.dp = 64;
    l.zero_stage = 3;
    l.recompute = Recompute::full;
    l.global_batch = 64;
    const MemoryReport z = simulate_memory(m, l, build_program(m, l), find_gpu("H100-SXM5-80GB", "test"));
    CHECK(z.fits());
}

TEST_CASE(
    "memory: FSDP all-gather buffers are alive while activations are held; the note names the coordinator") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 8;
    l.global_batch = 16;
    l.zero_stage = 3;
    const MemoryReport r = walk(m, l);
    const double layer = 2.0 * m.layer_params();
    bool overlap = false;
    for (const auto& s : r.stages[0].timeline)
        if (s.phase == MemoryPhase::forward && s.piles[kActiv] > 0 && s.piles[kBuffers] >= 2 * layer)
            overlap = true;
    CHECK(overlap);
    // ... and released after the iteration: the optimizer phase holds no gathered parameters.
    CHECK(r.stages[0].phase_peaks[static_cast<std::size_t>(MemoryPhase::optimizer)].piles[kBuffers] < layer);
    // The report says which ZeRO-3 coordinator is simulated.
    auto says = [](const MemoryReport& rep, const char* what) {
        return std::any_of(rep.notes.begin(), rep.notes.end(),
                           [&](const std::string& n) { return contains(n, what); });
    };
    CHECK(says(r, "ZeRO-3 / FSDP: parameter groups"));
    CHECK_FALSE(says(r, "DeepSpeed's 2021 releases"));
    // DeepSpeed's own stage-3 coordinator, with its host cost per partition.
    l.framework = Framework::deepspeed;
    const MemoryReport ds = walk(m, l);
    CHECK(says(ds, "ZeRO-3 as DeepSpeed's 2021 releases ran it"));
    CHECK(says(ds, "costing the host 31 us"));
    CHECK_FALSE(says(ds, "ZeRO-3 / FSDP: parameter groups"));
}

TEST_CASE("memory: optimizers, offload and adapters shrink the piles as they do") {
    const ModelSpec m = small_gpt(4);
    const double P = m.total_params();
    Layout l;
    l.optimizer = Optimizer::adam_8bit;
    CHECK(load(walk(m, l))[kOptim] == doctest::Approx(P * (4 + 2 * (1 + 4.0 / 2048))));
    l.optimizer = Optimizer::sgd_momentum;
    CHECK(load(walk(m, l))[kOptim] == doctest::Approx(8 * P));
    l.optimizer = Optimizer::adam;
    l.offload_optimizer = Offload::cpu;
    const MemoryReport off = walk(m, l);
    CHECK(load(off)[kOptim] == 0);
    CHECK(off.stages[0].host_bytes == doctest::Approx(12 * P));

    // LoRA r = 8 on every projection: gradients and optimizer state for the adapters only.
    Layout lora;
    lora.adapter = Adapter::lora;
    lora.lora_rank = 8;
    const double adapters = m.layers * adapter_params_per_layer(m, lora);
    const double h = 1024;
    CHECK(adapter_params_per_layer(m, lora) ==
          doctest::Approx(8 * ((3 * h + 3 * h) + 2 * h + (h + 4 * h) + (4 * h + h))));
    const MemoryReport lr = walk(m, lora);
    CHECK(load(lr)[kGrads] == doctest::Approx(4 * adapters));
    CHECK(load(lr)[kOptim] == doctest::Approx(12 * adapters));
    CHECK(load(lr)[kParams] == doctest::Approx(2 * (P + adapters)));
    // QLoRA: the linear weights in NF4 with double quantization, 4.127 bits each.
    lora.adapter = Adapter::qlora;
    const double linear = m.layers * m.linear_params();
    CHECK(load(walk(m, lora))[kParams] ==
          doctest::Approx(2 * (P + adapters) - (2 - 4.127 / 8) * linear).epsilon(1e-4));
}

TEST_CASE("memory: offload and adapters change the simulated step time") {
    const ModelSpec m = small_gpt(4);
    TopologySpec topo = small_topology(1);
    Layout l;
    l.tp = 8;
    l.global_batch = 4;
    const double base = simulate(topo, m, l, "base").report.step_time_s;
    l.offload_optimizer = Offload::cpu;
    CHECK_THROWS_AS(simulate(topo, m, l, "offload"), InputError);  // the host side is not described
    topo.host_memory_bandwidth = Bandwidth::GBps(400);
    topo.nvme_bandwidth = Bandwidth::GBps(25);
    const double off = simulate(topo, m, l, "offload").report.step_time_s;
    // At least the gradients out and the weights back over PCIe (32 GB/s x 0.8), per GPU.
    const double P = m.total_params() / 8;
    CHECK(off - base > (4 + 2) * P / (32e9 * 0.8));
    // LoRA on a model whose GEMMs are large: the weight-gradient GEMMs of the frozen base are skipped.
    const ModelSpec big = small_gpt(2, 4096, 32, 2048, 32000);
    const TopologySpec one = small_topology(1, 1, 1);
    Layout lo;
    lo.global_batch = 1;
    const double full = simulate(one, big, lo, "full").report.step_time_s;
    lo.adapter = Adapter::lora;
    CHECK(simulate(one, big, lo, "lora").report.step_time_s < 0.85 * full);
}

TEST_CASE("memory: the SVG chart is self-contained and names the peak") {
    const ModelSpec m = small_gpt(8);
    Layout l;
    l.pp = 2;
    l.global_batch = 4;
    const std::string svg = memory_svg(walk(m, l), "a <small> test");
    CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
    CHECK(svg.substr(svg.size() - 7) == "</svg>\n");
    CHECK(contains(svg, "a &lt;small&gt; test"));
    CHECK(contains(svg, "peak: stage "));
    CHECK_FALSE(contains(svg, "<script"));
}

TEST_CASE(
    "memory: the early walk's floor is a prefix of the full walk, under its peak, above the held piles") {
    // memory_peak_floor_bytes walks each stage up to the end of its first micro-batch's backward: the same
    // samples as the full walk's first ones (so equal to StageMemory::early_peak_bytes), never above the
    // full walk's peak; with 1F1B the steady state repeats the first micro-batches, so the floor holds the
    // peak's activations.
    const ModelSpec m = small_gpt(8);
    const GpuSpec gpu = find_gpu("A100-SXM4-80GB", "test");
    std::vector<Layout> layouts;
    Layout l;
    l.global_batch = 8;
    layouts.push_back(l);  // PP 1: the first micro-batch's backward holds the peak
    l.pp = 4;
    layouts.push_back(l);  // 1F1B: stage 0 warms up with 4 micro-batches
    l.vpp = 2;
    layouts.push_back(l);  // interleaved
    l.vpp = 1;
    l.recompute = Recompute::full;
    layouts.push_back(l);
    l.recompute = Recompute::none;
    l.pp = 1;
    l.dp = 4;
    l.zero_stage = 3;
    layouts.push_back(l);  // ZeRO-3 gathers
    l.framework = Framework::torchtitan;
    layouts.push_back(l);  // FSDP2
    for (const Layout& x : layouts) {
        CAPTURE(x.pp);
        CAPTURE(x.vpp);
        CAPTURE(x.zero_stage);
        const Program p = build_program(m, x);
        const MemoryReport full = simulate_memory(m, x, p, gpu);
        const double floor = memory_peak_floor_bytes(m, x, p, gpu);
        double early = 0, held = 0;
        for (const StageMemory& st : full.stages) {
            early = std::max(early, st.early_peak_bytes);
            CHECK(st.early_peak_bytes <= st.peak_bytes);
            held = std::max(held, total_bytes(held_piles(m, x, p, st.stage, gpu)));
        }
        CHECK(floor == early);
        CHECK(floor <= full.peak().peak_bytes);
        CHECK(floor > held);
        // The steady state repeats the first micro-batches: the floor is the peak's bytes up to what the
        // end of the iteration adds (the optimizer step's temporaries, a checkpoint's).
        CHECK(floor >= 0.8 * full.peak().peak_bytes);
    }
}
