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

Layout pipeline_layout(Schedule schedule, int micro_batches) {
    Layout l;
    l.tp = 1;
    l.pp = 2;
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

/// The program of a 2-stage pipeline: segment 0 forward (f), 1 backward (b). Each stage runs the passes of
/// pipeline_schedule(schedule, 2, rank, m, 1); a forward on stage 1 receives its activations first and a
/// forward on stage 0 sends them after; a backward on stage 0 receives its gradients first and a backward
/// on stage 1 sends them after.
Program pipeline_program(Schedule schedule, int m) {
    Program p;
    p.segments.push_back(Segment{"F", {}, kForwardS, 0});
    p.segments.push_back(Segment{"B", {}, kBackwardS, 0});
    p.stages.resize(2);
    for (int rank = 0; rank < 2; ++rank) {
        auto& ops = p.stages[static_cast<std::size_t>(rank)].ops;
        for (const ScheduleItem& it : pipeline_schedule(schedule, 2, rank, m, 1)) {
            if (it.forward) {
                if (rank == 1) ops.push_back(p2p_op(OpKind::recv, +1, 1, it.micro_batch));
                ops.push_back(compute_op(0, Phase::forward, it.micro_batch));
                if (rank == 0) ops.push_back(p2p_op(OpKind::send, +1, 1, it.micro_batch));
            } else {
                if (rank == 0) ops.push_back(p2p_op(OpKind::recv, -1, 0, it.micro_batch));
                ops.push_back(compute_op(1, Phase::backward, it.micro_batch));
                if (rank == 1) ops.push_back(p2p_op(OpKind::send, -1, 0, it.micro_batch));
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

/// d, the time of one P2P message alone on its route, by the alpha-beta formula from the cluster's graph.
double p2p_seconds_by_hand(const Cluster& c) {
    const Route r = c.route(0, 1);
    double bw = 1e300;
    for (int l : r.links)
        bw = std::min(bw, c.links()[static_cast<std::size_t>(l)].bandwidth.bytes_per_s);
    return kNcclLaunchLatencyS + kMessageBytes / bw + r.latency.to_seconds();
}

/// d as the executor times it: one message from stage 0 to stage 1, nothing else. Checked against the
/// formula to the picosecond; the timelines then add it exactly.
Time measured_p2p(const Cluster& c) {
    Program p;
    p.stages.resize(2);
    p.stages[0].ops.push_back(p2p_op(OpKind::send, +1, 1, 0));
    p.stages[1].ops.push_back(p2p_op(OpKind::recv, +1, 1, 0));
    const Recorded r = run(c, pipeline_layout(Schedule::one_f_one_b, 1), p);
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
    p.segments.push_back(Segment{"F", {}, kForwardS, 0});
    p.segments.push_back(Segment{"B", {}, kBackwardS, 0});
    p.segments.push_back(Segment{"O", {}, kOptimizerS, 0});
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
