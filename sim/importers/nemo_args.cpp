// NeMo 1.x (Hydra) launch overrides of megatron_gpt_config.yaml ("model.num_layers=96", "trainer.devices=8")
// translated to the Megatron-LM flags they configure, so that `import megatron` reads both spellings.
#include <map>

#include "megatron_args.hpp"

namespace trainsim::importers_detail {

namespace {

/// NeMo 1.x keys (nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py reads them from
/// examples/nlp/language_modeling/conf/megatron_gpt_config.yaml) -> the Megatron-LM flag of the same meaning.
const std::map<std::string, std::string>& nemo_flags() {
    static const std::map<std::string, std::string> m = {
        {"model.num_layers", "num-layers"},
        {"model.hidden_size", "hidden-size"},
        {"model.ffn_hidden_size", "ffn-hidden-size"},
        {"model.num_attention_heads", "num-attention-heads"},
        {"model.kv_channels", "kv-channels"},
        {"model.encoder_seq_length", "seq-length"},
        {"model.max_position_embeddings", "max-position-embeddings"},
        {"model.make_vocab_size_divisible_by", "make-vocab-size-divisible-by"},
        {"model.attention_dropout", "attention-dropout"},
        {"model.hidden_dropout", "hidden-dropout"},
        {"model.tensor_model_parallel_size", "tensor-model-parallel-size"},
        {"model.pipeline_model_parallel_size", "pipeline-model-parallel-size"},
        {"model.context_parallel_size", "context-parallel-size"},
        {"model.expert_model_parallel_size", "expert-model-parallel-size"},
        {"model.virtual_pipeline_model_parallel_size", "num-virtual-stages-per-pipeline-rank"},
        {"model.micro_batch_size", "micro-batch-size"},
        {"model.global_batch_size", "global-batch-size"},
        {"model.activations_checkpoint_granularity", "recompute-granularity"},
        {"model.activations_checkpoint_method", "recompute-method"},
        {"model.activations_checkpoint_num_layers", "recompute-num-layers"},
        {"model.num_moe_experts", "num-experts"},
        {"model.moe_router_topk", "moe-router-topk"},
        {"trainer.num_nodes", "nnodes"},
        {"trainer.devices", "nproc-per-node"}};
    return m;
}

bool truthy(const std::string& v) {
    return v == "true" || v == "True";
}

bool boolean(const std::string& v) {
    return truthy(v) || v == "false" || v == "False";
}

/// The Megatron flags of one NeMo boolean or choice key; false when `key` is not one of them, or its value is
/// not one trainsim reads (`model.sequence_parallel=yes`, `trainer.precision=bogus`,
/// `model.activation=geglu`: they were taken as false or the default without a word; now reported as ignored,
/// round 15).
bool nemo_special(const std::string& key, const std::string& v, std::vector<std::string>& out) {
    const auto add = [&](std::initializer_list<const char*> words) {
        out.insert(out.end(), words.begin(), words.end());
    };
    const bool flag = key == "model.sequence_parallel" ||
                      key == "model.share_embeddings_and_output_weights" || key == "model.ub_tp_comm_overlap";
    if (flag && !boolean(v)) return false;
    if (key == "model.sequence_parallel") {
        if (truthy(v)) add({"--sequence-parallel"});
    } else if (key == "model.share_embeddings_and_output_weights") {
        if (!truthy(v)) add({"--untie-embeddings-and-output-weights"});
    } else if (key == "model.activation") {
        if (v == "swiglu" || v == "fast-swiglu") add({"--swiglu"});
        return v == "swiglu" || v == "fast-swiglu" || v == "gelu";
    } else if (key == "model.num_query_groups") {
        if (v != "null" && v != "None")
            out.insert(out.end(), {"--group-query-attention", "--num-query-groups", v});
    } else if (key == "model.ub_tp_comm_overlap") {
        if (truthy(v)) add({"--tp-comm-overlap"});
    } else if (key == "model.optim.name") {
        if (v == "distributed_fused_adam") add({"--use-distributed-optimizer"});
    } else if (key == "trainer.precision") {
        if (v == "bf16" || v == "bf16-mixed") add({"--bf16"});
        if (v == "16" || v == "16-mixed") add({"--fp16"});
        return v == "bf16" || v == "bf16-mixed" || v == "16" || v == "16-mixed" || v == "32" ||
               v == "32-true";
    } else {
        return false;
    }
    return true;
}

}  // namespace

std::vector<std::string> translate_nemo_overrides(const std::vector<std::string>& words) {
    std::vector<std::string> out;
    bool fp8 = false, fp8_hybrid = false;
    for (const auto& w : words) {
        std::string word = w;
        while (!word.empty() && word[0] == '+')
            word.erase(0, 1);  // Hydra's + / ++ (add / force-add)
        const auto eq = word.find('=');
        const bool nemo =
            eq != std::string::npos && (word.rfind("model.", 0) == 0 || word.rfind("trainer.", 0) == 0);
        if (!nemo) {
            out.push_back(w);
            continue;
        }
        const std::string key = word.substr(0, eq), v = word.substr(eq + 1);
        if (const auto it = nemo_flags().find(key); it != nemo_flags().end()) {
            if (v != "null" && v != "None") out.insert(out.end(), {"--" + it->second, v});
        } else if (key == "model.fp8" && boolean(v)) {
            fp8 = truthy(v);
        } else if (key == "model.fp8_hybrid" && boolean(v)) {
            fp8_hybrid = truthy(v);
        } else if (!nemo_special(key, v, out)) {
            out.push_back(w);  // a NeMo key without a Megatron flag: reported as ignored
        }
    }
    if (fp8) out.insert(out.end(), {"--fp8-format", fp8_hybrid ? "hybrid" : "e4m3"});
    return out;
}

}  // namespace trainsim::importers_detail
