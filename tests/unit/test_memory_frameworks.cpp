// The caching-allocator model and the framework-specific memory behaviour (torchtitan's per-op selective
// checkpointing, FSDP2's fp32 shards, reshard policies and root unit, fp8 weight caches, loss_parallel, CP's
// gathered K/V), each against a hand-computed reference.
#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/caching_allocator.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using namespace trainsim::test;

namespace {

constexpr double MiB = 1024.0 * 1024.0;
constexpr std::size_t kParams = 0, kGrads = 1, kOptim = 2, kBuffers = 4;

MemoryReport walk(const ModelSpec& m, const Layout& l) {
    return simulate_memory(m, l, build_program(m, l), find_gpu("H100-SXM5-80GB", "test"), nullptr, true);
}

/// Llama 3 8B (32 layers, h 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256, seq 8192).
ModelSpec llama8b() {
    return llama_style(32, 4096, 32, 8, 14336, 128256, 8192);
}

}  // namespace

TEST_CASE("caching allocator: rounding, segment sizes, best fit, splitting and coalescing") {
    CHECK(CachingAllocator::round_request(1) == 512);
    CHECK(CachingAllocator::round_request(513) == 1024);
    CHECK(CachingAllocator::segment_size(512) == 2 * MiB);  // small pool
    CHECK(CachingAllocator::segment_size(1 * MiB) == 2 * MiB);
    CHECK(CachingAllocator::segment_size(1 * MiB + 512) == 20 * MiB);  // 1-10 MiB: a 20 MiB segment
    CHECK(CachingAllocator::segment_size(10 * MiB) == 10 * MiB);       // >= 10 MiB: rounded to 2 MiB
    CHECK(CachingAllocator::segment_size(11 * MiB) == 12 * MiB);

    CachingAllocator a(1e12);
    const auto x = a.allocate(100);  // a 2 MiB small segment, 512 B allocated
    CHECK(a.allocated_bytes() == 512);
    CHECK(a.reserved_bytes() == 2 * MiB);
    const auto y = a.allocate(3 * MiB);  // a 20 MiB segment, split: 17 MiB stay free in it
    CHECK(a.reserved_bytes() == 22 * MiB);
    const auto z = a.allocate(16.5 * MiB);  // fits in the 17 MiB remainder; 0.5 MiB left: not split
    CHECK(a.reserved_bytes() == 22 * MiB);
    CHECK(a.allocated_bytes() == doctest::Approx(512 + 3 * MiB + 17 * MiB));  // unsplit slack counts
    a.free(y);
    a.free(z);  // coalesces with y's block: the 20 MiB segment is one free block again
    const auto w = a.allocate(19 * MiB);
    CHECK(a.reserved_bytes() == 22 * MiB);  // served from the coalesced block
    a.free(w);
    a.free(x);
    CHECK(a.allocated_bytes() == 0);
    CHECK(a.reserved_bytes() == 22 * MiB);  // cached, not returned
    CHECK(a.peak_allocated_bytes() == doctest::Approx(512 + 20 * MiB));
    CHECK_THROWS_AS(a.free(w), InternalError);
}

TEST_CASE("caching allocator: a pool caching thousands of free blocks picks the same best fit") {
    // Past CachingAllocator::FreeList::kMaxSortedFree free blocks a pool keeps them in a tree instead of a
    // sorted vector: the same order, so the same choices. 2,000 blocks of distinct sizes in their own
    // segments are freed (every one cached), then each request takes the smallest free block that holds it:
    // nothing new is reserved, and a request above every cached block takes a new segment.
    CachingAllocator a(1e15);
    std::vector<std::int64_t> blocks;
    for (int k = 0; k < 2000; ++k)
        blocks.push_back(a.allocate((12.0 + 2.0 * k) * MiB));  // one segment each, >= 10 MiB: not split
    const double reserved = a.reserved_bytes();
    for (const auto b : blocks)
        a.free(b);
    CHECK(a.allocated_bytes() == 0);
    for (int k = 1999; k >= 0; k -= 3) {  // best fit: exactly the block of that size, from the top down
        const auto b = a.allocate((12.0 + 2.0 * k) * MiB);
        CHECK(a.reserved_bytes() == reserved);
        CHECK(a.allocated_bytes() > 0);
        a.free(b);
    }
    const auto big = a.allocate(5000.0 * MiB);  // above every cached block: a new segment
    CHECK(a.reserved_bytes() == reserved + 5000.0 * MiB);
    a.free(big);
    const auto mid = a.allocate(13.0 * MiB);  // rounded to 13 MiB: the 14 MiB block (best fit), not split
    CHECK(a.reserved_bytes() == reserved + 5000.0 * MiB);
    CHECK(a.allocated_bytes() == doctest::Approx(14.0 * MiB));
    a.free(mid);
}

TEST_CASE("caching allocator: streams keep their own caches; a failed cudaMalloc releases free segments") {
    CachingAllocator a(100 * MiB);
    const auto g = a.allocate(40 * MiB, AllocStream::all_gather);
    a.free(g);
    const auto c = a.allocate(40 * MiB);  // the cached 40 MiB block belongs to the all-gather stream
    CHECK(a.reserved_bytes() == 80 * MiB);
    const auto d = a.allocate(40 * MiB);  // 120 MiB > limit: the free all-gather segment is released first
    CHECK(a.reserved_bytes() == 80 * MiB);
    CHECK(a.peak_reserved_bytes() == 80 * MiB);
    a.free(c);
    a.free(d);
}

TEST_CASE(
    "memory: torchtitan per-op selective checkpointing keeps the listed op outputs (Llama 3 8B layer)") {
    const ModelSpec m = llama8b();
    Layout l;
    l.framework = Framework::torchtitan;
    l.micro_batch = 2;
    l.recompute = Recompute::selective_op;
    const double T = 2.0 * 8192;
    // Per token: block input 2·4096, wq 2·4096, wv 2·1024, SDPA output 2·4096 + fp32 LSE 4·32, w1 2·14336,
    // w2 2·4096 = 63,616 B.
    const LayerActivations a = layer_activations(m, l);
    CHECK(a.stored == doctest::Approx(T * 63616));
    // The rebuilt set is the unrecomputed one less what was kept: without recomputation a layer stores
    // 2 norm inputs, 2 GEMM inputs, Q, K, V (repeated to the 32 query heads by repeat_kv before SDPA), O,
    // LSE, gate, up, fc2 input: 2·(4·4096 + 4096 + 2·4096 + 4096 + 3·14336) + 128 = 151,680 B per token.
    Layout none = l;
    none.recompute = Recompute::none;
    CHECK(layer_activations(m, none).stored == doctest::Approx(T * 151680));
    CHECK(a.recomputed == doctest::Approx(T * (151680 - 63616)));
    // Megatron's selective (attention core only) keeps everything with flash attention.
    Layout sel = l;
    sel.recompute = Recompute::selective;
    CHECK(layer_activations(m, sel).stored == doctest::Approx(T * 151680));
    // Megatron (TE's GQA kernels) keeps K and V at the 8 K/V heads: 2·(4096 - 1024) B per token less.
    sel.framework = Framework::megatron;
    CHECK(layer_activations(m, sel).stored == doctest::Approx(T * (151680 - 2 * 2 * 3072)));

    // TP 2 + SP: the input and the reduce-scatter outputs are sequence-sharded, the w2 output (a partial sum)
    // is not, and the tp terms halve: 4096 + (8192 + 2048 + 8192 + 128 + 28672)/2 + 8192 + 2·4096 = 44,096.
    l.tp = 2;
    l.sequence_parallel = true;
    CHECK(layer_activations(m, l).stored == doctest::Approx(T * 44096));
}

TEST_CASE("memory: FSDP2 keeps fp32 shards as master weights; DeepSpeed ZeRO-3 a 16-bit shard beside them") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 8;
    l.global_batch = 8;
    l.zero_stage = 3;
    l.framework = Framework::deepspeed;
    const double P = m.total_params();
    const PileBytes ds = walk(m, l).stages[0].phase_peaks[0].piles;
    CHECK(ds[kParams] == doctest::Approx(2 * P / 8));
    CHECK(ds[kOptim] == doctest::Approx(12 * P / 8));
    l.framework = Framework::torchtitan;
    const PileBytes tt = walk(m, l).stages[0].phase_peaks[0].piles;
    CHECK(tt[kParams] == doctest::Approx(4 * P / 8));
    CHECK(tt[kOptim] == doctest::Approx(8 * P / 8));
    CHECK(tt[kGrads] == doctest::Approx(4 * P / 8));
    // Float8 keeps bf16 parameters and reduces in fp32: the gradients stay 4 B, no fp32 copy in the step.
    l.precision = Precision::fp8;
    l.fp8_recipe = Fp8Recipe::tensorwise;
    const MemoryReport f8 = walk(m, l);
    CHECK(f8.stages[0].phase_peaks[0].piles[kGrads] == doctest::Approx(4 * P / 8));
    CHECK(f8.stages[0].phase_peaks[static_cast<std::size_t>(MemoryPhase::optimizer)].allocated_bytes ==
          doctest::Approx(f8.stages[0].phase_peaks[0].allocated_bytes));
}

TEST_CASE("memory: the fp8 weight cache is Megatron's (sharded like the weights), not torchao's") {
    const ModelSpec m = llama_style(8, 4096, 32, 8, 14336, 32000, 4096);
    Layout l;
    l.dp = 8;
    l.global_batch = 8;
    l.precision = Precision::fp8;
    l.fp8_recipe = Fp8Recipe::tensorwise;
    const double linear = 8 * m.linear_params();
    const double P = m.total_params();
    l.framework = Framework::megatron;
    CHECK(walk(m, l).stages[0].phase_peaks[0].piles[kParams] == doctest::Approx(2 * P + 2 * linear));
    l.zero_stage = 3;  // sharded like the weights
    l.framework = Framework::deepspeed;
    CHECK(walk(m, l).stages[0].phase_peaks[0].piles[kParams] == doctest::Approx(2 * P / 8));
    l.framework = Framework::megatron;
    CHECK(walk(m, l).stages[0].phase_peaks[0].piles[kParams] == doctest::Approx(2 * P / 8 + 2 * linear / 8));
    l.fp8_param_gather = true;  // FP8 weights with their transpose: 1 + 1 B instead of 2 + 2
    CHECK(walk(m, l).stages[0].phase_peaks[0].piles[kParams] == doctest::Approx(2 * P / 8));
    l.fp8_param_gather = false;
    l.framework = Framework::torchtitan;  // torchao Float8: fp32 shards, no cache
    CHECK(walk(m, l).stages[0].phase_peaks[0].piles[kParams] == doctest::Approx(4 * P / 8));
    // ... its fp8 cast of the widest weight (w1/w3: 2·14336·4096 B at 1 B) exists only around the GEMM.
    Layout bf16 = l;
    bf16.precision = Precision::bf16;
    CHECK(layer_activations(m, l).forward_transient - layer_activations(m, bf16).forward_transient ==
          doctest::Approx(2.0 * 14336 * 4096));
}

TEST_CASE("memory: reshard_after_forward = false keeps every gathered block until the backward") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 8;
    l.global_batch = 8;
    l.zero_stage = 3;
    l.framework = Framework::composer;  // FSDP1 FULL_SHARD (DeepSpeed keeps what it reuses soon)
    const double layer = 2.0 * m.layer_params();
    auto forward_buffers = [&](const Layout& x) {
        double best = 0;
        const auto report = walk(m, x);  // kept alive: the loop below reads its timeline
        for (const auto& s : report.stages[0].timeline)
            if (s.phase == MemoryPhase::forward) best = std::max(best, s.piles[kBuffers]);
        return best;
    };
    const double resharded = forward_buffers(l);
    CHECK(resharded < 3 * layer + 2.0 * m.embedding_params() + 1);  // at most two groups, one prefetched
    l.reshard_after_forward = false;
    CHECK(forward_buffers(l) >= 4 * layer);  // all four blocks gathered at the end of the forward
}

TEST_CASE("memory: torchtitan keeps its root unit and last block gathered, and reports max reserved") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 8;
    l.global_batch = 8;
    l.zero_stage = 3;
    l.framework = Framework::torchtitan;
    const MemoryReport r = walk(m, l);
    // At the head's forward the embedding (root unit) and the last block are still gathered.
    double at_head = 0;
    for (const auto& s : r.stages[0].timeline)
        if (s.phase == MemoryPhase::forward) at_head = std::max(at_head, s.piles[kBuffers]);
    CHECK(at_head >= 2.0 * m.embedding_params() + 2.0 * m.layer_params());
    l.framework = Framework::deepspeed;
    const MemoryReport d = walk(m, l);
    CHECK(reported_memory(Framework::torchtitan) == ReportedMemory::reserved);
    CHECK(reported_peak_bytes(r, Framework::torchtitan) == r.peak_of(ReportedMemory::reserved));
    CHECK(r.peak_of(ReportedMemory::reserved) >= r.peak_of(ReportedMemory::allocated));
    // What the device holds is the reserved bytes plus what lives outside the allocator.
    CHECK(r.peak().peak_bytes ==
          doctest::Approx(r.peak().peak_reserved_bytes + r.peak().outside_allocator_bytes));
    CHECK(d.peak_of(ReportedMemory::allocated) > 0);
}

TEST_CASE("memory: the loss as the framework computes it (eager fp32 cross-entropy, DTensor loss_parallel)") {
    // One layer, the head dominating: the peak allocated is the head's backward.
    const ModelSpec m = small_gpt(1, 256, 4, 1024, 65536);
    Layout l;
    l.framework = Framework::torchtitan;
    const double T = 1024, V = 65536;
    const MemoryReport eager = walk(m, l);
    // Backward of F.cross_entropy(logits.float()): the saved log_softmax output, the nll gradient and the
    // log_softmax input gradient, all fp32: 12 B per logit, beside the static piles.
    const double statics = eager.stages[0].phase_peaks[0].allocated_bytes;
    CHECK(eager.peak_of(ReportedMemory::allocated) - statics >= 12.0 * T * V);
    CHECK(eager.peak_of(ReportedMemory::allocated) - statics < 13.0 * T * V);
    // Megatron's fused vocab-parallel cross-entropy: the fp32 softmax and the 16-bit logits, 6 B per logit.
    l.framework = Framework::megatron;
    const MemoryReport meg = walk(m, l);
    CHECK(meg.peak_of(ReportedMemory::allocated) - statics < 7.0 * T * V);
    // TP 2 under torchtitan: loss_parallel's decomposed backward holds 16 B per local logit.
    l.framework = Framework::torchtitan;
    l.tp = 2;
    l.sequence_parallel = true;
    const MemoryReport lp = walk(m, l);
    const double statics2 = lp.stages[0].phase_peaks[0].allocated_bytes;
    CHECK(lp.peak_of(ReportedMemory::allocated) - statics2 >= 16.0 * T * V / 2);
}

TEST_CASE("memory: context parallelism reads the other ranks' K/V (torchtitan gathers all of it)") {
    const ModelSpec m = llama8b();
    Layout l;
    l.cp = 4;
    l.recompute = Recompute::full;
    l.framework = Framework::megatron;
    Layout one = l;
    one.cp = 1;
    one.micro_batch = 1;
    // K or V of a rank: (8192/4) tokens x 8 heads x 128 x 2 B = 4 MiB.
    const double kv = 8192.0 / 4 * 8 * 128 * 2;
    const double base = layer_activations(m, l).backward_transient;
    l.framework = Framework::torchtitan;
    // Megatron's ring: K and V of the block in flight beside its own (2 each); torchtitan: the whole sequence
    // (cp each) of K and V repeated to the 32 query heads (4 x kv each).
    CHECK(layer_activations(m, l).backward_transient - base ==
          doctest::Approx(2 * 4 * (4 * kv) - 2 * 2 * kv));
}

TEST_CASE(
    "block recompute (recompute_num_layers): only the first N layers of a chunk recomputed and kept small") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 1;
    l.global_batch = 1;
    l.recompute = Recompute::full;
    auto recompute_ops = [&](const Layout& x) {
        const Program p = build_program(m, x);
        std::size_t n = 0;
        for (const auto& op : p.stages[0].ops)
            if (op.phase == Phase::recompute) ++n;
        return n;
    };
    const std::size_t all = recompute_ops(l);
    REQUIRE(all > 0);
    CHECK(all % 4 == 0);  // the same recompute ops for each of the 4 layers
    l.recompute_num_layers = 1;
    CHECK(recompute_ops(l) == all / 4);
    CHECK(l.layer_recomputed(0));
    CHECK_FALSE(l.layer_recomputed(1));
    // The three kept layers store what they store without recompute: one layer's input (full) against
    // the unrecomputed set (none), so the peak lies between the two extremes.
    Layout none = l;
    none.recompute = Recompute::none;
    none.recompute_num_layers = 0;
    Layout full = l;
    full.recompute_num_layers = 0;
    const double a_block = walk(m, l).stages[0].peak_allocated_bytes;
    const double a_none = walk(m, none).stages[0].peak_allocated_bytes;
    const double a_full = walk(m, full).stages[0].peak_allocated_bytes;
    CHECK(a_full < a_block);
    CHECK(a_block < a_none);
    Layout bad = l;
    bad.recompute = Recompute::selective;
    CHECK_THROWS_AS(check_layout(m, bad, 1), InputError);
}

TEST_CASE("memory: NeMo's Apex distributed Adam keeps a bf16 remainder, not an fp32 master") {
    const ModelSpec m = small_gpt(4);
    Layout l;
    l.dp = 8;
    l.global_batch = 8;
    l.distributed_optimizer = true;
    l.grad_reduce_in_bf16 = true;
    const double P = m.total_params();
    const auto opt = static_cast<std::size_t>(MemoryPhase::optimizer);
    // Megatron-Core: bf16 weights 2 B, bf16 main grads 2 B, fp32 master + m + v 12 B / 8; the step copies
    // its shard of the gradients to fp32 (4 B / 8).
    const MemoryReport mc = walk(m, l);
    const PileBytes mp = mc.stages[0].phase_peaks[0].piles;
    CHECK(mp[kParams] == doctest::Approx(2 * P));
    CHECK(mp[kGrads] == doctest::Approx(2 * P));
    CHECK(mp[kOptim] == doctest::Approx(12 * P / 8));
    // Apex (store_param_remainders): int16 remainder + m + v = 10 B / 8; the step keeps the bf16 gradient
    // shards (2 B / 8) instead of an fp32 copy.
    l.apex_distributed_adam = true;
    const MemoryReport ap = walk(m, l);
    const PileBytes a = ap.stages[0].phase_peaks[0].piles;
    CHECK(a[kParams] == doctest::Approx(2 * P));
    CHECK(a[kGrads] == doctest::Approx(2 * P));
    CHECK(a[kOptim] == doctest::Approx(10 * P / 8));
    CHECK(mc.stages[0].phase_peaks[opt].allocated_bytes - ap.stages[0].phase_peaks[opt].allocated_bytes ==
          doctest::Approx((2 * P + 2 * P) / 8).epsilon(1e-3));
}
