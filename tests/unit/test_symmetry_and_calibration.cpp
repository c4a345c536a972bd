#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>

#include "test_helpers.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;
using trainsim::test::small_gpt;
using trainsim::test::small_topology;

namespace {
ExecutionResult run(const TopologySpec& t, const ModelSpec& m, const Layout& l, bool fold,
                    bool private_tp = true) {
    const Cluster c(t);
    Program p = build_program(m, l);
    assign_durations(p, ComputeModel(c.gpu(), l.precision));
    ExecutionOptions o;
    o.fold_tp_groups = fold;
    o.private_tp_links = private_tp;
    return execute(c, l, p, {}, o);
}

/// The layout's program run with local ops ahead and event by event (ExecutionOptions::run_local_ops_ahead):
/// the same step time, the same accounts on every rank and the same flows. Returns both results.
std::pair<ExecutionResult, ExecutionResult> check_ahead_matches_events(const TopologySpec& topo,
                                                                       const ModelSpec& m, const Layout& l) {
    const Cluster c(topo);
    Program p = build_program(m, l);
    assign_durations(p, ComputeModel(c.gpu(), l.precision));
    ExecutionOptions event_by_event;
    event_by_event.run_local_ops_ahead = false;
    auto ahead = execute(c, l, p, {});
    auto events = execute(c, l, p, {}, event_by_event);
    CHECK(ahead.step_time_s == events.step_time_s);
    REQUIRE(ahead.ranks.size() == events.ranks.size());
    for (std::size_t r = 0; r < ahead.ranks.size(); ++r) {
        const RankTimes& a = ahead.ranks[r];
        const RankTimes& e = events.ranks[r];
        CHECK(a.compute_s == e.compute_s);
        CHECK(a.tp_exposed_s == e.tp_exposed_s);
        CHECK(a.cp_exposed_s == e.cp_exposed_s);
        CHECK(a.pp_exposed_s == e.pp_exposed_s);
        CHECK(a.bubble_s == e.bubble_s);
        CHECK(a.dp_exposed_s == e.dp_exposed_s);
        CHECK(a.idle_s == e.idle_s);
        CHECK(a.finish_s == e.finish_s);
        CHECK(a.compute_by_phase_s == e.compute_by_phase_s);
    }
    CHECK(ahead.flows == events.flows);
    return {std::move(ahead), std::move(events)};
}
}  // namespace

TEST_CASE("executor: folding TP groups gives the same step time as simulating every GPU") {
    // Layouts that exercise TP collectives, P2P with scatter-gather, DP buckets, the distributed optimizer,
    // interleaving and sequence parallelism, on nodes whose NICs are shared (4 NICs for 8 GPUs).
    struct Case {
        int tp, pp, dp, vpp;
        bool sp, dist_opt;
        int nics;
    };
    for (const Case& k : {Case{2, 2, 4, 1, false, false, 8}, Case{4, 2, 2, 1, true, true, 8},
                          Case{2, 2, 4, 2, false, true, 4}, Case{8, 2, 1, 1, true, false, 4}}) {
        CAPTURE(k.tp);
        CAPTURE(k.vpp);
        Layout l;
        l.tp = k.tp;
        l.pp = k.pp;
        l.dp = k.dp;
        l.vpp = k.vpp;
        l.micro_batch = 1;
        l.global_batch = 4 * k.dp;
        l.sequence_parallel = k.sp;
        l.distributed_optimizer = k.dist_opt;
        l.overlap_grad_reduce = k.dist_opt;
        l.overlap_param_gather = k.dist_opt;
        const auto topo = small_topology(2, 8, k.nics);
        const auto folded = run(topo, small_gpt(), l, true);
        const auto full = run(topo, small_gpt(), l, false);
        CHECK(folded.step_time_s == full.step_time_s);
        CHECK(folded.events < full.events);
    }
}

TEST_CASE("executor: TP collectives timed in closed form on a node's private NVLink give the same result") {
    // tp == GPUs per node: the TP group owns its node's NVLink; the shortcut must not change any time, on
    // A100 (ring) and H100 (NVLS all-reduce for large messages), with pipeline, DP, SP and interleaving
    // around it.
    for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB"})
        for (bool sp : {false, true}) {
            CAPTURE(gpu);
            CAPTURE(sp);
            Layout l;
            l.tp = 8;
            l.pp = 2;
            l.dp = 2;
            l.vpp = 2;
            l.global_batch = 8;
            l.sequence_parallel = sp;
            l.distributed_optimizer = true;
            l.overlap_grad_reduce = true;
            auto topo = small_topology(4, 8, 8);
            topo.gpu = gpu;
            const ModelSpec m = small_gpt(8, 4096, 32, 8192, 32000);  // TP all-reduces of 64 MB: NVLS on H100
            const auto fast = run(topo, m, l, true, true);
            const auto flows = run(topo, m, l, true, false);
            CHECK(fast.step_time_s == flows.step_time_s);
            REQUIRE(fast.ranks.size() == flows.ranks.size());
            for (std::size_t r = 0; r < fast.ranks.size(); ++r) {
                CHECK(fast.ranks[r].tp_exposed_s == flows.ranks[r].tp_exposed_s);
                CHECK(fast.ranks[r].bubble_s == flows.ranks[r].bubble_s);
                CHECK(fast.ranks[r].dp_exposed_s == flows.ranks[r].dp_exposed_s);
            }
            CHECK(fast.flows == flows.flows);
            CHECK(fast.events < flows.events);
        }
}

TEST_CASE("executor: running compute and private TP collectives ahead gives the same result") {
    // tp == GPUs per node with folding: a unit's compute and TP collectives between two P2P / DP / CP /
    // tied-embedding ops are timed at once and resumed by one event. Every rank's accounts must be the same
    // as event by event, across schedules, interleaving, SP, TP overlap, recomputation, CP, ZeRO-3 and the
    // distributed optimizer, on A100 (ring) and H100 (NVLS all-reduces of 64 MB).
    struct Case {
        int pp, dp, cp, vpp;
        bool sp, dist_opt, tp_overlap;
        Recompute recompute;
        Schedule schedule;
        int zero;
    };
    const Case cases[] = {
        {2, 2, 1, 2, true, true, false, Recompute::none, Schedule::one_f_one_b, 0},
        {2, 2, 1, 1, false, false, true, Recompute::full, Schedule::one_f_one_b, 0},
        {4, 1, 1, 1, true, true, true, Recompute::selective, Schedule::gpipe, 0},
        {1, 2, 2, 1, true, false, false, Recompute::none, Schedule::one_f_one_b, 0},
        {1, 4, 1, 1, false, false, false, Recompute::none, Schedule::one_f_one_b, 3},
    };
    for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB"})
        for (const Case& k : cases) {
            CAPTURE(gpu);
            CAPTURE(k.pp);
            CAPTURE(k.cp);
            CAPTURE(k.zero);
            Layout l;
            l.tp = 8;
            l.pp = k.pp;
            l.dp = k.dp;
            l.cp = k.cp;
            l.vpp = k.vpp;
            l.global_batch = 8 * k.dp;
            l.sequence_parallel = k.sp;
            l.distributed_optimizer = k.dist_opt;
            l.overlap_grad_reduce = k.dist_opt;
            l.overlap_param_gather = k.dist_opt;
            l.tp_comm_overlap = k.tp_overlap;
            l.recompute = k.recompute;
            l.schedule = k.schedule;
            l.zero_stage = k.zero;
            auto topo = small_topology(4, 8, 8);
            topo.gpu = gpu;
            const auto [ahead, events] =
                check_ahead_matches_events(topo, small_gpt(8, 4096, 32, 8192, 32000), l);
            CHECK(ahead.events < events.events);
        }
}

TEST_CASE("executor: a TP group smaller than its node runs ahead only while its NVLink ports are its own") {
    // tp < GPUs per node: DP rings (and CP collectives) hop between GPUs of one node, on the same NVLink
    // ports as the TP collectives. A unit runs its local ops ahead with private TP timings only while it is
    // engaged on no DP collective; the result must be the event-by-event one bit for bit, with DP buckets
    // overlapping the backward (the DP flows share the TP links then), interleaving, SP, TP overlap and CP.
    // With PP peers inside a node (P2P on the TP links) the shortcut declines.
    struct Case {
        int tp, pp, dp, cp, vpp, nodes;
        bool tp_overlap;
        bool engages;
    };
    const Case cases[] = {
        {4, 2, 2, 1, 1, 2, false, true},   // MLPerf GPT-3's shape: TP 4 per half node, DP hop 0 <-> 4
        {4, 2, 2, 1, 2, 2, true, true},    // interleaved, TP overlap
        {2, 2, 4, 1, 1, 2, false, true},   // four TP groups per node
        {2, 2, 2, 2, 1, 2, false, true},   // CP 2 inside the node, on the TP stream
        {2, 2, 2, 1, 1, 1, false, false},  // PP peers in one node: declines
    };
    for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB"})
        for (const Case& k : cases) {
            CAPTURE(gpu);
            CAPTURE(k.tp);
            CAPTURE(k.cp);
            CAPTURE(k.vpp);
            Layout l;
            l.tp = k.tp;
            l.pp = k.pp;
            l.dp = k.dp;
            l.cp = k.cp;
            l.vpp = k.vpp;
            l.global_batch = 8 * k.dp;
            l.sequence_parallel = true;
            l.distributed_optimizer = true;
            l.overlap_grad_reduce = true;
            l.overlap_param_gather = true;
            l.tp_comm_overlap = k.tp_overlap;
            auto topo = small_topology(k.nodes, 8, 8);
            topo.gpu = gpu;
            const auto [ahead, events] =
                check_ahead_matches_events(topo, small_gpt(8, 4096, 32, 8192, 32000), l);
            CHECK(ahead.ran_ahead == k.engages);
            if (k.engages) CHECK(ahead.events < events.events);
        }
}

TEST_CASE(
    "executor: an unfolded TP group smaller than its node runs ahead together where no DP collective is "
    "outstanding") {
    // MoE with expert TP 1 != TP 2: folding declines (the members' EP and expert-DP groups differ), so each
    // TP group runs its local ops ahead together (run_group_ahead) from the ops where, by the program's
    // structure, every DP collective launched before has been waited for and no EP collective is on the TP
    // stream (after the wait for a dispatch or combine). The DP rings and the EP all-to-all hop between the
    // node's GPUs on the TP links; every output must be the event-by-event one bit for bit: step time, every
    // rank's accounts, the waiting caused and the bytes on every link.
    // (With overlap_param_gather the first forward of an MoE layer waits for its expert bucket's all-gather,
    // as Megatron-Core's forward pre-hook does; before 2026-11-29 that gather was waited for only at the end
    // of the step, so in a stage of one model chunk a group there never started running ahead.)
    struct Case {
        int tp, pp, dp, ep, vpp;
        bool overlap_param_gather;
        const char* gpu;
    };
    const Case cases[] = {
        {2, 2, 4, 4, 1, false, "H100-SXM5-80GB"},  // Qwen3-235B's shape in small: TP 2, ETP 1, EP 4 per node
        {2, 2, 4, 8, 2, true,
         "H100-SXM5-80GB"},  // EP 8 over the node, interleaved, parameters gathered early
        {4, 2, 2, 4, 1, false, "A100-SXM4-80GB"},  // TP 4, ETP 1: two TP groups per node
    };
    ModelSpec m = small_gpt(4, 1024, 16, 512);
    m.tied_embeddings = false;
    m.num_experts = 8;
    m.moe_top_k = 2;
    m.moe_ffn_hidden = 1024;
    m.moe_first_dense_layers = 1;
    for (const Case& k : cases) {
        CAPTURE(k.tp);
        CAPTURE(k.ep);
        CAPTURE(k.vpp);
        Layout l;
        l.tp = k.tp;
        l.pp = k.pp;
        l.dp = k.dp;
        l.ep = k.ep;
        l.etp = 1;
        l.vpp = k.vpp;
        l.micro_batch = 1;
        l.global_batch = 8 * k.dp;
        l.sequence_parallel = true;
        l.distributed_optimizer = true;
        l.overlap_grad_reduce = true;
        l.overlap_param_gather = k.overlap_param_gather;
        auto topo = small_topology(2, 8, 8);  // PP peers in the other node: no P2P on the TP links
        topo.gpu = k.gpu;
        const Cluster c(topo);
        Program p = build_program(m, l);
        assign_durations(p, ComputeModel(c.gpu(), l.precision));
        ExecutionScenario attributed;
        attributed.attribute = true;
        ExecutionOptions event_by_event;
        event_by_event.run_local_ops_ahead = false;
        const auto ahead = execute(c, l, p, {}, {}, attributed);
        const auto events = execute(c, l, p, {}, event_by_event, attributed);
        CHECK_FALSE(ahead.tp_folded);
        CHECK(ahead.ran_ahead);
        CHECK_FALSE(events.ran_ahead);
        CHECK(ahead.events < events.events);
        test::check_identical(ahead, events);
    }
}

TEST_CASE("calibration: constants override the catalog for their GPU only, and bad files are refused") {
    const auto j = nlohmann::json::parse(R"({"format": "trainsim-calibration/1", "source": "test",
        "gpus": {"A100-SXM4-80GB": {"gemm_max_efficiency": 0.5, "hbm_efficiency": 0.6}}})");
    const Calibration c = parse_calibration(j, "cal.json");
    const GpuSpec a100 = apply_calibration(c, find_gpu("A100-SXM4-80GB", "t"));
    CHECK(a100.gemm_max_efficiency == 0.5);
    CHECK(a100.hbm_efficiency == 0.6);
    CHECK(a100.nvlink_efficiency == find_gpu("A100-SXM4-80GB", "t").nvlink_efficiency);
    const GpuSpec h100 = apply_calibration(c, find_gpu("H100-SXM5-80GB", "t"));
    CHECK(h100.gemm_max_efficiency == find_gpu("H100-SXM5-80GB", "t").gemm_max_efficiency);

    // A slower GEMM makes the simulated step slower.
    TopologySpec t = small_topology(1);
    Layout l;
    l.tp = 8;
    l.global_batch = 4;
    const double before = run(t, small_gpt(), l, true).step_time_s;
    apply_calibration(c, t);
    REQUIRE(t.gpu_calibrated.has_value());
    CHECK(run(t, small_gpt(), l, true).step_time_s > before);

    auto bad = [](const char* text) {
        return message_of<InputError>([&] { parse_calibration(nlohmann::json::parse(text), "cal.json"); });
    };
    CHECK(contains(bad(R"({"format": "trainsim-calibration/1", "source": "x",
                          "gpus": {"A100-SXM4-80GB": {"gemm_efficiency": 0.5}}})"),
                   "gpus.A100-SXM4-80GB.gemm_efficiency"));
    CHECK(contains(bad(R"({"format": "trainsim-calibration/1", "source": "x",
                          "gpus": {"A100-SXM4-80GB": {"hbm_efficiency": 1.5}}})"),
                   "at most 1"));
    CHECK(contains(bad(R"({"format": "trainsim-calibration/1", "source": "x", "gpus": {"V100": {}}})"),
                   "V100"));
}

TEST_CASE(
    "measured runs: cluster, framework defaults by GPU generation, uneven split, unsupported features") {
    auto run_json = [](const char* gpu, int layers, int pp, int cp, int zero) {
        nlohmann::json r = {
            {"id", "r1"},
            {"source", "test"},
            {"cluster",
             {{"gpu", gpu},
              {"gpus", 8 * pp},
              {"gpus_per_node", 8},
              {"scale_up", {{"kind", "nvswitch"}, {"bandwidth_GBps_per_gpu", 300}}},
              {"scale_out", {{"kind", "infiniband"}, {"nics_per_node", 4}, {"nic_Gbps", 100}}}}},
            {"model",
             {{"layers", layers},
              {"hidden", 1024},
              {"heads", 16},
              {"kv_heads", 16},
              {"ffn_hidden", 4096},
              {"vocab", 8192},
              {"seq_len", 512},
              {"mlp", "gelu"}}},
            {"training",
             {{"tp", 8 / cp},
              {"pp", pp},
              {"dp", 1},
              {"cp", cp},
              {"vpp", nullptr},
              {"micro_batch", 1},
              {"global_batch", 8},
              {"sequence_parallel", true},
              {"recompute", "none"},
              {"zero_stage", zero},
              {"distributed_optimizer", true},
              {"precision", "bf16"}}},
            {"measured", {{"step_time_s", 1.0}, {"peak_memory_GiB", nullptr}}}};
        return nlohmann::json{{"format", "trainsim-measured-runs/1"}, {"runs", {r}}};
    };
    const auto a = parse_measured_runs(run_json("A100-SXM4-80GB", 8, 2, 1, 0), "f.json").runs.at(0);
    CHECK(a.topology.nodes == 2);
    CHECK(a.topology.nics_per_node == 4);
    CHECK(a.topology.nic_bandwidth.bytes_per_s == doctest::Approx(12.5e9));
    CHECK(a.layout.framework == Framework::megatron);
    CHECK(a.layout.attention == AttentionKernel::unfused);  // Megatron before Hopper: fused softmax
    CHECK(a.layout.overlap_grad_reduce);
    CHECK(a.layout.tp_comm_overlap);  // keyed on the framework (Megatron with SP), not the GPU
    CHECK_FALSE(a.unsupported.has_value());
    const auto h = parse_measured_runs(run_json("H100-SXM5-80GB", 8, 2, 1, 0), "f.json").runs.at(0);
    CHECK(h.layout.attention == AttentionKernel::cudnn);  // TE's FusedAttention on sm90+
    CHECK(h.layout.tp_comm_overlap);
    // 10 layers on 3 stages: embedding and head count as layers -> 3, 4, 3 (Megatron: account_for_*).
    const auto u = parse_measured_runs(run_json("A100-SXM4-80GB", 10, 3, 1, 0), "f.json").runs.at(0);
    CHECK(u.layout.layers_per_stage.empty());
    CHECK(u.layout.account_for_embedding_in_pipeline_split);
    CHECK(u.layout.account_for_loss_in_pipeline_split);
    CHECK(layers_on_stage(u.model, u.layout, 0) == 3);
    CHECK(layers_on_stage(u.model, u.layout, 1) == 4);
    CHECK(layers_on_stage(u.model, u.layout, 2) == 3);
    // DeepSpeed (zero_stage 1): the same rule as an explicit layers_per_stage.
    const auto ud = parse_measured_runs(run_json("A100-SXM4-80GB", 10, 3, 1, 1), "f.json").runs.at(0);
    CHECK(ud.layout.layers_per_stage == std::vector<std::int64_t>{3, 4, 3});
    // Context parallelism is simulated: parsed as a layout with cp = 2 (tp = 4), nothing unsupported.
    const auto cpr = parse_measured_runs(run_json("H100-SXM5-80GB", 8, 2, 2, 0), "f.json").runs.at(0);
    CHECK_FALSE(cpr.unsupported);
    CHECK(cpr.layout.cp == 2);
    CHECK_FALSE(parse_measured_runs(run_json("A100-SXM4-80GB", 8, 2, 1, 3), "f.json").runs.at(0).unsupported);
    auto j = run_json("A100-SXM4-80GB", 8, 2, 1, 0);
    j["runs"][0]["training"]["tpp"] = 2;
    // A malformed row is that row's error, not the file's.
    const auto bad_row = parse_measured_runs(j, "f.json").runs.at(0);
    REQUIRE(bad_row.error);
    const std::string msg = *bad_row.error;
    CHECK(contains(msg, "f.json"));
    CHECK(contains(msg, "run \"r1\""));
    CHECK(contains(msg, "training.tpp"));
}
