// `trainsim import megatron`: the arguments of a Megatron-LM pretrain_gpt.py launch -> a workload
// (megatron/training/arguments.py; the mapping is listed in trainsim/importers.hpp and docs/importers.md).
#include <algorithm>
#include <charconv>
#include <sstream>

#include <fmt/format.h>
#include <boost/program_options/parsers.hpp>

#include "import_common.hpp"
#include "megatron_args.hpp"
#include "moe_layer_pattern.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/framework_defaults.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

using importers_detail::MegatronArgs;

namespace {

/// The tokenizer's vocabulary before padding: --vocab-size (NullTokenizer: + 1, its EOD token), else the
/// size of the tokenizers whose vocabulary is fixed (GPT2BPETokenizer: GPT-2's 50257 BPE entries, also
/// assumed when only --merge-file is given; Llama2Tokenizer: Llama 2's 32000 SentencePiece entries).
std::int64_t tokenizer_vocab(MegatronArgs& a, std::vector<std::string>& notes) {
    std::optional<std::string> type = a.text("tokenizer-type");
    const bool merges = a.text("merge-file").has_value();
    if (const auto v = a.integer("vocab-size")) return *v + (type == "NullTokenizer" ? 1 : 0);
    if (!type && merges) {
        type = "GPT2BPETokenizer";
        notes.push_back("tokenizer: --merge-file without --tokenizer-type: GPT2BPETokenizer (50257 entries)");
    }
    if (type == "GPT2BPETokenizer") return 50257;
    if (type == "Llama2Tokenizer") return 32000;
    throw InputError(fmt::format(
        "{}: the vocabulary size is not known{}: give --vocab-size (the tokenizer's) or --padded-vocab-size",
        a.source(), type ? fmt::format(" for --tokenizer-type {}", *type) : std::string()));
}

/// The vocabulary as Megatron builds the embedding: --padded-vocab-size, or the tokenizer's padded up to a
/// multiple of --make-vocab-size-divisible-by (default 128) x TP (arguments.py _vocab_size_with_padding).
std::int64_t padded_vocab(MegatronArgs& a, std::int64_t tp, std::vector<std::string>& notes) {
    if (const auto v = a.integer("padded-vocab-size")) return *v;
    const std::int64_t orig = tokenizer_vocab(a, notes);
    const std::int64_t multiple = a.integer("make-vocab-size-divisible-by").value_or(128) * tp;
    return (orig + multiple - 1) / multiple * multiple;
}

std::int64_t required(MegatronArgs& a, const std::string& name,
                      std::int64_t max = importers_detail::kMaxImportInteger) {
    const auto v = a.integer(name, 1, max);
    if (!v) throw InputError(fmt::format("{}: --{} is required", a.source(), name));
    return *v;
}

/// The dense shapes of the model (arguments.py defaults: FFN 4h, or int(4h * 2/3 / 64) * 64 with SwiGLU).
ModelSpec dense_model(MegatronArgs& a, const ImportTarget& target, std::int64_t tp,
                      std::vector<std::string>& notes) {
    ModelSpec m;
    m.layers = required(a, "num-layers", limits::kMaxLayers);
    m.hidden = required(a, "hidden-size");
    m.heads = required(a, "num-attention-heads");
    m.kv_heads = m.heads;
    if (a.flag("group-query-attention")) m.kv_heads = a.integer("num-query-groups").value_or(1);
    if (const auto kv = a.integer("kv-channels"); kv && *kv * m.heads != m.hidden) m.head_dim_override = *kv;
    m.mlp = a.flag("swiglu") ? MlpKind::swiglu : MlpKind::gelu;
    m.ffn_hidden = a.integer("ffn-hidden-size")
                       .value_or(m.mlp == MlpKind::swiglu ? (4 * m.hidden * 2 / 3) / 64 * 64 : 4 * m.hidden);
    m.tied_embeddings = !a.flag("untie-embeddings-and-output-weights");
    const double attention_dropout = a.number("attention-dropout", 0, 1).value_or(0.1);
    const double hidden_dropout = a.number("hidden-dropout", 0, 1).value_or(0.1);
    m.dropout = attention_dropout > 0 || hidden_dropout > 0;
    const auto seq = a.integer("seq-length"), enc_seq = a.integer("encoder-seq-length");
    const auto max_pos = a.integer("max-position-embeddings");
    if (target.seq_len)
        m.seq_len = *target.seq_len;
    else if (seq || enc_seq)
        m.seq_len = seq ? *seq : *enc_seq;
    else if (max_pos) {
        m.seq_len = *max_pos;
        notes.push_back(fmt::format("seq_len: no --seq-length: --max-position-embeddings {}", *max_pos));
    } else
        throw InputError(fmt::format("{}: --seq-length is required (or --seq)", a.source()));
    m.vocab = padded_vocab(a, tp, notes);
    return m;
}

/// MoE (megatron/core/transformer/moe/) and MLA (multi_latent_attention.py) fields, defaults of arguments.py.
void moe_and_mla(MegatronArgs& a, ModelSpec& m) {
    if (const auto e = a.integer("num-experts")) {
        m.num_experts = *e;
        m.moe_top_k = a.integer("moe-router-topk").value_or(2);
        m.moe_ffn_hidden = a.integer("moe-ffn-hidden-size").value_or(0);
        m.moe_shared_expert_ffn_hidden = a.integer("moe-shared-expert-intermediate-size").value_or(0);
        m.moe_capacity_factor = a.number("moe-expert-capacity-factor").value_or(0);
        if (const auto freq = a.text("moe-layer-freq")) {
            const auto p =
                importers_detail::moe_layer_pattern(*freq, m.layers, a.source(), "--moe-layer-freq");
            m.moe_first_dense_layers = p.first_dense_layers;
            m.moe_layer_freq = p.layer_freq;
        }
    }
    // --qk-layernorm: on standard attention the q / k head norms (ModelSpec::qk_layernorm); MLA's q / kv
    // latent norms are part of its attention.
    if (a.flag("qk-layernorm") && !a.flag("multi-latent-attention")) m.qk_layernorm = true;
    if (a.flag("multi-latent-attention")) {
        m.attention_type = AttentionType::mla;
        m.kv_heads = m.heads;
        m.q_lora_rank = a.integer("q-lora-rank").value_or(0);
        m.kv_lora_rank = a.integer("kv-lora-rank").value_or(32);
        m.head_dim_override = a.integer("qk-head-dim").value_or(128);
        m.qk_rope_head_dim = a.integer("qk-pos-emb-head-dim").value_or(64);
        m.v_head_dim = a.integer("v-head-dim").value_or(128);
    }
    m.mtp_layers = a.integer("mtp-num-layers", 0).value_or(0);  // ModelSpec::mtp_layers
}

/// --position-embedding-type yarn on standard attention: YaRN's concentration factor
/// (ModelSpec::yarn_concentration_factor), as Megatron-LM builds it: --rotary-scaling-factor s (default 1),
/// --mscale m (default 1) and --mscale-all-dim m_all (default 0) become the config's
/// yarn_rotary_scaling_factor, yarn_mscale and yarn_mscale_all_dim (training/argument_utils.py), and the
/// factor is mscale(s, m) / mscale(s, m_all) with mscale(s, x) = 0.1 x ln s + 1 for s > 1, else 1
/// (yarn_rotary_pos_embedding.py _yarn_get_concentration_factor). MLA's YaRN runs in its fused kernels.
void yarn(MegatronArgs& a, ModelSpec& m) {
    // Megatron's argparse choices: another value was taken as "not yarn" without a word (round 15).
    const auto type = a.choice("position-embedding-type",
                               {"learned_absolute", "rope", "mrope", "yarn", "relative", "none"});
    const double s = a.number("rotary-scaling-factor", 0, 1e9).value_or(1.0);
    const double ms = a.number("mscale", 0, 1e3).value_or(1.0);
    const double ms_all = a.number("mscale-all-dim", 0, 1e3).value_or(0.0);
    if (type != "yarn" || m.mla()) return;
    const double factor = importers_detail::yarn_concentration_factor(s, ms, ms_all);
    if (!(factor >= 0.01 && factor <= 100))
        throw InputError(
            fmt::format("{}: --rotary-scaling-factor {}, --mscale {}, --mscale-all-dim {}: YaRN's "
                        "concentration factor {:.6g} is outside 0.01 .. 100",
                        a.source(), s, ms, ms_all, factor));
    m.yarn_concentration_factor = factor;
}

/// --window-size "(w, 0)" (Megatron-LM tuple_type: "w,0" or "(w,0)") and --window-attn-skip-freq N
/// (ModelSpec::sliding_window, sliding_window_full_every). A window that looks ahead (right bound not 0) and
/// a list pattern for the skip frequency ("[1,1,1,0]*3") are refused.
void sliding_window(MegatronArgs& a, ModelSpec& m) {
    const auto text = a.text("window-size");
    if (!text) return;
    std::string w = *text;
    w.erase(std::remove_if(w.begin(), w.end(), [](char c) { return c == '(' || c == ')' || c == ' '; }),
            w.end());
    const auto comma = w.find(',');
    std::int64_t left = 0, right = -1;
    const bool read =
        comma != std::string::npos &&
        std::from_chars(w.data(), w.data() + comma, left).ptr == w.data() + comma &&
        std::from_chars(w.data() + comma + 1, w.data() + w.size(), right).ptr == w.data() + w.size();
    if (!read || left < 1 || left > limits::kMaxSeqLen || right != 0)
        throw InputError(
            fmt::format("{}: --window-size = \"{}\" is not a causal window \"(w,0)\" with 1 <= w "
                        "<= {} (the only kind trainsim models)",
                        a.source(), *text, limits::kMaxSeqLen));
    m.sliding_window = left;
    if (a.given("window-attn-skip-freq")) {
        const auto freq = a.text("window-attn-skip-freq").value_or("");
        std::int64_t n = 0;
        const auto [end, ec] = std::from_chars(freq.data(), freq.data() + freq.size(), n);
        if (ec != std::errc() || end != freq.data() + freq.size() || n < 1 || n > limits::kMaxLayers)
            throw InputError(
                fmt::format("{}: --window-attn-skip-freq = \"{}\" is not a layer count 1 .. {} "
                            "(a list pattern is not modelled)",
                            a.source(), freq, limits::kMaxLayers));
        m.sliding_window_full_every = n;
    }
}

/// --decoder-first/last-pipeline-num-layers: those stages hold the stated layers, the others the rest evenly.
void uneven_split(MegatronArgs& a, const ModelSpec& m, Layout& l) {
    const auto first = a.integer("decoder-first-pipeline-num-layers", 0);
    const auto last = a.integer("decoder-last-pipeline-num-layers", 0);
    if (!first && !last) return;
    const int ends = (first ? 1 : 0) + (last ? 1 : 0);
    if (l.pp < 2)
        throw InputError(
            fmt::format("{}: --decoder-first/last-pipeline-num-layers need "
                        "--pipeline-model-parallel-size > 1",
                        a.source()));
    const std::int64_t rest = m.layers - first.value_or(0) - last.value_or(0);
    const int middle = l.pp - ends;
    if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest % middle != 0))
        throw InputError(
            fmt::format("{}: {} layers less --decoder-first/last-pipeline-num-layers ({}, {}) do not "
                        "divide over the {} other pipeline stages",
                        a.source(), m.layers, first.value_or(0), last.value_or(0), middle));
    l.layers_per_stage.assign(static_cast<std::size_t>(l.pp), middle > 0 ? rest / middle : 0);
    if (first) l.layers_per_stage.front() = *first;
    if (last) l.layers_per_stage.back() = *last;
}

/// TP, PP, CP, EP, ETP and the virtual pipeline stages.
void parallel_sizes(MegatronArgs& a, const ModelSpec& m, Layout& l) {
    l.tp = static_cast<int>(a.integer("tensor-model-parallel-size", 1, limits::kMaxGpus).value_or(1));
    l.pp = static_cast<int>(a.integer("pipeline-model-parallel-size", 1, limits::kMaxGpus).value_or(1));
    l.cp = static_cast<int>(a.integer("context-parallel-size", 1, limits::kMaxGpus).value_or(1));
    l.ep = static_cast<int>(a.integer("expert-model-parallel-size", 1, limits::kMaxGpus).value_or(1));
    l.etp = static_cast<int>(a.integer("expert-tensor-parallel-size", 1, limits::kMaxGpus).value_or(0));
    uneven_split(a, m, l);
    if (const auto v = a.integer("num-virtual-stages-per-pipeline-rank", 1, limits::kMaxGpus))
        l.vpp = static_cast<int>(*v);
    if (const auto per = a.integer("num-layers-per-virtual-pipeline-stage")) {
        if (!l.layers_per_stage.empty() || m.layers % (l.pp * *per) != 0)
            throw InputError(fmt::format(
                "{}: --num-layers-per-virtual-pipeline-stage {} does not divide the {} layers per pipeline "
                "stage; give --num-virtual-stages-per-pipeline-rank",
                a.source(), *per, m.layers / l.pp));
        l.vpp = static_cast<int>(m.layers / (l.pp * *per));
    }
}

/// --recompute-granularity / --recompute-method / --recompute-num-layers (and the older
/// --recompute-activations = selective, --checkpoint-activations = full).
void recompute(MegatronArgs& a, Layout& l, std::vector<std::string>& notes) {
    auto granularity = a.choice("recompute-granularity", {"full", "selective"});
    if (!granularity && a.flag("recompute-activations")) granularity = "selective";
    if (!granularity && a.flag("checkpoint-activations")) granularity = "full";
    if (!granularity) return;
    if (*granularity == "selective") {
        l.recompute = Recompute::selective;
        return;
    }
    l.recompute = Recompute::full;
    const auto method = a.choice("recompute-method", {"uniform", "block"}).value_or("uniform");
    const auto n = a.integer("recompute-num-layers");
    if (method == "block") {
        l.recompute_num_layers = n.value_or(0);
    } else if (n && *n > 1) {
        notes.push_back(
            fmt::format("--recompute-method uniform --recompute-num-layers {}: every layer is "
                        "recomputed; trainsim keeps each layer's input, not each group's",
                        *n));
    }
}

/// --cpu-offloading with --cpu-offloading-num-layers N (TransformerConfig.cpu_offloading_num_layers, default
/// 0): Layout::activation_offload_layers (its checks are Megatron-Core's).
void activation_offload(MegatronArgs& a, Layout& l) {
    const bool on = a.flag("cpu-offloading");
    const auto n = a.integer("cpu-offloading-num-layers");
    if (on) l.activation_offload_layers = n.value_or(0);
}

/// --bf16 / --fp16 / --fp8-format with --fp8-recipe / --fp4-format with --fp4-recipe.
void precision(MegatronArgs& a, Layout& l) {
    const bool bf16 = a.flag("bf16"), fp16 = a.flag("fp16");
    const auto fp8 = a.choice("fp8-format", {"e4m3", "hybrid"});
    const auto fp4 = a.choice("fp4-format", {"e2m1"});
    if (!bf16 && !fp16 && !fp8 && !fp4)
        throw InputError(
            fmt::format("{}: neither --bf16 nor --fp16 (nor --fp8-format): Megatron then trains in "
                        "fp32, which trainsim does not model; add --bf16 or --fp16",
                        a.source()));
    l.precision = fp16 ? Precision::fp16 : Precision::bf16;
    const auto recipe = a.choice("fp8-recipe", {"delayed", "tensorwise", "mxfp8", "blockwise", "custom"});
    if (fp8) {
        l.precision = Precision::fp8;
        const std::string r = recipe.value_or("delayed");
        if (r == "blockwise" || r == "custom")
            importers_detail::bad_value(a.source(), "--fp8-recipe", r,
                                        "is not modeled (trainsim: delayed, tensorwise, mxfp8, nvfp4)");
        l.fp8_recipe = r == "tensorwise" ? Fp8Recipe::tensorwise
                       : r == "mxfp8"    ? Fp8Recipe::mxfp8
                                         : Fp8Recipe::delayed;
    }
    if (fp4) {
        a.choice("fp4-recipe", {"nvfp4"});
        l.precision = Precision::fp8;
        l.fp8_recipe = Fp8Recipe::nvfp4;
    }
    l.fp8_param_gather = a.flag("fp8-param-gather");
    l.grad_reduce_in_bf16 = a.flag("grad-reduce-in-bf16");
}

/// --attention-backend (flash, fused = cuDNN, unfused / local = unfused, auto), --use-flash-attn, else the
/// framework default for the cluster's GPU (framework_defaults.hpp).
void attention_and_flags(MegatronArgs& a, const GpuSpec& gpu, Layout& l) {
    apply_framework_defaults(l, gpu);
    l.tp_comm_overlap = l.overlap_grad_reduce = l.overlap_param_gather =
        false;  // Megatron's flags default off
    const auto backend = a.choice("attention-backend", {"auto", "flash", "fused", "unfused", "local"});
    if (backend == "flash" || a.flag("use-flash-attn")) l.attention = AttentionKernel::flash;
    if (backend == "fused") l.attention = AttentionKernel::cudnn;
    if (backend == "unfused" || backend == "local") l.attention = AttentionKernel::unfused;
    l.sequence_parallel = a.flag("sequence-parallel");
    l.distributed_optimizer = a.flag("use-distributed-optimizer");
    l.overlap_grad_reduce = a.flag("overlap-grad-reduce");
    l.overlap_param_gather = a.flag("overlap-param-gather");
    l.tp_comm_overlap = a.flag("tp-comm-overlap");
    // MoE communication (Layout::moe_a2a_overlap, Layout::moe_dispatcher; transformer_config.py: the flex
    // dispatcher's backend defaults to deepep; --moe-enable-deepep is its older spelling).
    l.moe_a2a_overlap = a.flag("overlap-moe-expert-parallel-comm");
    // Megatron's argparse choices (arguments.py; alltoall_seq before Megatron-Core 0.13): another value was
    // read as the all-to-all dispatcher without a word (round 15).
    if (a.choice("moe-token-dispatcher-type", {"allgather", "alltoall", "alltoall_seq", "flex"})
            .value_or("") == "flex") {
        const std::string backend =
            a.choice("moe-flex-dispatcher-backend", {"deepep", "hybridep"}).value_or("deepep");
        if (backend == "hybridep") l.moe_dispatcher = MoeDispatcher::hybridep;
        if (backend == "deepep" || a.flag("moe-enable-deepep")) l.moe_dispatcher = MoeDispatcher::deepep;
    }
    l.account_for_embedding_in_pipeline_split = a.flag("account-for-embedding-in-pipeline-split");
    l.account_for_loss_in_pipeline_split = a.flag("account-for-loss-in-pipeline-split");
    const bool ce_fusion = a.flag("cross-entropy-loss-fusion");
    l.cross_entropy_fusion = ce_fusion && a.choice("cross-entropy-fusion-impl", {"native", "te"}) == "te";
    if (const auto bucket = a.integer("ddp-bucket-size"))
        l.dp_bucket_bytes = static_cast<double>(*bucket) * 4;
}

/// --optimizer adam | sgd (with --sgd-momentum, default 0.9), --optimizer-cpu-offload.
void optimizer(MegatronArgs& a, Layout& l) {
    if (a.choice("optimizer", {"adam", "sgd"}) == "sgd")
        l.optimizer = a.number("sgd-momentum").value_or(0.9) > 0 ? Optimizer::sgd_momentum : Optimizer::sgd;
    if (a.flag("optimizer-cpu-offload")) {
        if (const auto f = a.number("optimizer-offload-fraction"); f && *f != 1.0)
            importers_detail::bad_value(a.source(), "--optimizer-offload-fraction", fmt::format("{:g}", *f),
                                        "is not modeled (trainsim offloads the whole optimizer state)");
        l.offload_optimizer = Offload::cpu;
    }
}

}  // namespace

Imported import_megatron(const std::vector<std::string>& args, const std::string& source,
                         const ImportTarget& target) {
    MegatronArgs a(importers_detail::translate_nemo_overrides(args), source);
    Imported imp;
    Layout l;
    const std::int64_t tp = a.integer("tensor-model-parallel-size", 1, limits::kMaxGpus).value_or(1);
    ModelSpec m = dense_model(a, target, tp, imp.notes);
    moe_and_mla(a, m);
    yarn(a, m);
    sliding_window(a, m);
    parallel_sizes(a, m, l);
    const auto nnodes = a.integer("nnodes", 1, limits::kMaxGpus),
               per_node = a.integer("nproc-per-node", 1, limits::kMaxGpus);
    // Each is at most the GPU limit, their product not: 131072 x 131072 was cast to an int of 0 and the
    // topology's GPU count taken instead, silently (round 14). Unused when --gpus is given.
    const std::int64_t stated = nnodes.value_or(1) * per_node.value_or(0);
    if (target.gpus <= 0 && stated > limits::kMaxGpus)
        throw InputError(
            fmt::format("{}: --nnodes x --nproc-per-node = {} x {} = {} GPUs is above the limit of "
                        "{} (trainsim/limits.hpp)",
                        source, nnodes.value_or(1), per_node.value_or(0), stated, limits::kMaxGpus));
    imp.gpus = importers_detail::import_gpus(
        target, static_cast<int>(std::min<std::int64_t>(stated, limits::kMaxGpus)));
    l.dp = importers_detail::derive_dp(imp.gpus, l, source);
    l.micro_batch = a.integer("micro-batch-size").value_or(1);
    l.global_batch = a.integer("global-batch-size").value_or(l.micro_batch * l.dp);
    recompute(a, l, imp.notes);
    activation_offload(a, l);
    attention_and_flags(a, find_gpu(target.gpu, source), l);  // before precision(): it sets the FP8 recipe
    precision(a, l);
    optimizer(a, l);
    l.framework = Framework::megatron;
    imp.ignored = a.unused();
    const std::string name = target.name.empty() ? "megatron-import" : target.name;
    imp.workload = importers_detail::workload_document(
        name,
        fmt::format("Imported by `trainsim import megatron` from the Megatron-LM arguments of {} for {} GPUs "
                    "({}).",
                    source, imp.gpus, target.gpu),
        m, l);
    return imp;
}

std::vector<std::string> split_args_text(std::string_view text, const std::string& source) {
    // A UTF-8 byte-order mark (a Windows editor's) hid the first line's '#' from the comment rule: an
    // apostrophe in that comment then opened a quote, blamed on a later line (round 15). The JSON and TOML
    // readers skip it too.
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    std::string joined;
    std::istringstream in{std::string(text)};
    for (std::string line; std::getline(in, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        for (std::size_t i = 0; i < line.size(); ++i)  // a comment: '#' at the start of a word
            if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
                line.resize(i);
                break;
            }
        while (!line.empty() && (line.back() == ' ' || line.back() == '\t'))
            line.pop_back();
        if (!line.empty() && line.back() == '\\') line.back() = ' ';  // a continuation: the words go on
        joined += line + "\n";
    }
    // split_unix takes an unclosed quote to the end of the text without a word: `--data-path "a` swallowed
    // every argument after it (and `--num-layers '32` read "32\n"). It toggles quoting on either quote
    // character, a backslash escaping the next one; so does this check.
    bool quoted = false;
    std::size_t line = 1, quote_line = 0;
    for (std::size_t i = 0; i < joined.size(); ++i) {
        const char c = joined[i];
        if (c == '\\' && i + 1 < joined.size()) {
            if (joined[++i] == '\n') ++line;
        } else if (c == '\n') {
            ++line;
        } else if (c == '"' || c == '\'') {
            quoted = !quoted;
            quote_line = line;
        }
    }
    if (quoted)
        throw InputError(fmt::format(
            "{}: the arguments do not split into words (the quote opened on line {} is not closed)", source,
            quote_line));
    std::vector<std::string> words;
    try {
        for (auto& w : boost::program_options::split_unix(joined, " \t\n"))
            if (!w.empty()) words.push_back(std::move(w));
    } catch (const std::exception& e) {  // boost::escaped_list_error: an unbalanced quote, a bad escape
        throw InputError(fmt::format("{}: the arguments do not split into words ({})", source,
                                     clip_for_message(e.what(), 200)));
    }
    return words;
}

}  // namespace trainsim
