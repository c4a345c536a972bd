#pragma once
// Processes that share the independent points of a study (the MPI ranks of `mpirun -np N trainsim sweep`):
// the library's view of a process group, with no MPI in it. The CLI implements it with Boost.MPI
// (tools/trainsim/mpi_spread.cpp); the library's sweep and validation spread their points with spread_map.
//
// Every process runs the same command on the same inputs, so every process enumerates the same points in the
// same order. spread_map gives point i to process i % size (cyclic: a list ordered costliest first is dealt
// out evenly), each process computes its points on its own threads (parallel_for), and every process gets
// every result back (all_gather), decoded in index order. The simulation being deterministic, the results,
// and so what the caller computes from them, are those of a single process, byte for byte.
//
// Exceptions: an exception of fn(i) travels to every process as its kind (InputError, InternalError; any
// other std::exception becomes an InternalError with its message) and message; after the gather every process
// rethrows the one of the smallest index, as parallel_map does. Each process computes all of its share even
// after one of its points threw (parallel_map stops starting new ones), which changes the work done, not the
// exception rethrown.
#include <cstddef>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "trainsim/errors.hpp"
#include "trainsim/parallel_map.hpp"

namespace trainsim {

class ProcessGroup {
  public:
    virtual ~ProcessGroup() = default;
    virtual int rank() const = 0;  ///< this process, 0 .. size() - 1
    virtual int size() const = 0;  ///< the processes, >= 1
    /// Collective: every process calls it, the same number of times in the same order. Each passes its own
    /// items; each gets every process's items, [process][item].
    virtual std::vector<std::vector<std::string>> all_gather(const std::vector<std::string>& mine) = 0;
};

/// The results fn(0) .. fn(n - 1) in index order, as parallel_map(n, jobs, fn) computes them, with the
/// indices spread over the processes of `group` (none, or one process: parallel_map itself, nothing encoded).
/// `encode` turns a result into bytes (std::string) and decode(bytes, i) turns the bytes of index i back;
/// decode(encode(fn(i)), i) must hold what the caller reads of fn(i).
template <class F, class Encode, class Decode>
auto spread_map(std::size_t n, int jobs, ProcessGroup* group, F&& fn, Encode&& encode, Decode&& decode)
    -> std::vector<std::invoke_result_t<F&, std::size_t>> {
    using R = std::invoke_result_t<F&, std::size_t>;
    if (!group || group->size() <= 1) return parallel_map(n, jobs, fn);
    const auto size = static_cast<std::size_t>(group->size());
    const auto rank = static_cast<std::size_t>(group->rank());
    std::vector<std::size_t> mine;
    for (std::size_t i = rank; i < n; i += size)
        mine.push_back(i);
    // Each item: a tag ('r' result, 'i' InputError, 'n' InternalError), then the encoded result or the
    // message.
    const auto tagged = [](char tag, std::string_view body) {
        std::string item(1, tag);
        item.append(body);
        return item;
    };
    const std::vector<std::string> items = parallel_map(mine.size(), jobs, [&](std::size_t k) -> std::string {
        try {
            return tagged('r', encode(fn(mine[k])));
        } catch (const InputError& e) {
            return tagged('i', e.what());
        } catch (const std::exception& e) {
            return tagged('n', e.what());
        }
    });
    const std::vector<std::vector<std::string>> all = group->all_gather(items);
    std::vector<R> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::string& item = all.at(i % size).at(i / size);
        const std::string body = item.substr(1);
        if (item.front() == 'i') throw InputError(body);
        if (item.front() == 'n') throw InternalError(body);
        out.push_back(decode(body, i));
    }
    return out;
}

}  // namespace trainsim
