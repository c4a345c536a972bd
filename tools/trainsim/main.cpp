// trainsim: simulate one training iteration of a large language model on a GPU cluster, event by event.
#include <csignal>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.hpp"
#include "processes.hpp"
#include "trainsim/errors.hpp"

namespace {
const char* kUsage = R"(trainsim - discrete-event simulator of LLM training clusters

usage: trainsim <command> [options]

commands:
  run        simulate one training iteration and report step time, tokens/s, TFLOP/s per GPU, MFU/HFU,
             the pipeline bubble, exposed communication and memory per stage
             (no options: the embedded default, GPT-3 175B on 1024 A100-80GB, TP 8 x PP 16 x DP 8)
  memory     memory per GPU of every pipeline stage and phase, by pile, with the peak named; --what-if
             simulates the standard remedies, --svg draws the chart
  validate   simulate measured runs (format trainsim-measured-runs/1) and compare with the measurements
  fit        fit one GPU type's model constants to measured runs, or (--profile) its kernel model to
             measured kernel times; writes a calibration file (--calibration)
  profile    import kernel measurements as a hardware profile (trainsim-profile/1) for --profile
  sweep      simulate every layout of a model on N GPUs (tp, pp, dp, micro-batch, vpp, recompute, ...) and
             rank them by step time, with what limits each and the rejected layouts counted by reason
  goodput    simulate a whole training run (days to months) with failures, checkpoints and restarts over
             many seeds: goodput, lost work, failures by component, time to train; the checkpoint interval
             swept beside Young/Daly's
  schema     every field of the input files with its type, unit, default and range (docs/inputs.md)
  import     a workload file from a Megatron-LM launch (megatron -- ARGS), a Hugging Face config.json (hf)
             or a torchtitan train.toml (torchtitan) (docs/importers.md)

  trainsim <command> --help   lists the command's options with their units (also: trainsim help <command>)
  trainsim --version          prints the version
  mpirun -np N trainsim sweep|validate ...   spreads the layouts / runs over N MPI processes (rank 0 prints;
                              the output is the single process's, byte for byte)

exit codes: 0 success, 1 internal error (a bug in trainsim), 2 bad input (message names the file and field),
            3 out of memory (run, memory, goodput: a stage does not fit; sweep: no layout fits),
            4 validate: a run outside the tolerance, predicted out of memory, or a malformed row
)";

int dispatch_command(const std::string& cmd, const std::vector<std::string>& args);

/// Runs the command `cmd` with `args`; exit code. Throws for an unknown command. An error about an option
/// ("--jobs = 0 must be ...", "--straggler ...", "--seeds ...") is given the command's name, as most of the
/// commands' own messages are ("sweep: --jobs = 0 ..."): `validate --max-mape -5` said only "--max-mape = -5
/// must be ..." (docs/reliability.md, round 8). A message about where an input came from (`--set "K=V": ...`,
/// `--from-runs F: ...`, `--id ...`) stands as a file's does: the Python module gives the same words.
int dispatch(const std::string& cmd, const std::vector<std::string>& args) {
    try {
        return dispatch_command(cmd, args);
    } catch (const trainsim::EventLimitExceeded&) {
        throw;
    } catch (const trainsim::InputError& e) {
        const std::string what = e.what();
        const bool option = what.rfind("--", 0) == 0;
        bool input_source = false;
        for (const char* source : {"--set ", "--from-runs ", "--id "})
            input_source = input_source || what.rfind(source, 0) == 0;
        if (option && !input_source) throw trainsim::InputError(cmd + ": " + what);
        throw;
    }
}

int dispatch_command(const std::string& cmd, const std::vector<std::string>& args) {
    if (cmd == "run") return trainsim::cli::run_command(args);
    if (cmd == "validate") return trainsim::cli::validate_command(args);
    if (cmd == "fit") return trainsim::cli::fit_command(args);
    if (cmd == "sweep") return trainsim::cli::sweep_command(args);
    if (cmd == "memory") return trainsim::cli::memory_command(args);
    if (cmd == "profile") return trainsim::cli::profile_command(args);
    if (cmd == "goodput") return trainsim::cli::goodput_command(args);
    if (cmd == "schema") return trainsim::cli::schema_command(args);
    if (cmd == "import") return trainsim::cli::import_workload_command(args);
    throw trainsim::InputError(
        fmt::format("unknown command \"{}\"; see trainsim --help", trainsim::clip_for_message(cmd)));
}

/// Flushes stdout and reports a failed write (disk full, closed pipe): exit 2, not a silent success.
int finish_stdout(int code) {
    std::cout.flush();
    const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
    if (!failed) return code;
    std::cerr << "trainsim: error: writing failed: standard output\n";
    return trainsim::kExitBadInput;
}

int run_main(std::vector<std::string> args) {
    // No command is bad input: one line on stderr, nothing on stdout (docs/reliability.md).
    if (args.empty()) throw trainsim::InputError("no command given; `trainsim --help` lists the commands");
    if (args[0] == "--help" || args[0] == "-h" ||
        (args[0] == "help" && (args.size() == 1 || (args.size() == 2 && args[1] == "help")))) {
        std::cout << kUsage;
        return trainsim::kExitOk;
    }
    if (args[0] == "--version" || args[0] == "version") {
        if (args.size() > 1)
            throw trainsim::InputError(
                fmt::format("{}: unexpected argument \"{}\"", args[0], trainsim::clip_for_message(args[1])));
        std::cout << "trainsim " << TRAINSIM_VERSION << "\n";
        return trainsim::kExitOk;
    }
    if (args[0] == "help") {  // trainsim help CMD [SUBCMD]: that command's help
        std::vector<std::string> rest(args.begin() + 2, args.end());
        rest.push_back("--help");
        return dispatch(args[1], rest);
    }
    const std::string cmd = args[0];
    args.erase(args.begin());
    return dispatch(cmd, args);
}
}  // namespace

int main(int argc, char** argv) {
    // A closed pipe is a failed write (exit 2 below), not a silent death by SIGPIPE; so is a write past the
    // file-size limit (`ulimit -f`): SIGXFSZ killed the process (exit 153) and left the output's temporary
    // file behind, half-written (2026-11-29); ignored, the write fails with EFBIG and the file is removed.
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGXFSZ, SIG_IGN);
    try {
        trainsim::cli::start_processes();  // under mpirun: MPI, and rank 0 alone prints (processes.hpp)
        return finish_stdout(run_main(std::vector<std::string>(argv + 1, argv + argc)));
    } catch (const trainsim::InputError& e) {
        std::cerr << "trainsim: error: " << trainsim::one_line(e.what()) << "\n";
        return trainsim::kExitBadInput;
    } catch (const trainsim::InternalError& e) {
        std::cerr << "trainsim: internal error (a bug in trainsim, please report it): " << e.what() << "\n";
        return trainsim::kExitInternal;
    } catch (const std::exception& e) {
        std::cerr << "trainsim: internal error (a bug in trainsim, please report it): " << e.what() << "\n";
        return trainsim::kExitInternal;
    }
}
