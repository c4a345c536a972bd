// trainsim._core: the pybind11 extension under the Python package trainsim (python/trainsim/__init__.py,
// which turns paths, JSON strings and dicts into the arguments here and the JSON text returned into dicts).
// Each function resolves its inputs and simulates through the library exactly as the CLI's command does
// (include/trainsim/frontend.hpp) and returns the JSON text that command prints with --json. The GIL is
// released while simulating. trainsim::InputError raises trainsim.InputError (a ValueError) with the CLI's
// one-line message; any other failure raises trainsim.InternalError (a RuntimeError).
#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <nlohmann/json.hpp>

#include "trainsim/errors.hpp"
#include "trainsim/frontend.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/sweep.hpp"

namespace py = pybind11;
using namespace trainsim;

namespace {

/// One input as __init__.py passes it: a file, or JSON text with the name that labels it in messages.
struct Source {
    std::string file;
    std::optional<std::string> text;
    std::string name;
    std::optional<JsonText> json_text() const {
        return text ? std::optional<JsonText>(JsonText{*text, name}) : std::nullopt;
    }
};

/// Runs `f` with the GIL released; a failure that is neither an InputError nor an InternalError (a bug, or an
/// exception of a library underneath) becomes an InternalError.
template <class F>
auto without_gil(F&& f) {
    py::gil_scoped_release release;
    try {
        return f();
    } catch (const InputError&) {
        throw;
    } catch (const InternalError&) {
        throw;
    } catch (const std::exception& e) {
        throw InternalError(e.what());
    }
}

InputSources sources_of(const Source& topology, const Source& workload, const std::vector<std::string>& sets,
                        const std::string& calibration, const std::string& profile) {
    InputSources s;
    s.topology_file = topology.file;
    s.topology_text = topology.json_text();
    s.workload_file = workload.file;
    s.workload_text = workload.json_text();
    s.sets = sets;
    s.calibration_file = calibration;
    s.profile_file = profile;
    return s;
}

int hardware_jobs() {
    return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

/// The threads of `jobs` (0: the hardware's); as the CLI's --jobs, at most limits::kMaxJobs. A negative count
/// ran on the hardware's threads without a word, and 5,000 was taken (2026-11-29).
int jobs_or_hardware(long long jobs, const char* command) {
    if (jobs < 0 || jobs > limits::kMaxJobs)
        throw InputError(fmt::format("{}: jobs = {} must be 1 .. {} (None or 0: the hardware's threads)",
                                     command, jobs, limits::kMaxJobs));
    return jobs > 0 ? static_cast<int>(jobs) : hardware_jobs();
}

/// `run --json` (the plain run: no perturbation, no trace); `runs` + `run_id` as --from-runs FILE --id ID,
/// the runs a file or JSON text as validate's (simulate() took a path only, round 12).
std::string run(const Source& topology, const Source& workload, const std::vector<std::string>& sets,
                const std::string& calibration, const std::string& profile, const Source& runs,
                const std::string& run_id) {
    return without_gil([&] {
        InputSources s = sources_of(topology, workload, sets, calibration, profile);
        s.runs_file = runs.file;
        s.runs_text = runs.json_text();
        s.run_id = run_id;
        const Inputs in = resolve_inputs(s);
        const SimulationResult res = simulate_inputs(in);
        return run_json(in, res.report).dump(2);
    });
}

/// `memory --json [--what-if] [--timeline] --max-events N`.
std::string memory(const Source& topology, const Source& workload, const std::vector<std::string>& sets,
                   const std::string& calibration, const std::string& profile, bool what_if, bool timeline,
                   long long max_events) {
    return without_gil([&] {
        if (max_events < 0)
            throw InputError(fmt::format("memory: max_events = {} must be 0 (no bound) or more", max_events));
        const Inputs in = resolve_inputs(sources_of(topology, workload, sets, calibration, profile));
        const MemoryStudy study = study_memory(in, static_cast<std::uint64_t>(max_events), what_if);
        return memory_document(in, study, timeline).dump(2);
    });
}

/// `sweep --gpus N --json` with --fix, --vary, --global-batch and --jobs; gpus 0: the topology's size.
std::string sweep(const Source& topology, const Source& workload, const std::vector<std::string>& sets,
                  const std::string& calibration, const std::string& profile, long long gpus,
                  const std::vector<std::string>& fixes, const std::vector<std::string>& varies,
                  long long global_batch, long long jobs) {
    return without_gil([&] {
        if (gpus < 0) throw InputError(fmt::format("sweep: gpus = {} must be positive", gpus));
        if (gpus > limits::kMaxGpus)  // as `sweep --gpus`; past 2^31 it was pybind11's TypeError
            throw InputError(
                fmt::format("sweep: gpus = {} is above the limit of {}", gpus, limits::kMaxGpus));
        const int threads = jobs_or_hardware(jobs, "sweep");
        if (global_batch < 0)
            throw InputError(fmt::format("sweep: global_batch = {} must be positive", global_batch));
        SweepGrid grid;
        for (const auto& f : fixes)
            restrict_sweep_grid(grid, f, "fix");
        for (const auto& v : varies)
            restrict_sweep_grid(grid, v, "vary");
        refuse_swept_sets(sets);  // as `trainsim sweep --set`: a field the grid sets at each point
        InputSources sources = sources_of(topology, workload, sets, calibration, profile);
        sources.check_set_layout = false;  // the sweep sets the layout and the size
        Inputs in = resolve_inputs(sources);
        // Two values for one thing, as `trainsim sweep` refuses: gpus over a topology.nodes override of
        // another size, global_batch over a layout.global_batch override.
        for (auto it = sets.rbegin(); it != sets.rend(); ++it)
            if (gpus > 0 && it->rfind("topology.nodes=", 0) == 0) {
                if (in.topology.gpus() != gpus)
                    throw InputError(
                        fmt::format("sweep: --set \"{}\" makes the cluster {} GPUs and gpus = {} "
                                    "another size; gpus sets topology.nodes: give one of them",
                                    clip_for_message(*it), in.topology.gpus(), gpus));
                break;
            }
        for (auto it = sets.rbegin(); it != sets.rend(); ++it)
            if (global_batch > 0 && it->rfind("layout.global_batch=", 0) == 0) {
                if (in.layout.global_batch != global_batch)
                    throw InputError(fmt::format(
                        "sweep: --set \"{}\" and global_batch = {} give two global batches; give one",
                        clip_for_message(*it), global_batch));
                break;
            }
        // 0: the topology's own size, as `sweep` without --gpus.
        if (gpus > 0 && gpus % in.topology.gpus_per_node != 0)
            throw InputError(
                fmt::format("sweep: gpus = {} is not a multiple of {}", gpus, in.topology.node_gpus_field()));
        if (gpus > 0) in.topology.nodes = static_cast<int>(gpus / in.topology.gpus_per_node);
        if (global_batch > 0) in.layout.global_batch = global_batch;
        SweepOptions options;
        options.jobs = threads;
        return sweep_json(run_sweep(in.topology, in.model, in.layout, grid, in.name, options)).dump(2);
    });
}

/// `validate --json FILE...` with --tolerance, --only, --calibration, --profile, --jobs.
std::string validate(const std::vector<Source>& files, double tolerance_pct,
                     const std::vector<std::string>& only, const std::string& calibration,
                     const std::string& profile, long long jobs) {
    return without_gil([&] {
        if (files.empty()) throw InputError("validate: no measured-run file given");
        // As `validate --tolerance`: inf was taken.
        if (!(tolerance_pct >= 0 && tolerance_pct <= 1e6))
            throw InputError(
                fmt::format("validate: tolerance = {} must be a percentage from 0 to 1e6", tolerance_pct));
        const int threads = jobs_or_hardware(jobs, "validate");
        std::vector<RunsSource> sources;
        for (const auto& f : files)
            sources.push_back({f.file, f.json_text()});
        ValidationOptions options;
        options.tolerance_pct = tolerance_pct;
        for (const auto& id : only)
            if (!options.only.insert(id).second)
                throw InputError(
                    fmt::format("validate: only names run id \"{}\" twice", clip_for_message(id)));
        options.profile_file = profile;
        options.jobs = threads;
        return validation_json_text(validate_sources(sources, calibration, options));
    });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "trainsim's simulator core; use the package trainsim (docs/python.md)";
    m.attr("__version__") = TRAINSIM_VERSION;
    m.attr("DEFAULT_MEMORY_MAX_EVENTS") = kDefaultMemoryMaxEvents;
    m.attr("DEFAULT_TOLERANCE_PCT") = ValidationOptions{}.tolerance_pct;
    static py::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
    static py::exception<InternalError> internal_error(m, "InternalError", PyExc_RuntimeError);
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const InputError& e) {
            input_error(one_line(e.what()).c_str());
        } catch (const InternalError& e) {
            internal_error(e.what());
        }
    });
    py::class_<Source>(m, "Source")
        .def(py::init([](std::string file, std::optional<std::string> text, std::string name) {
                 return Source{std::move(file), std::move(text), std::move(name)};
             }),
             py::arg("file") = "", py::arg("text") = std::nullopt, py::arg("name") = "");
    m.def("run", &run, py::arg("topology"), py::arg("workload"), py::arg("sets"), py::arg("calibration"),
          py::arg("profile"), py::arg("runs"), py::arg("run_id"));
    m.def("memory", &memory, py::arg("topology"), py::arg("workload"), py::arg("sets"),
          py::arg("calibration"), py::arg("profile"), py::arg("what_if"), py::arg("timeline"),
          py::arg("max_events"));
    m.def("sweep", &sweep, py::arg("topology"), py::arg("workload"), py::arg("sets"), py::arg("calibration"),
          py::arg("profile"), py::arg("gpus"), py::arg("fix"), py::arg("vary"), py::arg("global_batch"),
          py::arg("jobs"));
    m.def("validate", &validate, py::arg("files"), py::arg("tolerance_pct"), py::arg("only"),
          py::arg("calibration"), py::arg("profile"), py::arg("jobs"));
}
