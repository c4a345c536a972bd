// Megatron-LM's command line as argparse reads it: flags, values, and what was not used.
#include "megatron_args.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "import_common.hpp"
#include "trainsim/errors.hpp"

namespace trainsim::importers_detail {

namespace {

/// The store_true flags of megatron/training/arguments.py (and torchrun) that the importer reads: they take
/// no value. An unknown store_true flag is followed by another flag in practice, so it takes none either.
const std::set<std::string>& switch_flags() {
    static const std::set<std::string> s = {"group-query-attention",
                                            "swiglu",
                                            "untie-embeddings-and-output-weights",
                                            "sequence-parallel",
                                            "use-distributed-optimizer",
                                            "overlap-grad-reduce",
                                            "overlap-param-gather",
                                            "tp-comm-overlap",
                                            "bf16",
                                            "fp16",
                                            "fp8-param-gather",
                                            "grad-reduce-in-bf16",
                                            "cross-entropy-loss-fusion",
                                            "account-for-embedding-in-pipeline-split",
                                            "account-for-loss-in-pipeline-split",
                                            "multi-latent-attention",
                                            "qk-layernorm",
                                            "use-flash-attn",
                                            "recompute-activations",
                                            "checkpoint-activations",
                                            "optimizer-cpu-offload"};
    return s;
}

/// The flags of arguments.py that the importer reads with one value.
const std::set<std::string>& value_flags() {
    static const std::set<std::string> s = {
        "num-layers", "hidden-size", "ffn-hidden-size", "num-attention-heads", "num-query-groups",
        "kv-channels", "seq-length", "encoder-seq-length", "max-position-embeddings", "vocab-size",
        "padded-vocab-size", "tokenizer-type", "make-vocab-size-divisible-by", "attention-dropout",
        "hidden-dropout", "num-experts", "moe-router-topk", "moe-ffn-hidden-size",
        "moe-shared-expert-intermediate-size", "moe-layer-freq", "moe-expert-capacity-factor", "q-lora-rank",
        "kv-lora-rank", "qk-head-dim", "qk-pos-emb-head-dim", "v-head-dim", "mtp-num-layers",
        "tensor-model-parallel-size", "pipeline-model-parallel-size", "context-parallel-size",
        "expert-model-parallel-size", "expert-tensor-parallel-size", "num-layers-per-virtual-pipeline-stage",
        "num-virtual-stages-per-pipeline-rank", "micro-batch-size", "global-batch-size",
        "recompute-granularity", "recompute-method", "recompute-num-layers", "cpu-offloading-num-layers",
        "fp8-format", "fp8-recipe", "fp4-format", "fp4-recipe", "cross-entropy-fusion-impl",
        "attention-backend", "decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers",
        "optimizer", "sgd-momentum", "optimizer-offload-fraction", "ddp-bucket-size", "nnodes",
        "nproc-per-node", "merge-file", "position-embedding-type", "rotary-scaling-factor", "mscale",
        "mscale-all-dim",
        // torchrun's (torch/distributed/run.py): launch lines give them first
        "node-rank", "master-addr", "master-port", "rdzv-backend", "rdzv-endpoint", "rdzv-id",
        "max-restarts"};
    return s;
}

bool is_flag_word(const std::string& w) {
    return w.size() > 2 && w[0] == '-' && w[1] == '-';
}

/// True for a word an unknown flag does not take as its value: a flag, or a script (pretrain_gpt.py).
bool ends_values(const std::string& w) {
    const auto ends_with = [&](std::string_view e) {
        return w.size() >= e.size() && w.compare(w.size() - e.size(), e.size(), e) == 0;
    };
    return is_flag_word(w) || ends_with(".py") || ends_with(".sh");
}

}  // namespace

MegatronArgs::MegatronArgs(const std::vector<std::string>& args, std::string source)
    : source_(std::move(source)) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& w = args[i];
        if (!is_flag_word(w)) {  // a word that is no flag's value: the script, a stray positional
            order_.push_back(w);
            stray_.insert(w);
            continue;
        }
        std::string name = w.substr(2), value;
        const auto eq = name.find('=');
        const bool inline_value = eq != std::string::npos;
        if (inline_value) {
            value = name.substr(eq + 1);
            name.resize(eq);
        }
        std::replace(name.begin(), name.end(), '_', '-');
        if (switch_flags().count(name)) {
            if (inline_value) bad_value(source_, "--" + name, value, "is given a value; the flag takes none");
        } else if (value_flags().count(name)) {
            if (!inline_value) {
                if (i + 1 >= args.size() || is_flag_word(args[i + 1]))
                    throw InputError(fmt::format("{}: --{} needs a value", source_, name));
                value = args[++i];
            }
        } else if (!inline_value) {  // unknown: its values are the words up to the next flag
            while (i + 1 < args.size() && !ends_values(args[i + 1]))
                value += (value.empty() ? "" : " ") + args[++i];
        }
        if (!values_.count(name)) order_.push_back("--" + name);
        values_[name] = value;
    }
}

bool MegatronArgs::flag(const std::string& name) {
    if (!values_.count(name)) return false;
    used_.insert(name);
    return true;
}

bool MegatronArgs::given(const std::string& name) const {
    return values_.count(name) > 0;
}

std::optional<std::string> MegatronArgs::text(const std::string& name) {
    const auto it = values_.find(name);
    if (it == values_.end()) return std::nullopt;
    used_.insert(name);
    return it->second;
}

std::optional<std::int64_t> MegatronArgs::integer(const std::string& name, std::int64_t min,
                                                  std::int64_t max) {
    const auto t = text(name);
    if (!t) return std::nullopt;
    const auto v = parse_integer(*t);
    if (!v) bad_value(source_, "--" + name, *t, "is not an integer");
    if (*v < min) bad_value(source_, "--" + name, *t, fmt::format("must be at least {}", min));
    if (*v > max) bad_value(source_, "--" + name, *t, fmt::format("must be at most {}", max));
    return v;
}

std::optional<double> MegatronArgs::number(const std::string& name, double min, double max) {
    const auto t = text(name);
    if (!t) return std::nullopt;
    const auto v = parse_number(*t);
    if (!v) bad_value(source_, "--" + name, *t, "is not a number");
    if (*v < min) bad_value(source_, "--" + name, *t, fmt::format("must be at least {:g}", min));
    if (*v > max) bad_value(source_, "--" + name, *t, fmt::format("must be at most {:g}", max));
    return v;
}

std::optional<std::string> MegatronArgs::choice(const std::string& name,
                                                const std::vector<std::string>& choices) {
    const auto t = text(name);
    if (t && std::find(choices.begin(), choices.end(), *t) == choices.end())
        bad_value(source_, "--" + name, *t, fmt::format("is not one of {}", fmt::join(choices, ", ")));
    return t;
}

std::vector<std::string> MegatronArgs::unused() const {
    std::vector<std::string> out;
    for (const auto& w : order_)
        if (stray_.count(w) || !used_.count(w.substr(2))) out.push_back(w);
    return out;
}

}  // namespace trainsim::importers_detail
