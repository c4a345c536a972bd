// `trainsim import megatron|hf|torchtitan`: a workload file from a Megatron-LM launch, a Hugging Face
// config.json or a torchtitan train.toml (trainsim/importers.hpp; docs/importers.md).
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/importers.hpp"
#include "trainsim/output_file.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

const char* kImportUsage =
    "trainsim import KIND [SOURCE] [options] [-- ARGUMENTS]\n\n"
    "Writes a workload file (model + layout; docs/inputs.md) from the files planners already have:\n"
    "  trainsim import megatron [--args-file FILE] [options] -- <pretrain_gpt.py arguments>\n"
    "      Megatron-LM / NeMo launch arguments (--num-layers, --hidden-size, --tensor-model-parallel-size,\n"
    "      ...; torchrun's --nnodes and --nproc-per-node count the GPUs)\n"
    "  trainsim import hf config.json [options]\n"
    "      a Hugging Face config.json (Llama, Mistral, Qwen2/3, GPT-NeoX, Mixtral, gpt-oss, Qwen2/3-MoE): "
    "the\n"
    "      model, with trainsim's default layout (change it with --set layout.tp=8 ...)\n"
    "  trainsim import torchtitan train.toml [options]\n"
    "      a torchtitan job config: the llama3 flavor's model, FSDP/TP/PP/CP degrees, AC mode, float8\n"
    "Flags and keys the importer does not use are listed on stderr (\"ignored: --lr, --data-path\"); a "
    "value\n"
    "trainsim cannot represent is an error (exit 2). The written workload loads with `trainsim run\n"
    "--workload FILE` on a topology of the same GPU count (--topology-out writes one). Mapping tables:\n"
    "docs/importers.md.\n\noptions";

struct ImportOptions {
    std::vector<std::string> files, sets;
    std::string out, topology, topology_out, args_file, name;
    int gpus = 0;
    std::int64_t seq = 0;
};

void add_options(po::options_description& desc, ImportOptions& o) {
    desc.add_options()("help,h", "this help")("out,o", po::value(&o.out),
                                              "workload file to write (atomically; default: print it)")(
        "topology", po::value(&o.topology),
        "topology the workload is for: its GPU type picks framework defaults (Megatron's attention kernel) "
        "and its GPU count the DP size (default: the embedded DGX A100 cluster, 1024 GPUs)")(
        "gpus", po::value(&o.gpus),
        "GPUs to lay the model out on (DP = GPUs / (TP x PP x CP)); default: "
        "--nnodes x --nproc-per-node of a Megatron launch, else the topology's")(
        "seq", po::value(&o.seq),
        "sequence length (tokens), over the source's (hf: max_position_embeddings)")(
        "name", po::value(&o.name), "the workload's name (default: KIND-import)")(
        "set", po::value(&o.sets)->composing(),
        "override a field of the imported workload or the topology: KEY=VALUE, e.g. layout.tp=8 (repeatable; "
        "DP is derived again unless layout.dp is set)")(
        "topology-out", po::value(&o.topology_out),
        "also write the topology with its node count set for the workload's GPUs")(
        "args-file", po::value(&o.args_file),
        "megatron: a file of launch arguments (shell words, '\\' continuations, # comments), read before "
        "those after --")("files", po::value(&o.files)->composing(), "the source file (hf, torchtitan)");
}

/// The text of an input file, read as read_json_file reads one (trainsim/config.hpp): a directory is refused,
/// at most kMaxInputFileBytes are read (a device or FIFO such as /dev/zero is refused, not read forever).
Imported run_importer(const std::string& kind, const ImportOptions& o, const std::vector<std::string>& words,
                      const ImportTarget& target) {
    if (kind == "megatron") {
        if (!o.files.empty())
            throw InputError(
                fmt::format("import megatron: unexpected argument \"{}\" (Megatron arguments go "
                            "after --)",
                            clip_for_message(o.files.front())));
        std::vector<std::string> args;
        if (!o.args_file.empty()) args = split_args_text(read_input_file(o.args_file), o.args_file);
        args.insert(args.end(), words.begin(), words.end());
        if (args.empty())
            throw InputError("import megatron: no arguments: give them after -- or with --args-file");
        return import_megatron(args, o.args_file.empty() ? "megatron" : o.args_file, target);
    }
    if (!words.empty() || !o.args_file.empty())
        throw InputError(fmt::format("import {}: -- and --args-file are for megatron", kind));
    if (o.files.size() != 1) throw InputError(fmt::format("import {}: give exactly one source file", kind));
    const std::string& file = o.files.front();
    if (kind == "hf") return import_hf_config(read_json_file(file), file, target);
    return import_torchtitan(read_input_file(file), file, target);
}

/// The topology with its node count set for `gpus` (unless --set named topology.nodes), checked.
std::string topology_for(nlohmann::json topo, int gpus, const ImportOptions& o) {
    const bool nodes_set = std::any_of(o.sets.begin(), o.sets.end(), [](const std::string& s) {
        return s.rfind("topology.nodes=", 0) == 0;
    });
    const long long per_node = topo.value("gpus_per_node", 0LL);
    if (!nodes_set) {
        if (per_node <= 0 || gpus % per_node != 0)
            throw InputError(fmt::format("import: {} GPUs are not whole nodes of {} GPUs (--topology-out)",
                                         gpus, per_node));
        topo["nodes"] = gpus / per_node;
    }
    // Its errors name the topology it came from and the node count set here, not the file not yet written.
    const std::string from = o.topology.empty() ? "the default topology" : o.topology;
    (void)parse_topology(
        topo,
        nodes_set
            ? fmt::format("import: --topology-out {} ({} with the --set node count)", o.topology_out, from)
            : fmt::format("import: --topology-out {} ({} with nodes = {} for the workload's {} GPUs)",
                          o.topology_out, from, gpus / per_node, gpus));
    // A node count of the user's that does not hold the workload: the two files would not run together.
    if (nodes_set && topology_gpus(topo) != gpus)
        throw InputError(
            fmt::format("import: --topology-out {}: --set topology.nodes={} gives {} GPUs and the workload "
                        "is for {} (--gpus "
                        "or layout.dp); leave topology.nodes out to size the topology for the workload",
                        o.topology_out, topo.value("nodes", 0LL), topology_gpus(topo), gpus));
    return topo.dump(2) + "\n";
}

void report(const Imported& imp, const nlohmann::json& topo, const ImportOptions& o) {
    // Each key or flag, and each note, is cut as an error's values are: a 100,000-character key or
    // hidden_act was printed whole (round 12).
    if (!imp.ignored.empty()) {
        std::vector<std::string> keys;
        for (const auto& key : imp.ignored)
            keys.push_back(clip_for_message(key));
        std::cerr << "ignored: " << clip_for_message(fmt::format("{}", fmt::join(keys, ", ")), 4000) << "\n";
    }
    for (const auto& n : imp.notes)
        std::cerr << "note: " << one_line(n) << "\n";
    const int cluster = topology_gpus(topo);
    const long long per_node = topo.value("gpus_per_node", 0LL);
    if (o.topology_out.empty() && cluster != imp.gpus) {
        // The node count advised must itself pass the topology's checks (GB200 NVL72: whole 72-GPU domains,
        // so 64 GPUs are 16 trays that no domain of 18 holds).
        std::string nodes = "N";
        std::string why_not;
        if (per_node > 0 && imp.gpus % per_node == 0) {
            nlohmann::json sized = topo;
            sized["nodes"] = imp.gpus / per_node;
            try {
                (void)parse_topology(sized, "the topology");
                nodes = std::to_string(imp.gpus / per_node);
            } catch (const InputError& e) {
                why_not = clip_for_message(e.what(), 160);
            }
        }
        if (why_not.empty())
            std::cerr << fmt::format(
                "note: the workload is for {} GPUs and the topology has {}: run it with --set "
                "topology.nodes={} (or write a topology with --topology-out)\n",
                imp.gpus, cluster, nodes);
        else
            std::cerr << fmt::format(
                "note: the workload is for {} GPUs and the topology has {}, and no node count of this "
                "topology holds {} GPUs ({}): change the layout's GPUs or use another topology\n",
                imp.gpus, cluster, imp.gpus, why_not);
    }
}

}  // namespace

int import_workload_command(const std::vector<std::string>& all) {
    const auto dashes = std::find(all.begin(), all.end(), "--");
    std::vector<std::string> args(all.begin(), dashes), words;
    if (dashes != all.end()) words.assign(dashes + 1, all.end());
    ImportOptions o;
    po::options_description desc(kImportUsage);
    add_options(desc, o);
    if (args.empty())
        throw InputError(
            "import: no kind given (megatron, hf, torchtitan); `trainsim import --help` lists the options");
    if (args[0] == "--help" || args[0] == "-h") {
        std::cout << desc << "\n";
        return kExitOk;
    }
    const std::string kind = args[0];
    if (kind != "megatron" && kind != "hf" && kind != "torchtitan")
        throw InputError(fmt::format("import: unknown kind \"{}\" (known: megatron, hf, torchtitan)",
                                     clip_for_message(kind)));
    po::variables_map vm;
    const std::string command = "import " + kind;
    if (!parse_file_command({args.begin() + 1, args.end()}, desc, vm, command.c_str())) return kExitOk;
    check_output_option(vm, "out", o.out, command);
    check_output_option(vm, "topology-out", o.topology_out, command);
    {
        std::vector<NamedFile> inputs = {{"--topology", o.topology}, {"--args-file", o.args_file}};
        for (const std::string& f : o.files)
            inputs.push_back({"the source file", f});
        check_distinct_outputs({{"--out", o.out}, {"--topology-out", o.topology_out}}, inputs);
    }
    nlohmann::json topo = o.topology.empty() ? default_topology_json() : read_json_file(o.topology);
    const TopologySpec spec = parse_topology(topo, o.topology.empty() ? "(default topology)" : o.topology);
    ImportTarget target;
    target.gpu = spec.gpu;
    target.cluster_gpus = topology_gpus(topo);
    // The topology's GPUs after its --set values: `--set topology.nodes=4` lays the model out on the 32 GPUs
    // it asks for (it was laid out on the file's 1,024, and the note advised topology.nodes=128). A --set the
    // topology refuses is reported by finish_import below.
    if (std::any_of(o.sets.begin(), o.sets.end(),
                    [](const std::string& s) { return s.rfind("topology.", 0) == 0; })) {
        nlohmann::json sized = topo, unused = nlohmann::json::object();
        try {
            for (const std::string& s : o.sets)
                if (s.rfind("topology.", 0) == 0) apply_override(sized, unused, s);
            target.cluster_gpus = parse_topology(sized, "the topology").gpus();
        } catch (const InputError&) {
        }
    }
    if (vm.count("gpus") && o.gpus < 1)
        throw InputError(fmt::format("{}: --gpus = {} must be positive", command, o.gpus));
    if (vm.count("seq") && o.seq < 1)
        throw InputError(fmt::format("{}: --seq = {} must be positive", command, o.seq));
    target.gpus = o.gpus;
    if (o.seq > 0) target.seq_len = o.seq;
    // The name is written into the workload, a JSON text: bytes that are not UTF-8 (a Latin-1 name) made the
    // writer throw, reported as an internal error (round 14).
    for (std::size_t i = 0; i < o.name.size();) {
        const auto c = static_cast<unsigned char>(o.name[i]);
        const std::size_t n = c < 0x80 ? 1 : utf8_sequence_length(std::string_view(o.name).substr(i));
        if (n == 0)
            throw InputError(
                fmt::format("{}: --name = \"{}\" is not valid UTF-8", command, clip_for_message(o.name)));
        i += n;
    }
    target.name = o.name;
    // The source the model came from, named by errors found in what it says (a head count that does not
    // divide, a size over the limits), which the readers below raise without it.
    const std::string source = kind != "megatron" && o.files.size() == 1 ? o.files.front()
                               : !o.args_file.empty()                    ? o.args_file
                                                                         : kind;  // megatron: its label
    Imported imp;
    try {
        imp = run_importer(kind, o, words, target);
        finish_import(imp, o.sets, topo, o.topology.empty() ? "(default topology)" : o.topology);
    } catch (const InputError& e) {
        const std::string_view what = e.what();
        // The sequence length --seq gave, refused by the workload's range: blamed on --seq.
        if (const auto at = what.find("model.seq_len = ");
            vm.count("seq") && at != std::string_view::npos && what.rfind("--", 0) != 0)
            throw InputError(fmt::format("{}: --seq {}: {}", command, o.seq, what.substr(at)));
        if (what.rfind(source, 0) == 0 || what.rfind("import ", 0) == 0 || what.rfind("--", 0) == 0) throw;
        const std::string_view rest = what.rfind("hf-import: ", 0) == 0 ? what.substr(11) : what;
        throw InputError(fmt::format("{}: {}", source, rest));
    }
    const std::string text = workload_text(imp.workload);
    const std::string topo_text = o.topology_out.empty() ? "" : topology_for(topo, imp.gpus, o);
    // Both files are written in full before either is put in place, and the notes ("ignored: ...") come
    // after the output: a full disk under -o left --topology-out's file behind, and the notes made the
    // error of a failed write (a full disk, a closed standard output) the third line on stderr.
    std::optional<OutputFile> topo_file, workload_file;
    if (!o.topology_out.empty()) {
        topo_file.emplace(o.topology_out);
        topo_file->write(topo_text);
    }
    if (!o.out.empty()) {
        workload_file.emplace(o.out);
        workload_file->write(text);
    } else {
        std::cout << text;
        flush_stdout();
    }
    // Both under one lock of their folders: two imports at once left A from one and B from the other.
    std::vector<OutputFile*> outputs;
    if (topo_file) outputs.push_back(&*topo_file);
    if (workload_file) outputs.push_back(&*workload_file);
    commit_together(outputs);
    report(imp, topo, o);
    return kExitOk;
}

}  // namespace trainsim::cli
