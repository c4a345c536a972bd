#include <algorithm>

#include "trainsim/errors.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

namespace {
// Megatron-LM schedules.py: the model chunk of the k-th forward (backward) pass in the interleaved schedule.
int interleaved_chunk(int k, int pp, int vpp, bool forward) {
    const int in_group = k % (pp * vpp);
    const int chunk = in_group / pp;
    return forward ? chunk : vpp - 1 - chunk;
}
int interleaved_micro_batch(int k, int pp, int vpp) {
    return (k / (pp * vpp)) * pp + k % pp;
}
}  // namespace

std::vector<ScheduleItem> pipeline_schedule(Schedule schedule, int pp, int rank, int m, int vpp,
                                            bool a2a_overlap) {
    std::vector<ScheduleItem> items;
    if (pp <= 0 || rank < 0 || rank >= pp || m <= 0 || vpp <= 0)
        throw InternalError("bad schedule arguments");
    if (vpp == 1) {
        if (schedule == Schedule::gpipe) {
            for (int i = 0; i < m; ++i)
                items.push_back({true, 0, i});
            for (int i = 0; i < m; ++i)
                items.push_back({false, 0, i});
            return items;
        }
        // The combined 1F1B schedule of --overlap-moe-expert-parallel-comm starts with one forward alone
        // (combined_1f1b_schedule_for_no_pipelining; one extra warm-up forward with PP, below).
        const int warmup = std::min(pp - rank - 1 + (a2a_overlap ? 1 : 0), m);
        int f = 0, b = 0;
        for (; f < warmup; ++f)
            items.push_back({true, 0, f});
        while (f < m) {
            items.push_back({true, 0, f++, true});
            items.push_back({false, 0, b++});
        }
        while (b < m)
            items.push_back({false, 0, b++});
        return items;
    }
    const int total = m * vpp;
    // Megatron-LM: all passes are warm-up when there are exactly pp micro-batches.
    // With --overlap-moe-expert-parallel-comm one extra forward before the 1F1B steps, "to ensure the forward
    // and backward computations are independent in all 1f1b steps" (get_pp_rank_microbatches).
    int warmup = m == pp ? total : (pp - rank - 1) * 2 + (vpp - 1) * pp + (a2a_overlap ? 1 : 0);
    warmup = std::min(warmup, total);
    auto fwd = [&](int k) {
        items.push_back({true, interleaved_chunk(k, pp, vpp, true), interleaved_micro_batch(k, pp, vpp)});
    };
    auto bwd = [&](int k) {
        items.push_back({false, interleaved_chunk(k, pp, vpp, false), interleaved_micro_batch(k, pp, vpp)});
    };
    for (int k = 0; k < warmup; ++k)
        fwd(k);
    for (int i = 0; i < total - warmup; ++i) {
        fwd(warmup + i);
        items.back().steady = true;
        bwd(i);
    }
    for (int k = total - warmup; k < total; ++k)
        bwd(k);
    return items;
}

std::string to_string(Phase p) {
    switch (p) {
        case Phase::forward:
            return "forward";
        case Phase::backward:
            return "backward";
        case Phase::recompute:
            return "recompute";
        case Phase::optimizer:
            return "optimizer";
    }
    return "?";
}

}  // namespace trainsim
