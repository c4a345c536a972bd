#include "trainsim/output_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim {

namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) {
    return std::strerror(err);
}

/// What `mode` is, in words, for a file type that is not written over.
const char* refused_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "is a directory";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "is a device";
    if (S_ISFIFO(mode)) return "is a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "is a socket";
    return "is not a regular file";
}

}  // namespace

const char* standard_stream_of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
    for (const int fd : {STDOUT_FILENO, STDERR_FILENO}) {
        struct stat out {};
        if (::fstat(fd, &out) == 0 && out.st_dev == st.st_dev && out.st_ino == st.st_ino)
            return fd == STDOUT_FILENO ? "standard output" : "standard error";
    }
    return nullptr;
}

namespace {

/// The file the output really goes to: `path`, or the final target of the chain of symbolic links it names.
/// Throws InputError for a path that cannot be written over (see check_output_path).
struct Target {
    std::string file;     ///< the file to replace (symbolic links resolved)
    bool exists = false;  ///< it exists (a regular file)
    mode_t mode = 0;      ///< its permission bits when it exists
};

Target resolve_target(const std::string& path) {
    if (path.empty()) throw InputError("an output file name is empty");
    if (path.find('\0') != std::string::npos) throw InputError("an output file name holds a NUL byte");
    Target t;
    t.file = path;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
        std::error_code ec;
        const fs::path resolved = fs::canonical(path, ec);  // follows every link; fails on a dangling one
        if (ec) {  // dangling, or a loop: refused rather than replaced by a regular file
            // A link the kernel resolves though no path names its end (/dev/stdout, /proc/self/fd/1 of a
            // pipe: "pipe:[N]") is named by what it is: "is a symbolic link to a missing file" misled.
            if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
                throw InputError(fmt::format("{}: {}; not written", path, refused_kind(st.st_mode)));
            throw InputError(
                fmt::format("{}: is a symbolic link to a missing file or a loop; not written", path));
        }
        t.file = resolved.string();
    }
    if (::stat(t.file.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode))
            throw InputError(fmt::format("{}: {}; not written", path, refused_kind(st.st_mode)));
        if (const char* stream = standard_stream_of(path))
            throw InputError(fmt::format("{}: is the file {} goes to; not replaced", path, stream));
        // The running program's own file (`--html /proc/self/exe`, a link written through, or the binary's
        // path): it was replaced by the page, exit 0, and trainsim was gone (round 14).
        struct stat self {};
        if (::stat("/proc/self/exe", &self) == 0 && self.st_dev == st.st_dev && self.st_ino == st.st_ino)
            throw InputError(fmt::format("{}: is the running program's own executable; not replaced", path));
        // The rename needs only the folder's permission: a file its owner made read-only would be replaced
        // where `>` would fail. Refused as the shell would (root may write it, as with `>`).
        if (::access(t.file.c_str(), W_OK) != 0)
            throw InputError(
                fmt::format("{}: cannot write the file ({}); not replaced", path, errno_text(errno)));
        t.exists = true;
        t.mode = st.st_mode & 07777;
        return t;
    }
    if (errno != ENOENT)
        throw InputError(fmt::format("{}: cannot write the file ({})", path, errno_text(errno)));
    const fs::path dir = fs::path(t.file).parent_path();
    const std::string dir_name = dir.empty() ? "." : dir.string();
    if (::stat(dir_name.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        throw InputError(
            fmt::format("{}: cannot write the file (the folder {} does not exist)", path, dir_name));
    return t;
}

/// Writes `text` to `fd` in full; returns 0 or the errno of the failure.
int write_all(int fd, std::string_view text) {
    while (!text.empty()) {
        const ssize_t n = ::write(fd, text.data(), text.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        text.remove_prefix(static_cast<std::size_t>(n));
    }
    return 0;
}

}  // namespace

void check_output_path(const std::string& path) {
    const Target t = resolve_target(path);
    const fs::path dir = fs::path(t.file).parent_path();
    const std::string dir_name = dir.empty() ? "." : dir.string();
    if (::access(dir_name.c_str(), W_OK | X_OK) != 0)
        throw InputError(
            fmt::format("{}: cannot write the file (folder {}: {})", path, dir_name, errno_text(errno)));
    // In a sticky folder (/tmp) only the file's or the folder's owner may rename over the file: another
    // user's world-writable file there failed at the rename, after the whole simulation (round 10).
    struct stat dir_st {
    }, file_st{};
    if (t.exists && ::geteuid() != 0 && ::stat(dir_name.c_str(), &dir_st) == 0 &&
        (dir_st.st_mode & S_ISVTX) && ::stat(t.file.c_str(), &file_st) == 0 &&
        file_st.st_uid != ::geteuid() && dir_st.st_uid != ::geteuid())
        throw InputError(
            fmt::format("{}: cannot replace the file (another user's, in the sticky folder {}); "
                        "not replaced",
                        path, dir_name));
}

namespace {

// The temporary files being written, removed by a SIGINT / SIGTERM / SIGHUP handler so that an interrupted
// run (a large trace is what users stop) leaves nothing behind; the handler then re-raises the signal with
// its default action. Fixed slots of plain characters: the handler may only call async-signal-safe functions
// (unlink, signal, raise).
constexpr int kCleanupSlots = 16;
constexpr std::size_t kCleanupPathBytes = 4096;
// A slot is free (0), taken by a thread writing its path (1), or holds a path to remove (2): a slot is
// claimed before its path is copied, so two threads never write one slot and the handler never reads a path
// being written (the copy came before the claim, and two threads could both fill slot 0, 2026-11-29).
char cleanup_path[kCleanupSlots][kCleanupPathBytes];
std::atomic<int> cleanup_state[kCleanupSlots];

extern "C" void remove_temporaries_and_reraise(int sig) {
    for (int i = 0; i < kCleanupSlots; ++i)
        if (cleanup_state[i].load() == 2) ::unlink(cleanup_path[i]);
    std::signal(sig, SIG_DFL);
    std::raise(sig);
}

/// Registers `tmp` for removal on a signal; the slot, or -1 when all are taken or the path is too long (the
/// file is then only removed by the destructor).
int register_temporary(const std::string& tmp) {
    static const bool installed = [] {
        for (const int sig : {SIGINT, SIGTERM, SIGHUP})
            std::signal(sig, remove_temporaries_and_reraise);
        return true;
    }();
    (void)installed;
    if (tmp.size() >= kCleanupPathBytes) return -1;
    for (int i = 0; i < kCleanupSlots; ++i) {
        int expected = 0;
        if (!cleanup_state[i].compare_exchange_strong(expected, 1)) continue;
        std::memcpy(cleanup_path[i], tmp.c_str(), tmp.size() + 1);
        cleanup_state[i].store(2);
        return i;
    }
    return -1;
}

void unregister_temporary(int slot) {
    if (slot >= 0) cleanup_state[slot].store(0);
}

}  // namespace

namespace {
bool same_file(const std::string& a, const std::string& b) {
    std::error_code ea, eb, eq;
    if (fs::exists(a, ea) && fs::exists(b, eb)) return fs::equivalent(a, b, eq) && !eq;
    const fs::path ca = fs::weakly_canonical(fs::absolute(a, ea), ea),
                   cb = fs::weakly_canonical(fs::absolute(b, eb), eb);
    return !ea && !eb && ca == cb;
}
}  // namespace

void check_distinct_outputs(const std::vector<NamedFile>& outputs, const std::vector<NamedFile>& inputs) {
    for (std::size_t i = 0; i < outputs.size(); ++i) {
        const NamedFile& out = outputs[i];
        if (out.path.empty()) continue;
        auto clash = [&](const NamedFile& other, const char* what) {
            if (other.path.empty() || !same_file(out.path, other.path)) return;
            throw InputError(fmt::format("{} {}: names the same file as {} {}; {}", out.option, out.path,
                                         other.option, other.path, what));
        };
        for (const NamedFile& in : inputs)
            clash(in, "an output never replaces an input");
        for (std::size_t j = 0; j < i; ++j)
            clash(outputs[j], "two outputs cannot share a file");
    }
}

void write_output_file(const std::string& path, std::string_view text) {
    OutputFile out(path);
    out.write(text);
    out.commit();
}

OutputFile::OutputFile(const std::string& path) : path_(path) {
    const Target t = resolve_target(path);
    target_ = t.file;
    const fs::path target(t.file);
    const fs::path dir = target.parent_path();
    // ".NAME.trainsim-XXXXXX" is 17 bytes longer than NAME: a name of 239 to 255 bytes (which `>` writes)
    // made a temporary name past NAME_MAX, and the output was refused ("File name too long"). The name in it
    // is cut to fit in a file name and in PATH_MAX; it is only there to tell the user what the file was.
    constexpr std::size_t kExtra = 17, kNameMax = 255, kPathMax = 4095;
    const std::string name_part = target.filename().string();
    const std::size_t dir_bytes = dir.empty() ? 0 : dir.string().size() + 1;
    std::size_t keep = std::min(name_part.size(), kNameMax - kExtra);
    keep = dir_bytes + kExtra >= kPathMax ? 0 : std::min(keep, kPathMax - dir_bytes - kExtra);
    const std::string templ =
        (dir / fmt::format(".{}.trainsim-XXXXXX", std::string_view(name_part).substr(0, keep))).string();
    std::vector<char> name(templ.begin(), templ.end());
    name.push_back('\0');
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) throw InputError(fmt::format("{}: cannot write the file ({})", path, errno_text(errno)));
    tmp_ = name.data();
    cleanup_slot_ = register_temporary(tmp_);
    mode_t mode = t.mode;
    if (!t.exists) {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
    }
    mode_ = mode;
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) ::unlink(tmp_.c_str());
    unregister_temporary(cleanup_slot_);
}

void OutputFile::fail(int err, const char* what) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    tmp_.clear();
    unregister_temporary(cleanup_slot_);
    cleanup_slot_ = -1;
    throw InputError(fmt::format("{}: {} ({})", path_, what, errno_text(err)));
}

void OutputFile::write(std::string_view text) {
    if (tmp_.empty()) throw InputError(fmt::format("{}: written after it was closed", path_));
    if (const int err = write_all(fd_, text); err != 0) fail(err, "writing failed");
    bytes_ += text.size();
}

void OutputFile::commit() {
    if (tmp_.empty()) throw InputError(fmt::format("{}: committed twice", path_));
    if (::fchmod(fd_, static_cast<mode_t>(mode_)) != 0 || ::fsync(fd_) != 0) fail(errno, "writing failed");
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail(errno, "writing failed");
    if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail(errno, "cannot put the file in place");
    tmp_.clear();
    unregister_temporary(cleanup_slot_);
    cleanup_slot_ = -1;
}

namespace {
/// An exclusive flock on a folder, released (closed) on destruction; not held when the folder cannot be
/// opened or locked, or another process holds it past kMaxWait.
class FolderLock {
  public:
    explicit FolderLock(const std::string& dir) {
        fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd_ < 0) return;
        constexpr int kTries = 1000;  // 10 ms apart: 10 s
        for (int i = 0; i < kTries; ++i) {
            if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
            if (errno != EWOULDBLOCK && errno != EINTR) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ::close(fd_);
        fd_ = -1;
    }
    ~FolderLock() {
        if (fd_ >= 0) ::close(fd_);  // releases the lock
    }
    FolderLock(const FolderLock&) = delete;
    FolderLock& operator=(const FolderLock&) = delete;

  private:
    int fd_ = -1;
};
}  // namespace

void commit_together(const std::vector<OutputFile*>& files) {
    // By canonical path, sorted: every process locks each folder once, whatever the spelling of its path
    // (a second flock of one folder through another open file would wait on this process's own lock), and
    // in the same order.
    std::set<std::string> folders;
    for (const OutputFile* f : files) {
        const fs::path dir = fs::path(f->target()).parent_path();
        std::error_code ec;
        const fs::path canonical = fs::canonical(dir.empty() ? fs::path(".") : dir, ec);
        folders.insert(ec ? (dir.empty() ? std::string(".") : dir.string()) : canonical.string());
    }
    std::vector<std::unique_ptr<FolderLock>> locks;
    for (const std::string& dir : folders)
        locks.push_back(std::make_unique<FolderLock>(dir));
    for (OutputFile* f : files)
        f->commit();
}

}  // namespace trainsim
