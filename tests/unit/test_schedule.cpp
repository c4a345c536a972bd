#include <doctest/doctest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;

namespace {

/// "F0 F1 B0 ..." for a non-interleaved schedule.
std::string compact(const std::vector<ScheduleItem>& items) {
    std::string s;
    for (const auto& it : items) {
        if (!s.empty()) s += ' ';
        s.push_back(it.forward ? 'F' : 'B');
        s.append(std::to_string(it.micro_batch));
    }
    return s;
}

/// Each micro-batch once forward and once backward, forwards and backwards each in micro-batch order, and the
/// backward of a micro-batch after its forward.
void check_each_once_in_order(const std::vector<ScheduleItem>& items, int m) {
    std::vector<int> fwd, bwd;
    std::vector<int> fwd_pos(static_cast<std::size_t>(m), -1), bwd_pos(static_cast<std::size_t>(m), -1);
    for (std::size_t i = 0; i < items.size(); ++i) {
        CHECK(items[i].chunk == 0);
        (items[i].forward ? fwd : bwd).push_back(items[i].micro_batch);
        (items[i].forward ? fwd_pos : bwd_pos)[static_cast<std::size_t>(items[i].micro_batch)] =
            static_cast<int>(i);
    }
    std::vector<int> expected;
    for (int i = 0; i < m; ++i)
        expected.push_back(i);
    CHECK(fwd == expected);
    CHECK(bwd == expected);
    for (int i = 0; i < m; ++i)
        CHECK(fwd_pos[static_cast<std::size_t>(i)] < bwd_pos[static_cast<std::size_t>(i)]);
}

}  // namespace

TEST_CASE("schedule: 1F1B on pp = 4, m = 8") {
    const int pp = 4, m = 8;
    for (int r = 0; r < pp; ++r) {
        CAPTURE(r);
        const auto items = pipeline_schedule(Schedule::one_f_one_b, pp, r, m, 1);
        REQUIRE(items.size() == 2u * m);
        check_each_once_in_order(items, m);
        // Warm-up: p - r - 1 forwards, then strict alternation F, B, then the cool-down backwards.
        const int warmup = pp - r - 1;
        for (int i = 0; i < warmup; ++i)
            CHECK(items[static_cast<std::size_t>(i)].forward);
        for (int i = warmup; i < warmup + 2 * (m - warmup); ++i)
            CHECK(items[static_cast<std::size_t>(i)].forward == ((i - warmup) % 2 == 0));
        for (int i = warmup + 2 * (m - warmup); i < 2 * m; ++i)
            CHECK(!items[static_cast<std::size_t>(i)].forward);
    }
    CHECK(compact(pipeline_schedule(Schedule::one_f_one_b, pp, 0, m, 1)) ==
          "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
    CHECK(compact(pipeline_schedule(Schedule::one_f_one_b, pp, 3, m, 1)) ==
          "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
    CHECK(compact(pipeline_schedule(Schedule::one_f_one_b, pp, 1, m, 1)) ==
          "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 B6 B7");
}

TEST_CASE(
    "schedule: 1F1B with fewer micro-batches than stages degenerates to all-forward then all-backward") {
    const auto items = pipeline_schedule(Schedule::one_f_one_b, 4, 0, 2, 1);
    CHECK(compact(items) == "F0 F1 B0 B1");
}

TEST_CASE("schedule: GPipe runs all forwards, then all backwards") {
    for (int r = 0; r < 4; ++r) {
        const auto items = pipeline_schedule(Schedule::gpipe, 4, r, 8, 1);
        REQUIRE(items.size() == 16u);
        check_each_once_in_order(items, 8);
        for (int i = 0; i < 8; ++i)
            CHECK(items[static_cast<std::size_t>(i)].forward);
        for (int i = 8; i < 16; ++i)
            CHECK(!items[static_cast<std::size_t>(i)].forward);
    }
}

TEST_CASE("schedule: interleaved 1F1B (vpp = 2, pp = 2, m = 4)") {
    const int pp = 2, vpp = 2, m = 4;
    for (int r = 0; r < pp; ++r) {
        CAPTURE(r);
        const auto items = pipeline_schedule(Schedule::one_f_one_b, pp, r, m, vpp);
        REQUIRE(items.size() == static_cast<std::size_t>(2 * m * vpp));
        std::map<std::pair<int, int>, int> fwd_pos, bwd_pos;  // (chunk, micro-batch) -> position
        for (std::size_t i = 0; i < items.size(); ++i) {
            const auto& it = items[i];
            CHECK(it.chunk >= 0);
            CHECK(it.chunk < vpp);
            CHECK(it.micro_batch >= 0);
            CHECK(it.micro_batch < m);
            auto& pos = it.forward ? fwd_pos : bwd_pos;
            CHECK(pos.count({it.chunk, it.micro_batch}) == 0);  // at most once
            pos[{it.chunk, it.micro_batch}] = static_cast<int>(i);
        }
        // Every (chunk, micro-batch) once forward and once backward.
        CHECK(fwd_pos.size() == static_cast<std::size_t>(m * vpp));
        CHECK(bwd_pos.size() == static_cast<std::size_t>(m * vpp));
        for (int mb = 0; mb < m; ++mb) {
            CAPTURE(mb);
            // A micro-batch goes through chunk 0 before chunk 1 forward, and back through chunk 1 before
            // chunk 0.
            CHECK(fwd_pos.at({0, mb}) < fwd_pos.at({1, mb}));
            CHECK(bwd_pos.at({1, mb}) < bwd_pos.at({0, mb}));
            for (int c = 0; c < vpp; ++c)
                CHECK(fwd_pos.at({c, mb}) < bwd_pos.at({c, mb}));
        }
    }
    // Rank 0, Megatron-LM's order: micro-batches in groups of pp per chunk; warm-up (pp-1)*2 + (vpp-1)*pp
    // = 4.
    const auto r0 = pipeline_schedule(Schedule::one_f_one_b, pp, 0, m, vpp);
    std::vector<std::pair<int, int>> first_forwards;
    for (int i = 0; i < 4; ++i) {
        CHECK(r0[static_cast<std::size_t>(i)].forward);
        first_forwards.emplace_back(r0[static_cast<std::size_t>(i)].chunk,
                                    r0[static_cast<std::size_t>(i)].micro_batch);
    }
    CHECK(first_forwards == std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}});
    CHECK(!r0[5].forward);
    CHECK(r0[5].chunk == 1);  // the first backward runs the last chunk
    CHECK(r0[5].micro_batch == 0);
}

TEST_CASE("schedule: bad arguments are internal errors") {
    CHECK_THROWS_AS(pipeline_schedule(Schedule::one_f_one_b, 4, 4, 8, 1), InternalError);
    CHECK_THROWS_AS(pipeline_schedule(Schedule::one_f_one_b, 4, 0, 0, 1), InternalError);
    CHECK_THROWS_AS(pipeline_schedule(Schedule::gpipe, 0, 0, 8, 1), InternalError);
}

TEST_CASE("program: a program built in a recycled one's op lists is the program built fresh") {
    // The sweep builds each point's program in the memory of the previous one's (build_program's
    // `recycled`): a longer, a shorter and a deeper pipeline in turn must each give the fresh program's ops.
    const ModelSpec m = trainsim::test::small_gpt(8);
    auto layout = [](int pp, std::int64_t global_batch) {
        Layout l;
        l.pp = pp;
        l.global_batch = global_batch;
        return l;
    };
    auto same_ops = [](const Program& a, const Program& b) {
        REQUIRE(a.stages.size() == b.stages.size());
        for (std::size_t s = 0; s < a.stages.size(); ++s) {
            const auto& x = a.stages[s].ops;
            const auto& y = b.stages[s].ops;
            REQUIRE(x.size() == y.size());
            for (std::size_t i = 0; i < x.size(); ++i) {
                CHECK(x[i].kind == y[i].kind);
                CHECK(x[i].segment == y[i].segment);
                CHECK(x[i].bytes == y[i].bytes);
                CHECK(x[i].micro_batch == y[i].micro_batch);
                CHECK(x[i].virtual_stage == y[i].virtual_stage);
                CHECK(x[i].group == y[i].group);
            }
            CHECK(a.stages[s].memory_marks.size() == b.stages[s].memory_marks.size());
            CHECK(a.stages[s].hardware_flops == b.stages[s].hardware_flops);
        }
    };
    Program scratch;
    for (const Layout& l : {layout(2, 32), layout(2, 4), layout(4, 16), layout(1, 8)}) {
        CAPTURE(l.pp);
        CAPTURE(l.global_batch);
        const Program fresh = build_program(m, l);
        scratch = build_program(m, l, std::move(scratch));
        same_ops(fresh, scratch);
    }
}
