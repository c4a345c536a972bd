// Subcommands of the trainsim CLI: each parses its options, calls the library and writes the result.
// They return the process exit code; InputError and InternalError propagate to main().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "trainsim/output_file.hpp"

namespace trainsim::cli {

int run_command(const std::vector<std::string>& args);
int validate_command(const std::vector<std::string>& args);
int fit_command(const std::vector<std::string>& args);
int sweep_command(const std::vector<std::string>& args);
int memory_command(const std::vector<std::string>& args);
int profile_command(const std::vector<std::string>& args);
int goodput_command(const std::vector<std::string>& args);
int schema_command(const std::vector<std::string>& args);
int import_workload_command(const std::vector<std::string>& args);

/// Parses `args` of `command` whose positional arguments are files (option "files"); prints the help and
/// returns false for --help. Throws InputError (one line) for a malformed command line.
bool parse_file_command(const std::vector<std::string>& args,
                        const boost::program_options::options_description& desc,
                        boost::program_options::variables_map& vm, const char* command);

/// Parses `args` of `command` whose options are all named (a word that is not an option is refused, as boost
/// would drop it silently); prints the help and returns false for --help. Throws InputError (one line).
/// `--jobs` in 1 .. limits::kMaxJobs; else throws InputError "PREFIX--jobs = N must be 1 .. 1024".
void check_jobs(std::int64_t jobs, const std::string& prefix);
/// `--tokens` (parsed) at most limits::kMaxTrainTokens, `--gpu-hour-price` in [0, kMaxGpuHourPriceUsd]; else
/// throws InputError naming `command` and the value.
void check_tokens(double tokens, const std::string& text, const char* command);
void check_gpu_hour_price(double price, const char* command);

/// Refuses a negative value of the options that hold counts unsigned (seed, top, max-oom, iterations):
/// Boost's conversion would wrap it. Throws InputError naming `command`, the option and the value.
void refuse_negative_counts(const boost::program_options::parsed_options& parsed, const char* command);

bool parse_input_command(const std::vector<std::string>& args,
                         const boost::program_options::options_description& desc,
                         boost::program_options::variables_map& vm, const char* command);

/// The output file of option `--OPTION` when given (vm.count): an empty name is refused (InputError "COMMAND:
/// --OPTION needs a file name"; it was ignored, exit 0 with no file written), else check_output_path(path).
void check_output_option(const boost::program_options::variables_map& vm, const char* option,
                         const std::string& path, const std::string& command);

/// Writes `text` to `path` atomically (trainsim/output_file.hpp: mkstemp in the target's folder, fsync,
/// rename; devices, FIFOs and directories refused). Throws InputError.
void write_file_atomically(const std::string& path, const std::string& text);

/// Flushes standard output and throws InputError "writing failed: standard output" (main's finish_stdout's
/// line) when a write to it failed (a closed pipe, /dev/full). A command calls it before the notes it prints
/// on stderr after its output (import's "ignored:", profile import's summary, fit's progress and table):
/// they came before the error, so a failed write gave 2 to 46 lines on stderr (docs/reliability.md, round
/// 10).
void flush_stdout();

}  // namespace trainsim::cli
