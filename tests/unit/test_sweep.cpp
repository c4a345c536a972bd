#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../../sim/sweep/sweep_internal.hpp"  // has_signature: internal to the sweep
#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

/// The layout fields the sweep keeps from the workload: bf16, flash attention, 1F1B.
Layout base_layout(std::int64_t global_batch) {
    Layout l;
    l.global_batch = global_batch;
    return l;
}

SweepGrid grid_of(std::initializer_list<const char*> restrictions) {
    SweepGrid g;
    for (const char* r : restrictions)
        restrict_sweep_grid(g, r, "--vary");
    return g;
}

const SweepEntry* find_entry(const SweepResult& r, const std::string& canonical) {
    for (const auto& e : r.entries)
        if (canonical_string(e.layout) == canonical) return &e;
    return nullptr;
}

}  // namespace

TEST_CASE(
    "sweep: the default grid skips duplicate points (vpp > 1 with pp = 1, sequence parallel with tp = 1)") {
    const ModelSpec m = trainsim::test::small_gpt(8);  // 8 layers: pp in {1, 2, 4, 8}
    const auto layouts = enumerate_layouts(m, base_layout(32), SweepGrid{}, 16, 8);
    // tp x sp: 1 + 3 x 2 = 7; pp x vpp: 1 + 3 x 3 = 10; micro_batch 4, recompute 3, distributed optimizer 2.
    CHECK(layouts.size() == 7u * 10u * 4u * 3u * 2u);
    for (const auto& l : layouts) {
        CHECK_FALSE((l.vpp > 1 && l.pp == 1));
        CHECK_FALSE((l.sequence_parallel && l.tp == 1));
        CHECK(l.zero_stage == 0);
        CHECK(l.dp == (16 % (l.tp * l.pp) == 0 ? 16 / (l.tp * l.pp) : 0));
    }
    // Enumeration order: tp outermost, distributed_optimizer innermost.
    CHECK(canonical_string(layouts[0]) == "tp1 pp1 dp16 cp1 mb1 vpp1 rc=none sp0 do0");
    CHECK(canonical_string(layouts[1]) == "tp1 pp1 dp16 cp1 mb1 vpp1 rc=none sp0 do1");
    CHECK(layouts.back().tp == 8);
}

TEST_CASE(
    "sweep: a point of another recompute granularity drops the base's selective modules or full block "
    "count") {
    // The base recomputes MLA's up-projections (selective, as workloads/deepseek-v3.json): its none and full
    // points are valid layouts without them, its selective points keep them.
    const ModelSpec m = trainsim::test::dense_mla();
    Layout base = base_layout(8);
    base.recompute = Recompute::selective;
    base.recompute_mla_up_proj = true;
    base.recompute_modules.layernorm = true;
    const auto layouts = enumerate_layouts(m, base, grid_of({"tp=1", "pp=1", "micro_batch=1"}), 8, 8);
    REQUIRE(layouts.size() == 3u * 2u);  // recompute x distributed_optimizer
    for (const auto& l : layouts) {
        CAPTURE(canonical_string(l));
        const bool selective = l.recompute == Recompute::selective;
        CHECK(l.recompute_mla_up_proj == selective);
        CHECK(l.recompute_modules.layernorm == selective);
        CHECK(reject_reason(m, l, 8).empty());
    }
    // A base of full recompute of the first N layers: the block count stays only on its full points.
    Layout full = base_layout(8);
    full.recompute = Recompute::full;
    full.recompute_num_layers = 1;
    for (const auto& l : enumerate_layouts(m, full, grid_of({"tp=1", "pp=1", "micro_batch=1"}), 8, 8)) {
        CAPTURE(canonical_string(l));
        CHECK(l.recompute_num_layers == (l.recompute == Recompute::full ? 1 : 0));
        CHECK(reject_reason(m, l, 8).empty());
    }
}

TEST_CASE(
    "sweep: the base's pipeline_layout and layers_per_stage are held only at its pp and vpp (round 10)") {
    // Each layout copied them and cleared them at another pp or vpp, keeping their capacity: a
    // 65,000-character pipeline_layout cost 64 KB in every layout (1.5 GB for 23,000). A layers_per_stage of
    // another length than pp (check_layout refuses it) is refused at once: 6 M entries passed 25 s.
    const ModelSpec m = trainsim::test::small_gpt(8);
    Layout base = base_layout(32);
    base.pp = 2;
    base.vpp = 1;
    base.pipeline_layout = std::string(5000, 't');
    std::size_t kept = 0;
    for (const auto& l : enumerate_layouts(m, base, SweepGrid{}, 16, 8)) {
        const bool at_base = l.pp == 2 && l.vpp == 1;
        CHECK(l.pipeline_layout.size() == (at_base ? 5000u : 0u));
        if (!at_base) CHECK(l.pipeline_layout.capacity() < 5000u);
        kept += at_base ? 1 : 0;
    }
    CHECK(kept > 0);
    Layout split = base_layout(32);
    split.pp = 2;
    split.layers_per_stage = {3, 5};
    for (const auto& l : enumerate_layouts(m, split, SweepGrid{}, 16, 8)) {
        CHECK(l.layers_per_stage.size() == (l.pp == 2 ? 2u : 0u));
        if (l.pp != 2) CHECK(l.layers_per_stage.capacity() == 0u);
    }
    split.layers_per_stage = {2, 2, 4};
    CHECK(message_of<InputError>([&] { enumerate_layouts(m, split, SweepGrid{}, 16, 8); }) ==
          "sweep: layout.layers_per_stage has 3 entries; layout.pp = 2");
}

TEST_CASE("sweep: the default tp stops at 8 in an NVLink domain of 72 (GB200 NVL72); --vary reaches beyond") {
    const ModelSpec m = trainsim::test::small_gpt(8);
    auto tps = [&](const SweepGrid& grid, int gpus, int gpus_per_node) {
        std::vector<int> out;
        for (const auto& l : enumerate_layouts(m, base_layout(32), grid, gpus, gpus_per_node))
            if (std::find(out.begin(), out.end(), l.tp) == out.end()) out.push_back(l.tp);
        return out;
    };
    CHECK(kSweepMaxDefaultTp == 8);
    CHECK(tps(SweepGrid{}, 576, 72) == std::vector<int>{1, 2, 4, 8});
    CHECK(tps(SweepGrid{}, 64, 4) == std::vector<int>{1, 2, 4});  // a host of 4 still bounds it
    CHECK(tps(SweepGrid{}, 4, 8) == std::vector<int>{1, 2, 4});   // and the cluster size
    SweepGrid wide;
    restrict_sweep_grid(wide, "tp=8,16", "--vary");
    CHECK(tps(wide, 576, 72) == std::vector<int>{8, 16});
}

TEST_CASE("sweep: --fix / --vary restrict a dimension; unknown keys and bad values are refused") {
    SweepGrid g;
    restrict_sweep_grid(g, "tp=8", "--fix");
    restrict_sweep_grid(g, "recompute=full,none", "--vary");
    restrict_sweep_grid(g, "sequence_parallel=true", "--fix");
    CHECK(g.tp == std::vector<int>{8});
    CHECK(g.recompute == std::vector<Recompute>{Recompute::none, Recompute::full});
    CHECK(g.sequence_parallel == std::vector<bool>{true});

    auto err = [](const char* a, const char* opt) {
        SweepGrid fresh;
        return message_of<InputError>([&] { restrict_sweep_grid(fresh, a, opt); });
    };
    const auto unknown = err("tensor_parallel=8", "--fix");
    CHECK_MESSAGE(contains(unknown, "unknown key \"tensor_parallel\""), unknown);
    CHECK_MESSAGE(unknown.find('\n') == std::string::npos, unknown);
    CHECK(contains(err("tp=4,8", "--fix"), "--fix takes one value"));
    CHECK(contains(err("tp=0", "--vary"), "not a positive integer"));
    CHECK(contains(err("tp=x", "--vary"), "not a positive integer"));
    CHECK(contains(err("sequence_parallel=yes", "--fix"), "not true or false"));
    CHECK(contains(err("recompute=some", "--fix"), "none, selective, selective_op, full"));
    CHECK(contains(err("tp", "--fix"), "expected key=value"));
    CHECK(contains(message_of<InputError>([&] { restrict_sweep_grid(g, "tp=4", "--vary"); }), "twice"));
}

TEST_CASE("sweep: reject reasons of constructed layouts") {
    const ModelSpec m = trainsim::test::small_gpt(8, 1024, 16);  // 16 heads, ffn 4096, seq 512
    Layout ok = base_layout(32);
    ok.tp = 2;
    ok.pp = 2;
    ok.dp = 4;
    CHECK(reject_reason(m, ok, 16) == "");

    Layout l = ok;
    l.tp = 3;  // 3 x 2 x 4 = 24 GPUs; 3 does not divide 16 heads
    l.dp = 4;
    CHECK(reject_reason(m, l, 24) == "tp does not divide heads");

    l = ok;
    l.dp = 0;  // what enumerate_layouts gives when tp*pp*cp does not divide the GPUs
    CHECK(reject_reason(m, l, 16) == "tp*pp*cp does not divide the GPUs");

    l = ok;
    l.cp = 2;
    l.dp = 2;
    CHECK(reject_reason(m, l, 16) == "");  // context parallelism: 2 x 2 chunks of the 512 tokens
    l.attention = AttentionKernel::unfused;
    CHECK(reject_reason(m, l, 16) == "cp > 1 needs flash attention and no sliding window");
    CHECK(reject_reason(trainsim::test::small_gpt(8, 1024, 16, 510), l, 16) ==
          "2*cp does not divide seq_len");

    l = ok;
    l.global_batch = 10;  // not a multiple of micro_batch 1 x dp 4
    CHECK(reject_reason(m, l, 16) == "global_batch not divisible by micro_batch*dp");

    const ModelSpec m9 = trainsim::test::small_gpt(9);
    CHECK(reject_reason(m9, ok, 16) == "pp does not divide layers");

    l = ok;
    l.vpp = 3;  // 4 layers per stage
    CHECK(reject_reason(m, l, 16) == "vpp does not divide the layers per stage");

    l = ok;
    l.vpp = 2;
    l.global_batch = 4;  // 1 micro-batch per pipeline: interleaving needs a multiple of pp = 2
    CHECK(reject_reason(m, l, 16) == "vpp > 1: micro-batches not a multiple of pp");
}

TEST_CASE("sweep: rejects counted by reason, out-of-memory layouts by their largest pile") {
    const TopologySpec topo = trainsim::test::small_topology(1);  // 8 x A100-80GB
    SweepOptions opt;
    opt.jobs = 2;
    {
        const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
        const auto r = run_sweep(topo, m, base_layout(16),
                                 grid_of({"tp=1,3", "pp=1", "micro_batch=1,3", "recompute=none",
                                          "sequence_parallel=false", "distributed_optimizer=false"}),
                                 "tiny", opt);
        // tp 3: does not divide the 8 GPUs first; micro_batch 3 with dp 8: 16 is not a multiple of 24.
        CHECK(r.simulated == 1);
        CHECK(r.rejected == 3);
        REQUIRE(r.reject_counts.size() == 2);
        CHECK(r.reject_counts[0] ==
              std::pair<std::string, std::size_t>{"tp*pp*cp does not divide the GPUs", 2});
        CHECK(r.reject_counts[1] ==
              std::pair<std::string, std::size_t>{"global_batch not divisible by micro_batch*dp", 1});
    }
    {
        // GPT-3 175B on one node with TP 8: 175e9 / 8 parameters per GPU x (2 + 4 + 12) B = 394 GB > 80 GB,
        // the optimizer state (12 B per parameter, not sharded with dp = 1) the largest pile.
        const ModelSpec m = trainsim::test::gpt3_175b();
        const auto r =
            run_sweep(topo, m, base_layout(8),
                      grid_of({"tp=8", "pp=1", "micro_batch=1", "recompute=full", "sequence_parallel=true"}),
                      "gpt3", opt);
        CHECK(r.simulated == 0);
        CHECK(r.out_of_memory == 2);
        REQUIRE(r.reject_counts.size() == 1);
        CHECK(r.reject_counts[0].first == "out of memory: optimizer state largest");
        CHECK(r.entries[0].peak_memory_bytes > 80e9 * 4);
    }
}

TEST_CASE("sweep: a tiny model on one node is best with pp = 1 and no tensor parallelism") {
    // 8 GPUs on one NVSwitch node, a 4-layer model of hidden 256. Every layout does the same FLOPs per GPU;
    // pipeline parallelism only adds a bubble ((p-1)/m of the compute with m = 2 micro-batches per pipeline
    // here) and P2P hops, tensor parallelism splits already small GEMMs further (lower efficiency, more
    // kernel overhead per FLOP) and adds two latency-bound all-reduces per layer and pass, while data
    // parallelism adds one all-reduce of 4 MB of fp32 gradients over NVLink, overlapped with nothing but tiny
    // next to the rest. So the winner is TP 1 x PP 1 x DP 8.
    const TopologySpec topo = trainsim::test::small_topology(1);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    SweepOptions opt;
    opt.jobs = 2;
    const auto r = run_sweep(topo, m, base_layout(16),
                             grid_of({"micro_batch=1", "recompute=none", "sequence_parallel=false",
                                      "distributed_optimizer=false"}),
                             "tiny", opt);
    REQUIRE(r.simulated > 4);
    const auto& best = r.entries.front();
    CHECK(best.status == SweepStatus::simulated);
    CHECK(canonical_string(best.layout) == "tp1 pp1 dp8 cp1 mb1 vpp1 rc=none sp0 do0");
    // Every layout with pp > 1 is slower than the best layout with pp = 1 and the same tp.
    for (const auto& e : r.entries) {
        if (e.status != SweepStatus::simulated || e.layout.pp == 1) continue;
        const SweepEntry* flat = find_entry(
            r, fmt::format("tp{} pp1 dp{} cp1 mb1 vpp1 rc=none sp0 do0", e.layout.tp, 8 / e.layout.tp));
        REQUIRE(flat != nullptr);
        CHECK_MESSAGE(flat->report.step_time_s < e.report.step_time_s, canonical_string(e.layout));
    }
    // Ranked by step time.
    for (std::size_t i = 1; i < r.simulated; ++i)
        CHECK(r.entries[i - 1].report.step_time_s <= r.entries[i].report.step_time_s);
}

TEST_CASE("sweep: the ranking and the CSV do not depend on the number of threads") {
    const TopologySpec topo = trainsim::test::small_topology(2);  // 16 GPUs on 2 nodes
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    const SweepGrid g = grid_of({"micro_batch=1,2", "recompute=none,full", "vpp=1,2"});
    SweepOptions one;
    one.jobs = 1;
    SweepOptions two;
    two.jobs = 2;
    std::size_t calls = 0, last_done = 0, to_simulate = 0;
    two.progress = [&](const SweepProgress& p) {
        ++calls;
        to_simulate = p.to_simulate;
        const std::size_t done = p.checked + p.simulated;
        CHECK(p.simulated <= p.to_simulate);
        if (p.checks_done && p.simulated == 0) {  // the call that announces the simulations
            CHECK(p.checked == p.layouts);
            CHECK(done == last_done);
        } else {
            CHECK(done == last_done + 1);  // serialized, one step at a time
        }
        last_done = done;
    };
    const auto a = run_sweep(topo, m, base_layout(16), g, "tiny", one);
    const auto b = run_sweep(topo, m, base_layout(16), g, "tiny", two);
    // Points with identical programs are simulated once (to_simulate counts the distinct ones).
    CHECK(calls == b.entries.size() + 1 + to_simulate);
    CHECK(to_simulate <= b.simulated);
    REQUIRE(a.simulated > 10);
    CHECK(sweep_csv(a) == sweep_csv(b));
    CHECK(sweep_json(a).dump() == sweep_json(b).dump());
    CHECK(format_sweep_text(a, 5) == format_sweep_text(b, 5));
    // The CSV holds a header and one row per grid point.
    const auto csv = sweep_csv(a);
    CHECK(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')) == a.entries.size() + 1);
}

TEST_CASE("sweep: a precision or FP8 recipe the GPU lacks is the input's error, not every layout's") {
    // The grid varies neither: before, each layout was rejected or, pruning, counted out of memory before
    // its program was built, and the sweep ended "no layout fits" (exit 3).
    TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 16;
    base.precision = Precision::fp8;
    SweepOptions o;
    o.prune_beyond_top = 3;
    CHECK_THROWS_WITH_AS(
        run_sweep(topo, m, base, SweepGrid{}, "tiny", o),
        "layout.precision = \"fp8\" is not supported by GPU A100-SXM4-80GB: it has no FP8 tensor cores",
        InputError);
    topo.gpu = "H100-SXM5-80GB";
    base.fp8_recipe = Fp8Recipe::mxfp8;
    CHECK_THROWS_AS(run_sweep(topo, m, base, SweepGrid{}, "tiny", o), InputError);
    base.fp8_recipe = Fp8Recipe::tensorwise;
    CHECK(run_sweep(topo, m, base, SweepGrid{}, "tiny", o).simulated > 0);
}

TEST_CASE("sweep: what limits a layout, from its breakdown") {
    const TopologySpec topo = trainsim::test::small_topology(128);
    Report r;
    r.layout.tp = 8;
    r.layout.pp = 16;
    r.layout.dp = 8;
    r.layout.global_batch = 96;  // 12 micro-batches per pipeline
    r.step_time_s = 10.0;
    r.compute_s = 7.0;
    r.bubble_s = 1.8;
    r.tp_exposed_s = 0.8;
    r.dp_exposed_s = 0.4;
    CHECK(explain_limit(r, topo) == "bubble 18%: 12 micro-batches on 16 stages");
    r.layout.vpp = 2;
    CHECK(explain_limit(r, topo) == "bubble 18%: 12 micro-batches on 16 stages x 2 chunks");
    r.bubble_s = 0.2;
    r.dp_exposed_s = 2.3;  // DP group of 8 x stride 8 spans 64 GPUs: 8 nodes
    CHECK(explain_limit(r, topo) == "exposed DP 2.3 s (23%) over InfiniBand");
    r.dp_exposed_s = 0.1;
    CHECK(explain_limit(r, topo) == "exposed TP 0.8 s (8%) over NVLink");
    r.layout.cp = 2;  // TP 8 x CP 2 spans 16 GPUs: two nodes
    CHECK(explain_limit(r, topo) == "exposed TP+CP 0.8 s (8%) over InfiniBand");
    r.layout.cp = 1;
    r.layout.tp = 2;
    r.layout.ep = 32;  // mostly EP all-to-alls: their group of 32 spans four nodes, TP's two GPUs one
    r.ep_exposed_s = 0.7;
    CHECK(explain_limit(r, topo) ==
          "exposed TP 0.8 s (8%) over NVLink, of which EP all-to-all 0.7 s over InfiniBand");
    r.layout.ep = 4;
    CHECK(explain_limit(r, topo) ==
          "exposed TP 0.8 s (8%) over NVLink, of which EP all-to-all 0.7 s over NVLink");
    TopologySpec nvl = topo;  // domains of 72: the EP group of ranks 64-95 crosses one
    nvl.gpus_per_node = 72;
    r.layout.ep = 32;
    CHECK(explain_limit(r, nvl) ==
          "exposed TP 0.8 s (8%) over NVLink, of which EP all-to-all 0.7 s over InfiniBand");
    r.layout.ep = 4;
    CHECK(explain_limit(r, nvl) ==
          "exposed TP 0.8 s (8%) over NVLink, of which EP all-to-all 0.7 s over NVLink");
    r.layout.cp = 1;
    r.tp_exposed_s = 0.3;
    r.compute_s = 9.1;
    CHECK(explain_limit(r, topo) == "compute-bound (91%)");
}

TEST_CASE(
    "sweep: layouts with identical programs are simulated once, and the copies equal a full simulation") {
    // With flash attention, selective recomputation recomputes nothing: its program is the same as with no
    // recomputation, so the sweep simulates one of the two and copies the result. The copy must be what a
    // simulation of that layout gives, and its memory is its own.
    const TopologySpec topo = trainsim::test::small_topology(1);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base = base_layout(16);
    base.attention = AttentionKernel::flash;
    SweepOptions opt;
    opt.jobs = 2;
    const auto r = run_sweep(topo, m, base,
                             grid_of({"tp=2", "pp=2", "micro_batch=1", "recompute=none,selective",
                                      "sequence_parallel=false", "distributed_optimizer=false"}),
                             "dedupe", opt);
    const SweepEntry* none = find_entry(r, "tp2 pp2 dp2 cp1 mb1 vpp1 rc=none sp0 do0");
    const SweepEntry* sel = find_entry(r, "tp2 pp2 dp2 cp1 mb1 vpp1 rc=selective sp0 do0");
    REQUIRE(none != nullptr);
    REQUIRE(sel != nullptr);
    REQUIRE(sel->status == SweepStatus::simulated);
    CHECK(sel->report.layout.recompute == Recompute::selective);
    const auto direct = simulate(topo, m, sel->layout, "dedupe");
    CHECK(sel->report.step_time_s == direct.report.step_time_s);
    CHECK(none->report.step_time_s == direct.report.step_time_s);
    CHECK(sel->report.memory.peak().peak_bytes == direct.report.memory.peak().peak_bytes);
}

TEST_CASE("sweep: has_signature(p, sig) is program_signature(p) == sig, without building it") {
    const ModelSpec m = test::small_gpt();
    const Layout a = test::tp2_pp2_dp4(1, 16);
    const Layout b = test::tp2_pp2_dp4(2, 16);  // other micro-batches: another program
    const Program pa = build_program(m, a);
    const Program pb = build_program(m, b);
    const std::string sig = sweep_detail::program_signature(pa);
    CHECK(sweep_detail::has_signature(pa, sig));
    CHECK(sweep_detail::has_signature(build_program(m, a), sig));  // built again: equal
    CHECK_FALSE(sweep_detail::has_signature(pb, sig));
    CHECK(sweep_detail::has_signature(pb, sweep_detail::program_signature(pb)));
    std::string flipped = sig;  // one byte changed, one missing, one extra
    flipped[sig.size() / 2] = static_cast<char>(flipped[sig.size() / 2] ^ 1);
    CHECK_FALSE(sweep_detail::has_signature(pa, flipped));
    CHECK_FALSE(sweep_detail::has_signature(pa, sig.substr(0, sig.size() - 1)));
    CHECK_FALSE(sweep_detail::has_signature(pa, sig + '\0'));
}
