// Event engine throughput (events/s): the target (issue "sweep"): >= 20 million events per second on one
// core. Each iteration schedules a batch of events at pseudo-random future times (a heap of realistic depth)
// and runs them. The callbacks are small lambdas capturing a pointer, as the simulator's own are
// ([this, unit], [this, flow, version]); BM_EngineEventThroughputStdFunction passes a std::function holding a
// larger capture instead (one heap allocation per event, as the engine cost before the inline callbacks).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>

#include "trainsim/engine.hpp"

namespace {

struct Chain {
    trainsim::Simulator* sim = nullptr;
    std::uint64_t x = 88172645463325252ULL;
    std::uint64_t counter = 0;
    std::uint64_t pending = 0;
    std::uint64_t total = 0;

    void step() {
        if (++counter + pending > total) return;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sim->schedule_in(trainsim::Time::ps(static_cast<std::int64_t>(x % 1000000)),
                         trainsim::Priority::kDefault, [this] { step(); });
    }
};

void BM_EngineEventThroughput(benchmark::State& state) {
    const std::int64_t pending = state.range(0);
    std::uint64_t executed = 0;
    for (auto _ : state) {
        trainsim::Simulator sim;
        Chain c;
        c.sim = &sim;
        c.pending = static_cast<std::uint64_t>(pending);
        c.total = static_cast<std::uint64_t>(pending) * 16;
        // Keep `pending` events in flight: every event schedules one successor until `total` have run.
        for (std::int64_t i = 0; i < pending; ++i)
            sim.schedule(trainsim::Time::ps(i), trainsim::Priority::kDefault, [&c] { c.step(); });
        executed += sim.run();
    }
    state.counters["events/s"] =
        benchmark::Counter(static_cast<double>(executed), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineEventThroughput)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

void BM_EngineEventThroughputStdFunction(benchmark::State& state) {
    const std::int64_t pending = state.range(0);
    std::uint64_t executed = 0;
    for (auto _ : state) {
        trainsim::Simulator sim;
        std::uint64_t x = 88172645463325252ULL;
        std::uint64_t counter = 0;
        const std::int64_t total = pending * 16;
        std::function<void()> chain;
        chain = [&] {
            if (++counter + static_cast<std::uint64_t>(pending) > static_cast<std::uint64_t>(total)) return;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sim.schedule_in(trainsim::Time::ps(static_cast<std::int64_t>(x % 1000000)),
                            trainsim::Priority::kDefault, chain);
        };
        for (std::int64_t i = 0; i < pending; ++i)
            sim.schedule(trainsim::Time::ps(i), trainsim::Priority::kDefault, chain);
        executed += sim.run();
    }
    state.counters["events/s"] =
        benchmark::Counter(static_cast<double>(executed), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineEventThroughputStdFunction)->Arg(1024)->Arg(65536)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
