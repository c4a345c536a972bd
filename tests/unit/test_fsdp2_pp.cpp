// The data-parallel group in the program builder (stage_builder.cpp plan_data_parallel): FSDP2 under
// pipeline parallelism (torchtitan, plain PyTorch), where torch.distributed.pipelining's stage runs every
// backward but the last with requires_gradient_sync off, so the unsharded gradients accumulate (in the
// reduce dtype) and are reduce-scattered once per step; and the DP x CP group the gradients are reduced
// and the state sharded over.
#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

namespace {

/// 8 layers, hidden 1024, PP 2 x DP 4 FSDP, 8 micro-batches per pipeline.
trainsim::Layout pp_fsdp(trainsim::Framework f) {
    trainsim::Layout l = trainsim::test::fsdp_layout(f, 4, 2, 32);
    l.reshard_after_forward = false;  // torchtitan: reshard_after_forward = not pp_enabled
    return l;
}

int dp_reduce_scatters(const trainsim::Program& p) {
    int n = 0;
    for (const trainsim::Op& op : p.stages[0].ops)
        if (op.kind == trainsim::OpKind::dp_launch &&
            op.collective == trainsim::CollectiveKind::reduce_scatter)
            ++n;
    return n;
}

}  // namespace

TEST_CASE("fsdp2 under pp: gradients reduce-scattered once per step, held unsharded until then") {
    const trainsim::ModelSpec m = trainsim::test::small_gpt(8, 1024, 16);
    const trainsim::Layout tt = pp_fsdp(trainsim::Framework::torchtitan);
    const trainsim::Layout ds = pp_fsdp(trainsim::Framework::composer);  // FSDP1 path: every micro-batch
    const trainsim::Program ptt = trainsim::build_program(m, tt);
    const trainsim::Program pds = trainsim::build_program(m, ds);
    const int once = dp_reduce_scatters(ptt);
    CHECK(once > 0);
    CHECK(dp_reduce_scatters(pds) == 8 * once);  // 8 micro-batches
    // The accumulated unsharded gradients (fp32, the stage's parameters) are held across the step.
    const trainsim::GpuSpec& gpu = trainsim::find_gpu("H100-SXM5-80GB", "test");
    const auto mem = trainsim::simulate_memory(m, tt, ptt, gpu);
    // FSDP1 (Composer) on the same layout reduce-scatters each group's gradients after each backward.
    const auto mem_fsdp1 = trainsim::simulate_memory(m, ds, pds, gpu);
    const double stage_params = 4.0 * 12.0 * 1024 * 1024;  // 4 layers of 12 h^2 (and more on the edges)
    // Stage 0 (no loss head, whose tensors differ by framework).
    const double d = mem.stages.at(0).peak_bytes - mem_fsdp1.stages.at(0).peak_bytes;
    CHECK(d > 0.75 * 4.0 * stage_params);
    CHECK(d < 1.5 * 4.0 * stage_params);
}

TEST_CASE("dp x cp: CP ranks' gradients are reduced and their state sharded even at dp = 1") {
    // Megatron-Core's distributed optimizer shards over the DP x CP group; torchtitan's FSDP over dp_shard x
    // cp. At dp = 1, cp = 2 the program reduce-scatters and gathers over the CP pair, as the memory model
    // shards.
    trainsim::ModelSpec m = trainsim::test::small_gpt(4, 1024, 16);
    m.seq_len = 2048;
    trainsim::Layout l;
    l.dp = 1;
    l.cp = 2;
    l.micro_batch = 1;
    l.global_batch = 2;
    l.distributed_optimizer = true;
    l.attention = trainsim::AttentionKernel::flash;
    const trainsim::Program p = trainsim::build_program(m, l);
    int launches = 0;
    for (const trainsim::Op& op : p.stages[0].ops)
        if (op.kind == trainsim::OpKind::dp_launch) ++launches;
    CHECK(launches > 0);
    l.cp = 1;
    l.global_batch = 2;
    int none = 0;
    const trainsim::Program one = trainsim::build_program(m, l);
    for (const trainsim::Op& op : one.stages[0].ops)
        if (op.kind == trainsim::OpKind::dp_launch) ++none;
    CHECK(none == 0);  // one GPU: nothing to reduce
}
