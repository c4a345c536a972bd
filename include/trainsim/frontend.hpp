// What the CLI (tools/trainsim) and the Python module (python/) share: the inputs of a simulation resolved
// from files or JSON text with --set overrides, a calibration and a profile; and the JSON documents of
// `run --json`, `memory --json` and `validate --json`, so that trainsim.simulate() returns what the CLI
// prints.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json_fwd.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/model.hpp"
#include "trainsim/profile.hpp"
#include "trainsim/report.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/validation.hpp"
#include "trainsim/what_if.hpp"

namespace trainsim {

/// One JSON input given as text rather than a file (the Python module's dicts and JSON strings).
struct JsonText {
    std::string text;  ///< the JSON document
    std::string name;  ///< names it in error messages, e.g. "workload (dict)"
};

/// Where the inputs of `run`, `memory` and `goodput` come from: a topology and a workload (each a file, JSON
/// text, or else the embedded default) with --set overrides and a calibration file, or one run of a
/// measured-runs file (runs_file + run_id).
struct InputSources {
    std::string topology_file, workload_file, runs_file, run_id, calibration_file, profile_file;
    std::optional<JsonText> topology_text, workload_text;  ///< used when the file is empty
    std::optional<JsonText> runs_text;  ///< the measured-runs document when runs_file is empty (Python)
    std::vector<std::string> sets;      ///< "key=value" as --set
    /// With sets: check the layout they give against the cluster, blaming a --set (check_set_layout). A
    /// sweep sets the layout and the size itself, as `trainsim sweep --set` does not check it: false there
    /// (the Python module's sweep refused every override of a layout not of the topology's size, 2026-11-29).
    bool check_set_layout = true;
};

/// What to simulate, resolved from the sources.
struct Inputs {
    TopologySpec topology;
    ModelSpec model;
    Layout layout;
    std::string name;                  ///< workload name, or the run id
    std::string label;                 ///< prefix of error messages: the workload file, or "FILE: run "ID""
    std::optional<Measured> measured;  ///< printed beside the prediction (not with --set)
};

/// Reads the hardware profile `file` (trainsim-profile/1) for the clusters of GPU type `gpu`. Throws
/// InputError naming the file and both GPU types when the profile describes another GPU.
std::shared_ptr<const Profile> load_profile(const std::string& file, const std::string& gpu,
                                            const std::string& cluster_label);

/// Reads the files (or parses the texts) and applies overrides, calibration and profile. Throws InputError
/// naming the file and field.
Inputs resolve_inputs(const InputSources& o);

/// Refuses a --set that a sweep would silently override (2026-11-29: `--set layout.cp=2` swept cp 1 only,
/// `--set layout.zero_stage=3` swept without ZeRO-3, exit 0): a field every grid point sets (--fix pins
/// it). layout.pp and layout.vpp stay: the workload's pp joins the grid with its layers_per_stage, and its
/// pipeline_layout is kept at its pp and vpp. Shared by `trainsim sweep` and the Python module's sweep().
void refuse_swept_sets(const std::vector<std::string>& sets);

/// Runs `f()`; an InputError it throws is rethrown with the inputs' label in front ("FILE: message").
template <class F>
decltype(auto) with_label(const Inputs& in, F&& f) {
    try {
        return f();
    } catch (const InputError& e) {
        throw InputError(fmt::format("{}: {}", in.label, e.what()));
    }
}

/// simulate() of the inputs, errors labelled (with_label), the report's topology named: what `trainsim run`
/// does without perturbations or a trace (tools/trainsim/run_command.cpp; tests/python checks the two agree).
SimulationResult simulate_inputs(const Inputs& in, const SimulationOptions& options = {});

/// The document of `run --json`: to_json of the report beside the inputs' measured figures.
nlohmann::json run_json(const Inputs& in, const Report& report);

/// `memory`: the layout simulated with the memory timeline (bounded by max_events, 0: none) or, past the
/// bound, its memory walked over the schedule's order without times; with what_if, the remedies.
struct MemoryStudy {
    bool simulated = true;  ///< false: the simulation passed max_events (no times, `walked` holds the memory)
    std::uint64_t max_events = 0;
    SimulationResult result;  ///< when simulated
    MemoryReport walked;      ///< when not simulated
    std::optional<WhatIf> what_if;
    std::string gpu_name;
    const MemoryReport& memory() const { return simulated ? result.report.memory : walked; }
};

/// The default bound on the events of each simulation of `memory` (--max-events; a step of the fabric's
/// flow-rate updates counts as an event, ExecutionOptions::max_events): the simulations of the presets and
/// their remedies (GPT-3 175B on 1,024 A100: 3.3 M events, 5-6 M with the rate-update steps of its ZeRO-2
/// remedy; Llama 3 405B on 16,384 H100: 1.6 M) run in full; a layout whose simulation is far larger (a TP
/// group across nodes on an ECMP fabric: tens of millions of events, minutes) gets its memory at once and
/// its step times not. 2^23: at most about 1-3 s of CPU per simulation (0.1-0.35 us per event or step).
inline constexpr std::uint64_t kDefaultMemoryMaxEvents = std::uint64_t{1} << 23;

/// Runs the memory study of `in`. Throws InputError labelled with the inputs (with_label). `observers`
/// (not owned) subscribe to the layout's simulation (not the remedies'); past max_events they saw part of it.
/// `jobs`: threads that simulate the what-if remedies (WhatIfOptions::jobs).
MemoryStudy study_memory(const Inputs& in, std::uint64_t max_events, bool what_if,
                         const std::vector<ExecutorObserver*>& observers = {}, int jobs = 1);

/// The what-if remedies as JSON (`memory --what-if --json`'s "what_if": step times null when not simulated).
nlohmann::json to_json(const WhatIf& w);

/// The document of `memory --json` (`timeline`: every memory sample of every stage).
nlohmann::json memory_document(const Inputs& in, const MemoryStudy& s, bool timeline);

/// One measured-runs input of `validate`: a file, or JSON text.
struct RunsSource {
    std::string file;
    std::optional<JsonText> text;  ///< used when file is empty
};

/// `validate`: every source is read first (one that is not a measured-runs file stops it: InputError), the
/// calibration file (may be empty) and options.profile_file (may be empty) are read, then validate_runs.
ValidationResult validate_sources(const std::vector<RunsSource>& sources, const std::string& calibration_file,
                                  ValidationOptions options);

/// The uncalibrated-constants note of every GPU type a simulated run used, once each, sorted.
std::set<std::string> uncalibrated_notes(const ValidationResult& res);

/// The document of `validate --json`: "runs", "summary", "collectives", "notes".
nlohmann::json validation_json(const ValidationResult& res);
/// validation_json(res) as `validate --json` prints it: nlohmann's dump(2) layout with "runs" first, so
/// that the runs can be printed as they are compared (validation_json_head, validation_json_run, then
/// validation_json_tail give the same text).
std::string validation_json_text(const ValidationResult& res);
/// The text before the first run: the document opened and its "runs" array.
std::string validation_json_head();
/// One element of "runs" as printed, after `runs_before` elements (its separator included).
std::string validation_json_run(const RunValidation& r, std::size_t runs_before);
/// The text after the last run of `runs_printed`: the array closed, validation_json's other keys.
std::string validation_json_tail(const ValidationResult& res, std::size_t runs_printed);

}  // namespace trainsim
