// Shared helpers of the unit tests: small hand-made clusters and models, and exception-message capture.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim::test {

/// A DGX A100-like cluster (the values of topologies/dgx-a100.json) with the given shape.
inline TopologySpec small_topology(int nodes, int gpus_per_node = 8, int nics_per_node = 8,
                                   int nodes_per_leaf = 32) {
    TopologySpec t;
    t.name = "unit-test";
    t.gpu = "A100-SXM4-80GB";
    t.nodes = nodes;
    t.gpus_per_node = gpus_per_node;
    t.nvlink_bandwidth = Bandwidth::GBps(300);
    t.nvlink_latency = Time::seconds(1e-6);
    t.nics_per_node = nics_per_node;
    t.nic_bandwidth = Bandwidth::Gbps(200);
    t.pcie_bandwidth = Bandwidth::GBps(32);
    t.nic_latency = Time::seconds(2e-6);
    t.switch_latency = Time::seconds(0.5e-6);
    t.nodes_per_leaf = nodes_per_leaf;
    t.oversubscription = 1.0;
    return t;
}

/// TP 2 x PP 2 x DP 4 (the 16 GPUs of small_topology(2)), with the given micro-batch and global batch (by
/// default 1 and 16: 4 micro-batches per pipeline); everything else Layout's defaults.
inline Layout tp2_pp2_dp4(int micro_batch = 1, int global_batch = 16) {
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.micro_batch = micro_batch;
    l.global_batch = global_batch;
    return l;
}

/// PyTorch-style FSDP (ZeRO-3) of framework `f` over DP `dp` x PP `pp`, bf16, FlashAttention-2, micro-batch 1
/// unless given; everything else Layout's defaults.
inline Layout fsdp_layout(Framework f, int dp, int pp, int global_batch, int micro_batch = 1) {
    Layout l;
    l.framework = f;
    l.dp = dp;
    l.pp = pp;
    l.zero_stage = 3;
    l.micro_batch = micro_batch;
    l.global_batch = global_batch;
    l.precision = Precision::bf16;
    l.attention = AttentionKernel::flash;
    return l;
}

/// A small GPT-style model (heads == kv_heads, ffn = 4h, GeLU, tied embeddings).
inline ModelSpec small_gpt(std::int64_t layers = 8, std::int64_t hidden = 1024, std::int64_t heads = 16,
                           std::int64_t seq = 512, std::int64_t vocab = 8192) {
    ModelSpec m;
    m.name = "small-gpt";
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = heads;
    m.ffn_hidden = 4 * hidden;
    m.vocab = vocab;
    m.seq_len = seq;
    m.mlp = MlpKind::gelu;
    m.tied_embeddings = true;
    return m;
}

/// A Llama-style model (GQA, SwiGLU, RMSNorm, untied embeddings, no dropout); defaults: Llama 3 70B
/// (Llama Team 2024, arXiv:2407.21783, Table 3).
inline ModelSpec llama_style(std::int64_t layers = 80, std::int64_t hidden = 8192, std::int64_t heads = 64,
                             std::int64_t kv_heads = 8, std::int64_t ffn = 28672, std::int64_t vocab = 128256,
                             std::int64_t seq = 8192) {
    ModelSpec m;
    m.name = "llama-style";
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = kv_heads;
    m.ffn_hidden = ffn;
    m.vocab = vocab;
    m.seq_len = seq;
    m.mlp = MlpKind::swiglu;
    m.tied_embeddings = false;
    m.dropout = false;
    return m;
}

/// A dense MLA model: 2 layers, h 256, 8 heads, qk head 32 (nope) + 16 (rope), v head 24, q_lora 96, kv_lora
/// 64, SwiGLU 512, vocab 1000, s 256.
inline ModelSpec dense_mla() {
    ModelSpec m = llama_style(2, 256, 8, 8, 512, 1000, 256);
    m.attention_type = AttentionType::mla;
    m.head_dim_override = 32;
    m.q_lora_rank = 96;
    m.kv_lora_rank = 64;
    m.qk_rope_head_dim = 16;
    m.v_head_dim = 24;
    return m;
}

/// GPT-3 175B (Brown et al. 2020, Table 2.1).
inline ModelSpec gpt3_175b() {
    ModelSpec m = small_gpt(96, 12288, 96, 2048, 51200);
    m.name = "gpt3-175b";
    return m;
}

/// The message of the exception of type E thrown by f, or "<no exception>" when f returns normally.
template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "<no exception>";
}

inline bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

inline double rel_diff(double a, double b) {
    return std::abs(a - b) / std::max(std::abs(a), std::abs(b));
}

/// A one-run measured-runs document (format trainsim-measured-runs/1): 8 H100 of a DGX node, a 4-layer
/// SwiGLU model of hidden 1024 and `ffn_hidden`, TP 1 x DP 8, `precision`, with `extensions`.
inline nlohmann::json one_row_runs_file(const nlohmann::json& extensions,
                                        const std::string& precision = "bf16", int ffn_hidden = 1024) {
    using nlohmann::json;
    json row = {{"id", "r"},
                {"source", "Megatron-Bridge performance summary"},
                {"cluster",
                 {{"gpu", "H100-SXM5-80GB"},
                  {"gpus", 8},
                  {"gpus_per_node", 8},
                  {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 450}}},
                  {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 8}, {"nic_Gbps", 400}}}}},
                {"model",
                 {{"layers", 4},
                  {"hidden", 1024},
                  {"heads", 8},
                  {"kv_heads", 8},
                  {"ffn_hidden", ffn_hidden},
                  {"vocab", 32000},
                  {"seq_len", 1024},
                  {"mlp", "swiglu"}}},
                {"training",
                 {{"tp", 1},
                  {"pp", 1},
                  {"dp", 8},
                  {"cp", 1},
                  {"micro_batch", 1},
                  {"global_batch", 16},
                  {"sequence_parallel", false},
                  {"recompute", "none"},
                  {"zero_stage", 0},
                  {"distributed_optimizer", true},
                  {"precision", precision}}},
                {"measured", {{"step_time_s", 1.0}, {"peak_memory_GiB", nullptr}}},
                {"extensions", extensions}};
    return json{{"format", "trainsim-measured-runs/1"}, {"runs", json::array({row})}};
}

/// The two results are the same, bit for bit: step time, flows, every rank's accounts, the waiting each GPU
/// caused and the bytes on every link (a shortcut checked against the event-by-event run).
inline void check_identical(const ExecutionResult& a, const ExecutionResult& b) {
    REQUIRE(a.ranks.size() == b.ranks.size());
    CHECK(a.step_time_s == b.step_time_s);
    CHECK(a.flows == b.flows);
    for (std::size_t i = 0; i < a.ranks.size(); ++i) {
        CAPTURE(i);
        const RankTimes &x = a.ranks[i], &y = b.ranks[i];
        CHECK(x.compute_s == y.compute_s);
        CHECK(x.compute_by_phase_s == y.compute_by_phase_s);
        CHECK(x.tp_exposed_s == y.tp_exposed_s);
        CHECK(x.tp_wait_s == y.tp_wait_s);
        CHECK(x.cp_exposed_s == y.cp_exposed_s);
        CHECK(x.cp_wait_s == y.cp_wait_s);
        CHECK(x.ep_exposed_s == y.ep_exposed_s);
        CHECK(x.ep_wait_s == y.ep_wait_s);
        CHECK(x.pp_exposed_s == y.pp_exposed_s);
        CHECK(x.bubble_s == y.bubble_s);
        CHECK(x.dp_exposed_s == y.dp_exposed_s);
        CHECK(x.dp_wait_s == y.dp_wait_s);
        CHECK(x.idle_s == y.idle_s);
        CHECK(x.finish_s == y.finish_s);
    }
    CHECK(a.caused_wait_s == b.caused_wait_s);
    REQUIRE(a.link_bytes.size() == b.link_bytes.size());
    for (std::size_t k = 0; k < a.link_bytes.size(); ++k)
        CHECK(a.link_bytes[k] == b.link_bytes[k]);
}

/// Bytes and count of stage 0's kernels whose name starts with `prefix` (and not with `skip_prefix`, when
/// given), forward-named (forward and recompute) or backward ("_bwd" in the name).
inline double stage0_kernel_bytes(const Program& p, const std::string& prefix, bool backward, int* count,
                                  const std::string& skip_prefix = "") {
    double bytes = 0;
    *count = 0;
    for (const Op& op : p.stages[0].ops) {
        if (op.kind != OpKind::compute || op.segment < 0) continue;
        for (const Kernel& k : p.segments[static_cast<std::size_t>(op.segment)].kernels) {
            const std::string name = k.name;
            if (name.rfind(prefix, 0) != 0) continue;
            if (!skip_prefix.empty() && name.rfind(skip_prefix, 0) == 0) continue;
            if ((name.find("_bwd") != std::string::npos) != backward) continue;
            bytes += k.bytes;
            ++*count;
        }
    }
    return bytes;
}

}  // namespace trainsim::test
