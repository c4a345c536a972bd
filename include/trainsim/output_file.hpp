// Safe output files: every file trainsim writes (run --trace, run|memory|sweep --html, memory --svg, sweep
// --csv, fit --out, profile import --out, trainsim-calibrate --out) goes through write_output_file, which
// never leaves a half-written file, never replaces anything that is not a regular file, and never touches a
// file of the user's beside the target (no fixed "PATH.tmp").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace trainsim {

/// Checks that `path` can be written as an output file, without creating anything: it is missing or a
/// regular file (a symbolic link is followed to its target, which must itself be missing in an existing
/// folder, or a regular file), and its folder exists. Throws InputError "PATH: is a directory" (device, FIFO,
/// socket, a dangling symbolic link, a missing folder) naming `path`. Commands call it before simulating so a
/// bad output path fails at once (exit 2).
void check_output_path(const std::string& path);

/// "standard output" or "standard error" when `path` is the regular file that stream is written to (`--trace
/// /dev/stdout > f`, `--html /proc/self/fd/1`, `--html f > f`), else nullptr. Such an output is refused
/// (check_output_path, OutputFile): renamed over the file, it took the place of what the command printed
/// there, and the report printed after it went to the replaced file, lost (round 10's open item).
const char* standard_stream_of(const std::string& path);

/// A file named on the command line, with the option that named it ("--trace", "--workload").
struct NamedFile {
    std::string option;
    std::string path;
};
/// Refuses (InputError "OPTION PATH: names the same file as OPTION2 PATH2; ...") an output that names one of
/// the input files or another output: `run --workload w.json --trace w.json` replaced the workload with the
/// trace, `import -o w.json --topology-out w.json` kept only one of the two. Two paths are the same file when
/// both exist and are one file (hard and symbolic links resolved), or when their canonical forms are equal.
/// Empty paths are skipped.
void check_distinct_outputs(const std::vector<NamedFile>& outputs, const std::vector<NamedFile>& inputs);

/// Writes `text` to `path` atomically: a new file from mkstemp in the target's folder (a unique name, so no
/// file of the user's is overwritten), written in full, fsync'd, given the target's permissions (0666 less
/// the umask for a new file), then renamed over the target. A symbolic link is followed: its target is
/// replaced and the link is kept. Devices, FIFOs, sockets and directories are refused (InputError naming
/// `path`), as are write failures (disk full: "PATH: writing failed (...)"); on any failure the temporary
/// file is removed and the target is untouched.
void write_output_file(const std::string& path, std::string_view text);

/// An output file written in pieces (a trace streamed as the simulation runs), with write_output_file's
/// guarantees: the constructor resolves `path` as write_output_file does and creates the unique temporary
/// file beside the target (InputError naming `path` if it cannot); write() appends (InputError "PATH: writing
/// failed (...)" on a failure, after which the temporary file is already removed); commit() gives it the
/// target's permissions, fsyncs it and renames it over the target. Destroyed without commit() (an error on
/// the way, an exception), the temporary file is removed and the target is untouched; so it is when the
/// process is stopped by SIGINT, SIGTERM or SIGHUP while the file is open (a handler removes the open
/// temporary files, then the signal takes its default action). Not copyable.
class OutputFile {
  public:
    explicit OutputFile(const std::string& path);
    ~OutputFile();
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;
    void write(std::string_view text);
    void commit();
    /// Bytes written so far.
    std::uint64_t bytes() const { return bytes_; }

    /// The file replaced (symbolic links resolved).
    const std::string& target() const { return target_; }

  private:
    void fail(int err, const char* what);
    std::string path_;    ///< as the user named it (for messages)
    std::string target_;  ///< the file replaced (symbolic links resolved)
    std::string tmp_;     ///< the temporary file; empty once committed or removed
    int fd_ = -1;
    unsigned mode_ = 0;
    std::uint64_t bytes_ = 0;
    int cleanup_slot_ = -1;  ///< its slot in the SIGINT / SIGTERM / SIGHUP removal list (output_file.cpp)
};

/// Commits `files` in their order as one step against other trainsim processes committing to the same
/// folders: an exclusive advisory lock (flock) is taken on each target's folder, in the order of the
/// folders' names (so two processes cannot wait on each other), held while the files are committed, then
/// released. Two `import -o A --topology-out B` at once left A from one and B from the other; now each
/// leaves its pair whole, the last to commit both. Readers that do not lock may still see the new B beside
/// the old A between the two renames (microseconds). A folder that cannot be opened or locked (a file
/// system without flock) is committed to without its lock, and a lock held past 10 s by another process
/// (one stopped while committing) is not waited for further: the files are committed as before.
void commit_together(const std::vector<OutputFile*>& files);

}  // namespace trainsim
