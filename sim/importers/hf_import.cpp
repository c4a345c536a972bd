// `trainsim import hf config.json`: a Hugging Face transformers config -> the model block of a workload
// (the mapping is listed in trainsim/importers.hpp and docs/importers.md).
#include <set>

#include <fmt/format.h>

#include "import_common.hpp"
#include "moe_layer_pattern.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {

using nlohmann::json;

/// The model families read, by config.json model_type, with their MLP and where their experts are counted.
struct Family {
    std::string model_type;
    MlpKind mlp;
    std::string experts_key;  ///< "" for a dense family
};

const std::vector<Family>& families() {
    static const std::vector<Family> f = {{"llama", MlpKind::swiglu, ""},
                                          {"mistral", MlpKind::swiglu, ""},
                                          {"qwen2", MlpKind::swiglu, ""},
                                          {"qwen3", MlpKind::swiglu, ""},
                                          {"gpt_neox", MlpKind::gelu, ""},
                                          {"mixtral", MlpKind::swiglu, "num_local_experts"},
                                          {"gpt_oss", MlpKind::swiglu, "num_local_experts"},
                                          {"qwen2_moe", MlpKind::swiglu, "num_experts"},
                                          {"qwen3_moe", MlpKind::swiglu, "num_experts"}};
    return f;
}

/// A config.json read key by key: each key read is marked used; the others are reported as ignored.
class Config {
  public:
    Config(const json& j, std::string file) : j_(j), file_(std::move(file)) {
        if (!j_.is_object()) throw InputError(fmt::format("{}: not a JSON object", file_));
    }
    bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
    const json* get(const std::string& key) {
        used_.insert(key);
        return has(key) ? &j_.at(key) : nullptr;
    }
    std::optional<std::int64_t> integer(const std::string& key, std::int64_t min = 1,
                                        std::int64_t max = importers_detail::kMaxImportInteger) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_number_integer())
            importers_detail::bad_written_value(file_, key, v->dump(), "is not an integer");
        // The upper bound first: an unsigned value past 2^63 read as an int64 is negative, and was refused
        // as "9223372036854775808 must be at least 1" (round 14).
        if (v->is_number_unsigned() ? v->get<std::uint64_t>() > static_cast<std::uint64_t>(max)
                                    : v->get<std::int64_t>() > max)
            importers_detail::bad_written_value(file_, key, v->dump(),
                                                fmt::format("must be at most {}", max));
        if (v->get<std::int64_t>() < min)
            importers_detail::bad_written_value(file_, key, v->dump(),
                                                fmt::format("must be at least {}", min));
        return v->get<std::int64_t>();
    }
    std::int64_t required(const std::string& key, std::int64_t max = importers_detail::kMaxImportInteger) {
        const auto v = integer(key, 1, max);
        if (!v) throw InputError(fmt::format("{}: {} is missing", file_, key));
        return *v;
    }
    /// A number in [min, max] (a dropout probability: 0 .. 1).
    std::optional<double> number(const std::string& key, double min, double max) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_number()) importers_detail::bad_written_value(file_, key, v->dump(), "is not a number");
        const double x = v->get<double>();
        if (!(x >= min && x <= max))
            importers_detail::bad_written_value(file_, key, v->dump(),
                                                fmt::format("must be {:g} .. {:g}", min, max));
        return x;
    }
    std::optional<bool> boolean(const std::string& key) {
        const json* v = get(key);
        if (!v) return std::nullopt;
        if (!v->is_boolean())
            importers_detail::bad_written_value(file_, key, v->dump(), "is not true or false");
        return v->get<bool>();
    }
    std::string text(const std::string& key) {
        const json* v = get(key);
        if (v && !v->is_string())
            importers_detail::bad_written_value(file_, key, v->dump(), "is not a string");
        return v ? v->get<std::string>() : std::string();
    }
    std::vector<std::string> unused() const {
        std::vector<std::string> out;
        for (const auto& [k, v] : j_.items())
            if (!used_.count(k)) out.push_back(k);
        return out;
    }
    const std::string& file() const { return file_; }

  private:
    const json& j_;
    std::string file_;
    std::set<std::string> used_;
};

const Family& family_of(Config& c) {
    const std::string type = c.text("model_type");
    for (const auto& f : families())
        if (f.model_type == type) return f;
    std::vector<std::string> names;
    for (const auto& f : families())
        names.push_back(f.model_type);
    importers_detail::bad_value(c.file(), "model_type", type,
                                fmt::format("is not supported (supported: {})", fmt::join(names, ", ")));
}

/// The sliding window (ModelSpec::sliding_window, sliding_window_full_every): `sliding_window` for every
/// layer (Mistral), unless `use_sliding_window` is false (Qwen2 / Qwen3 write a window they do not use; their
/// configs' default is false);
/// `layer_types` ("sliding_attention" / "full_attention", gpt-oss, Gemma 3) when every N-th layer is the
/// full one. A window at least seq_len long is no window.
void sliding_window(Config& c, const Family& f, ModelSpec& m, std::vector<std::string>& notes) {
    const auto window = c.integer("sliding_window");
    // Qwen2Config / Qwen2MoeConfig / Qwen3(Moe)Config default use_sliding_window to false (transformers
    // configuration_qwen2.py); Mistral's and gpt-oss's configs have no such key and use their window.
    const bool qwen = f.model_type.rfind("qwen", 0) == 0;
    const bool used = c.boolean("use_sliding_window").value_or(!qwen);
    const json* types = c.get("layer_types");
    if (!window || !used || *window >= m.seq_len) return;
    std::int64_t every = 0;
    if (types) {
        if (!types->is_array() || static_cast<std::int64_t>(types->size()) != m.layers)
            importers_detail::bad_written_value(c.file(), "layer_types", types->dump(),
                                                fmt::format("is not a list of {} layer types", m.layers));
        std::vector<std::int64_t> full;  // 1-based numbers of the full-attention layers
        for (std::int64_t i = 0; i < m.layers; ++i) {
            const json& t = (*types)[static_cast<std::size_t>(i)];
            if (t == "full_attention")
                full.push_back(i + 1);
            else if (t != "sliding_attention")
                importers_detail::bad_written_value(
                    c.file(), "layer_types", types->dump(),
                    fmt::format("holds {} (not \"sliding_attention\" or \"full_attention\")", t.dump()));
        }
        if (full.size() == static_cast<std::size_t>(m.layers)) return;  // no windowed layer
        every = full.empty() ? 0 : full.front();
        for (std::size_t k = 0; k < full.size() && every > 0; ++k)
            if (full[k] != every * static_cast<std::int64_t>(k + 1)) every = -1;
        if (every < 0 || (every > 0 && static_cast<std::int64_t>(full.size()) != m.layers / every)) {
            notes.push_back(
                fmt::format("layer_types: the full-attention layers are not every N-th layer; "
                            "attention costed as full causal (sliding_window {} not applied)",
                            *window));
            return;
        }
    }
    m.sliding_window = *window;
    m.sliding_window_full_every = every;
}

/// Qwen-MoE's sparse layers: layer i is sparse when i is not in mlp_only_layers and (i + 1) %
/// decoder_sparse_step == 0 (transformers modeling_qwen2_moe.py Qwen2MoeDecoderLayer).
void sparse_layers(Config& c, ModelSpec& m) {
    const std::int64_t step = c.integer("decoder_sparse_step").value_or(1);
    std::set<std::int64_t> dense;
    if (const json* only = c.get("mlp_only_layers")) {
        if (!only->is_array())
            importers_detail::bad_written_value(c.file(), "mlp_only_layers", only->dump(), "is not a list");
        for (const auto& v : *only) {
            if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() >= m.layers)
                importers_detail::bad_written_value(
                    c.file(), "mlp_only_layers", only->dump(),
                    fmt::format("holds a value that is not a layer index 0 .. {}", m.layers - 1));
            dense.insert(v.get<std::int64_t>());
        }
    }
    std::vector<int> is_moe;
    for (std::int64_t i = 0; i < m.layers; ++i)
        is_moe.push_back(!dense.count(i) && (i + 1) % step == 0 ? 1 : 0);
    const auto p = importers_detail::pattern_of(
        is_moe, c.file(), "decoder_sparse_step / mlp_only_layers",
        fmt::format("{} / {}", step, c.has("mlp_only_layers") ? c.get("mlp_only_layers")->dump() : "[]"));
    m.moe_first_dense_layers = p.first_dense_layers;
    m.moe_layer_freq = p.layer_freq;
}

void experts(Config& c, const Family& f, ModelSpec& m) {
    const auto n = c.integer(f.experts_key, 0);
    if (!n || *n == 0) return;
    m.num_experts = *n;
    m.moe_top_k = c.required("num_experts_per_tok");
    if (f.model_type == "mixtral" || f.model_type == "gpt_oss") {
        m.moe_ffn_hidden = m.ffn_hidden;  // every expert is an MLP intermediate_size wide
        return;
    }
    m.moe_ffn_hidden = c.required("moe_intermediate_size");
    m.moe_shared_expert_ffn_hidden = c.integer("shared_expert_intermediate_size", 0).value_or(0);
    sparse_layers(c, m);
}

/// rope_scaling with rope_type (or the older type) "yarn" on standard attention: YaRN's concentration factor
/// as Megatron-Core computes it from the config Megatron-Bridge converts it to (model_bridge.py
/// YARN_ROPE_SCALING_MAPPING @v0.6.0: factor -> yarn_rotary_scaling_factor, mscale -> yarn_mscale,
/// mscale_all_dim -> yarn_mscale_all_dim; attention_factor is not mapped): mscale(factor, mscale) /
/// mscale(factor, mscale_all_dim) when both are given, else mscale(factor), with mscale(s, x) = 0.1 x ln s +
/// 1 for s > 1, else 1 (yarn_rotary_pos_embedding.py _yarn_get_concentration_factor; `is None` tests, so 0 is
/// a value). ModelSpec::yarn_concentration_factor. Other rope types change no kernel trainsim times.
void rope_scaling(Config& c, ModelSpec& m, std::vector<std::string>& notes) {
    const json* r = c.get("rope_scaling");
    if (!r) return;
    if (!r->is_object())
        importers_detail::bad_written_value(c.file(), "rope_scaling", r->dump(), "is not an object");
    std::string type;
    for (const char* key : {"rope_type", "type"}) {
        if (!type.empty() || !r->contains(key) || r->at(key).is_null()) continue;
        if (!r->at(key).is_string())  // read as no YaRN without a word before (round 15)
            importers_detail::bad_written_value(c.file(), std::string("rope_scaling.") + key,
                                                r->at(key).dump(), "is not a string");
        type = r->at(key).get<std::string>();
    }
    if (type != "yarn") return;
    const auto num = [&](const char* key) -> std::optional<double> {
        if (!r->contains(key) || r->at(key).is_null()) return std::nullopt;
        const json& v = r->at(key);
        if (!v.is_number() || !(v.get<double>() >= 0 && v.get<double>() <= 1e9))
            importers_detail::bad_written_value(c.file(), std::string("rope_scaling.") + key, v.dump(),
                                                "is not a number 0 .. 1e9");
        return v.get<double>();
    };
    const double s = num("factor").value_or(1.0);
    const double factor =
        importers_detail::yarn_concentration_factor(s, num("mscale"), num("mscale_all_dim"));
    if (!(factor >= 0.01 && factor <= 100))
        importers_detail::bad_written_value(
            c.file(), "rope_scaling", r->dump(),
            fmt::format("gives YaRN's concentration factor {:.6g}, outside 0.01 .. 100", factor));
    if (m.mla()) return;
    m.yarn_concentration_factor = factor;
    notes.push_back(fmt::format(
        "rope_scaling yarn (factor {:g}): model.yarn_concentration_factor {:.6g}{}", s, factor,
        r->contains("attention_factor") ? " (attention_factor is not used: Megatron-Bridge does not map it)"
                                        : ""));
}

}  // namespace

Imported import_hf_config(const nlohmann::json& config, const std::string& file, const ImportTarget& target) {
    Config c(config, file);
    const Family& f = family_of(c);
    Imported imp;
    ModelSpec m;
    m.layers = c.required("num_hidden_layers", limits::kMaxLayers);
    m.hidden = c.required("hidden_size");
    m.heads = c.required("num_attention_heads");
    m.kv_heads = c.integer("num_key_value_heads").value_or(m.heads);
    m.ffn_hidden = c.required("intermediate_size");
    m.vocab = c.required("vocab_size");
    m.mlp = f.mlp;
    const std::string act = c.text("hidden_act");
    if (!act.empty() && act != "silu" && act != "swish" && act != "gelu" && act != "gelu_new")
        imp.notes.push_back(fmt::format("hidden_act \"{}\": costed as {}", clip_for_message(act),
                                        m.mlp == MlpKind::swiglu ? "SwiGLU" : "GELU"));
    // head_dim x heads compared in double: both are checked against their limits later, and their int64
    // product could overflow first (round 15).
    if (const auto hd = c.integer("head_dim");
        hd && static_cast<double>(*hd) * static_cast<double>(m.heads) != static_cast<double>(m.hidden))
        m.head_dim_override = *hd;
    m.tied_embeddings = c.boolean("tie_word_embeddings").value_or(false);
    m.dropout = c.number("attention_dropout", 0, 1).value_or(0) > 0 ||
                c.number("hidden_dropout", 0, 1).value_or(0) > 0;
    const auto max_pos = c.integer("max_position_embeddings");
    if (target.seq_len)
        m.seq_len = *target.seq_len;
    else if (max_pos) {
        m.seq_len = *max_pos;
        imp.notes.push_back(
            fmt::format("seq_len = max_position_embeddings = {} (give --seq for the training "
                        "sequence length)",
                        *max_pos));
    } else
        throw InputError(fmt::format("{}: max_position_embeddings is missing: give --seq", file));
    sliding_window(c, f, m, imp.notes);
    // Qwen3 and Qwen3-MoE normalize every query and key head (transformers modeling_qwen3.py
    // Qwen3Attention q_norm / k_norm, RMSNorm over head_dim): ModelSpec::qk_layernorm.
    m.qk_layernorm = f.model_type == "qwen3" || f.model_type == "qwen3_moe";
    if (!f.experts_key.empty()) experts(c, f, m);
    rope_scaling(c, m, imp.notes);
    // gpt-oss (transformers modeling_gpt_oss.py): the experts' projections carry biases (GptOssExperts
    // gate_up_proj_bias, down_proj_bias) and the gated activation clamps at swiglu_limit.
    if (f.model_type == "gpt_oss") {
        m.moe_expert_bias = m.moe();
        m.moe_activation_clamp = m.moe() && c.number("swiglu_limit", 0, 1e9).value_or(0) > 0;
    }
    Layout l;
    imp.gpus = importers_detail::import_gpus(target, 0);
    l.dp = importers_detail::derive_dp(imp.gpus, l, file);
    l.global_batch = l.dp;
    imp.ignored = c.unused();
    imp.workload = importers_detail::workload_document(
        target.name.empty() ? "hf-import" : target.name,
        fmt::format(
            "Imported by `trainsim import hf` from the Hugging Face config {} (model_type {}); layout: "
            "trainsim's defaults on {} GPUs.",
            file, f.model_type, imp.gpus),
        m, l);
    return imp;
}

}  // namespace trainsim
