// Frameworks as data: the defaults each framework implies, FP8 as it runs (FP8 GEMMs on the linear layers
// only, cast kernels with their bytes), torchtitan's per-op selective checkpointing, ZeRO-3 / FSDP gathers.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/framework_defaults.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::llama_style;
using trainsim::test::small_gpt;

namespace {

Layout layout_of(Framework f, int tp, bool sp, int pp = 1) {
    Layout l;
    l.framework = f;
    l.tp = tp;
    l.pp = pp;
    l.sequence_parallel = sp;
    return l;
}

/// Every kernel of the compute ops of `phase` on stage 0, with multiplicity.
std::vector<Kernel> kernels_of(const Program& p, Phase phase) {
    std::vector<Kernel> out;
    for (const auto& op : p.stages[0].ops)
        if (op.kind == OpKind::compute && op.phase == phase)
            for (const auto& k : p.segments[static_cast<std::size_t>(op.segment)].kernels)
                out.push_back(k);
    return out;
}

std::vector<Kernel> all_kernels(const Program& p) {
    std::vector<Kernel> out;
    for (Phase ph : {Phase::forward, Phase::backward, Phase::recompute, Phase::optimizer})
        for (const auto& k : kernels_of(p, ph))
            out.push_back(k);
    return out;
}

Layout single_gpu(Precision p, Fp8Recipe r, Recompute rc = Recompute::none) {
    Layout l;
    l.micro_batch = 1;
    l.global_batch = 1;
    l.precision = p;
    l.fp8_recipe = r;
    l.recompute = rc;
    return l;
}

/// A measured-runs row on `gpus` DGX H100 GPUs (a 4-layer SwiGLU model) from `source` with `training`.
nlohmann::json measured_row(const std::string& source, int gpus, const nlohmann::json& training) {
    return {{"id", "r"},
            {"source", source},
            {"cluster",
             {{"gpu", "H100-SXM5-80GB"},
              {"gpus", gpus},
              {"gpus_per_node", 8},
              {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 450}}},
              {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 8}, {"nic_Gbps", 400}}}}},
            {"model",
             {{"layers", 4},
              {"hidden", 1024},
              {"heads", 16},
              {"ffn_hidden", 4096},
              {"vocab", 8192},
              {"seq_len", 512},
              {"mlp", "swiglu"}}},
            {"training", training},
            {"measured", {{"step_time_s", 1.0}}}};
}

}  // namespace

TEST_CASE("framework defaults: attention, TP overlap, reshard, FP8 recipe per framework and GPU") {
    const GpuSpec& a100 = find_gpu("A100-SXM4-80GB", "test");
    const GpuSpec& h100 = find_gpu("H100-SXM5-80GB", "test");
    CHECK_FALSE(hopper_or_newer(a100));
    CHECK(hopper_or_newer(h100));

    auto mg = framework_defaults(Framework::megatron, a100, layout_of(Framework::megatron, 8, false));
    CHECK(mg.attention == AttentionKernel::unfused);  // the 2020-22 Megatron-LM A100 runs
    CHECK_FALSE(mg.tp_comm_overlap);
    mg = framework_defaults(Framework::megatron, h100, layout_of(Framework::megatron, 8, true));
    CHECK(mg.attention == AttentionKernel::cudnn);  // TE prefers cuDNN FusedAttention on sm90+
    CHECK(mg.tp_comm_overlap);                      // userbuffers with SP
    CHECK(mg.fp8_recipe == Fp8Recipe::delayed);
    CHECK(mg.reshard_after_forward);

    CHECK(
        framework_defaults(Framework::deepspeed, a100, layout_of(Framework::deepspeed, 4, false)).attention ==
        AttentionKernel::unfused);

    const auto tt =
        framework_defaults(Framework::torchtitan, h100, layout_of(Framework::torchtitan, 8, true));
    CHECK(tt.attention == AttentionKernel::flash);
    CHECK_FALSE(tt.tp_comm_overlap);  // vanilla DTensor TP
    CHECK(tt.reshard_after_forward);  // not pp_enabled
    CHECK(tt.fp8_recipe == Fp8Recipe::tensorwise);
    CHECK(framework_defaults(Framework::torchtitan, h100, layout_of(Framework::torchtitan, 8, true), true)
              .tp_comm_overlap);  // async TP
    CHECK_FALSE(framework_defaults(Framework::torchtitan, h100, layout_of(Framework::torchtitan, 1, false, 4))
                    .reshard_after_forward);  // reshard_after_forward = not pp_enabled
    CHECK(framework_defaults(Framework::torchtitan, a100, layout_of(Framework::torchtitan, 1, false))
              .attention == AttentionKernel::flash);
    // llm-foundry's benchmark runs: attn_impl triton (or flash-attn 1.0.9): FlashAttention-1 class.
    CHECK(framework_defaults(Framework::composer, a100, layout_of(Framework::composer, 1, false)).attention ==
          AttentionKernel::flash1);
    CHECK(framework_defaults(Framework::pytorch, h100, layout_of(Framework::pytorch, 1, false)).attention ==
          AttentionKernel::flash);
}

TEST_CASE("measured runs: framework from the source, training.framework and async_tp override") {
    nlohmann::json run = measured_row("pytorch/torchtitan docs", 16,
                                      {{"tp", 8},
                                       {"pp", 1},
                                       {"dp", 2},
                                       {"micro_batch", 1},
                                       {"global_batch", 2},
                                       {"sequence_parallel", true},
                                       {"recompute", "selective"},
                                       {"zero_stage", 3},
                                       {"distributed_optimizer", false},
                                       {"precision", "bf16"}});
    auto doc = [&](const nlohmann::json& r) {
        return nlohmann::json{{"format", "trainsim-measured-runs/1"}, {"runs", nlohmann::json::array({r})}};
    };
    auto l = parse_measured_runs(doc(run), "f.json").runs[0].layout;
    CHECK(l.framework == Framework::torchtitan);
    CHECK(l.recompute == Recompute::selective_op);
    CHECK(l.attention == AttentionKernel::flash);
    CHECK_FALSE(l.tp_comm_overlap);
    run["training"]["async_tp"] = true;
    CHECK(parse_measured_runs(doc(run), "f.json").runs[0].layout.tp_comm_overlap);
    run["source"] = "NVIDIA/NeMo performance summary";
    run["training"].erase("async_tp");
    run["training"]["zero_stage"] = 0;
    l = parse_measured_runs(doc(run), "f.json").runs[0].layout;
    CHECK(l.framework == Framework::megatron);
    CHECK(l.recompute == Recompute::selective);
    CHECK(l.attention == AttentionKernel::cudnn);
    CHECK(l.tp_comm_overlap);
    run["training"]["framework"] = "composer";
    CHECK(parse_measured_runs(doc(run), "f.json").runs[0].layout.framework == Framework::composer);
    run["training"].erase("framework");
    run["source"] = "mosaicml/llm-foundry benchmarks";
    CHECK(parse_measured_runs(doc(run), "f.json").runs[0].layout.framework == Framework::composer);
    run["source"] = "some paper";
    run["training"]["zero_stage"] = 1;
    CHECK(parse_measured_runs(doc(run), "f.json").runs[0].layout.framework == Framework::deepspeed);
}

TEST_CASE("FP8: FP8 GEMMs only for the linear layers; LM head and attention in 16 bits") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    const Program p = build_program(m, single_gpu(Precision::fp8, Fp8Recipe::tensorwise));
    int fp8_gemms = 0;
    for (const auto& k : all_kernels(p)) {
        const std::string name = k.name;
        if (k.kind == KernelKind::gemm && k.fp8) {
            ++fp8_gemms;
            CHECK(name.rfind("lm_head", 0) != 0);
        }
        if (name.rfind("lm_head", 0) == 0) CHECK_FALSE(k.fp8);
        if (k.kind == KernelKind::flash_attention) CHECK_FALSE(k.fp8);
    }
    // 4 linears x (fwd, dgrad, wgrad) x 2 layers
    CHECK(fp8_gemms == 4 * 3 * 2);
    const Program bf = build_program(m, single_gpu(Precision::bf16, Fp8Recipe::tensorwise));
    for (const auto& k : all_kernels(bf)) {
        CHECK_FALSE(k.fp8);
        CHECK(std::string(k.name).rfind("fp8_", 0) != 0);  // no casts without fp8
    }
}

TEST_CASE("FP8: cast and amax kernels as memory passes with their bytes, per recipe") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    const double T = 1024, h = 1024, E = 2;
    auto bytes_of = [](const Program& p, Phase ph, const std::string& name) {
        std::vector<double> v;
        for (const auto& k : kernels_of(p, ph))
            if (name == k.name) v.push_back(k.bytes);
        return v;
    };
    // torchao tensorwise: amax pass + cast, 2E + 1 per input element; the weight every forward.
    Layout torchao = single_gpu(Precision::fp8, Fp8Recipe::tensorwise);
    torchao.framework = Framework::torchtitan;
    torchao.torch_compile = true;
    const Program tw = build_program(m, torchao);
    const auto in_tw = bytes_of(tw, Phase::forward, "fp8_cast_input");
    REQUIRE(in_tw.size() == 4 * 2);
    CHECK(in_tw[0] == doctest::Approx((2 * E + 1) * T * h));  // qkv input [T, h]
    CHECK(bytes_of(tw, Phase::forward, "fp8_cast_weight").size() == 4 * 2);
    CHECK(bytes_of(tw, Phase::forward, "fp8_cast_transpose_weights").empty());
    const auto g_tw = bytes_of(tw, Phase::backward, "fp8_cast_grad_output");
    REQUIRE(g_tw.size() == 4 * 2);
    CHECK(g_tw[0] == doctest::Approx((2 * E + 3) * T * h));  // fc2's output gradient [T, h]
    // TE delayed scaling: cast_transpose E + 2; the weights once per step (first micro-batch).
    const Program de = build_program(m, single_gpu(Precision::fp8, Fp8Recipe::delayed));
    const auto in_de = bytes_of(de, Phase::forward, "fp8_cast_input");
    // TE LayerNormLinear writes qkv's and fc1's inputs in FP8 from the norm: only proj and fc2 cast theirs,
    // and qkv and fc1 transpose the saved fp8 input in backward (1 + 1 B).
    REQUIRE(in_de.size() == 2 * 2);
    CHECK(in_de[0] == doctest::Approx((E + 2) * T * h));  // proj input [T, a·d] = [T, h]
    const auto tr = bytes_of(de, Phase::backward, "fp8_transpose_input");
    REQUIRE(tr.size() == 2 * 2);
    CHECK(tr[0] == doctest::Approx(2 * T * h));
    CHECK(bytes_of(de, Phase::forward, "fp8_cast_weight").empty());
    const auto w = bytes_of(de, Phase::forward, "fp8_cast_transpose_weights");
    REQUIRE(w.size() == 1);
    const double weights = m.hidden * (m.heads + 2 * m.kv_heads) * m.head_dim() +
                           m.heads * m.head_dim() * m.hidden + 2.0 * m.hidden * m.ffn_hidden +
                           m.ffn_hidden * m.hidden;
    CHECK(w[0] == doctest::Approx((E + 2) * weights * 2));
    CHECK(bytes_of(de, Phase::backward, "fp8_relayout_input").empty());
}

TEST_CASE("selective_op: wk, wo and w3 and the non-mm ops recomputed; attention not") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    const Program p =
        build_program(m, single_gpu(Precision::bf16, Fp8Recipe::delayed, Recompute::selective_op));
    const auto rec = kernels_of(p, Phase::recompute);
    int gemms = 0, attention = 0, norms = 0;
    double flops = 0;
    for (const auto& k : rec) {
        if (k.kind == KernelKind::gemm) ++gemms, flops += k.flops;
        if (k.kind == KernelKind::flash_attention) ++attention;
        if (std::string(k.name).find("norm") != std::string::npos) ++norms;
    }
    CHECK(gemms == 3 * 2);
    CHECK(attention == 0);
    CHECK(norms == 2 * 2);
    const double T = 1024, h = 1024, d = m.head_dim();
    const double per_layer =
        2 * T * h * (m.kv_heads * d) + 2 * T * h * (m.heads * d) + 2 * T * h * m.ffn_hidden;
    CHECK(flops == doctest::Approx(2 * per_layer));
    // Megatron's selective recompute adds nothing with flash attention.
    CHECK(kernels_of(build_program(m, single_gpu(Precision::bf16, Fp8Recipe::delayed, Recompute::selective)),
                     Phase::recompute)
              .empty());
}

TEST_CASE("ZeRO-3 / FSDP: backward gathers follow reshard_after_forward; copy-out per framework") {
    const ModelSpec m = small_gpt(4);
    const int groups = 4 + 2;
    Layout l;
    l.dp = 8;
    l.micro_batch = 1;
    l.global_batch = 8;
    l.zero_stage = 3;
    auto copies = [](const Program& p) {
        int n = 0;
        for (const auto& k : all_kernels(p))
            if (std::string(k.name) == "zero3_all_gather_copy_out" ||
                std::string(k.name) == "zero3_all_gather_zero_buffer")
                ++n;
        return n;
    };
    auto gathers = [](const Program& p) {
        int n = 0;
        for (const auto& op : p.stages[0].ops)
            if (op.kind == OpKind::dp_launch && op.collective == CollectiveKind::all_gather) ++n;
        return n;
    };
    l.framework = Framework::torchtitan;
    const Program resh = build_program(m, l);
    CHECK(gathers(resh) == 2 * groups);  // forward and backward
    CHECK(copies(resh) == 2 * groups);   // FSDP2 copy-out after every gather
    l.reshard_after_forward = false;
    const Program keep = build_program(m, l);
    CHECK(gathers(keep) == groups);  // forward only: kept for backward
    l.reshard_after_forward = true;
    l.framework = Framework::composer;  // FSDP1 gathers into the flat parameter: no copy
    CHECK(copies(build_program(m, l)) == 0);
    l.framework = Framework::deepspeed;
    // DeepSpeed fetches per linear module (4 per layer) and, in a model this small, keeps every one
    // gathered (each is reused within stage3_max_reuse_distance): one gather and copy-out per unit.
    const Program ds = build_program(m, l);
    CHECK(copies(ds) == 4 * 4 + 2);
    CHECK(gathers(ds) == 4 * 4 + 2);
    // 6 B per gathered element: the zeroed flat buffer (2 B), then ProcessGroupNCCL's copy of the flattened
    // result into each of the DP world's partitions, one copy kernel each (4 B in all).
    const double qkv = 3.0 * m.hidden * m.hidden;
    int qkv_zero = 0, qkv_partitions = 0;
    for (const auto& k : all_kernels(ds)) {
        if (std::string(k.name) == "zero3_all_gather_zero_buffer" && k.bytes == doctest::Approx(2.0 * qkv))
            ++qkv_zero;
        if (std::string(k.name) == "zero3_all_gather_copy_out_partition" &&
            k.bytes == doctest::Approx(4.0 * qkv / l.dp) && k.host_issue_s == 250e-6 / 8)
            ++qkv_partitions;  // each issued no faster than the host's per-partition work (DeepSpeed #1069)
    }
    CHECK(qkv_zero == 4);
    CHECK(qkv_partitions == 4 * l.dp);
}

TEST_CASE("torchtitan without torch.compile: norms, RoPE and SwiGLU as eager ATen ops") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    const double T = 1024, h = 1024;
    auto first = [](const Program& p, const std::string& name) {
        for (const auto& k : all_kernels(p))
            if (name == k.name) return k.bytes;
        return -1.0;
    };
    Layout l = single_gpu(Precision::bf16, Fp8Recipe::tensorwise);
    l.framework = Framework::torchtitan;
    const Program eager = build_program(m, l);
    CHECK(first(eager, "input_norm") == doctest::Approx(36 * T * h));
    CHECK(first(eager, "input_norm_bwd") == doctest::Approx(68 * T * h));
    CHECK(first(eager, "swiglu") == doctest::Approx(10 * T * m.ffn_hidden));
    CHECK(first(eager, "rope") == doctest::Approx(20 * T * (m.heads + m.kv_heads) * m.head_dim()));
    l.torch_compile = true;
    const Program compiled = build_program(m, l);
    CHECK(first(compiled, "input_norm") == doctest::Approx(4 * T * h));
    CHECK(first(compiled, "swiglu") == doctest::Approx(6 * T * m.ffn_hidden));
    CHECK(first(compiled, "rope") < 0);
    l.framework = Framework::megatron;  // TE / fused kernels whatever torch_compile says
    l.torch_compile = false;
    CHECK(first(build_program(m, l), "input_norm") == doctest::Approx(4 * T * h));
}

TEST_CASE(
    "FSDP backward prefetch: BACKWARD_POST (Composer) gathers the next group after the current gradients") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 8;
    l.micro_batch = 1;
    l.global_batch = 8;
    l.zero_stage = 3;
    // Backward all-gathers (after the first) with compute between their launch and the next DP wait: the
    // gather overlaps a gradient computation.
    auto overlapped = [](const Program& p) {
        int n = 0, launched = 0;
        const auto& ops = p.stages[0].ops;
        bool backward = false;
        for (std::size_t i = 0; i < ops.size(); ++i) {
            if (ops[i].phase == Phase::backward && ops[i].kind == OpKind::compute) backward = true;
            if (ops[i].kind != OpKind::dp_launch) continue;
            const int id = ++launched;  // the wait for it has dp_target >= id
            if (!backward || ops[i].collective != CollectiveKind::all_gather) continue;
            for (std::size_t j = i + 1; j < ops.size(); ++j) {
                if (ops[j].kind == OpKind::dp_wait && ops[j].dp_target >= id) break;
                if (ops[j].kind == OpKind::compute) {
                    ++n;
                    break;
                }
            }
        }
        return n;
    };
    l.framework = Framework::torchtitan;  // FSDP2: explicit prefetch before the current gradients
    CHECK(overlapped(build_program(m, l)) > 0);
    l.framework = Framework::composer;
    CHECK(overlapped(build_program(m, l)) == 0);
}

TEST_CASE("FP8 under TransformerEngine: current scaling casts, fp8_param_gather, fused cross entropy") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    const double T = 1024, h = 1024, E = 2, V = 8192;
    auto bytes_of = [](const Program& p, Phase ph, const std::string& name) {
        std::vector<double> v;
        for (const auto& k : kernels_of(p, ph))
            if (name == k.name) v.push_back(k.bytes);
        return v;
    };
    const double weights = m.hidden * (m.heads + 2 * m.kv_heads) * m.head_dim() +
                           m.heads * m.head_dim() * m.hidden + 2.0 * m.hidden * m.ffn_hidden +
                           m.ffn_hidden * m.hidden;
    // TE Float8CurrentScaling (Megatron, tensorwise): amax E + cast_transpose E + 2 for every GEMM input
    // (the norm cannot write fp8 without the amax), the weights once per step, nothing re-laid out after.
    Layout te = single_gpu(Precision::fp8, Fp8Recipe::tensorwise);
    const Program cs = build_program(m, te);
    const auto in = bytes_of(cs, Phase::forward, "fp8_cast_input");
    REQUIRE(in.size() == 4 * 2);
    CHECK(in[0] == doctest::Approx((2 * E + 2) * T * h));
    CHECK(bytes_of(cs, Phase::forward, "fp8_cast_weight").empty());
    const auto w = bytes_of(cs, Phase::forward, "fp8_cast_transpose_weights");
    REQUIRE(w.size() == 1);
    CHECK(w[0] == doctest::Approx((2 * E + 2) * weights * 2));
    const auto g = bytes_of(cs, Phase::backward, "fp8_cast_grad_output");
    REQUIRE(g.size() == 4 * 2);
    CHECK(g[0] == doctest::Approx((2 * E + 2) * T * h));
    CHECK(bytes_of(cs, Phase::backward, "fp8_relayout_input").empty());
    CHECK(bytes_of(cs, Phase::backward, "fp8_relayout_weight").empty());
    // fp8_param_gather: the weights are FP8 already; their transpose once per step (1 + 1 B), and the
    // optimizer quantizes its master shard (amax 4 + cast 4 + 1 B per element).
    te.fp8_param_gather = true;
    const Program pg = build_program(m, te);
    CHECK(bytes_of(pg, Phase::forward, "fp8_cast_transpose_weights").empty());
    const auto tr = bytes_of(pg, Phase::forward, "fp8_transpose_weights");
    REQUIRE(tr.size() == 1);
    CHECK(tr[0] == doctest::Approx(2.0 * weights * 2));
    const auto q = bytes_of(pg, Phase::optimizer, "fp8_quantize_param_shard");
    REQUIRE(q.size() == 1);
    CHECK(q[0] == doctest::Approx(9.0 * m.total_params()));
    // Fused cross entropy (TE parallel_cross_entropy): 6 B per logit forward, 4 backward, instead of the
    // unfused fp32 loss's 38 and 14.
    CHECK(bytes_of(cs, Phase::forward, "vocab_parallel_cross_entropy")[0] == doctest::Approx(38 * T * V));
    te.cross_entropy_fusion = true;
    const Program ce = build_program(m, te);
    CHECK(bytes_of(ce, Phase::forward, "vocab_parallel_cross_entropy").empty());
    CHECK(bytes_of(ce, Phase::forward, "fused_cross_entropy")[0] == doctest::Approx(6 * T * V));
    CHECK(bytes_of(ce, Phase::backward, "fused_cross_entropy_bwd")[0] == doctest::Approx(4 * T * V));
}

TEST_CASE("fp8_param_gather: the DP all-gather of a stage's parameters moves FP8 linear weights") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    Layout l;
    l.dp = 4;
    l.micro_batch = 1;
    l.global_batch = 4;
    l.distributed_optimizer = true;
    l.precision = Precision::fp8;
    auto gathered = [&](const Layout& x) {
        double bytes = 0;
        const Program p = build_program(m, x);
        for (const auto& op : p.stages[0].ops)
            if (op.kind == OpKind::dp_launch && op.collective == CollectiveKind::all_gather)
                bytes += op.bytes;
        return bytes;
    };
    const double bf16_bytes = gathered(l);
    CHECK(bf16_bytes == doctest::Approx(2.0 * m.total_params()));
    l.fp8_param_gather = true;
    const double linear = 2 * m.linear_params();
    CHECK(gathered(l) == doctest::Approx(1.0 * linear + 2.0 * (m.total_params() - linear)));
}

TEST_CASE("measured runs: Megatron-Bridge and MLPerf NeMo recipe defaults, overridable per row") {
    nlohmann::json run = measured_row("NVIDIA-NeMo/Megatron-Bridge docs/performance-summary.md", 8,
                                      {{"tp", 1},
                                       {"pp", 1},
                                       {"dp", 8},
                                       {"micro_batch", 1},
                                       {"global_batch", 8},
                                       {"sequence_parallel", false},
                                       {"recompute", "none"},
                                       {"zero_stage", 0},
                                       {"distributed_optimizer", true},
                                       {"precision", "fp8"}});
    auto layout = [](const nlohmann::json& r) {
        const nlohmann::json doc{{"format", "trainsim-measured-runs/1"},
                                 {"runs", nlohmann::json::array({r})}};
        return parse_measured_runs(doc, "f.json").runs[0].layout;
    };
    Layout l = layout(run);
    CHECK(l.cross_entropy_fusion);
    CHECK(l.fp8_param_gather);
    CHECK(l.grad_reduce_in_bf16);
    CHECK(l.grad_reduce_bytes_per_element() == 2.0);
    run["training"]["fp8_param_gather"] = false;
    run["training"]["cross_entropy_fusion"] = false;
    l = layout(run);
    CHECK_FALSE(l.cross_entropy_fusion);
    CHECK_FALSE(l.fp8_param_gather);
    run["training"].erase("fp8_param_gather");
    run["training"].erase("cross_entropy_fusion");
    run["training"]["precision"] = "bf16";
    CHECK_FALSE(layout(run).fp8_param_gather);
    // Megatron-LM and NeMo sources keep Megatron-LM's defaults ...
    run["training"]["precision"] = "fp8";
    run["source"] = "NVIDIA/NeMo docs/source/performance/performance_summary.md";
    l = layout(run);
    CHECK_FALSE(l.cross_entropy_fusion);
    CHECK(l.grad_reduce_bytes_per_element() == 4.0);
    CHECK_FALSE(l.fp8_param_gather);
    // ... except NVIDIA's MLPerf NeMo submissions from v4.0 (FP8_PARAMS=True); v3.1 did not set it.
    run["extensions"] = {
        {"mlperf", {{"version", "v4.1"}, {"framework", "NVIDIA NeMo Framework Release 24.09"}}}};
    CHECK(layout(run).fp8_param_gather);
    run["extensions"]["mlperf"]["version"] = "v3.1";
    CHECK_FALSE(layout(run).fp8_param_gather);
}

TEST_CASE("torchtitan Float8 TP: the column-parallel inputs are cast on the shard and all-gathered in FP8") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    const double T = 1024, h = 1024, E = 2;
    Layout l = layout_of(Framework::torchtitan, 4, true);
    l.micro_batch = 1;
    l.global_batch = 1;
    l.torch_compile = true;
    l.precision = Precision::fp8;
    l.fp8_recipe = Fp8Recipe::tensorwise;
    auto forward_gathers = [](const Program& p) {
        std::vector<double> v;
        for (const auto& op : p.stages[0].ops)
            if (op.phase == Phase::forward && op.kind == OpKind::tp_launch &&
                op.collective == CollectiveKind::all_gather)
                v.push_back(op.bytes);
        return v;
    };
    auto input_casts = [](const Program& p) {
        std::vector<double> v;
        for (const auto& k : kernels_of(p, Phase::forward))
            if (std::string(k.name) == "fp8_cast_input") v.push_back(k.bytes);
        return v;
    };
    const Program f8 = build_program(m, l);
    // qkv and fc1 of 2 layers, then the LM head's 16-bit gather of the final norm's output.
    const auto g = forward_gathers(f8);
    REQUIRE(g.size() == 2 * 2 + 1);
    CHECK(g[0] == doctest::Approx(T * h));      // qkv input in FP8: 1 B per element
    CHECK(g[4] == doctest::Approx(T * h * E));  // LM head input stays 16-bit
    const auto c = input_casts(f8);
    REQUIRE(c.size() == 4 * 2);
    CHECK(c[0] == doctest::Approx((2 * E + 1) * T / 4 * h));  // the qkv cast on the sequence shard
    // rowwise keeps the TP communication in 16 bits (torchtitan docs/float8.md).
    l.fp8_recipe = Fp8Recipe::rowwise;
    CHECK(forward_gathers(build_program(m, l))[0] == doctest::Approx(T * h * E));
}

TEST_CASE(
    "torchtitan TP + SP: funcol's chunk + cat copy around each dim-1 collective; no backward re-gather") {
    // 2 layers, TP 4 with SP, 1,024 tokens of h = 1,024 in 16 bits: a full activation is T h E bytes.
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    auto count = [](const Program& p, Phase ph, const char* name) {
        int n = 0;
        for (const auto& k : kernels_of(p, ph))
            if (std::string(k.name) == name) {
                CHECK(k.bytes ==
                      doctest::Approx(2 * 1024.0 * 1024.0 * 2.0));  // read and write the whole tensor
                ++n;
            }
        return n;
    };
    auto gathers = [](const Program& p, Phase ph) {
        int n = 0;
        for (const auto& op : p.stages[0].ops)
            if (op.phase == ph && op.kind == OpKind::tp_launch && op.collective == CollectiveKind::all_gather)
                ++n;
        return n;
    };
    Layout l = layout_of(Framework::torchtitan, 4, true);
    l.micro_batch = 1;
    l.global_batch = 1;
    l.torch_compile = true;
    const Program tt = build_program(m, l);
    // Forward: per layer 2 all-gathers (qkv, fc1 inputs) and 2 reduce-scatters (proj, fc2 outputs), the
    // embedding's reduce-scatter and the LM head input's all-gather: 2 * 4 + 2 copies.
    CHECK(count(tt, Phase::forward, "funcol_chunk_cat") == 2 * 4 + 2);
    // Backward: per layer the output-gradient all-gathers of proj and fc2 and the input-gradient
    // reduce-scatters of qkv and fc1; the embedding's all-gather and the head's reduce-scatter.
    CHECK(count(tt, Phase::backward, "funcol_chunk_cat") == 2 * 4 + 2);
    // DTensor saves the gathered input of a column-parallel GEMM: the backward gathers only the output
    // gradients (2 per layer) and the embedding's; Megatron gathers the inputs again (2 more per layer).
    CHECK(gathers(tt, Phase::backward) == 2 * 2 + 1);
    Layout mg = layout_of(Framework::megatron, 4, true);
    mg.micro_batch = 1;
    mg.global_batch = 1;
    const Program meg = build_program(m, mg);
    CHECK(gathers(meg, Phase::backward) == 2 * 4 + 2);  // and the LM head input
    CHECK(count(meg, Phase::forward, "funcol_chunk_cat") == 0);
    // Async TP's fused all-gather-matmul / matmul-reduce-scatter work on views: no copy inside the blocks;
    // the eager embedding's reduce-scatter and LM head's all-gather keep theirs (tp_unfused).
    l.tp_comm_overlap = true;
    const Program async = build_program(m, l);
    CHECK(count(async, Phase::forward, "funcol_chunk_cat") == 2);
    // Backward: the input-gradient reduce-scatters of qkv and fc1 (a sum of mms: not fused) per layer, the
    // embedding's all-gather and the head's reduce-scatter.
    CHECK(count(async, Phase::backward, "funcol_chunk_cat") == 2 * 2 + 2);
}

TEST_CASE("torchtitan async TP: symmetric-memory shard copies and the reduction of the TP partials") {
    // 2 layers, TP 4 with SP, 1,024 tokens of h = 1,024 in 16 bits: a full activation is
    // T h E = 1024 * 1024 * 2 = 2,097,152 bytes, its shard 524,288 bytes.
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    Layout l = layout_of(Framework::torchtitan, 4, true);
    l.micro_batch = 1;
    l.global_batch = 1;
    l.torch_compile = true;
    l.tp_comm_overlap = true;  // async TP
    const double act = 1024.0 * 1024.0 * 2.0;
    auto count = [](const Program& p, Phase ph, const char* name, double bytes) {
        int n = 0;
        for (const auto& k : kernels_of(p, ph))
            if (std::string(k.name) == name) {
                CHECK(k.bytes == doctest::Approx(bytes));
                ++n;
            }
        return n;
    };
    const Program p = build_program(m, l);
    // fused_all_gather_matmul: the shard read and written into symmetric memory before the first mm (qkv
    // and fc1 inputs in forward, the proj and fc2 output gradients in backward): 2 * 524,288 bytes.
    CHECK(count(p, Phase::forward, "symm_mem_shard_copy", 2 * act / 4) == 2 * 2);
    CHECK(count(p, Phase::backward, "symm_mem_shard_copy", 2 * act / 4) == 2 * 2);
    // fused_matmul_reduce_scatter (proj, fc2): the [4, T/4, h] partials read, [T/4, h] written:
    // 2,097,152 + 524,288 = 2,621,440 bytes.
    CHECK(count(p, Phase::forward, "symm_mem_reduce_partials", 2621440.0) == 2 * 2);
    CHECK(count(p, Phase::backward, "symm_mem_reduce_partials", 2621440.0) == 0);
    // Neither without async TP, nor under Megatron's userbuffers overlap.
    l.tp_comm_overlap = false;
    CHECK(count(build_program(m, l), Phase::forward, "symm_mem_reduce_partials", 0.0) == 0);
    Layout mg = layout_of(Framework::megatron, 4, true);
    mg.micro_batch = 1;
    mg.global_batch = 1;
    mg.tp_comm_overlap = true;
    const Program meg = build_program(m, mg);
    CHECK(count(meg, Phase::forward, "symm_mem_shard_copy", 0.0) == 0);
    CHECK(count(meg, Phase::forward, "symm_mem_reduce_partials", 0.0) == 0);
}

TEST_CASE("NeMo's Apex distributed Adam: the step reads the 16-bit gradient shards, no fp32 copy") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    auto bytes_of = [](const Program& p, Phase ph, const std::string& name) {
        std::vector<double> v;
        for (const auto& k : kernels_of(p, ph))
            if (name == k.name) v.push_back(k.bytes);
        return v;
    };
    Layout l = single_gpu(Precision::bf16, Fp8Recipe::delayed);
    l.grad_reduce_in_bf16 = true;
    const double P = m.total_params();
    // Megatron's distributed optimizer: bf16 main grads copied to fp32 (2 + 4 B), the norm over the fp32
    // copy (4 B), Adam 30 B.
    const Program mc = build_program(m, l);
    CHECK(bytes_of(mc, Phase::optimizer, "copy_grads_to_fp32")[0] == doctest::Approx(6.0 * P));
    CHECK(bytes_of(mc, Phase::optimizer, "adam_step")[0] == doctest::Approx(30.0 * P));
    // Apex DistributedFusedAdam with param remainders: norm over the bf16 shards (2 B); the fused step reads
    // gradient 2, bf16 weight 2, remainder 2, m 4, v 4 and writes weight, remainder, m, v (12 B): 26 B.
    l.apex_distributed_adam = true;
    const Program ap = build_program(m, l);
    CHECK(bytes_of(ap, Phase::optimizer, "copy_grads_to_fp32").empty());
    CHECK(bytes_of(ap, Phase::optimizer, "adam_step").empty());
    CHECK(bytes_of(ap, Phase::optimizer, "grad_norm_and_inf_check")[0] == doctest::Approx(2.0 * P));
    CHECK(bytes_of(ap, Phase::optimizer, "apex_distributed_adam_step")[0] == doctest::Approx(26.0 * P));
    // fp16 weights: an fp32 master (store_params), 12 B of state, and the 16-bit copy written: 2 + 26 B.
    l.precision = Precision::fp16;
    CHECK(l.optimizer_bytes_per_param() == 12.0);
    CHECK(bytes_of(build_program(m, l), Phase::optimizer, "apex_distributed_adam_step")[0] ==
          doctest::Approx(28.0 * P));
    l.precision = Precision::bf16;
    CHECK(l.optimizer_bytes_per_param() == 10.0);  // remainder 2 + m 4 + v 4
    // Only NeMo's Adam without ZeRO or offload.
    l.zero_stage = 1;
    CHECK_THROWS_AS(check_layout(m, l, 1), InputError);
    l.apex_distributed_adam = false;
    CHECK_NOTHROW(check_layout(m, l, 1));
}

TEST_CASE("Megatron-Core's precision-aware optimizer: bf16 Adam moments, 8 B of state and a 22 B step") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);
    auto bytes_of = [](const Program& p, const std::string& name) {
        for (const auto& k : kernels_of(p, Phase::optimizer))
            if (name == k.name) return k.bytes;
        return -1.0;
    };
    Layout l = single_gpu(Precision::bf16, Fp8Recipe::delayed);
    const double P = m.total_params();
    CHECK(l.optimizer_bytes_per_param() == 12.0);
    CHECK(bytes_of(build_program(m, l), "adam_step") == doctest::Approx(30.0 * P));
    // fp32 master 4 + bf16 m 2 + bf16 v 2; the step reads gradient 4, master 4, m 2, v 2 and writes master
    // 4, m 2, v 2 and the 16-bit weight 2.
    l.adam_moments_bf16 = true;
    CHECK(l.optimizer_bytes_per_param() == 8.0);
    CHECK(bytes_of(build_program(m, l), "adam_step") == doctest::Approx(22.0 * P));
    CHECK_NOTHROW(check_layout(m, l, 1));
    // Adam only, on the GPU, not with Apex's distributed Adam.
    l.optimizer = Optimizer::sgd_momentum;
    CHECK_THROWS_AS(check_layout(m, l, 1), InputError);
    l.optimizer = Optimizer::adam;
    l.apex_distributed_adam = true;
    CHECK_THROWS_AS(check_layout(m, l, 1), InputError);
}

TEST_CASE(
    "measured runs: NeMo 24.07 rows run Apex's distributed Adam; GPT-3 / Llama / Nemotron-340B FP8 reduce in "
    "bf16") {
    nlohmann::json run = measured_row(
        "NVIDIA/NeMo docs/source/performance/performance_summary.md, final version; container NeMo 24.07", 8,
        {{"tp", 1},
         {"pp", 1},
         {"dp", 8},
         {"micro_batch", 1},
         {"global_batch", 8},
         {"sequence_parallel", false},
         {"recompute", "none"},
         {"zero_stage", 0},
         {"distributed_optimizer", true},
         {"precision", "fp8"}});
    auto layout = [](const nlohmann::json& r) {
        const nlohmann::json doc{{"format", "trainsim-measured-runs/1"},
                                 {"runs", nlohmann::json::array({r})}};
        return parse_measured_runs(doc, "f.json").runs[0].layout;
    };
    run["id"] = "nemo2407_fp8_LLAMA3-8B_8gpu";
    Layout l = layout(run);
    CHECK(l.apex_distributed_adam);
    CHECK(l.grad_reduce_in_bf16);
    run["id"] = "nemo_24.07_h100_nemotron_8b_fp8_64gpu";  // the Nemotron 8B / 22B scripts keep apex's fp32
    l = layout(run);
    CHECK(l.apex_distributed_adam);
    CHECK_FALSE(l.grad_reduce_in_bf16);
    run["id"] = "nemo2407_fp8_Nemotron-340B_128gpu";  // conf/training/nemotron/nemotron_340b.yaml: bf16
    CHECK(layout(run).grad_reduce_in_bf16);
    run["id"] = "nemo2407_fp8_GPT3-5B_64gpu";
    run["training"]["precision"] = "bf16";  // only the FP8 scripts set grad_sync_dtype
    CHECK_FALSE(layout(run).grad_reduce_in_bf16);
    run["training"]["apex_distributed_adam"] = false;  // the row's own key wins
    CHECK_FALSE(layout(run).apex_distributed_adam);
    run["training"].erase("apex_distributed_adam");
    run["source"] = "NVIDIA/NeMo docs/source/performance/performance_summary.md, container NeMo 24.12";
    CHECK_FALSE(layout(run).apex_distributed_adam);
}

TEST_CASE("torchtitan's repeat_kv: K and V copied to every query head, their gradients summed back") {
    const ModelSpec m = llama_style(2, 1024, 16, 4, 3584, 8192, 1024);  // 16 query heads, 4 K/V heads of 64
    const double T = 1024, E = 2, d = 64;
    auto bytes_of = [](const Program& p, const std::string& name, int* n) {
        double b = 0;
        *n = 0;
        for (const auto& k : all_kernels(p))
            if (name == k.name) {
                b += k.bytes;
                ++*n;
            }
        return b;
    };
    Layout l = single_gpu(Precision::bf16, Fp8Recipe::tensorwise);
    l.framework = Framework::torchtitan;
    const Program p = build_program(m, l);
    int n = 0;
    // Per layer: read g heads, write a heads (forward); read a, write g (backward). Two layers.
    CHECK(bytes_of(p, "repeat_kv_k", &n) == doctest::Approx(2 * E * T * (4 + 16) * d));
    CHECK(n == 2);
    CHECK(bytes_of(p, "repeat_kv_v_bwd", &n) == doctest::Approx(2 * E * T * (4 + 16) * d));
    CHECK(n == 2);
    // The attention core reads the repeated K and V: E·T·(2a + 2a)·d forward.
    CHECK(bytes_of(p, "flash_attention_fwd", &n) == doctest::Approx(2 * E * T * 4 * 16 * d));
    // Megatron (TE's GQA kernels) and multi-head attention repeat nothing.
    l.framework = Framework::megatron;
    CHECK(bytes_of(build_program(m, l), "repeat_kv_k", &n) == 0);
    l.framework = Framework::torchtitan;
    ModelSpec mha = m;
    mha.kv_heads = mha.heads;
    CHECK(bytes_of(build_program(mha, l), "repeat_kv_k", &n) == 0);
}

TEST_CASE("frameworks: torchtitan refuses async TP without compile; no other framework has async TP") {
    CHECK(trainsim::async_tp_refusal(Framework::torchtitan, true, 8, false).find("only compiled") !=
          std::string::npos);
    CHECK(trainsim::async_tp_refusal(Framework::torchtitan, true, 8, true).empty());
    CHECK(
        trainsim::async_tp_refusal(Framework::torchtitan, true, 1, false).empty());  // no TP: nothing to run
    CHECK(trainsim::async_tp_refusal(Framework::torchtitan, false, 8, false).empty());
    CHECK(trainsim::async_tp_refusal(Framework::megatron, true, 8, false).empty());
}
