// The planner's answers (issue 16 item 3): several cluster sizes in one sweep, the memory safety margin, the
// time to train, tokens/day; and the sweep and validation spread over processes (process_group.hpp), here
// over threads that stand in for MPI ranks.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <barrier>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/process_group.hpp"
#include "trainsim/report.hpp"
#include "trainsim/sweep.hpp"
#include "trainsim/units.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

/// `size` ranks in one process, each a thread: all_gather waits for every rank's items (a generation
/// counter makes it reusable, call after call).
struct ThreadExchange {
    explicit ThreadExchange(int size) : slots(static_cast<std::size_t>(size)) {}
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<std::vector<std::string>> slots;
    int arrived = 0;
    std::uint64_t generation = 0;
    std::vector<std::vector<std::string>> result;
};

class ThreadRank : public ProcessGroup {
  public:
    ThreadRank(ThreadExchange& ex, int rank) : ex_(ex), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(ex_.slots.size()); }
    std::vector<std::vector<std::string>> all_gather(const std::vector<std::string>& mine) override {
        std::unique_lock<std::mutex> lock(ex_.mutex);
        const std::uint64_t gen = ex_.generation;
        ex_.slots[static_cast<std::size_t>(rank_)] = mine;
        if (++ex_.arrived == size()) {
            ex_.result = ex_.slots;
            ex_.arrived = 0;
            ++ex_.generation;
            ex_.cv.notify_all();
        } else {
            ex_.cv.wait(lock, [&] { return ex_.generation != gen; });
        }
        return ex_.result;
    }

  private:
    ThreadExchange& ex_;
    int rank_;
};

/// Runs body(group) on `size` thread ranks; the results of every rank.
template <class F>
auto on_ranks(int size, F body) {
    ThreadExchange ex(size);
    using R = decltype(body(std::declval<ProcessGroup*>()));
    std::vector<R> out(static_cast<std::size_t>(size));
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r)
        threads.emplace_back([&, r] {
            ThreadRank group(ex, r);
            try {
                out[static_cast<std::size_t>(r)] = body(&group);
            } catch (...) {
                errors[static_cast<std::size_t>(r)] = std::current_exception();
            }
        });
    for (auto& t : threads)
        t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    return out;
}

Layout base_layout(std::int64_t global_batch) {
    Layout l;
    l.global_batch = global_batch;
    return l;
}

SweepGrid small_grid() {
    SweepGrid g;
    for (const char* r : {"micro_batch=1,2", "recompute=none,selective", "vpp=1,2"})
        restrict_sweep_grid(g, r, "--vary");
    return g;
}

std::string all_outputs(const SweepResult& r) {
    return sweep_csv(r) + format_sweep_text(r, 50) + sweep_json(r).dump();
}

}  // namespace

TEST_CASE("parse_count: K, M, B, T suffixes; anything else one line naming the option") {
    CHECK(parse_count("15T", "--tokens") == doctest::Approx(15e12));
    CHECK(parse_count("300B", "--tokens") == doctest::Approx(300e9));
    CHECK(parse_count("2.5e12", "--tokens") == doctest::Approx(2.5e12));
    CHECK(parse_count("7", "--tokens") == 7.0);
    CHECK(parse_count("1.5K", "--tokens") == 1500.0);
    CHECK(parse_count("4M", "--tokens") == 4e6);
    for (const char* bad : {"", "T", "15X", "-1T", "0", "0T", "nan", " 5T", "5 T", "1e400"})
        CHECK_MESSAGE(contains(message_of<InputError>([&] { parse_count(bad, "--tokens"); }),
                               "--tokens = \"" + std::string(bad) + "\" is not a positive count"),
                      bad);
}

TEST_CASE("time to train: whole steps of global_batch x seq_len tokens; GPU-hours; cost") {
    Report r;
    r.step_time_s = 2.0;
    r.gpus = 8;
    r.layout.global_batch = 4;
    r.model.seq_len = 1000;                                // 4,000 tokens per step
    const TimeToTrain t = time_to_train(r, 1e6 + 1, 2.5);  // 251 steps (the last one partly used)
    CHECK(t.tokens_per_step == 4000.0);
    CHECK(t.steps == 251.0);
    CHECK(t.seconds == 502.0);
    CHECK(t.days == doctest::Approx(502.0 / 86400.0));
    CHECK(t.gpu_hours == doctest::Approx(502.0 / 3600.0 * 8));
    REQUIRE(t.cost_usd);
    CHECK(*t.cost_usd == doctest::Approx(t.gpu_hours * 2.5));
    CHECK_FALSE(time_to_train(r, 1e6, std::nullopt).cost_usd);
    CHECK(count_text(950) == "950");
    CHECK(count_text(12345) == "12.3K");
    CHECK(count_text(2.027e11) == "202.7B");
    CHECK(count_text(15e12) == "15.0T");
    const std::string text = time_to_train_text(t);
    CHECK(contains(text, "time to train 1.0M tokens"));
    CHECK(contains(text, "(at $2.50 per GPU-hour)"));
}

TEST_CASE("spread_map: every rank gets every result in index order; the first error in index order") {
    const auto square = [](std::size_t i) {
        if (i == 7) throw InternalError("seven");
        if (i == 5) throw InputError("five");
        return static_cast<double>(i * i);
    };
    const auto encode = [](double x) { return std::to_string(x); };
    const auto decode = [](const std::string& s, std::size_t) { return std::stod(s); };
    const auto results = on_ranks(3, [&](ProcessGroup* g) {
        return spread_map(5, 2, g, square, encode, decode);  // indices 0..4: no error
    });
    for (const auto& r : results)
        CHECK(r == std::vector<double>{0, 1, 4, 9, 16});
    // Indices 5 (rank 2) and 7 (rank 1) throw: every rank rethrows index 5's InputError.
    const auto kinds = on_ranks(3, [&](ProcessGroup* g) {
        try {
            spread_map(9, 1, g, square, encode, decode);
        } catch (const InputError& e) {
            return std::string("input: ") + e.what();
        } catch (const InternalError& e) {
            return std::string("internal: ") + e.what();
        }
        return std::string("none");
    });
    for (const auto& k : kinds)
        CHECK(k == "input: five");
}

TEST_CASE("sweep over processes: every output byte for byte the single process's") {
    const TopologySpec topo = trainsim::test::small_topology(2);  // 16 GPUs on 2 nodes
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    SweepOptions one;
    one.jobs = 1;
    one.gpus = {8, 16};
    one.train_tokens = 1e9;
    one.gpu_hour_price_usd = 2.0;
    const auto single = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", one);
    REQUIRE(single.simulated > 10);
    const auto outputs = on_ranks(3, [&](ProcessGroup* g) {
        SweepOptions o = one;
        o.processes = g;
        return all_outputs(run_sweep(topo, m, base_layout(16), small_grid(), "tiny", o));
    });
    for (const auto& out : outputs)
        CHECK(out == all_outputs(single));
    // Pruned: rounds over processes, the threads of one process as they are free; the same kept layouts.
    // Then keeping the Pareto front (--html): rounds skip dominated groups after their walks; the same kept.
    const auto ranks_match_threads = [&](const SweepOptions& pruned) {
        const auto threads = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", pruned);
        REQUIRE(threads.pruned > 0);
        const auto pruned_outputs = on_ranks(3, [&](ProcessGroup* g) {
            SweepOptions o = pruned;
            o.jobs = 1;
            o.processes = g;
            return all_outputs(run_sweep(topo, m, base_layout(16), small_grid(), "tiny", o));
        });
        for (const auto& out : pruned_outputs)
            CHECK(out == all_outputs(threads));
    };
    SweepOptions pruned = one;
    pruned.prune_beyond_top = 3;
    pruned.jobs = 2;
    ranks_match_threads(pruned);
    pruned.prune_keeps_pareto_front = true;
    ranks_match_threads(pruned);
}

TEST_CASE("sweep --gpus with several sizes: one ranking, a gpus column; one size as before") {
    const TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    SweepOptions opt;
    opt.jobs = 2;
    const auto plain = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", opt);
    opt.gpus = {16};
    const auto same = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", opt);
    CHECK(all_outputs(plain) == all_outputs(same));
    CHECK_FALSE(contains(sweep_csv(plain), ",gpus,"));
    opt.gpus = {16, 8, 16};  // sorted, repeats dropped
    const auto both = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", opt);
    CHECK(both.sizes == std::vector<int>{8, 16});
    CHECK(both.entries.size() ==
          plain.entries.size() + enumerate_layouts(m, base_layout(16), small_grid(), 8, 8).size());
    for (std::size_t i = 1; i < both.simulated; ++i)
        CHECK(both.entries[i - 1].report.step_time_s <= both.entries[i].report.step_time_s);
    for (const auto& e : both.entries) {
        CHECK((e.gpus == 8 || e.gpus == 16));
        if (e.status == SweepStatus::simulated) CHECK(e.layout.gpus() == e.gpus);
    }
    CHECK(contains(sweep_csv(both), "rank,gpus,tp,"));
    CHECK(contains(format_sweep_text(both, 5), "on 8, 16 x A100"));
    CHECK(contains(format_sweep_text(both, 5), "best layout per cluster size\n"));
    CHECK(sweep_json(both)["gpus"] == nlohmann::json({8, 16}));
    opt.gpus = {12};
    CHECK(
        contains(message_of<InputError>([&] { run_sweep(topo, m, base_layout(16), small_grid(), "t", opt); }),
                 "12 GPUs is not a positive multiple of"));
}

TEST_CASE("sweep --min-headroom: a peak above (1 - margin) x HBM does not fit, named by the margin") {
    const TopologySpec topo = trainsim::test::small_topology(1);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    SweepOptions opt;
    opt.jobs = 2;
    const auto free = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", opt);
    REQUIRE(free.simulated > 2);
    // A margin that leaves room for the smallest peak only: every layout above it is out of memory.
    double lowest = 1e30, highest = 0;
    for (std::size_t i = 0; i < free.simulated; ++i) {
        lowest = std::min(lowest, free.entries[i].peak_memory_bytes);
        highest = std::max(highest, free.entries[i].peak_memory_bytes);
    }
    REQUIRE(highest > lowest);
    opt.min_headroom = 1.0 - (lowest + highest) / 2 / free.hbm_bytes;
    const auto kept = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", opt);
    CHECK(kept.simulated + kept.out_of_memory == free.simulated + free.out_of_memory);
    CHECK(kept.simulated < free.simulated);
    for (const auto& e : kept.entries) {
        if (e.status == SweepStatus::simulated)
            CHECK(e.peak_memory_bytes <= (1 - opt.min_headroom) * kept.hbm_bytes);
        if (e.status == SweepStatus::out_of_memory) CHECK(contains(e.reason, "% headroom: "));
    }
    CHECK(contains(format_sweep_text(kept, 3), "% headroom kept)"));
}

TEST_CASE(
    "sweep --min-headroom: parameters, gradients and optimizer state over the HBM less the margin are "
    "out of memory without the walk, as the walk finds them") {
    // Round 7: the held-piles check compared them with the whole HBM, so a margin where no layout fits had
    // every layout walked in full (Llama 3 8B on 64 H100 at 99.99%: 46 s).
    const TopologySpec topo = trainsim::test::small_topology(1);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    SweepOptions walked;
    walked.jobs = 2;
    walked.min_headroom = 1 - 1e-6;  // about 80 KB of HBM left: below any layout's parameters
    SweepOptions held = walked;
    held.prune_beyond_top = 3;
    const auto a = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", walked);
    const auto b = run_sweep(topo, m, base_layout(16), small_grid(), "tiny", held);
    REQUIRE(a.out_of_memory > 2);
    CHECK(a.simulated == 0);
    CHECK(b.simulated == 0);
    CHECK(b.out_of_memory == a.out_of_memory);
    CHECK(b.rejected == a.rejected);
    for (const auto& e : b.entries)
        if (e.status == SweepStatus::out_of_memory) {
            CHECK(contains(e.reason, "% headroom: "));
            CHECK((contains(e.reason, "parameters") || contains(e.reason, "gradients") ||
                   contains(e.reason, "optimizer")));
            CHECK(e.peak_memory_bytes > (1 - held.min_headroom) * b.hbm_bytes);
        }
}
