#include "trainsim/output_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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
        if (ec)  // dangling, or a loop: refused rather than replaced by a regular file
            throw InputError(
                fmt::format("{}: is a symbolic link to a missing file or a loop; not written", path));
        t.file = resolved.string();
    }
    if (::stat(t.file.c_str(), &st) == 0) {
        if (!S_ISREG(st.st_mode))
            throw InputError(fmt::format("{}: {}; not written", path, refused_kind(st.st_mode)));
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
    const std::string templ = (dir / fmt::format(".{}.trainsim-XXXXXX", target.filename().string())).string();
    std::vector<char> name(templ.begin(), templ.end());
    name.push_back('\0');
    fd_ = ::mkstemp(name.data());
    if (fd_ < 0) throw InputError(fmt::format("{}: cannot write the file ({})", path, errno_text(errno)));
    tmp_ = name.data();
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
}

void OutputFile::fail(int err, const char* what) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(tmp_.c_str());
    tmp_.clear();
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
}

}  // namespace trainsim
