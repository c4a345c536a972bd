// trainsim-calibrate: times real GEMM, attention, memory-bound and NCCL kernels on this machine's GPUs and
// writes a trainsim-profile/1 file (tools/calibrate/README.md).
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <boost/algorithm/string.hpp>
#include <boost/program_options.hpp>

#include "../trainsim/commands.hpp"
#include "../trainsim/inputs.hpp"
#include "measure.hpp"
#include "plan.hpp"
#include "profile_writer.hpp"
#include "progress.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/output_file.hpp"

namespace po = boost::program_options;
using namespace trainsim;
using namespace trainsim::calibrate;

namespace {

constexpr int kExitNoDevice = 5;
constexpr int kExitSelfCheckFailed = 6;

const char* kAbout =
    "trainsim-calibrate [options]\n\n"
    "Times real kernels on this machine's GPUs with CUDA events (warm-up, then repetitions: median, min, "
    "max)\n"
    "on random data and writes a trainsim-profile/1 file for `trainsim ... --profile FILE`:\n"
    "  gemm         cuBLASLt GEMMs y[m,n] = x[m,k].W[n,k]^T in bf16, fp16 and fp8 (e4m3, per-tensor scales,\n"
    "               sm89+): the shapes of --workload's program (forward, dgrad, wgrad) and a generic grid\n"
    "               (M 1024..32768, N, K 1024..16384, powers of two);\n"
    "  attention    causal attention forward and backward at the workload's heads, KV heads, sequence and\n"
    "               head dim (backend \"unfused\": cuBLAS batched GEMMs and a softmax kernel);\n"
    "  memory       copy, layer norm and GeLU (bytes read + written);\n"
    "  collectives  NCCL all-reduce, all-gather, reduce-scatter and send/recv over the local GPUs, 1 KiB to\n"
    "               4 GiB, algbw and busbw as nccl-tests defines them (skipped with one GPU).\n"
    "Before measuring, every timed GPU path runs once on small inputs and is compared with a CPU reference\n"
    "(--self-check runs only that). Progress goes to stderr. Needs a CUDA GPU.\n"
    "exit codes: 0 success, 1 CUDA/cuBLAS/NCCL failure or internal error, 2 bad input, 5 no CUDA device,\n"
    "            6 the self-check failed (no profile written)\n\n"
    "options";

std::string join_command_line(int argc, char** argv) {
    std::string s = "trainsim-calibrate";
    for (int i = 1; i < argc; ++i) {
        s += ' ';
        s += argv[i];
    }
    return s;
}

/// Fails early (exit 2) when --out cannot be written, rather than after the measurements (creates nothing).
void check_writable(const std::string& path) {
    check_output_path(path);
}

struct Sections {
    bool gemm = true, attention = true, memory = true, collectives = true;
};

Sections parse_sections(const std::string& only) {
    if (only.empty()) return {};
    Sections s{false, false, false, false};
    std::vector<std::string> words;
    boost::split(words, only, boost::is_any_of(","));
    for (const auto& w : words) {
        if (w == "gemm")
            s.gemm = true;
        else if (w == "attention")
            s.attention = true;
        else if (w == "memory")
            s.memory = true;
        else if (w == "collectives")
            s.collectives = true;
        else
            throw InputError(
                fmt::format("--only: \"{}\" is not one of gemm, attention, memory, collectives", w));
    }
    return s;
}

/// --plan: the measurements a run would make, one line each (GEMMs as on a GPU with FP8).
void print_plan(std::ostream& os, const Sections& sections, const std::vector<GemmShape>& workload,
                const std::vector<GemmShape>& grid, const std::vector<AttentionShape>& attention,
                const std::vector<MemoryJob>& memory, bool quick) {
    if (sections.gemm) {
        const auto jobs = plan_gemm_jobs(workload, grid, true, quick);
        os << fmt::format("gemm: {} (cuBLASLt, fp8 only on sm89+)\n", jobs.size());
        for (const auto& j : jobs)
            os << fmt::format("  gemm {} {}x{}x{}{} ({})\n", to_string(j.dtype), j.m, j.n, j.k,
                              j.batch > 1 ? fmt::format(" batch {}", j.batch) : "", j.label);
    }
    if (sections.attention) {
        os << fmt::format("attention: {} (unfused, forward and backward)\n", 2 * attention.size());
        for (const auto& a : attention)
            os << fmt::format("  attention b={} heads={} kv_heads={} seq={} head_dim={} causal ({})\n",
                              a.batch, a.heads, a.kv_heads, a.seq, a.head_dim, a.label);
    }
    if (sections.memory) {
        os << fmt::format("memory-bound: {}\n", memory.size());
        for (const auto& m : memory)
            os << fmt::format("  {} [{}, {}] {} bytes read + written\n", m.kernel, m.rows, m.cols,
                              memory_job_bytes(m));
    }
    if (sections.collectives) {
        const auto sizes = collective_sizes(quick, std::int64_t{1} << 40);
        os << fmt::format(
            "collectives: all_reduce, all_gather, reduce_scatter, send_recv over the local GPUs (two "
            "or more), {} sizes from {} to {} bytes\n",
            sizes.size(), sizes.front(), sizes.back());
    }
}

int run(int argc, char** argv) {
    po::options_description desc(kAbout);
    std::string out_file, gpu_name, only;
    int device = 0;
    cli::InputOptions in_opts;
    desc.add_options()("help,h", "this help")(
        "out", po::value(&out_file)->value_name("FILE"),
        "write the profile to FILE (temporary file, then renamed: never half written); default: stdout")(
        "gpu", po::value(&gpu_name)->value_name("NAME"),
        "the trainsim catalog GPU the profile describes (default: guessed from the device name, e.g. "
        "\"NVIDIA H100 80GB HBM3\" -> H100-SXM5-80GB; refused when unknown)")(
        "quick", "a short pass: fewer shapes, sizes and repetitions")(
        "device", po::value(&device)->value_name("N"),
        "CUDA device index of the single-GPU measurements (default 0)")(
        "only", po::value(&only)->value_name("LIST"),
        "comma-separated sections to run: gemm, attention, memory, collectives")(
        "no-grid", "leave out the generic GEMM grid")(
        "self-check", "only compare each GPU path with its CPU reference on small inputs (no profile)")(
        "plan", "print what would be measured (fp8 as on an sm89+ GPU) and exit; needs no GPU");
    cli::add_input_options(desc, in_opts);
    po::variables_map vm;
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (!cli::parse_input_command(args, desc, vm, "trainsim-calibrate")) return kExitOk;
    const bool quick = vm.count("quick") > 0;
    const Sections sections = parse_sections(only);
    if (!gpu_name.empty()) (void)find_gpu(gpu_name, "--gpu");
    if (!out_file.empty()) check_writable(out_file);

    // The workload (optional): the same files and options as `trainsim run`.
    const bool has_workload = !in_opts.workload_file.empty() || !in_opts.runs_file.empty();
    if (!has_workload && (!in_opts.topology_file.empty() || !in_opts.sets.empty()))
        throw InputError(
            "--topology and --set describe a workload's run: give --workload (or --from-runs --id)");
    std::optional<cli::Inputs> in;
    if (has_workload) in = cli::resolve_inputs(in_opts);
    std::vector<GemmShape> workload_shapes;
    std::vector<AttentionShape> attention_shapes;
    std::vector<MemoryJob> memory_jobs;
    if (in) {
        try {
            workload_shapes = workload_gemm_shapes(in->model, in->layout, in->name);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", in->label, e.what()));
        }
        attention_shapes.push_back(workload_attention(in->model, in->layout, in->name));
        const std::int64_t tokens = in->layout.micro_batch * in->model.seq_len / in->layout.cp;
        memory_jobs = plan_memory_jobs(quick, tokens, in->model.hidden, in->model.ffn_hidden / in->layout.tp);
    } else {
        attention_shapes = generic_attention(quick);
        memory_jobs = plan_memory_jobs(quick);
    }

    if (vm.count("plan")) {
        print_plan(std::cout, sections, workload_shapes,
                   vm.count("no-grid") ? std::vector<GemmShape>{} : gemm_grid(quick), attention_shapes,
                   memory_jobs, quick);
        return kExitOk;
    }

    // The device.
    std::string why;
    const int devices = cuda_device_count(why);
    if (devices == 0) {
        std::cerr << "trainsim-calibrate: error: no CUDA device: " << why << "\n";
        return kExitNoDevice;
    }
    if (device < 0 || device >= devices)
        throw InputError(
            fmt::format("--device {}: this machine has CUDA devices 0..{}", device, devices - 1));
    const DeviceProps props = device_props(device);
    // The GPU paths compute what they claim before anything is timed.
    int failures = self_check(device, std::cerr);
    if (devices >= 2 && (sections.collectives || vm.count("self-check")))
        failures += self_check_collectives(devices, std::cerr);
    if (failures > 0) {
        std::cerr << fmt::format("trainsim-calibrate: error: {} self-check(s) failed; no profile written\n",
                                 failures);
        return kExitSelfCheckFailed;
    }
    if (vm.count("self-check")) return kExitOk;
    const auto guess = guess_catalog_gpu(props.name, props.memory_bytes);
    if (!gpu_name.empty() && guess && *guess != gpu_name)
        std::cerr << fmt::format(
            "trainsim-calibrate: note: --gpu {} names another GPU than the device \"{}\" "
            "({})\n",
            gpu_name, props.name, *guess);
    if (gpu_name.empty()) {
        if (!guess)
            throw InputError(fmt::format(
                "the device \"{}\" matches no trainsim catalog GPU; name it with --gpu", props.name));
        gpu_name = *guess;
    }
    if (in && (!in_opts.topology_file.empty() || !in_opts.runs_file.empty()) && in->topology.gpu != gpu_name)
        std::cerr << fmt::format(
            "trainsim-calibrate: note: the topology's GPU is {}, this profile describes {}; trainsim refuses "
            "a profile for another GPU type\n",
            in->topology.gpu, gpu_name);

    const RepPolicy policy = rep_policy(quick);
    Progress progress(std::cerr, isatty(STDERR_FILENO) != 0);
    calibrate::Profile profile;
    profile.gpu = gpu_name;
    profile.device = device_info(device);
    profile.date = today_utc();
    progress.note(fmt::format("device {}: {} (sm_{}{}, {} SMs, {:.1f} GiB), profile for {}", device,
                              props.name, props.cc_major, props.cc_minor, props.sm_count,
                              props.memory_bytes / (1024.0 * 1024.0 * 1024.0), gpu_name));

    std::vector<std::string> measured;
    if (sections.gemm) {
        const bool fp8 = has_fp8(props.cc_major, props.cc_minor);
        if (!fp8) progress.note("no FP8 tensor cores (sm89+ needed): fp8 GEMMs left out");
        const auto jobs = plan_gemm_jobs(
            workload_shapes, vm.count("no-grid") ? std::vector<GemmShape>{} : gemm_grid(quick), fp8, quick);
        profile.gemm = measure_gemms(device, jobs, policy, progress);
        measured.push_back(
            fmt::format("{} GEMMs (cuBLASLt, TN layout, heuristic's first algorithm, 32 MiB "
                        "workspace, fp32 accumulation; fp8 e4m3 x e4m3 -> bf16 with per-tensor "
                        "scales, no fast accumulation)",
                        profile.gemm.size()));
    }
    if (sections.attention) {
        profile.attention = measure_attention(device, attention_shapes, policy, progress);
        measured.push_back(
            fmt::format("{} attention passes (unfused: cublasGemmStridedBatchedEx bf16 + "
                        "trainsim-calibrate's causal softmax; GQA K/V expansion not timed)",
                        profile.attention.size()));
    }
    if (sections.memory) {
        profile.memory_bound = measure_memory_bound(device, memory_jobs, policy, progress);
        measured.push_back(
            fmt::format("{} memory-bound kernels (copy = cudaMemcpyAsync, layernorm and gelu "
                        "= trainsim-calibrate's bf16 kernels)",
                        profile.memory_bound.size()));
    }
    if (sections.collectives) {
        if (devices < 2) {
            progress.note("one GPU: NCCL collectives need two or more, skipped");
        } else {
            profile.collectives = measure_collectives(devices, quick, policy, progress);
            measured.push_back(
                fmt::format("{} NCCL collectives over {} GPUs (bf16, sum, out of place; {} warm-up "
                            "and {} timed iterations back to back, average of the slowest GPU)",
                            profile.collectives.size(), devices, policy.nccl_warmup, policy.nccl_iters));
        }
    }
    profile.source = fmt::format(
        "{}; self-check against CPU references passed; CUDA events on random data; warm-up >= {} runs and >= "
        "{} ms, then clamp(ceil({} ms / "
        "warm-up median), {}, {}) timed runs: median, min, max; {}; peak clocks SM {} MHz, memory {} MHz "
        "(clocks not locked by the tool)",
        join_command_line(argc, argv), policy.warmup_min, policy.warmup_s * 1e3, policy.target_s * 1e3,
        policy.reps_min, policy.reps_max, boost::algorithm::join(measured, "; "), props.sm_clock_khz / 1000,
        props.memory_clock_khz / 1000);

    const std::string text = profile_to_json(profile).dump(1) + "\n";
    if (out_file.empty()) {
        std::cout << text;
    } else {
        cli::write_file_atomically(out_file, text);
        progress.note("wrote " + out_file);
    }
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    // As trainsim's main: a closed pipe (`--plan | head -1`) or a write past `ulimit -f` is a failed write
    // (exit 2, one line), not a death by SIGPIPE or SIGXFSZ; standard output is checked at the end (`--plan >
    // /dev/full` ended with exit 0).
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGXFSZ, SIG_IGN);
    try {
        const int code = run(argc, argv);
        std::cout.flush();
        if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
            std::cerr << "trainsim-calibrate: error: writing failed: standard output\n";
            return kExitBadInput;
        }
        return code;
    } catch (const InputError& e) {
        // The option errors of the shared parser name the command already ("trainsim-calibrate: unrecognised
        // option ..."): once is enough (round 10 found it twice).
        std::string_view what = e.what();
        constexpr std::string_view self = "trainsim-calibrate: ";
        if (what.starts_with(self)) what.remove_prefix(self.size());
        std::cerr << "trainsim-calibrate: error: " << what << "\n";
        return kExitBadInput;
    } catch (const DeviceError& e) {
        std::cerr << "trainsim-calibrate: error: " << e.what() << "\n";
        return kExitInternal;
    } catch (const std::exception& e) {
        std::cerr << "trainsim-calibrate: internal error: " << e.what() << "\n";
        return kExitInternal;
    }
}
