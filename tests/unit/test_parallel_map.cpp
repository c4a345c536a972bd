#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "trainsim/parallel_map.hpp"

using namespace trainsim;

TEST_CASE("parallel_map: results by index, the same for any thread count") {
    auto square = [](std::size_t i) { return static_cast<double>(i) * static_cast<double>(i) + 0.5; };
    const auto serial = parallel_map(37, 1, square);
    REQUIRE(serial.size() == 37);
    for (std::size_t i = 0; i < serial.size(); ++i)
        CHECK(serial[i] == square(i));
    for (int jobs : {0, 2, 3, 8, 100})
        CHECK(parallel_map(37, jobs, square) == serial);
    CHECK(parallel_map(0, 4, square).empty());
}

TEST_CASE("parallel_map: a result type without a default constructor") {
    struct Item {
        explicit Item(std::string s) : text(std::move(s)) {}
        std::string text;
    };
    const auto items = parallel_map(5, 3, [](std::size_t i) { return Item(std::to_string(i)); });
    REQUIRE(items.size() == 5);
    CHECK(items[4].text == "4");
}

TEST_CASE("parallel_for: every index once") {
    std::vector<std::atomic<int>> hits(100);
    parallel_for(hits.size(), 4, [&](std::size_t i) { ++hits[i]; });
    for (const auto& h : hits)
        CHECK(h.load() == 1);
}

TEST_CASE("parallel_map: the exception of the smallest failing index is rethrown, for any thread count") {
    auto fail_from_7 = [](std::size_t i) -> int {
        if (i == 7 || i == 12 || i == 30) throw std::runtime_error("item " + std::to_string(i));
        return static_cast<int>(i);
    };
    for (int jobs : {1, 2, 4, 16}) {
        std::string what;
        try {
            (void)parallel_map(40, jobs, fail_from_7);
        } catch (const std::runtime_error& e) {
            what = e.what();
        }
        CHECK(what == "item 7");
    }
}

TEST_CASE("parallel_for: no index after a failure is started on one thread") {
    std::atomic<int> calls{0};
    CHECK_THROWS_AS(parallel_for(10, 1,
                                 [&](std::size_t i) {
                                     ++calls;
                                     if (i == 3) throw std::logic_error("stop");
                                 }),
                    std::logic_error);
    CHECK(calls.load() == 4);
}

TEST_CASE("parallel_for: at most the hardware threads run, whatever jobs asks") {
    // sweep -j 1024 started 1,024 threads, each holding a simulation (3.9 GiB for Llama 3 8B, exhaustive).
    const unsigned hardware = std::thread::hardware_concurrency();
    std::mutex mutex;
    std::set<std::thread::id> seen;
    parallel_for(4096, 1024, [&](std::size_t) {
        const std::lock_guard<std::mutex> lock(mutex);
        seen.insert(std::this_thread::get_id());
    });
    if (hardware > 0) {
        CHECK(seen.size() <= hardware);
        CHECK(worker_threads(1024) == std::min<std::size_t>(1024, hardware));
    }
    CHECK(worker_threads(0) == 1);
    CHECK(worker_threads(-5) == 1);
}
