// `trainsim import torchtitan train.toml`: a torchtitan job config -> a workload (the mapping is listed in
// trainsim/importers.hpp and docs/importers.md). TOML parsed with toml++.
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "import_common.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/framework_defaults.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {

/// torchtitan's llama3 flavors (torchtitan/models/llama3/__init__.py llama3_args at commit 76d5c72e2^; the
/// TransformerModelArgs defaults of model/args.py: vocab 128256, multiple_of 256, n_kv_heads = n_heads).
struct Flavor {
    std::string name;
    std::int64_t dim, n_layers, n_heads, n_kv_heads;
    double ffn_dim_multiplier;  ///< 0: None
    std::int64_t multiple_of, vocab;
};

const std::vector<Flavor>& llama3_flavors() {
    static const std::vector<Flavor> f = {{"debugmodel", 256, 6, 16, 16, 0, 256, 2048},
                                          {"8B", 4096, 32, 32, 8, 1.3, 1024, 128256},
                                          {"70B", 8192, 80, 64, 8, 1.3, 4096, 128256},
                                          {"405B", 16384, 126, 128, 8, 1.2, 4096, 128256}};
    return f;
}

/// FeedForward's hidden width (torchtitan/models/llama3/model/model.py FeedForward.__init__ with
/// hidden_dim = 4 * dim): int(2 * hidden / 3), times ffn_dim_multiplier, rounded up to multiple_of.
std::int64_t ffn_hidden(const Flavor& f) {
    std::int64_t h = 2 * (4 * f.dim) / 3;
    if (f.ffn_dim_multiplier > 0)
        h = static_cast<std::int64_t>(f.ffn_dim_multiplier * static_cast<double>(h));
    return f.multiple_of * ((h + f.multiple_of - 1) / f.multiple_of);
}

/// Deepest nesting of tables and arrays accepted in a TOML config (torchtitan's need 2 levels; as
/// kMaxJsonDepth for the JSON inputs).
constexpr int kMaxTomlDepth = 64;

/// Refuses TOML `text` whose tables or arrays could nest deeper than kMaxTomlDepth, by a scan outside
/// strings and comments before parsing: every dot of a table header or of a dotted key opens a table, and
/// toml++ walks the parsed tree recursively (its parser's closing pass, the destructor), so a key of 40,000
/// dotted parts overflowed the stack (signal 11, 2026-11-28). The bound at each point: the dots of the last
/// header + the key dots on the path to the current value + the open arrays and inline tables.
void check_toml_depth(std::string_view text, const std::string& file) {
    int header_dots = 0, path_dots = 0, line = 1;
    bool key = true, header = false, statement_start = true;
    std::vector<std::pair<char, int>> open;  // open '[' / '{' with the path's key dots when opened
    const auto check = [&] {
        if (header_dots + path_dots + static_cast<int>(open.size()) > kMaxTomlDepth)
            throw InputError(
                fmt::format("{}:{}: tables and arrays nested deeper than {} levels (dotted keys, "
                            "headers, arrays and inline tables)",
                            file, line, kMaxTomlDepth));
    };
    // Skips a string opened at i by `quote` (one or three of them); the index of its last character.
    const auto skip_string = [&](std::size_t i, char quote) {
        const bool multi = text.compare(i, 3, std::string(3, quote)) == 0;
        std::size_t j = i + (multi ? 3 : 1);
        for (; j < text.size(); ++j) {
            const char c = text[j];
            if (c == '\n') {
                if (!multi) return j - 1;  // an unterminated string: toml++ says so
                ++line;
            } else if (c == '\\' && quote == '"') {
                if (j + 1 < text.size() && text[j + 1] == '\n') ++line;
                ++j;
            } else if (c == quote && (!multi || text.compare(j, 3, std::string(3, quote)) == 0)) {
                if (!multi) return j;
                j += 2;
                for (int extra = 0; extra < 2 && j + 1 < text.size() && text[j + 1] == quote; ++extra)
                    ++j;  // """a"""" : up to two quotes before the closing three belong to the string
                return j;
            }
        }
        return text.size();
    };
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (c == '\n') {
            ++line;
            if (open.empty()) {
                key = statement_start = true;
                header = false;
                path_dots = 0;
            }
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\r') continue;
        const bool at_start = statement_start;
        statement_start = false;
        if (c == '#') {
            while (i + 1 < text.size() && text[i + 1] != '\n')
                ++i;
        } else if (c == '"' || c == '\'') {
            i = skip_string(i, c);
        } else if (c == '[' && at_start) {
            header = true;
            header_dots = 0;
            if (i + 1 < text.size() && text[i + 1] == '[') ++i;
        } else if (c == ']' && header) {
            header = false;
        } else if (c == '.' && (header || key)) {
            ++(header ? header_dots : path_dots);
            check();
        } else if (c == '=' && key && !header) {
            key = false;
        } else if (c == '[' || c == '{') {
            open.emplace_back(c, path_dots);
            key = c == '{';
            check();
        } else if ((c == ']' || c == '}') && !open.empty()) {
            path_dots = open.back().second;
            open.pop_back();
            key = false;
        } else if (c == ',' && !open.empty()) {
            path_dots = open.back().second;
            key = open.back().first == '{';
        }
    }
}

/// The parsed TOML, read key by key ("section.key" paths); the keys never read are reported as ignored.
class Toml {
  public:
    Toml(std::string_view text, std::string file) : file_(std::move(file)) {
        check_toml_depth(text, file_);
        try {
            table_ = toml::parse(text, file_);
        } catch (const toml::parse_error& e) {
            throw InputError(fmt::format("{}:{}: {}", file_, e.source().begin.line, e.description()));
        }
    }
    /// The first of `paths` present (the current key first, then older spellings); nullptr when none.
    const toml::node* find(std::initializer_list<const char*> paths, std::string* found = nullptr) {
        for (const char* p : paths) {
            used_.insert(p);
            if (const toml::node* n = table_.at_path(p).node()) {
                if (found) *found = p;
                return n;
            }
        }
        return nullptr;
    }
    /// The integer at the first of `paths` present, in lo .. hi; nullopt when none is present.
    std::optional<std::int64_t> integer(std::initializer_list<const char*> paths, std::int64_t lo,
                                        std::int64_t hi) {
        std::string path;
        const toml::node* n = find(paths, &path);
        if (!n) return std::nullopt;
        if (!n->is_integer()) bad(path, *n, "is not an integer");
        const std::int64_t v = *n->value<std::int64_t>();
        if (v < lo) bad(path, *n, fmt::format("must be at least {}", lo));
        if (v > hi) bad(path, *n, fmt::format("must be at most {}", hi));
        return v;
    }
    std::optional<std::string> text(std::initializer_list<const char*> paths) {
        std::string path;
        const toml::node* n = find(paths, &path);
        if (!n) return std::nullopt;
        if (!n->is_string()) bad(path, *n, "is not a string");
        return n->value<std::string>();
    }
    std::optional<bool> boolean(std::initializer_list<const char*> paths) {
        std::string path;
        const toml::node* n = find(paths, &path);
        if (!n) return std::nullopt;
        if (!n->is_boolean()) bad(path, *n, "is not true or false");
        return n->value<bool>();
    }
    /// The strings of an array (converters); a non-string entry is refused.
    std::vector<std::string> strings(std::initializer_list<const char*> paths) {
        std::string path;
        const toml::node* n = find(paths, &path);
        std::vector<std::string> out;
        if (!n) return out;
        const toml::array* a = n->as_array();
        if (!a) bad(path, *n, "is not a list of strings");
        for (const auto& e : *a) {
            if (!e.is_string()) bad(path, *n, "is not a list of strings");
            out.push_back(*e.value<std::string>());
        }
        return out;
    }
    [[noreturn]] void bad(const std::string& path, const toml::node& n, const std::string& problem) const {
        std::ostringstream s;
        s << toml::json_formatter{n};  // the value as written (one line for a scalar)
        importers_detail::bad_written_value(file_, path, s.str(), problem);
    }
    std::vector<std::string> unused() const {
        std::vector<std::string> out;
        collect(table_, "", out);
        return out;
    }
    const std::string& file() const { return file_; }

  private:
    void collect(const toml::table& t, const std::string& prefix, std::vector<std::string>& out) const {
        for (const auto& [k, v] : t) {
            const std::string path = prefix + std::string(k.str());
            if (const toml::table* sub = v.as_table())
                collect(*sub, path + ".", out);
            else if (!used_.count(path))
                out.push_back(path);
        }
    }
    std::string file_;
    toml::table table_;
    std::set<std::string> used_;
};

ModelSpec flavor_model(Toml& t, const ImportTarget& target) {
    const std::string name = t.text({"model.name"}).value_or("llama3");
    if (name != "llama3")
        importers_detail::bad_value(t.file(), "model.name", name, "is not supported (supported: llama3)");
    const std::string flavor = t.text({"model.flavor"}).value_or("debugmodel");
    const auto& all = llama3_flavors();
    const auto f = std::find_if(all.begin(), all.end(), [&](const Flavor& x) { return x.name == flavor; });
    if (f == all.end())
        importers_detail::bad_value(t.file(), "model.flavor", flavor,
                                    "is not a llama3 flavor trainsim knows (debugmodel, 8B, 70B, 405B)");
    ModelSpec m;
    m.name = "llama3-" + flavor;
    m.layers = f->n_layers;
    m.hidden = f->dim;
    m.heads = f->n_heads;
    m.kv_heads = f->n_kv_heads;
    m.ffn_hidden = ffn_hidden(*f);
    m.vocab = f->vocab;
    m.mlp = MlpKind::swiglu;
    m.tied_embeddings = false;
    m.dropout = false;
    const std::int64_t seq = t.integer({"training.seq_len"}, 1, limits::kMaxSeqLen).value_or(2048);
    m.seq_len = target.seq_len.value_or(seq);
    return m;
}

/// The data-parallel degrees: shard (FSDP, -1 = the GPUs left) and replicate (DDP); HSDP is refused.
void data_parallel(Toml& t, int gpus, Layout& l) {
    const auto replicate =
        t.integer({"parallelism.data_parallel_replicate_degree", "training.data_parallel_replicate_degree"},
                  1, limits::kMaxGpus)
            .value_or(1);
    auto shard = t.integer({"parallelism.data_parallel_shard_degree", "training.data_parallel_shard_degree"},
                           -1, limits::kMaxGpus)
                     .value_or(-1);
    const long long rest = static_cast<long long>(l.tp) * l.pp * l.cp * std::max<std::int64_t>(replicate, 1);
    if (replicate < 1 || shard == 0 || shard < -1)
        throw InputError(
            fmt::format("{}: parallelism.data_parallel_replicate_degree = {} / "
                        "data_parallel_shard_degree = {}: degrees must be positive (shard -1: the GPUs "
                        "left)",
                        t.file(), replicate, shard));
    if (shard == -1) shard = gpus / rest;
    if (shard < 1 || rest * shard != gpus)
        throw InputError(
            fmt::format("{}: {} GPUs are not TP x PP x CP x DP-replicate x DP-shard = {} x {} x {} x "
                        "{} x {}",
                        t.file(), gpus, l.tp, l.pp, l.cp, replicate, shard));
    if (replicate > 1 && shard > 1)
        throw InputError(
            fmt::format("{}: data_parallel_replicate_degree = {} with data_parallel_shard_degree = {} "
                        "is HSDP, which trainsim does not model (FSDP or DDP)",
                        t.file(), replicate, shard));
    l.dp = static_cast<int>(replicate * shard);
    l.zero_stage = shard > 1 ? 3 : 0;
}

/// torchtitan's split of the layers over the virtual pipeline stages, the embedding and the output counting
/// as first/last_stage_less_layers layers (pipeline_parallel.py generate_llm_fqn_per_model_part).
std::vector<std::int64_t> titan_stage_layers(std::int64_t layers, std::int64_t stages, std::int64_t in_w,
                                             std::int64_t out_w, const std::string& file) {
    const std::int64_t effective = layers + in_w + out_w, per = effective / stages,
                       extra = effective % stages;
    if (per == 0 || in_w > per || out_w > per)
        throw InputError(
            fmt::format("{}: {} layers (+ {} + {} for the embedding and the output) do not split over "
                        "{} pipeline stages",
                        file, layers, in_w, out_w, stages));
    std::vector<std::int64_t> out;
    std::int64_t left = layers;
    for (std::int64_t s = 0; s < stages; ++s) {
        std::int64_t n = per + (s < extra ? 1 : 0) - (s == 0 ? in_w : 0) - (s == stages - 1 ? out_w : 0);
        n = std::min(n, left);
        out.push_back(n);
        left -= n;
    }
    return out;
}

/// pipeline_parallel_schedule (1F1B, GPipe, Interleaved1F1B), the stages per rank and the layer split.
void pipeline(Toml& t, const ModelSpec& m, Layout& l, Imported& imp) {
    const std::string sched =
        t.text({"parallelism.pipeline_parallel_schedule", "experimental.pipeline_parallel_schedule"})
            .value_or("1F1B");
    const auto per_stage =
        t.integer({"parallelism.pipeline_parallel_layers_per_stage"}, 1, limits::kMaxLayers);
    const std::int64_t in_w =
        t.integer({"parallelism.pipeline_parallel_first_stage_less_layers"}, 0, limits::kMaxLayers)
            .value_or(1);
    const std::int64_t out_w =
        t.integer({"parallelism.pipeline_parallel_last_stage_less_layers"}, 0, limits::kMaxLayers)
            .value_or(1);
    if (l.pp <= 1) return;
    if (sched != "1F1B" && sched != "GPipe" && sched != "Interleaved1F1B")
        importers_detail::bad_value(t.file(), "parallelism.pipeline_parallel_schedule", sched,
                                    "is not modeled (trainsim: 1F1B, GPipe, Interleaved1F1B)");
    l.schedule = sched == "GPipe" ? Schedule::gpipe : Schedule::one_f_one_b;
    const bool multi = sched == "Interleaved1F1B";
    std::int64_t stages = l.pp * (multi ? 2 : 1);
    if (per_stage) stages = (m.layers + in_w + out_w + *per_stage - 1) / *per_stage;
    if (stages % l.pp != 0 || (!multi && stages != l.pp) || (multi && stages < 2 * l.pp))
        throw InputError(fmt::format("{}: {} virtual pipeline stages do not suit PP {} with schedule {}",
                                     t.file(), stages, l.pp, sched));
    l.vpp = static_cast<int>(stages / l.pp);
    const auto counts = titan_stage_layers(m.layers, stages, in_w, out_w, t.file());
    std::vector<std::int64_t> per_rank(static_cast<std::size_t>(l.pp), 0);
    bool uneven_chunks = false;
    for (std::int64_t s = 0; s < stages; ++s) {  // looped placement: virtual stage s on rank s % pp
        const auto rank = static_cast<std::size_t>(s % l.pp);
        uneven_chunks = uneven_chunks || counts[static_cast<std::size_t>(s)] != counts[rank];
        per_rank[rank] += counts[static_cast<std::size_t>(s)];
    }
    for (std::size_t r = 0; r < per_rank.size(); ++r)
        if (per_rank[r] % l.vpp != 0)
            throw InputError(
                fmt::format("{}: torchtitan's split of {} layers over {} virtual stages ({}) puts {} "
                            "layers on rank {}, which its {} chunks cannot share evenly as trainsim "
                            "holds them",
                            t.file(), m.layers, stages, fmt::join(counts, " "), per_rank[r], r, l.vpp));
    if (uneven_chunks)
        imp.notes.push_back(
            fmt::format("torchtitan splits the {} layers over the {} virtual stages as {}; trainsim "
                        "keeps each rank's layers ({}) and splits them evenly over its {} chunks",
                        m.layers, stages, fmt::join(counts, " "), fmt::join(per_rank, " "), l.vpp));
    if (std::adjacent_find(per_rank.begin(), per_rank.end(), std::not_equal_to<>()) != per_rank.end())
        l.layers_per_stage = per_rank;
}

/// [activation_checkpoint] mode and selective_ac_option.
void activation_checkpoint(Toml& t, const ModelSpec& m, Layout& l, Imported& imp) {
    const std::string mode = t.text({"activation_checkpoint.mode"}).value_or("selective");
    const std::string option = t.text({"activation_checkpoint.selective_ac_option"}).value_or("2");
    if (mode == "none") return;
    if (mode == "full") {
        l.recompute = Recompute::full;
        return;
    }
    if (mode != "selective")
        importers_detail::bad_value(t.file(), "activation_checkpoint.mode", mode,
                                    "is not modeled (trainsim: none, full, selective)");
    if (option == "op") {
        l.recompute = Recompute::selective_op;
        return;
    }
    const auto every = importers_detail::parse_integer(option);
    if (!every || *every < 1)
        importers_detail::bad_value(t.file(), "activation_checkpoint.selective_ac_option", option,
                                    "is neither \"op\" nor a positive integer");
    l.recompute = Recompute::full;
    const std::int64_t chunk_layers = m.layers / (l.pp * l.vpp);
    if (*every > 1) {
        l.recompute_num_layers = (chunk_layers + *every - 1) / *every;
        imp.notes.push_back(
            fmt::format("selective_ac_option {}: every {}-th layer recomputed, modeled as the first "
                        "{} layers of each chunk (the same count)",
                        *every, *every, l.recompute_num_layers));
    }
}

/// Float8 / MX converters ([model] converters, [float8] / [quantize.linear.float8] recipe_name).
void low_precision(Toml& t, Layout& l) {
    const auto converters = t.strings({"model.converters"});
    const auto has = [&](const char* a, const char* b) {
        return std::find(converters.begin(), converters.end(), a) != converters.end() ||
               std::find(converters.begin(), converters.end(), b) != converters.end();
    };
    const bool legacy = t.boolean({"float8.enable_float8_linear"}).value_or(false);
    const auto recipe = t.text({"quantize.linear.float8.recipe_name", "float8.recipe_name"});
    if (has("float8", "quantize.linear.float8") || legacy) {
        l.precision = Precision::fp8;
        const std::string r = recipe.value_or("tensorwise");
        if (r != "tensorwise" && r != "rowwise")
            importers_detail::bad_value(t.file(), "float8.recipe_name", r,
                                        "is not modeled (tensorwise, rowwise)");
        l.fp8_recipe = r == "rowwise" ? Fp8Recipe::rowwise : Fp8Recipe::tensorwise;
    }
    if (has("mx", "quantize.linear.mx")) {
        l.precision = Precision::fp8;
        l.fp8_recipe = Fp8Recipe::mxfp8;
    }
}

/// [training]: batch sizes, precision, compile, CPU offload.
void training(Toml& t, Layout& l) {
    const std::int64_t local =
        t.integer({"training.local_batch_size", "training.batch_size"}, 1, limits::kMaxGlobalBatch)
            .value_or(8);
    const std::int64_t global =
        t.integer({"training.global_batch_size"}, -1, limits::kMaxGlobalBatch).value_or(-1);
    const std::int64_t mbs =
        t.integer({"parallelism.pipeline_parallel_microbatch_size"}, 1, limits::kMaxGlobalBatch).value_or(1);
    l.micro_batch = l.pp > 1 ? mbs : local;
    l.global_batch = global > 0 ? global : local * l.dp;
    const std::string param = t.text({"training.mixed_precision_param"}).value_or("bfloat16");
    if (param != "bfloat16")
        importers_detail::bad_value(t.file(), "training.mixed_precision_param", param,
                                    "is not modeled (trainsim: bfloat16 parameters)");
    l.precision = Precision::bf16;
    l.torch_compile = t.boolean({"compile.enable", "training.compile"}).value_or(false);
    if (t.boolean({"training.enable_cpu_offload"}).value_or(false))
        importers_detail::bad_value(t.file(), "training.enable_cpu_offload", "true",
                                    "is not modeled (FSDP's CPU offload of parameters and gradients)");
}

Layout titan_layout(Toml& t, const ModelSpec& m, const ImportTarget& target, Imported& imp) {
    Layout l;
    l.framework = Framework::torchtitan;
    l.tp =
        static_cast<int>(t.integer({"parallelism.tensor_parallel_degree", "training.tensor_parallel_degree"},
                                   1, limits::kMaxGpus)
                             .value_or(1));
    l.pp = static_cast<int>(
        t.integer({"parallelism.pipeline_parallel_degree", "experimental.pipeline_parallel_degree"}, 1,
                  limits::kMaxGpus)
            .value_or(1));
    l.cp = static_cast<int>(
        t.integer({"parallelism.context_parallel_degree", "experimental.context_parallel_degree"}, 1,
                  limits::kMaxGpus)
            .value_or(1));
    if (l.tp < 1 || l.pp < 1 || l.cp < 1)
        throw InputError(fmt::format("{}: parallel degrees must be positive (TP {}, PP {}, CP {})", t.file(),
                                     l.tp, l.pp, l.cp));
    imp.gpus = importers_detail::import_gpus(target, 0);
    data_parallel(t, imp.gpus, l);
    l.sequence_parallel = l.tp > 1;  // torchtitan's TP plan shards the norms' activations (SequenceParallel)
    pipeline(t, m, l, imp);
    training(t, l);
    activation_checkpoint(t, m, l, imp);
    const bool async_tp =
        t.boolean({"parallelism.enable_async_tensor_parallel", "experimental.enable_async_tensor_parallel"})
            .value_or(false);
    if (const std::string why = async_tp_refusal(Framework::torchtitan, async_tp, l.tp, l.torch_compile);
        !why.empty())
        importers_detail::bad_value(t.file(), "parallelism.enable_async_tensor_parallel", "true",
                                    "needs training.compile = true: " + why);
    const Fp8Recipe recipe_before = l.fp8_recipe;
    apply_framework_defaults(l, find_gpu(target.gpu, t.file()), async_tp);
    low_precision(t, l);
    if (l.precision != Precision::fp8) l.fp8_recipe = recipe_before;
    const std::string reshard = t.text({"parallelism.fsdp_reshard_after_forward"}).value_or("default");
    if (reshard == "always")
        l.reshard_after_forward = true;
    else if (reshard == "never")
        l.reshard_after_forward = false;
    else if (reshard != "default")
        importers_detail::bad_value(t.file(), "parallelism.fsdp_reshard_after_forward", reshard,
                                    "is not one of default, always, never");
    return l;
}

}  // namespace

Imported import_torchtitan(std::string_view toml_text, const std::string& file, const ImportTarget& target) {
    Toml t(toml_text, file);
    Imported imp;
    const ModelSpec m = flavor_model(t, target);
    const Layout l = titan_layout(t, m, target, imp);
    imp.ignored = t.unused();
    imp.workload = importers_detail::workload_document(
        target.name.empty() ? "torchtitan-import" : target.name,
        fmt::format(
            "Imported by `trainsim import torchtitan` from the torchtitan job config {} ({} flavor {}) "
            "for {} GPUs ({}).",
            file, "llama3", m.name.substr(7), imp.gpus, target.gpu),
        m, l);
    return imp;
}

}  // namespace trainsim
