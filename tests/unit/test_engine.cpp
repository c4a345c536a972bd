#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;

TEST_CASE("engine: events run in time order, then priority, then insertion order") {
    Simulator sim;
    std::vector<int> order;
    std::vector<std::int64_t> times;
    auto rec = [&](int id) {
        return [&, id] {
            order.push_back(id);
            times.push_back(sim.now().picoseconds());
        };
    };
    // Scheduled out of time order; same-time events with different priorities scheduled highest value first.
    sim.schedule(Time::ps(20), Priority::kDefault, rec(5));
    sim.schedule(Time::ps(10), Priority::kRateUpdate, rec(3));
    sim.schedule(Time::ps(10), Priority::kDefault, rec(2));
    sim.schedule(Time::ps(10), Priority::kFlowCompletion, rec(1));
    sim.schedule(Time::ps(5), Priority::kRateUpdate, rec(0));
    sim.schedule(Time::ps(15), Priority::kFlowCompletion, rec(4));
    CHECK(sim.pending() == 6);
    CHECK(sim.run() == 6);
    CHECK(order == std::vector<int>{0, 1, 2, 3, 4, 5});
    CHECK(times == std::vector<std::int64_t>{5, 10, 10, 10, 15, 20});
    CHECK(sim.now() == Time::ps(20));
    CHECK(sim.pending() == 0);
    CHECK(sim.events_executed() == 6);
}

TEST_CASE("engine: same time and priority run in insertion order (heap is made stable by the sequence)") {
    Simulator sim;
    std::vector<int> order;
    const int n = 257;  // enough for the heap to reorder equal keys if the sequence were ignored
    for (int i = 0; i < n; ++i)
        sim.schedule(Time::ps(7), Priority::kDefault, [&order, i] { order.push_back(i); });
    sim.run();
    REQUIRE(order.size() == static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i)
        CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("engine: insertion order holds when the storage of executed events is reused") {
    Simulator sim;
    // A first wave fills the callback storage; running it frees the storage, which the second wave then
    // reuses in another order. Ties must still break by the order of schedule() calls.
    for (int i = 0; i < 16; ++i)
        sim.schedule(Time::ps(1), Priority::kDefault, [] {});
    sim.run();
    std::vector<int> order;
    for (int i = 0; i < 16; ++i)
        sim.schedule(Time::ps(5), Priority::kDefault, [&order, i] { order.push_back(i); });
    sim.run();
    std::vector<int> expected;
    for (int i = 0; i < 16; ++i)
        expected.push_back(i);
    CHECK(order == expected);
}

TEST_CASE("engine: a random mix of times and priorities runs in (time, priority, sequence) order") {
    std::mt19937_64 rng(12345);
    std::uniform_int_distribution<int> t(0, 20);  // few distinct times: many ties
    const Priority prios[] = {Priority::kFlowCompletion, Priority::kDefault, Priority::kRateUpdate};
    std::uniform_int_distribution<int> p(0, 2);
    struct Key {
        std::int64_t time;
        int prio;
        int seq;
    };
    std::vector<Key> keys;
    Simulator sim;
    std::vector<int> order;
    for (int i = 0; i < 1000; ++i) {
        const Key k{t(rng), static_cast<int>(prios[p(rng)]), i};
        keys.push_back(k);
        sim.schedule(Time::ps(k.time), static_cast<Priority>(k.prio), [&order, i] { order.push_back(i); });
    }
    sim.run();
    std::vector<Key> expected = keys;
    std::sort(expected.begin(), expected.end(), [](const Key& a, const Key& b) {
        return std::tie(a.time, a.prio, a.seq) < std::tie(b.time, b.prio, b.seq);
    });
    REQUIRE(order.size() == expected.size());
    for (std::size_t i = 0; i < order.size(); ++i)
        CHECK(order[i] == expected[i].seq);
}

TEST_CASE("engine: scheduling before now() throws InternalError") {
    Simulator sim;
    bool checked = false;
    sim.schedule(Time::ps(100), Priority::kDefault, [&] {
        CHECK_THROWS_AS(sim.schedule(Time::ps(99), Priority::kDefault, [] {}), InternalError);
        CHECK_NOTHROW(sim.schedule(Time::ps(100), Priority::kDefault, [] {}));  // at now() is fine
        checked = true;
    });
    sim.run();
    CHECK(checked);
    CHECK(sim.now() == Time::ps(100));
    CHECK_THROWS_AS(sim.schedule(Time::ps(50), Priority::kDefault, [] {}), InternalError);
    CHECK(sim.pending() == 0);  // the refused event was not queued
}

namespace {
// A workload whose callbacks schedule more events (with ties), recording what ran when.
std::vector<std::pair<std::int64_t, int>> run_workload(std::uint64_t seed) {
    Simulator sim;
    std::mt19937_64 rng(seed);
    std::vector<std::pair<std::int64_t, int>> log;
    int next_id = 0;
    std::function<void(int, int)> spawn = [&](int id, int depth) {
        log.emplace_back(sim.now().picoseconds(), id);
        if (depth == 0) return;
        const int children = static_cast<int>(rng() % 3);
        for (int c = 0; c < children; ++c) {
            const int child = next_id++;
            const auto delay = static_cast<std::int64_t>(rng() % 4);  // 0: at now()
            const auto prio = static_cast<Priority>((rng() % 2) ? 0 : 10);
            sim.schedule_in(Time::ps(delay), prio, [&spawn, child, depth] { spawn(child, depth - 1); });
        }
    };
    for (int i = 0; i < 20; ++i) {
        const int id = next_id++;
        sim.schedule(Time::ps(static_cast<std::int64_t>(rng() % 5)), Priority::kDefault,
                     [&spawn, id] { spawn(id, 6); });
    }
    sim.run();
    return log;
}
}  // namespace

TEST_CASE("engine: identical runs give identical execution sequences") {
    const auto a = run_workload(42);
    const auto b = run_workload(42);
    CHECK(a.size() > 40);  // the workload did spawn events
    CHECK(a == b);
    // And the log is in non-decreasing time order.
    CHECK(std::is_sorted(a.begin(), a.end(), [](const auto& x, const auto& y) { return x.first < y.first; }));
}

TEST_CASE("engine: events scheduled from a callback at now() run, before later-priority pending events") {
    Simulator sim;
    std::vector<std::string> order;
    sim.schedule(Time::ps(5), Priority::kRateUpdate, [&] { order.push_back("rate_update"); });
    sim.schedule(Time::ps(5), Priority::kDefault, [&] {
        order.push_back("default");
        sim.schedule(sim.now(), Priority::kFlowCompletion, [&] {
            order.push_back("child_at_now");
            CHECK(sim.now() == Time::ps(5));
        });
        sim.schedule_in(Time{}, Priority::kRateUpdate, [&] { order.push_back("child_after_rate_update"); });
        sim.schedule_in(Time::ps(3), Priority::kDefault, [&] {
            order.push_back("child_later");
            CHECK(sim.now() == Time::ps(8));
        });
    });
    CHECK(sim.run() == 5);
    CHECK(order == std::vector<std::string>{"default", "child_at_now", "rate_update",
                                            "child_after_rate_update", "child_later"});
}

TEST_CASE("engine: large and move-only callbacks run once and are destroyed") {
    Simulator sim;
    auto alive = std::make_shared<int>(0);
    std::vector<int> order;
    struct Big {
        double pad[12];  // 96 bytes: stored out of line
    };
    Big big{};
    big.pad[11] = 3;
    sim.schedule(Time::ps(2), Priority::kDefault,
                 [&order, big, alive] { order.push_back(int(big.pad[11])); });
    auto owned = std::make_unique<int>(1);
    sim.schedule(Time::ps(1), Priority::kDefault,
                 [&order, p = std::move(owned), alive] { order.push_back(*p); });
    std::function<void()> f = [&order, alive] { order.push_back(2); };
    sim.schedule(Time::ps(1), Priority::kDefault, f);
    CHECK(alive.use_count() == 5);  // `alive`, the two lambdas, `f` and the copy of `f` scheduled
    sim.run();
    CHECK(order == std::vector<int>{1, 2, 3});
    CHECK(alive.use_count() == 2);  // `alive` and the copy held by `f`
}

TEST_CASE("engine: a priority outside 0 .. 255 is an internal error") {
    Simulator sim;
    CHECK_THROWS_AS(sim.schedule(Time::ps(1), static_cast<Priority>(256), [] {}), InternalError);
    CHECK_THROWS_AS(sim.schedule(Time::ps(1), static_cast<Priority>(-1), [] {}), InternalError);
    CHECK(sim.pending() == 0);
}

namespace {
// Events that schedule more events (ties in time and priority included); returns the execution order.
std::vector<int> renumber_workload(std::uint64_t sequence_limit) {
    Simulator sim;
    if (sequence_limit > 0) sim.set_sequence_limit_for_testing(sequence_limit);
    std::mt19937_64 rng(7);
    std::vector<int> order;
    int next = 0;
    std::function<void(int)> add = [&](int depth) {
        const int id = next++;
        const auto at = Time::ps(sim.now().picoseconds() + static_cast<std::int64_t>(rng() % 4));
        const auto prio = static_cast<Priority>((rng() % 2) ? 0 : 10);
        sim.schedule(at, prio, [&, id, depth] {
            order.push_back(id);
            if (depth > 0)
                for (int c = 0; c < 2; ++c)
                    add(depth - 1);
        });
    };
    for (int i = 0; i < 30; ++i)
        add(4);
    sim.run();
    return order;
}
}  // namespace

TEST_CASE("engine: renumbering the sequence of pending events keeps the (time, priority, sequence) order") {
    // With a limit of 5 the pending events are renumbered at almost every schedule() call (from outside and
    // from callbacks); the execution order must be the one of the unbounded insertion counter.
    const auto reference = renumber_workload(0);
    CHECK(reference.size() == 30u * 31u);
    CHECK(renumber_workload(5) == reference);
    CHECK(renumber_workload(64) == reference);
}

TEST_CASE(
    "engine: events scheduled by a running event take its place in the heap in key order, also past a "
    "throw") {
    // Simulator::run leaves the running event's entry at the root and lets the first event its callback
    // schedules take that place (replace_root). Each event here schedules 0 to 3 more, at now() or up to 5 ps
    // later, of any of three priorities (so some come before pending ones at now()); a reference loop over a
    // std::set of (time, priority, sequence) gives the order they must run in. Event 300 throws: run() passes
    // the exception on, pending() counts what is left, and a second run() goes on in the same order.
    struct Key {
        std::int64_t time;
        int prio;
        int seq;
        bool operator<(const Key& o) const {
            return std::tie(time, prio, seq) < std::tie(o.time, o.prio, o.seq);
        }
    };
    const Priority prios[] = {Priority::kFlowCompletion, Priority::kDefault, Priority::kRateUpdate};
    auto children = [](int seq) {  // (delay ps, priority index) of the events event `seq` schedules
        std::mt19937_64 rng(static_cast<std::uint64_t>(seq) * 7919u + 17u);
        std::vector<std::pair<int, int>> out;
        const int n = seq < 2000 ? static_cast<int>(rng() % 4) : 0;
        for (int i = 0; i < n; ++i)
            out.emplace_back(static_cast<int>(rng() % 6), static_cast<int>(rng() % 3));
        return out;
    };
    // The reference.
    std::vector<int> expected;
    std::vector<std::size_t> pending_after;  // [i]: events pending once the i-th has run
    {
        std::set<Key> queue;
        int next = 0;
        for (int i = 0; i < 50; ++i)
            queue.insert(Key{i % 7, static_cast<int>(prios[i % 3]), next++});
        while (!queue.empty()) {
            const Key k = *queue.begin();
            queue.erase(queue.begin());
            expected.push_back(k.seq);
            for (auto [delay, p] : children(k.seq))
                queue.insert(Key{k.time + delay, static_cast<int>(prios[p]), next++});
            pending_after.push_back(queue.size());
        }
    }
    REQUIRE(expected.size() > 1000u);
    Simulator sim;
    std::vector<int> order;
    int next = 0;
    std::function<void(int)> body = [&](int seq) {
        order.push_back(seq);
        for (auto [delay, p] : children(seq)) {
            const int child = next++;
            sim.schedule(sim.now() + Time::ps(delay), prios[p], [&body, child] { body(child); });
        }
        if (seq == 300) throw InternalError("event 300");
    };
    for (int i = 0; i < 50; ++i) {
        const int seq = next++;
        sim.schedule(Time::ps(i % 7), prios[i % 3], [&body, seq] { body(seq); });
    }
    CHECK_THROWS_AS(sim.run(), InternalError);
    const auto ran = order.size();
    REQUIRE(ran >= 1u);
    CHECK(sim.pending() == pending_after[ran - 1]);
    sim.run();
    CHECK(order == expected);
    CHECK(sim.pending() == 0u);
}
