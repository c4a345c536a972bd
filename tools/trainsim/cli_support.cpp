// Shared helpers of the CLI commands: command-line parsing of file commands and atomic file writing.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "commands.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/output_file.hpp"

namespace trainsim::cli {

void check_jobs(std::int64_t jobs, const std::string& prefix) {
    if (jobs < 1 || jobs > limits::kMaxJobs)
        throw InputError(fmt::format("{}--jobs = {} must be 1 .. {}", prefix, jobs, limits::kMaxJobs));
}

void check_tokens(double tokens, const std::string& text, const char* command) {
    if (tokens > limits::kMaxTrainTokens)
        throw InputError(fmt::format("{}: --tokens = {} is above the limit of {:g} (trainsim/limits.hpp)",
                                     command, clip_for_message(text), limits::kMaxTrainTokens));
}

void check_gpu_hour_price(double price, const char* command) {
    if (!(price >= 0) || !(price <= limits::kMaxGpuHourPriceUsd))
        throw InputError(fmt::format("{}: --gpu-hour-price = {:g} must be a price in [0, {:g}] US dollars",
                                     command, price, limits::kMaxGpuHourPriceUsd));
}

void refuse_negative_counts(const boost::program_options::parsed_options& parsed, const char* command) {
    // Counts held unsigned, which Boost's conversion would wrap (--seed -1 became 2^64 - 1, --top -1 listed
    // every layout).
    for (const auto& o : parsed.options)
        for (const char* name : {"seed", "top", "max-oom", "iterations"})
            if (o.string_key == name)
                for (const auto& v : o.value)
                    if (!v.empty() && v.front() == '-')
                        throw InputError(fmt::format("{}: --{} = {} must not be negative", command, name,
                                                     clip_for_message(v)));
}

namespace {
/// boost's message with each '...' it quotes (an option as given, its argument) cut as clip_for_message cuts:
/// `--days "1 y y ..."` echoed 800 characters of short words, past the 400 of a line (round 11).
std::string clip_quoted(const std::string& message) {
    std::string out;
    std::size_t at = 0;
    while (true) {
        const std::size_t open = message.find('\'', at);
        const std::size_t close = open == std::string::npos ? open : message.find('\'', open + 1);
        if (close == std::string::npos) return out + message.substr(at);
        out += message.substr(at, open + 1 - at) +
               clip_for_message(message.substr(open + 1, close - open - 1)) + '\'';
        at = close + 1;
    }
}

/// Parses `args`; `files`: positional words are the option "files", else they are refused.
bool parse_command(const std::vector<std::string>& args,
                   const boost::program_options::options_description& desc,
                   boost::program_options::variables_map& vm, const char* command, bool files) {
    namespace po = boost::program_options;
    po::positional_options_description pos;
    if (files) pos.add("files", -1);
    try {
        po::command_line_parser parser(args);
        parser.options(desc);
        if (files) parser.positional(pos);
        const auto parsed = parser.run();
        refuse_negative_counts(parsed, command);
        for (const auto& o : parsed.options) {
            // An empty input file name was taken as the option left out: `run --workload ""` simulated the
            // default workload, exit 0 (round 10), where an empty output name is refused.
            for (const char* name :
                 {"topology", "workload", "from-runs", "calibration", "profile", "args-file"})
                if (o.string_key == name && (o.value.empty() || o.value.front().empty()))
                    throw InputError(
                        fmt::format("{}: --{} needs a file name (it is empty: \"\")", command, name));
            if (!files && o.position_key >= 0 && !o.original_tokens.empty())
                throw InputError(
                    fmt::format("{}: unexpected argument \"{}\" (files are given with --topology "
                                "FILE and --workload FILE)",
                                command, clip_for_message(o.original_tokens.front())));
        }
        po::store(parsed, vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw InputError(fmt::format("{}: {}", command, clip_quoted(e.what())));
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return false;
    }
    return true;
}
}  // namespace

bool parse_file_command(const std::vector<std::string>& args,
                        const boost::program_options::options_description& desc,
                        boost::program_options::variables_map& vm, const char* command) {
    return parse_command(args, desc, vm, command, true);
}

bool parse_input_command(const std::vector<std::string>& args,
                         const boost::program_options::options_description& desc,
                         boost::program_options::variables_map& vm, const char* command) {
    return parse_command(args, desc, vm, command, false);
}

void check_output_option(const boost::program_options::variables_map& vm, const char* option,
                         const std::string& path, const std::string& command) {
    if (!vm.count(option)) return;
    if (path.empty())
        throw InputError(fmt::format("{}: --{} needs a file name (it is empty: \"\")", command, option));
    // "-" is standard output by the Unix convention, which these outputs do not support (the report goes
    // there): a file named "-" was written instead (round 10).
    if (path == "-")
        throw InputError(
            fmt::format("{}: --{} - : this output is written to a file, not to standard output; "
                        "give a file name (./- for a file named -)",
                        command, option));
    if (const char* stream = standard_stream_of(path))
        throw InputError(
            fmt::format("{}: --{} {}: is the file {} goes to, which this output would replace; "
                        "give it a file of its own",
                        command, option, clip_for_message(path), stream));
    check_output_path(path);
}

void write_file_atomically(const std::string& path, const std::string& text) {
    write_output_file(path, text);
}

void flush_stdout() {
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout))
        throw InputError("writing failed: standard output");
}

}  // namespace trainsim::cli
