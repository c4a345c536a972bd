// Replay driver of the fuzz harnesses: runs a harness's LLVMFuzzerTestOneInput on every input named on the
// command line, as libFuzzer does when given files instead of a corpus to grow (libFuzzer's own
// StandaloneFuzzTargetMain.c plays the same role in LLVM). Built with any compiler, so the harnesses compile
// and their seed corpus and past findings (tests/fuzz/regressions/NAME/) replay in every test build, the
// AddressSanitizer + UBSan one included (ctest label "fuzz_replay", tests/fuzz/CMakeLists.txt).
//
// Usage: replay_NAME PATH...   (a PATH that is a folder stands for its regular files, in name order)
// Exit: 0 when every input was run (an InputError is a clean refusal, caught by the harness); anything else
// the harness lets escape terminates the process, as it does under libFuzzer; 2 when a PATH cannot be read.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

/// The regular files `arg` names: itself, or a folder's files in name order (deterministic replay order).
std::vector<std::filesystem::path> inputs_of(const std::filesystem::path& arg) {
    if (!std::filesystem::is_directory(arg)) return {arg};
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator(arg))
        if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    return files;
}

}  // namespace

int main(int argc, char** argv) {
    std::size_t replayed = 0;
    for (int i = 1; i < argc; ++i) {
        for (const auto& path : inputs_of(argv[i])) {
            std::ifstream in(path, std::ios::binary);
            if (!in) {
                std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
                return 2;
            }
            const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
            LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
            ++replayed;
        }
    }
    std::printf("replayed %zu inputs\n", replayed);
    return replayed > 0 ? 0 : 2;
}
