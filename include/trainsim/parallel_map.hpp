#pragma once
// The one parallel-map facility of the library and the CLI: fn(i) for i in [0, n) on up to `jobs` threads,
// each result stored at its index, so what a caller computes from the results never depends on the number of
// threads or on their timing. Used by sweep, validate, fit, goodput and the what-if studies.
//
// Scheduling: the indices are handed out in increasing order from one atomic counter (a thread takes the
// next index when it is done with its last), so items of uneven cost balance themselves; a caller that
// wants the costliest first orders its items so. The calling thread is one of the workers; no thread is
// started when jobs <= 1 or n <= 1. At most the hardware threads run (std::thread::hardware_concurrency, when
// known): each worker of a sweep or validate holds a simulation, so `sweep -j 1024` held 3.9 GiB at no gain
// in speed (2026-11-28); the results are the same for any number.
//
// Exceptions: when fn(i) throws, no index after i is started (those already running finish), and after every
// worker has stopped the exception of the smallest index that threw is rethrown. Because indices are handed
// out in order, every index before a failing one has been started, so the exception rethrown is the same
// for any `jobs` (the one a serial loop would have met first).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace trainsim {

/// The threads parallel_for runs at most for `jobs`: max(jobs, 1), capped at the hardware threads when known.
inline std::size_t worker_threads(int jobs) {
    const auto wanted = static_cast<std::size_t>(std::max(jobs, 1));
    const unsigned hardware = std::thread::hardware_concurrency();
    return hardware > 0 ? std::min<std::size_t>(wanted, hardware) : wanted;
}

/// Runs fn(i) for every i in [0, n) on up to worker_threads(jobs) threads (the calling thread among them).
/// Rethrows the exception of the smallest index that threw, after every started call has returned.
template <class F>
void parallel_for(std::size_t n, int jobs, F&& fn) {
    std::atomic<std::size_t> next{0};
    std::atomic<std::size_t> first_failed{n};  // the smallest index that threw so far, n: none
    std::vector<std::exception_ptr> errors(n);
    auto work = [&] {
        for (std::size_t i = next.fetch_add(1); i < n && i < first_failed.load(); i = next.fetch_add(1)) {
            try {
                fn(i);
            } catch (...) {
                errors[i] = std::current_exception();
                std::size_t seen = first_failed.load();
                while (i < seen && !first_failed.compare_exchange_weak(seen, i)) {
                }
            }
        }
    };
    const std::size_t threads = std::min<std::size_t>(worker_threads(jobs), n);
    if (threads <= 1) {
        work();
    } else {
        std::vector<std::jthread> pool;
        pool.reserve(threads - 1);
        for (std::size_t t = 1; t < threads; ++t)
            pool.emplace_back(work);
        work();
    }  // the pool joins here
    if (const std::size_t i = first_failed.load(); i < n) std::rethrow_exception(errors[i]);
}

/// The results fn(0) .. fn(n - 1), computed as parallel_for does (same threads, same exceptions), in index
/// order. fn's result type must be move-constructible (it need not be default-constructible).
template <class F>
auto parallel_map(std::size_t n, int jobs, F&& fn) -> std::vector<std::invoke_result_t<F&, std::size_t>> {
    using R = std::invoke_result_t<F&, std::size_t>;
    static_assert(!std::is_void_v<R>, "parallel_map: fn returns nothing; use parallel_for");
    std::vector<std::optional<R>> slots(n);
    parallel_for(n, jobs, [&](std::size_t i) { slots[i].emplace(fn(i)); });
    std::vector<R> out;
    out.reserve(n);
    for (auto& s : slots)
        out.push_back(std::move(*s));
    return out;
}

}  // namespace trainsim
