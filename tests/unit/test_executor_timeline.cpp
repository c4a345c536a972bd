// The reference executor against timelines computed by hand: two GPUs of one node, hand-built programs whose
// compute segments have fixed durations (forward f = 1 ms, backward b = 2 ms), and P2P messages whose
// transfer time d is the alpha-beta time of one flow alone on its route (NCCL launch + bytes / bottleneck
// bandwidth + route latency; collectives.hpp). Every expected start and end below is derived in the comments
// from the executor's rules (executor.hpp, program.hpp):
//   - a transfer starts when the sender has sent and the receiver has posted its recv (vpp = 1);
//   - after a send, the sender's next op other than send/recv waits until the send has arrived (Megatron-LM
//     waits for its P2P requests at once), so a send alone costs the sender d;
//   - a wait on P2P is bubble until the awaited transfer started, exposed PP communication after;
//   - with pp > 1 the wait after a stage's last pass until the step ends (the drain) is bubble too.
// P2P transfers in opposite directions use distinct NVLink links, so they do not slow each other down.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;
using trainsim::test::small_topology;

namespace {

constexpr double kForwardS = 1e-3;
constexpr double kBackwardS = 2e-3;
constexpr double kOptimizerS = 0.5e-3;
constexpr double kMessageBytes = 16e6;  ///< one activation / gradient message, per rank

/// One node of two A100 (DGX A100 NVLink figures).
Cluster two_gpus() {
    return Cluster(small_topology(1, 2, 2));
}

Layout pipeline_layout(Schedule schedule, int micro_batches, int pp = 2) {
    Layout l;
    l.tp = 1;
    l.pp = pp;
    l.dp = 1;
    l.micro_batch = 1;
    l.global_batch = micro_batches;
    l.schedule = schedule;
    return l;
}

Op compute_op(int segment, Phase phase, int mb) {
    Op op;
    op.kind = OpKind::compute;
    op.segment = segment;
    op.phase = phase;
    op.micro_batch = mb;
    return op;
}

/// A send or recv of micro-batch `mb` toward `direction` (+1 activations, -1 gradients); `receiver` is the
/// receiving stage (the virtual stage with vpp = 1).
Op p2p_op(OpKind kind, int direction, int receiver, int mb) {
    Op op;
    op.kind = kind;
    op.direction = direction;
    op.virtual_stage = receiver;
    op.micro_batch = mb;
    op.bytes = kMessageBytes;
    return op;
}

/// The program of a `pp`-stage pipeline: segment 0 forward (f), 1 backward (b). Each stage runs the passes
/// of pipeline_schedule(schedule, pp, rank, m, 1); a forward on a stage other than the first receives its
/// activations first, and on a stage other than the last sends them to the next stage after; a backward on a
/// stage other than the last receives its gradients first, and on a stage other than the first sends them
/// to the previous stage after.
Program pipeline_program(Schedule schedule, int m, int pp = 2) {
    Program p;
    p.segments.push_back(Segment{"F", {}, kForwardS, 0, {}, ActivationCopy::none});
    p.segments.push_back(Segment{"B", {}, kBackwardS, 0, {}, ActivationCopy::none});
    p.stages.resize(static_cast<std::size_t>(pp));
    for (int rank = 0; rank < pp; ++rank) {
        auto& ops = p.stages[static_cast<std::size_t>(rank)].ops;
        for (const ScheduleItem& it : pipeline_schedule(schedule, pp, rank, m, 1)) {
            if (it.forward) {
                if (rank > 0) ops.push_back(p2p_op(OpKind::recv, +1, rank, it.micro_batch));
                ops.push_back(compute_op(0, Phase::forward, it.micro_batch));
                if (rank < pp - 1) ops.push_back(p2p_op(OpKind::send, +1, rank + 1, it.micro_batch));
            } else {
                if (rank < pp - 1) ops.push_back(p2p_op(OpKind::recv, -1, rank, it.micro_batch));
                ops.push_back(compute_op(1, Phase::backward, it.micro_batch));
                if (rank > 0) ops.push_back(p2p_op(OpKind::send, -1, rank - 1, it.micro_batch));
            }
        }
    }
    return p;
}

/// An execution with every slice recorded.
struct Recorded : ExecutionResult {
    std::vector<RecordedSlice> slices;
};

struct Slice {
    std::string name;
    Time start, end;
};

/// Rank `rank`'s compute slices (track 0), in order.
std::vector<Slice> compute_slices(const Recorded& r, int rank) {
    std::vector<Slice> out;
    for (const RecordedSlice& s : r.slices)
        if (s.rank == rank && s.track == Track::compute) out.push_back({s.name, s.start, s.end});
    return out;
}

void check_slices(const std::vector<Slice>& got, const std::vector<Slice>& expected) {
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i].name == expected[i].name);
        CHECK(got[i].start.picoseconds() == expected[i].start.picoseconds());
        CHECK(got[i].end.picoseconds() == expected[i].end.picoseconds());
    }
}

/// The accounts of one rank, in multiples of f, b and d (seconds), each checked to a picosecond.
struct Accounts {
    Time compute, bubble, pp_exposed, finish;
};
void check_accounts(const RankTimes& t, const Accounts& a) {
    const double ps = 1e-12;
    CHECK(std::abs(t.compute_s - a.compute.to_seconds()) <= ps);
    CHECK(std::abs(t.bubble_s - a.bubble.to_seconds()) <= ps);
    CHECK(std::abs(t.pp_exposed_s - a.pp_exposed.to_seconds()) <= ps);
    CHECK(std::abs(t.finish_s - a.finish.to_seconds()) <= ps);
    CHECK(t.tp_exposed_s == 0);
    CHECK(t.dp_exposed_s == 0);
    CHECK(t.idle_s == 0);  // pp > 1: the drain is bubble
}

Recorded run(const Cluster& c, const Layout& l, const Program& p) {
    SliceRecorder rec;
    Recorded r;
    static_cast<ExecutionResult&>(r) = execute(c, l, p, {&rec});
    r.slices = std::move(rec.slices);
    return r;
}

/// The same with every kernel of stage `slow` taking `factor` times as long (a straggler,
/// ExecutionScenario::compute_factor).
Recorded run_slow_stage(const Cluster& c, const Layout& l, const Program& p, int slow, double factor) {
    ExecutionScenario sc;
    sc.compute_factor.assign(static_cast<std::size_t>(l.gpus()), 1.0);
    sc.compute_factor[static_cast<std::size_t>(slow)] = factor;
    SliceRecorder rec;
    Recorded r;
    static_cast<ExecutionResult&>(r) = execute(c, l, p, {&rec}, {}, sc);
    r.slices = std::move(rec.slices);
    return r;
}

/// d, the time of one P2P message alone on its route, by the alpha-beta formula from the cluster's graph.
double p2p_seconds_by_hand(const Cluster& c, int src = 0, int dst = 1) {
    const Route r = c.route(src, dst);
    double bw = 1e300;
    for (int l : r.links)
        bw = std::min(bw, c.links()[static_cast<std::size_t>(l)].bandwidth.bytes_per_s);
    return kNcclLaunchLatencyS + kMessageBytes / bw + r.latency.to_seconds();
}

/// d as the executor times it: one message from stage 0 to stage 1, nothing else. Checked against the
/// formula to the picosecond; the timelines then add it exactly.
Time measured_p2p(const Cluster& c) {
    Program p;
    p.stages.resize(static_cast<std::size_t>(c.gpus()));  // one stage per GPU; stages past 1 do nothing
    p.stages[0].ops.push_back(p2p_op(OpKind::send, +1, 1, 0));
    p.stages[1].ops.push_back(p2p_op(OpKind::recv, +1, 1, 0));
    const Recorded r = run(c, pipeline_layout(Schedule::one_f_one_b, 1, c.gpus()), p);
    return Time::seconds(r.step_time_s);
}

}  // namespace

TEST_CASE("executor timeline: one P2P message takes launch + bytes / bandwidth + route latency") {
    const Cluster c = two_gpus();
    const double by_hand = p2p_seconds_by_hand(c);
    CHECK(by_hand > 50e-6);  // 16 MB over NVLink: tens of microseconds, well below f
    CHECK(by_hand < kForwardS / 4);
    CHECK(std::abs(measured_p2p(c).to_seconds() - by_hand) <= 2e-12);
}

TEST_CASE("executor timeline: PP 2, 1F1B, 2 micro-batches, by hand") {
    const Cluster c = two_gpus();
    const Time f = Time::seconds(kForwardS), b = Time::seconds(kBackwardS), d = measured_p2p(c);
    // Stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1 (warm-up pp - rank - 1 forwards).
    const Program p = pipeline_program(Schedule::one_f_one_b, 2);
    const Recorded r = run(c, pipeline_layout(Schedule::one_f_one_b, 2), p);
    // 0      S0 F0 [0, f]; S1 posts recv act0 and waits.
    // f      S0 sends act0 (posted: starts now) and waits for it before F1.
    // f+d    act0 arrives: S0 F1 [f+d, 2f+d] (wait d: PP exposed); S1 F0 B0 [f+d, 2f+b+d] (bubble f, PP d).
    // 2f+d   S0 sends act1 (S1 has not posted: pending) and posts recv grad0: waits.
    // 2f+b+d S1 sends grad0 (starts) and posts recv act1 (starts act1): both arrive at 2f+b+2d.
    // 2f+b+2d S0 B0 [2f+b+2d, 2f+2b+2d] (bubble b, PP d); S1 F1 B1 [.., 3f+2b+2d] (PP d).
    // 2f+2b+2d S0 posts recv grad1; 3f+2b+2d S1 sends grad1, arrives 3f+2b+3d; S1 done (PP d).
    // 3f+2b+3d S0 B1 [.., 3f+3b+3d] (bubble f, PP d). Step 3f+3b+3d; S1 drains b.
    check_slices(compute_slices(r, 0),
                 {{"F", Time{}, f},
                  {"F", f + d, f + f + d},
                  {"B", f + f + b + d + d, f + f + b + b + d + d},
                  {"B", f + f + f + b + b + d + d + d, f + f + f + b + b + b + d + d + d}});
    check_slices(compute_slices(r, 1), {{"F", f + d, f + f + d},
                                        {"B", f + f + d, f + f + b + d},
                                        {"F", f + f + b + d + d, f + f + f + b + d + d},
                                        {"B", f + f + f + b + d + d, f + f + f + b + b + d + d}});
    const Time step = f + f + f + b + b + b + d + d + d;
    CHECK(r.step_time_s == step.to_seconds());
    check_accounts(r.ranks[0], {f + f + b + b, b + f, d + d + d, step});
    check_accounts(r.ranks[1], {f + f + b + b, f + b, d + d + d, f + f + f + b + b + d + d + d});
}

TEST_CASE("executor timeline: PP 2, 1F1B, 3 micro-batches, by hand") {
    const Cluster c = two_gpus();
    const Time f = Time::seconds(kForwardS), b = Time::seconds(kBackwardS), d = measured_p2p(c);
    // Stage 0: F0 F1 B0 F2 B1 B2; stage 1: F0 B0 F1 B1 F2 B2.
    const Program p = pipeline_program(Schedule::one_f_one_b, 3);
    const Recorded r = run(c, pipeline_layout(Schedule::one_f_one_b, 3), p);
    // Up to 2f+b+2d as with 2 micro-batches. Then S0 runs B0 F2 [2f+b+2d, 3f+2b+2d] while S1 runs F1 B1
    // [2f+b+2d, 3f+2b+2d]: both reach their P2P at 3f+2b+2d, S0 sends act2 and posts recv grad1, S1 sends
    // grad1 and posts recv act2; both arrive at 3f+2b+3d (PP d each, no bubble).
    // S0 B1 [3f+2b+3d, 3f+3b+3d], then waits for grad2; S1 F2 B2 [3f+2b+3d, 4f+3b+3d], sends grad2: it
    // arrives at 4f+3b+4d (S1 done; S0 waited f as bubble, then d); S0 B2 [4f+3b+4d, 4f+4b+4d].
    const Time t1 = f + f + b + d + d;  // 2f+b+2d
    const Time t2 = t1 + f + b + d;     // 3f+2b+3d
    const Time t3 = t2 + f + b + d;     // 4f+3b+4d
    check_slices(compute_slices(r, 0), {{"F", Time{}, f},
                                        {"F", f + d, f + f + d},
                                        {"B", t1, t1 + b},
                                        {"F", t1 + b, t1 + b + f},
                                        {"B", t2, t2 + b},
                                        {"B", t3, t3 + b}});
    check_slices(compute_slices(r, 1), {{"F", f + d, f + f + d},
                                        {"B", f + f + d, f + f + b + d},
                                        {"F", t1, t1 + f},
                                        {"B", t1 + f, t1 + f + b},
                                        {"F", t2, t2 + f},
                                        {"B", t2 + f, t2 + f + b}});
    const Time step = t3 + b;  // 4f+4b+4d = (m + p - 1)(f + b + d) here
    CHECK(r.step_time_s == step.to_seconds());
    // S0: bubble b (waiting for grad0) + f (grad2); PP d at each of its 4 waits.
    check_accounts(r.ranks[0], {f + f + f + b + b + b, b + f, d + d + d + d, step});
    // S1: bubble f (fill) + b (drain); PP d at each of its 4 waits.
    check_accounts(r.ranks[1], {f + f + f + b + b + b, f + b, d + d + d + d, t3});
}

TEST_CASE("executor timeline: PP 2, GPipe, 2 micro-batches, by hand") {
    const Cluster c = two_gpus();
    const Time f = Time::seconds(kForwardS), b = Time::seconds(kBackwardS), d = measured_p2p(c);
    // Both stages: F0 F1 B0 B1.
    const Program p = pipeline_program(Schedule::gpipe, 2);
    const Recorded r = run(c, pipeline_layout(Schedule::gpipe, 2), p);
    // f+d    act0 arrives: S0 F1 [f+d, 2f+d]; S1 F0 [f+d, 2f+d] (bubble f, PP d).
    // 2f+d   S0 sends act1 and posts recv grad0; S1 posts recv act1: act1 runs [2f+d, 2f+2d].
    // 2f+2d  S1 F1 B0 [2f+2d, 3f+b+2d] (PP d), sends grad0 and waits for it before B1: arrives 3f+b+3d.
    // 3f+b+3d S0 B0 [.., 3f+2b+3d] (waited from 2f+d: bubble until grad0 started at 3f+b+2d = f+b+d, then
    //        PP d); S1 B1 [3f+b+3d, 3f+2b+3d] (PP d). Both reach their last P2P at 3f+2b+3d: grad1 arrives
    //        at 3f+2b+4d (S1 done, PP d); S0 B1 [3f+2b+4d, 3f+3b+4d] (PP d).
    const Time t1 = f + f + f + b + d + d + d;  // 3f+b+3d
    check_slices(
        compute_slices(r, 0),
        {{"F", Time{}, f}, {"F", f + d, f + f + d}, {"B", t1, t1 + b}, {"B", t1 + b + d, t1 + b + d + b}});
    check_slices(compute_slices(r, 1), {{"F", f + d, f + f + d},
                                        {"F", f + f + d + d, f + f + f + d + d},
                                        {"B", f + f + f + d + d, f + f + f + b + d + d},
                                        {"B", t1, t1 + b}});
    const Time step = t1 + b + d + b;  // 3f+3b+4d
    CHECK(r.step_time_s == step.to_seconds());
    check_accounts(r.ranks[0], {f + f + b + b, f + b + d, d + d + d, step});
    check_accounts(r.ranks[1], {f + f + b + b, f + b, d + d + d + d, t1 + b + d});
}

TEST_CASE("executor timeline: PP 2, GPipe, 3 micro-batches, by hand") {
    const Cluster c = two_gpus();
    const Time f = Time::seconds(kForwardS), b = Time::seconds(kBackwardS), d = measured_p2p(c);
    // Both stages: F0 F1 F2 B0 B1 B2.
    const Program p = pipeline_program(Schedule::gpipe, 3);
    const Recorded r = run(c, pipeline_layout(Schedule::gpipe, 3), p);
    // Forwards: S0 F_i at [i(f+d), i(f+d)+f] (each send waited for before the next forward: PP d);
    // S1 F_i at [i(f+d)+f+d, (i+1)(f+d)+f] (bubble f, then PP d per recv). S0 then posts recv grad0 at
    // 3f+2d; S1 runs F2 B0 [3f+3d, 4f+b+3d], sends grad0 (arrives 4f+b+4d) and waits for it before B1.
    // S0 B0 [4f+b+4d, 4f+2b+4d] (bubble 4f+b+3d - (3f+2d) = f+b+d, PP d), S1 B1 at the same time; grad1
    // [4f+2b+4d, 4f+2b+5d]; S0 B1 and S1 B2 [4f+2b+5d, 4f+3b+5d]; grad2 arrives 4f+3b+6d; S0 B2 after.
    const Time fd = f + d;
    const Time g0 = fd + fd + fd + f + b + d;  // 4f+b+4d: grad0 arrived
    check_slices(compute_slices(r, 0), {{"F", Time{}, f},
                                        {"F", fd, fd + f},
                                        {"F", fd + fd, fd + fd + f},
                                        {"B", g0, g0 + b},
                                        {"B", g0 + b + d, g0 + b + d + b},
                                        {"B", g0 + b + d + b + d, g0 + b + d + b + d + b}});
    check_slices(compute_slices(r, 1), {{"F", fd, fd + f},
                                        {"F", fd + fd, fd + fd + f},
                                        {"F", fd + fd + fd, fd + fd + fd + f},
                                        {"B", fd + fd + fd + f, fd + fd + fd + f + b},
                                        {"B", g0, g0 + b},
                                        {"B", g0 + b + d, g0 + b + d + b}});
    const Time step = g0 + b + d + b + d + b;  // 4f+4b+6d
    CHECK(r.step_time_s == step.to_seconds());
    check_accounts(r.ranks[0], {f + f + f + b + b + b, f + b + d, d + d + d + d + d, step});
    check_accounts(r.ranks[1], {f + f + f + b + b + b, f + b, d + d + d + d + d + d, g0 + b + d + b + d});
}

/// One node of `n` A100, and d as the executor times it there. Every neighbour pair of the pipeline sees the
/// same d (the formula gives the same double for each): a GPU's port to the NVSwitch and back, the same links
/// for every pair.
Time pipeline_d(const Cluster& c) {
    const double d01 = p2p_seconds_by_hand(c, 0, 1);
    for (int a = 0; a + 1 < c.gpus(); ++a) {
        CHECK(p2p_seconds_by_hand(c, a, a + 1) == d01);
        CHECK(p2p_seconds_by_hand(c, a + 1, a) == d01);
    }
    const Time d = measured_p2p(c);
    CHECK(std::abs(d.to_seconds() - d01) <= 2e-12);
    return d;
}

// With more than two stages, a stage's transfers still never share a link: it waits for its send before its
// next compute and for its receive before going on, so at most one transfer leaves and one enters each GPU
// at a time, on distinct links (GPU -> switch, switch -> GPU). Each transfer takes d.

TEST_CASE("executor timeline: PP 3, 1F1B, 3 micro-batches, the middle stage slow, by hand") {
    const Cluster c(small_topology(1, 3, 3));
    const Time f = Time::seconds(kForwardS), b = Time::seconds(kBackwardS), d = pipeline_d(c);
    const double factor = 2;
    const Time F = f + f, B = b + b;  // stage 1's passes (factor 2: exact in picoseconds)
    // Schedules (warm-up p - rank - 1 forwards): S0 F0 F1 F2 B0 B1 B2; S1 F0 F1 B0 F2 B1 B2; S2 F0 B0 F1 B1
    // F2 B2. Stage 1 is the bottleneck: 3(F + B) = 18 ms against 9 ms for the others.
    const Program p = pipeline_program(Schedule::one_f_one_b, 3, 3);
    const Recorded r = run_slow_stage(c, pipeline_layout(Schedule::one_f_one_b, 3, 3), p, 1, factor);
    // 0        S0 F0 [0, f]; S1, S2 post their recv of act0.
    // f        act0 0->1 [f, f+d]; S0 waits for it (PP d).
    // f+d      S0 F1 [f+d, 2f+d]; S1 F0 [f+d, F+f+d] (bubble f, PP d).
    // 2f+d     S0 sends act1: S1 has not posted, S0 waits (bubble until S1 posts, then PP d).
    // F+f+d    S1 sends act0 1->2 (S2 posted) and posts recv act1: both [F+f+d, F+f+2d] (S1: PP d;
    //          S0: bubble F+f+d - (2f+d) = F - f, PP d; S2: bubble F+f+d, PP d).
    // F+f+2d   S0 F2 [.., F+2f+2d], sends act2 (S1 not posted) and posts recv grad0: waits.
    //          S1 F1 [.., 2F+f+2d], sends act1 (S2 not posted), posts recv grad0: waits.
    //          S2 F0 B0 [.., F+2f+b+2d], sends grad0 (S1 posted) and posts recv act1: both [.., F+2f+b+3d]
    //          (S1 waited from 2F+f+2d: bubble until F+2f+b+2d, i.e. f+b-F, then PP d; S2 PP d).
    const Time g0 = F + f + f + b + d + d + d;  // F+2f+b+3d: grad0 and act1 arrived
    //          S1 B0 [g0, g0+B]; S2 F1 B1 [g0, g0+f+b], sends grad1 (S1 not posted), posts recv act2: waits.
    // g0+B     S1 sends grad0 (S0 posted) and posts recv act2 (S0's act2 pending): both [g0+B, g0+B+d]
    //          (S0 waited from F+2f+2d: bubble until g0+B, i.e. b+B+d, then PP d; S1 PP d).
    const Time t1 = g0 + B + d;
    //          S0 B0 [t1, t1+b], posts recv grad1; S1 F2 [t1, t1+F], sends act2 (S2 posted) and posts recv
    //          grad1 (S2's grad1 pending): both [t1+F, t1+F+d] (S1 PP d; S2 waited from g0+f+b: bubble until
    //          t1+F, i.e. B+F+d-f-b, then PP d).
    const Time t2 = t1 + F + d;
    //          S1 B1 [t2, t2+B]; S2 F2 B2 [t2, t2+f+b], sends grad2 (S1 not posted): waits for it.
    // t2+B     S1 sends grad1 (S0 posted at t1+b) and posts recv grad2 (S2's pending): [t2+B, t2+B+d]
    //          (S0: bubble t2+B - (t1+b), PP d; S2: bubble B-f-b, PP d, done at t2+B+d; S1 PP d).
    const Time t3 = t2 + B + d;
    //          S0 B1 [t3, t3+b], posts recv grad2; S1 B2 [t3, t3+B], sends grad2 [t3+B, t3+B+d]
    //          (S0: bubble B-b, PP d; S1: PP d, done at t3+B+d).
    const Time t4 = t3 + B + d;
    //          S0 B2 [t4, t4+b]: the step ends.
    const Time step = t4 + b;  // 2f + 2b + 2F + 3B + 7d: stage 1's passes, one wait f+b-F, S0's F0 and B2
    CHECK(step == f + f + b + b + F + F + B + B + B + d + d + d + d + d + d + d);
    check_slices(compute_slices(r, 1), {{"F", f + d, F + f + d},
                                        {"F", F + f + d + d, F + F + f + d + d},
                                        {"B", g0, g0 + B},
                                        {"F", t1, t1 + F},
                                        {"B", t2, t2 + B},
                                        {"B", t3, t3 + B}});
    check_slices(compute_slices(r, 0), {{"F", Time{}, f},
                                        {"F", f + d, f + f + d},
                                        {"F", F + f + d + d, F + f + f + d + d},
                                        {"B", t1, t1 + b},
                                        {"B", t3, t3 + b},
                                        {"B", t4, t4 + b}});
    check_slices(compute_slices(r, 2), {{"F", F + f + d + d, F + f + f + d + d},
                                        {"B", F + f + f + d + d, F + f + f + b + d + d},
                                        {"F", g0, g0 + f},
                                        {"B", g0 + f, g0 + f + b},
                                        {"F", t2, t2 + f},
                                        {"B", t2 + f, t2 + f + b}});
    CHECK(r.step_time_s == step.to_seconds());
    // Bubbles, from the waits above (each wait ends with PP d, the transfer):
    //   S0: 0 (act0) + (F - f) (act1) + (b + B + d) (grad0) + (t2 + B - t1 - b) (grad1) + (B - b) (grad2)
    //   S1: f (fill) + (f + b - F) (grad0) + 0 four times + b (drain: step - (t3 + B + d))
    //   S2: (F + f + d) (act0) + 0 + (B + F + d - f - b) (act2) + (B - f - b) (grad2) + drain step - (t2 + B
    //   + d)
    const Time s0_bubble = (F - f) + (b + B + d) + (t2 + B - t1 - b) + (B - b);
    const Time s2_bubble = (F + f + d) + (B + F + d - f - b) + (B - f - b) + (step - (t2 + B + d));
    check_accounts(r.ranks[0], {f + f + f + b + b + b, s0_bubble, d + d + d + d + d, step});
    check_accounts(r.ranks[1],
                   {F + F + F + B + B + B, f + (f + b - F) + b, d + d + d + d + d + d + d, t3 + B + d});
    check_accounts(r.ranks[2], {f + f + f + b + b + b, s2_bubble, d + d + d + d, t2 + B + d});
    // The slow stage is the bottleneck: every stage's accounts sum to the step.
    for (int s = 0; s < 3; ++s) {
        const RankTimes& t = r.ranks[static_cast<std::size_t>(s)];
        CHECK(std::abs(t.compute_s + t.bubble_s + t.pp_exposed_s - step.to_seconds()) <= 1e-12);
    }
}

TEST_CASE("executor timeline: PP 4, 1F1B, 4 micro-batches, the last stage slow, by hand") {
    const Cluster c(small_topology(1, 4, 4));
    const Time f = Time::seconds(kForwardS), b = Time::seconds(kBackwardS), d = pipeline_d(c);
    const Time F = f + f, B = b + b;  // stage 3's passes (factor 2)
    // Schedules: S0 F0 F1 F2 F3 B0 B1 B2 B3; S1 F0 F1 F2 B0 F3 B1 B2 B3; S2 F0 F1 B0 F2 B1 F3 B2 B3;
    // S3 F0 B0 F1 B1 F2 B2 F3 B3.
    const Program p = pipeline_program(Schedule::one_f_one_b, 4, 4);
    const Recorded r = run_slow_stage(c, pipeline_layout(Schedule::one_f_one_b, 4, 4), p, 3, 2.0);
    // Fill: act0 reaches stage k at k(f+d); each of stages 0-2 then runs its warm-up forwards back to back
    // with their sends (each waited for: d), the receiver posting as it finishes its previous forward:
    // S0 F_i [i(f+d), i(f+d)+f] (i < 4); S1 F_i [(i+1)(f+d), ..]; S2 F_i [(i+2)(f+d), ..] (i < 2 and 1: its
    // warm-up is one forward, the second is its first steady-state one).
    // a0 := 3(f+d): S3 receives act0 and runs F0 B0 [a0, a0+F+B]. Meanwhile S0 (after F3 at 4f+3d), S1
    // (after F2 at 4f+3d) and S2 (after F1 at 4f+3d) each send (not posted yet) and post recv grad0: wait.
    const Time a0 = f + d + f + d + f + d;
    // a0+F+B   S3 sends grad0 (S2 posted) and posts recv act1 (S2's pending): [a0+F+B, a0+F+B+d].
    const Time u0 = a0 + F + B + d;  // S3's pass i starts at u0 + (i-1)(F+B+d) for i >= 1
    // u0       S2 B0 [u0, u0+b], sends grad0 (S1 posted) and posts recv act2 (S1's pending): [.., u0+b+d].
    //          S3 F1 B1 [u0, u0+F+B].
    // u0+b+d   S1 B0 [.., u0+2b+d], sends grad0 (S0 posted) and posts recv act3 (S0's pending): arrive
    //          u0+2b+2d. S2 F2 [.., u0+b+f+d], sends act2 (S3 busy until u0+F+B) and posts recv grad1.
    // u0+2b+2d S0 B0 [.., u0+3b+2d], posts recv grad1. S1 F3 [.., u0+2b+f+2d], sends act3 (S2 waits at its
    //          recv grad1, not posted) and posts recv grad1.
    const Time u1 = u0 + F + B + d;
    // u0+F+B   S3 sends grad1 and posts recv act2: [.., u1]. S2 B1 [u1, u1+b], sends grad1 (S1 posted) and
    //          posts recv act3 (S1's pending): [.., u1+b+d]. S3 F2 B2 [u1, u1+F+B].
    // u1+b+d   S1 B1 [.., u1+2b+d], sends grad1 (S0 posted) and posts recv grad2 (not sent): grad1 reaches
    //          S0 at u1+2b+2d: S0 B1 [.., u1+3b+2d], posts recv grad2. S2 F3 [.., u1+b+f+d], sends act3 (S3
    //          busy) and posts recv grad2.
    const Time u2 = u1 + F + B + d;
    // u1+F+B   S3 sends grad2, posts recv act3: [.., u2]. Then as for grad1, one stage later each: S2 B2
    //          [u2, u2+b] (and posts recv grad3), S1 B2 [u2+b+d, u2+2b+d], S0 B2 [u2+2b+2d, u2+3b+2d].
    //          S3 F3 B3 [u2, u2+F+B].
    const Time u3 = u2 + F + B;  // S3's last backward ends; its grad3 arrives at u3 + d (S3 done)
    // u3       grad3 to S2 [u3, u3+d]; S2 B3 [u3+d, u3+b+d], grad3 to S1 (done at u3+b+2d); S1 B3
    //          [u3+b+2d, u3+2b+2d], grad3 to S0 (done at u3+2b+3d); S0 B3 [u3+2b+3d, u3+3b+3d].
    const Time step = u3 + b + b + b + d + d + d;  // 3f + 3b + 4F + 4B + 9d
    CHECK(step == f + f + f + b + b + b + F + F + F + F + B + B + B + B + d + d + d + d + d + d + d + d + d);
    check_slices(compute_slices(r, 3), {{"F", a0, a0 + F},
                                        {"B", a0 + F, a0 + F + B},
                                        {"F", u0, u0 + F},
                                        {"B", u0 + F, u0 + F + B},
                                        {"F", u1, u1 + F},
                                        {"B", u1 + F, u1 + F + B},
                                        {"F", u2, u2 + F},
                                        {"B", u2 + F, u2 + F + B}});
    const Time fd = f + d;
    check_slices(compute_slices(r, 2), {{"F", fd + fd, fd + fd + f},
                                        {"F", fd + fd + fd, fd + fd + fd + f},
                                        {"B", u0, u0 + b},
                                        {"F", u0 + b + d, u0 + b + d + f},
                                        {"B", u1, u1 + b},
                                        {"F", u1 + b + d, u1 + b + d + f},
                                        {"B", u2, u2 + b},
                                        {"B", u3 + d, u3 + d + b}});
    check_slices(compute_slices(r, 0), {{"F", Time{}, f},
                                        {"F", fd, fd + f},
                                        {"F", fd + fd, fd + fd + f},
                                        {"F", fd + fd + fd, fd + fd + fd + f},
                                        {"B", u0 + b + b + d + d, u0 + b + b + b + d + d},
                                        {"B", u1 + b + b + d + d, u1 + b + b + b + d + d},
                                        {"B", u2 + b + b + d + d, u2 + b + b + b + d + d},
                                        {"B", u3 + b + b + d + d + d, step}});
    CHECK(r.step_time_s == step.to_seconds());
    // Accounts: PP exposed is one d per transfer the stage waited for (S0: its 3 warm-up sends, then the 4
    // gradients; S1 and S2: 9 each; S3: its 4 exchanges and its last send); the rest of each wait is bubble.
    // By hand with f = 1, b = 2, F = 2, B = 4 (ms): step 33 + 9d; bubbles S0 21 + 2d (9 + 2d waiting for
    // grad0, then 4 for each other gradient), S1 21, S2 21, S3 9 + 4d (3 + 2d fill, 6 + 2d drain). Here
    // written as step - compute - PP, which the checks against the executor's split confirm.
    // S3 finishes at u3 + d, S2 at u3+b+2d, S1 at u3+2b+3d.
    const Time c4 = f + f + f + f + b + b + b + b;
    const Time pp0 = d + d + d + d + d + d + d, pp3 = d + d + d + d + d;
    const Time pp12 = pp0 + d + d;
    check_accounts(r.ranks[0], {c4, step - c4 - pp0, pp0, step});
    check_accounts(r.ranks[1], {c4, step - c4 - pp12, pp12, u3 + b + b + d + d + d});
    check_accounts(r.ranks[2], {c4, step - c4 - pp12, pp12, u3 + b + d + d});
    const Time c3 = F + F + F + F + B + B + B + B;
    check_accounts(r.ranks[3], {c3, step - c3 - pp3, pp3, u3 + d});
}

TEST_CASE("executor timeline: one DP all-reduce between two GPUs, by hand") {
    const Cluster c = two_gpus();
    // DP 2: forward, backward, the gradient all-reduce (waited for at once), optimizer.
    Layout l;
    l.tp = 1;
    l.pp = 1;
    l.dp = 2;
    l.micro_batch = 1;
    l.global_batch = 2;
    const double grad_bytes = 1e9;
    Program p;
    p.segments.push_back(Segment{"F", {}, kForwardS, 0, {}, ActivationCopy::none});
    p.segments.push_back(Segment{"B", {}, kBackwardS, 0, {}, ActivationCopy::none});
    p.segments.push_back(Segment{"O", {}, kOptimizerS, 0, {}, ActivationCopy::none});
    p.stages.resize(1);
    auto& ops = p.stages[0].ops;
    ops.push_back(compute_op(0, Phase::forward, 0));
    ops.push_back(compute_op(1, Phase::backward, 0));
    Op launch;
    launch.kind = OpKind::dp_launch;
    launch.collective = CollectiveKind::all_reduce;
    launch.bytes = grad_bytes;
    ops.push_back(launch);
    Op wait;
    wait.kind = OpKind::dp_wait;
    wait.dp_target = 1;
    ops.push_back(wait);
    ops.push_back(compute_op(2, Phase::optimizer, 0));
    const Recorded r = run(c, l, p);
    // Ring all-reduce over n = 2 (collectives.hpp): T = launch + 2(n-1)·alpha + 2(n-1)/n · S / B with
    // alpha = route latency + NCCL's per-step latency, B the bottleneck of the ring's links (edges 0->1 and
    // 1->0 use distinct links). At 1 GB NCCL's tuner picks the Simple protocol (full bandwidth).
    const Route r01 = c.route(0, 1), r10 = c.route(1, 0);
    double bw = 1e300;
    for (const Route* route : {&r01, &r10})
        for (int link : route->links)
            bw = std::min(bw, c.links()[static_cast<std::size_t>(link)].bandwidth.bytes_per_s);
    const double alpha = std::max(r01.latency, r10.latency).to_seconds() + kNcclStepLatencyS;
    const double all_reduce = kNcclLaunchLatencyS + 2 * alpha + grad_bytes / bw;
    CHECK(std::abs(isolated_collective_seconds(c, CollectiveKind::all_reduce, {0, 1}, grad_bytes) -
                   all_reduce) <= 2e-12);
    // Both replicas reach the all-reduce at f + b; it ends at f + b + T; the optimizer runs after.
    const double fb = kForwardS + kBackwardS;
    for (int rank = 0; rank < 2; ++rank) {
        CAPTURE(rank);
        const auto s = compute_slices(r, rank);
        REQUIRE(s.size() == 3u);
        CHECK(s[0].start.picoseconds() == 0);
        CHECK(s[1].end.picoseconds() == Time::seconds(fb).picoseconds());
        CHECK(std::abs(s[2].start.to_seconds() - (fb + all_reduce)) <= 2e-12);
        CHECK(s[2].end - s[2].start == Time::seconds(kOptimizerS));
        const RankTimes& t = r.ranks[static_cast<std::size_t>(rank)];
        CHECK(std::abs(t.compute_s - (fb + kOptimizerS)) <= 1e-15);
        CHECK(std::abs(t.dp_exposed_s - all_reduce) <= 2e-12);
        CHECK(t.bubble_s == 0);
        CHECK(t.pp_exposed_s == 0);
        CHECK(t.idle_s == 0);
    }
    CHECK(std::abs(r.step_time_s - (fb + all_reduce + kOptimizerS)) <= 2e-12);
    // The DP stream's slice is the collective itself.
    for (const RecordedSlice& s : r.slices)
        if (s.track == Track::dp_stream)
            CHECK(std::abs((s.end - s.start).to_seconds() - all_reduce) <= 2e-12);
}
