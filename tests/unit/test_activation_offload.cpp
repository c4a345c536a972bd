// Activation offloading to host memory (Layout::activation_offload_layers: Megatron-Core
// --cpu-offloading-num-layers, Transformer Engine's AsyncDoubleBufferGroupOffloadHandler): the window map,
// the memory it frees, the copy waits' exposed time against a hand computation, the layout checks and the
// measured-runs extension.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using namespace trainsim::test;

namespace {

Layout offload_layout(std::int64_t offloaded) {
    Layout l;
    l.dp = 8;
    l.global_batch = 16;
    l.recompute = Recompute::none;
    l.activation_offload_layers = offloaded;
    return l;
}

double stored_forward_peak(const MemoryReport& r) {
    double best = 0;
    for (const auto& s : r.stages.at(0).timeline)
        if (s.phase == MemoryPhase::forward)
            best = std::max(best, s.piles[static_cast<std::size_t>(Pile::activations)]);
    return best;
}

std::vector<const Segment*> segments_named(const Program& p, const std::string& name) {
    std::vector<const Segment*> out;
    for (const auto& s : p.segments)
        if (s.name == name) out.push_back(&s);
    return out;
}

}  // namespace

TEST_CASE("activation offload: the window map is Transformer Engine's layer_window_map") {
    // TE cpu_offload.py: (L // N) * (i + 1) - 1, plus i + 1 for i < L % N, else L % N. By hand:
    // L 80, N 20: 4 (i + 1) - 1 = 3, 7, ..., 79; L 10, N 3: 3, 6, 9; L 126, N 95: 1, 3, ..., 61 (2i + 1 for
    // i < 31), then 62, 63, ..., 125 (i + 31).
    for (int i = 0; i < 20; ++i)
        CHECK(offload_window_layer(80, 20, i) == 4 * (i + 1) - 1);
    CHECK(offload_window_layer(10, 3, 0) == 3);
    CHECK(offload_window_layer(10, 3, 1) == 6);
    CHECK(offload_window_layer(10, 3, 2) == 9);
    CHECK(offload_window_layer(126, 95, 0) == 1);
    CHECK(offload_window_layer(126, 95, 30) == 61);
    CHECK(offload_window_layer(126, 95, 31) == 62);
    CHECK(offload_window_layer(126, 95, 94) == 125);
    for (int i = 0; i < 95; ++i)
        CHECK(offload_window_layer(126, 95, i) > i);
    CHECK_THROWS_AS(offload_window_layer(10, 10, 0), InternalError);
    CHECK_THROWS_AS(offload_window_layer(10, 3, 3), InternalError);
}

TEST_CASE(
    "activation offload: the offloaded layers' stored activations leave the GPU at their window's end") {
    // 8 layers, 4 offloaded: windows 1, 3, 5, 7. The forward's peak is the loss head's, after layer 7's
    // forward, where group 3's copy was waited for: all 4 offloaded layers are on the host.
    const ModelSpec m = small_gpt(8);
    const GpuSpec gpu = find_gpu("H100-SXM5-80GB", "test");
    const Layout off = offload_layout(4);
    const Layout on = offload_layout(0);
    const double layer = layer_activations(m, on).stored;
    const MemoryReport r_off = simulate_memory(m, off, build_program(m, off), gpu, nullptr, true);
    const MemoryReport r_on = simulate_memory(m, on, build_program(m, on), gpu, nullptr, true);
    CHECK(stored_forward_peak(r_on) - stored_forward_peak(r_off) == doctest::Approx(4 * layer));
    CHECK(r_off.stages[0].peak_bytes < r_on.stages[0].peak_bytes);
}

TEST_CASE("activation offload: each copy wait lasts the copy less the layers that ran beside it") {
    // Copy of one layer's stored activations at host link x kPcieCopyEfficiency; the forward wait of group k
    // at the end of layer w(k) is hidden by the forwards of layers w(k-1)+1 .. w(k) (layers 1 .. w(0) for
    // group 0); the backward wait for group j+1's copy back at layer w(j) by the backwards of w(j+1) ..
    // w(j)+1, and at layer 0 for group 0's by those of w(0) .. 1. 8 layers, 4 offloaded: windows 1, 3, 5, 7,
    // so one forward wait hidden by 1 layer, three by 2; backward waits hidden by 2 layers (three) and by 1
    // (layer 0).
    const ModelSpec m = small_gpt(8);
    const GpuSpec gpu = find_gpu("H100-SXM5-80GB", "test");
    const Layout l = offload_layout(4);
    for (double link : {2e9, 64e9, 1e12}) {
        Program p = build_program(m, l);
        HostLinks host;
        host.pcie_bytes_per_s = link;
        const ComputeModel cm(gpu, l.precision, host);
        set_activation_copy_bytes(p, m, l);
        assign_durations(p, cm);
        const double copy = layer_activations(m, l).stored / (link * kPcieCopyEfficiency);
        const auto d2h = segments_named(p, "activation_offload_d2h");
        const auto h2d = segments_named(p, "activation_reload_h2d");
        REQUIRE(d2h.size() == 2);  // hidden by 1 layer, by 2
        REQUIRE(h2d.size() == 2);
        for (const auto* s : d2h) {
            double hidden = 0;
            for (const auto& [seg, count] : s->hidden_by)
                hidden += count * p.segments[static_cast<std::size_t>(seg)].seconds;
            CHECK(s->kernels.at(0).bytes == doctest::Approx(layer_activations(m, l).stored));
            CHECK(s->seconds == doctest::Approx(std::max(0.0, copy - hidden)));
        }
        for (const auto* s : h2d) {
            double hidden = 0;
            for (const auto& [seg, count] : s->hidden_by)
                hidden += count * p.segments[static_cast<std::size_t>(seg)].seconds;
            CHECK(s->seconds == doctest::Approx(std::max(0.0, copy - hidden)));
        }
        if (link == 2e9) {  // a slow link: every wait exposed
            for (const auto* s : d2h)
                CHECK(s->seconds > 0);
        }
        if (link == 1e12) {  // a fast one: none
            for (const auto* s : d2h)
                CHECK(s->seconds == 0);
            for (const auto* s : h2d)
                CHECK(s->seconds == 0);
        }
    }
}

TEST_CASE("activation offload: the program's copy waits sit at TE's sync points") {
    // Per micro-batch: 4 forward waits (one per group) and 4 backward ones (groups 3..1 at layers 5, 3, 1,
    // group 0 at layer 0); the first micro-batch's ops in order: the wait of group 0 right after layer 1's
    // forward.
    const ModelSpec m = small_gpt(8);
    const Layout l = offload_layout(4);
    const Program p = build_program(m, l);
    int fwd = 0, bwd = 0;
    for (const auto& op : p.stages[0].ops) {
        if (op.kind != OpKind::compute) continue;
        const std::string& name = p.segments[static_cast<std::size_t>(op.segment)].name;
        if (name == "activation_offload_d2h") ++fwd;
        if (name == "activation_reload_h2d") ++bwd;
    }
    const int micro_batches = static_cast<int>(l.global_batch / (l.dp * l.micro_batch));
    CHECK(fwd == 4 * micro_batches);
    CHECK(bwd == 4 * micro_batches);
    int offloaded = 0, reloaded = 0;
    for (const auto& mk : p.stages[0].memory_marks) {
        offloaded += mk.event == MemoryEvent::activations_offloaded ? 1 : 0;
        reloaded += mk.event == MemoryEvent::activations_reloaded ? 1 : 0;
    }
    CHECK(offloaded == 4 * micro_batches);
    CHECK(reloaded == 4 * micro_batches);
}

TEST_CASE("activation offload: Megatron-Core's conditions are checked") {
    const ModelSpec m = small_gpt(8);
    Layout l = offload_layout(8);  // not fewer than the layers
    CHECK_THROWS_WITH_AS(check_layout(m, l, 8), doctest::Contains("layout.activation_offload_layers = 8"),
                         InputError);
    l = offload_layout(2);
    l.recompute = Recompute::selective;
    CHECK_THROWS_WITH_AS(check_layout(m, l, 8), doctest::Contains("layout.recompute = \"none\""), InputError);
    l = offload_layout(2);
    l.pp = 2;
    l.dp = 4;
    CHECK_THROWS_WITH_AS(check_layout(m, l, 8), doctest::Contains("layout.pp = 1"), InputError);
    l = offload_layout(2);
    CHECK_NOTHROW(check_layout(m, l, 8));
}
