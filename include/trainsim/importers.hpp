// Importers: a workload file (model + layout, include/trainsim/config.hpp) written from the files planners
// already have: a Megatron-LM / NeMo launch command line, a Hugging Face config.json, a torchtitan
// train.toml. `trainsim import megatron|hf|torchtitan` (tools/trainsim/import_command.cpp) writes what these
// return; docs/importers.md has the flag -> field tables.
//
// Every importer maps what it knows, reports everything else (flags or keys it did not use) in
// Imported::ignored, never silently drops anything, and refuses a value trainsim cannot represent with a
// one-line InputError naming the source, the flag or key and the value (exit 2). The workload document it
// returns passes the workload loader's strict checks and check_layout (finish_import()).
//
// Megatron-LM (megatron/training/arguments.py; flags of pretrain_gpt.py, which NeMo's Megatron launches
// pass through):
//   --num-layers -> model.layers; --hidden-size -> hidden; --num-attention-heads -> heads;
//   --group-query-attention with --num-query-groups -> kv_heads (else heads); --kv-channels -> head_dim
//   (when not hidden / heads); --ffn-hidden-size -> ffn_hidden (default 4 * hidden, with --swiglu
//   int(4 * hidden * 2/3 / 64) * 64 as arguments.py derives it); --seq-length (or --encoder-seq-length,
//   else --max-position-embeddings) -> seq_len; vocab: --padded-vocab-size as is, else the tokenizer's size
//   (--vocab-size for NullTokenizer, + 1 for its EOD token; GPT2BPETokenizer 50257; Llama2Tokenizer 32000;
//   --vocab-size for the others) padded up to a multiple of --make-vocab-size-divisible-by (128) * TP as
//   arguments.py _vocab_size_with_padding does; --swiglu -> mlp swiglu (else gelu);
//   --untie-embeddings-and-output-weights -> tied_embeddings false; --attention-dropout / --hidden-dropout
//   (default 0.1) -> dropout when either is non-zero; MoE: --num-experts, --moe-router-topk (default 2),
//   --moe-ffn-hidden-size, --moe-shared-expert-intermediate-size, --moe-layer-freq (an integer, or a list
//   such as "([0]*3+[1]*58)" whose dense layers lead), --moe-expert-capacity-factor; MLA:
//   --multi-latent-attention with --q-lora-rank, --kv-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim,
//   --v-head-dim (Megatron's defaults 32, 128, 64, 128 for the unstated ones); --qk-layernorm ->
//   qk_layernorm (standard attention; with MLA its latent norms are part of the attention);
//   --position-embedding-type yarn with --rotary-scaling-factor s, --mscale m, --mscale-all-dim m_all
//   (defaults 1, 1, 0) -> yarn_concentration_factor = mscale(s, m) / mscale(s, m_all), mscale(s, x) =
//   0.1 x ln s + 1 for s > 1 (training/argument_utils.py, yarn_rotary_pos_embedding.py; standard attention,
//   which Megatron-LM's GPT model takes with YaRN from core_v0.19.0); --window-size "(w,0)" -> sliding_window
//   and --window-attn-skip-freq N -> sliding_window_full_every (a look-ahead window or a list pattern is
//   refused).
//   Layout: --tensor-model-parallel-size -> tp; --pipeline-model-parallel-size -> pp;
//   --context-parallel-size -> cp; --expert-model-parallel-size -> ep; --expert-tensor-parallel-size -> etp;
//   --num-layers-per-virtual-pipeline-stage N -> vpp = layers / (pp * N);
//   --num-virtual-stages-per-pipeline-rank -> vpp; --micro-batch-size; --global-batch-size (default
//   micro-batch * DP); --sequence-parallel; --recompute-granularity full|selective, --recompute-method
//   uniform|block, --recompute-num-layers (block: recompute_num_layers); --use-distributed-optimizer;
//   --overlap-grad-reduce; --overlap-param-gather; --tp-comm-overlap; --fp16 / --bf16; --fp8-format with
//   --fp8-recipe delayed|tensorwise|mxfp8 -> precision fp8 and fp8_recipe; --fp4-format with --fp4-recipe
//   nvfp4; --fp8-param-gather; --grad-reduce-in-bf16; --cross-entropy-loss-fusion with
//   --cross-entropy-fusion-impl te; --attention-backend / --use-flash-attn -> attention;
//   --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers -> layers_per_stage (the other
//   stages share the rest evenly); --account-for-embedding-in-pipeline-split,
//   --account-for-loss-in-pipeline-split; --optimizer adam|sgd; --ddp-bucket-size (elements) ->
//   dp_bucket_size. GPUs: --nnodes * --nproc-per-node (torchrun's) when given; DP = GPUs / (TP * PP * CP).
//   NeMo 1.x Hydra overrides of megatron_gpt_config.yaml (model.num_layers=96, model.encoder_seq_length,
//   model.activations_checkpoint_granularity, model.activation=fast-swiglu, model.num_query_groups,
//   model.share_embeddings_and_output_weights, model.fp8 / fp8_hybrid,
//   model.optim.name=distributed_fused_adam, trainer.num_nodes, trainer.devices, trainer.precision, ...) are
//   read as the flags they configure.
//
// Hugging Face config.json (transformers' LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config,
// GPTNeoXConfig, MixtralConfig, GptOssConfig, Qwen2MoeConfig, Qwen3MoeConfig; by model_type):
//   num_hidden_layers -> layers; hidden_size -> hidden; num_attention_heads -> heads; num_key_value_heads
//   -> kv_heads (default heads); intermediate_size -> ffn_hidden; vocab_size -> vocab;
//   max_position_embeddings -> seq_len unless a sequence length is given; tie_word_embeddings (default false,
//   the default of these classes) -> tied_embeddings; sliding_window shorter than the sequence ->
//   sliding_window (every layer, unless use_sliding_window is false, the Qwen families' default; layer_types
//   with every N-th layer full_attention -> sliding_window_full_every N, another pattern noted and the
//   window not applied); hidden_act silu/swish with the gated MLP of the Llama family -> mlp
//   swiglu, GPT-NeoX's gelu -> gelu; head_dim -> head_dim (when not hidden / heads); attention_dropout /
//   hidden_dropout -> dropout; model_type qwen3 / qwen3_moe -> qk_layernorm (their q_norm / k_norm).
//   rope_scaling of rope_type yarn -> yarn_concentration_factor as Megatron-Core computes it from the
//   config Megatron-Bridge converts (factor, mscale, mscale_all_dim; attention_factor is not mapped):
//   mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are given, else mscale(factor).
//   gpt_oss -> moe_expert_bias, and moe_activation_clamp when swiglu_limit > 0 (modeling_gpt_oss.py
//   GptOssExperts).
//   MoE: num_local_experts (Mixtral, gpt-oss) / num_experts (Qwen-MoE) -> num_experts;
//   num_experts_per_tok -> moe_top_k; moe_intermediate_size (Qwen-MoE; Mixtral's and gpt-oss's experts are
//   intermediate_size wide) -> moe_ffn_hidden; shared_expert_intermediate_size ->
//   moe_shared_expert_ffn_hidden; decoder_sparse_step s (layer i is sparse when (i + 1) % s == 0) ->
//   moe_layer_freq s with moe_first_dense_layers s - 1; mlp_only_layers [0 .. k-1] -> moe_first_dense_layers
//   k. The layout: Layout's defaults, DP = GPUs.
//
// torchtitan train.toml (torchtitan/config/job_config.py and torchtitan/models/llama3/__init__.py at
// commit 76d5c72e2^, the last with TOML configs; the older [training]-only keys are read too):
//   [model] name "llama3" with flavor debugmodel / 8B / 70B / 405B -> the flavor's shapes (FeedForward's
//   hidden = multiple_of * ceil(ffn_dim_multiplier * int(2 * 4 * dim / 3) / multiple_of), vocab 128256
//   (2048 for debugmodel), untied, no dropout); [training] seq_len, local_batch_size (or batch_size),
//   global_batch_size (-1: local batch * DP), mixed_precision_param bfloat16; [parallelism]
//   data_parallel_shard_degree (-1: the GPUs left) -> FSDP (zero_stage 3), data_parallel_replicate_degree
//   -> DDP when the shard degree is 1 (HSDP, both > 1, is refused), tensor_parallel_degree (with sequence
//   parallelism, as torchtitan's TP plan shards the norms), enable_async_tensor_parallel,
//   pipeline_parallel_degree, pipeline_parallel_schedule (1F1B, GPipe, Interleaved1F1B),
//   pipeline_parallel_microbatch_size, pipeline_parallel_first/last_stage_less_layers (the split of
//   pipeline_parallel.py generate_llm_fqn_per_model_part -> layers_per_stage: each rank's layers, split
//   evenly over its chunks), context_parallel_degree,
//   fsdp_reshard_after_forward; [activation_checkpoint] mode none / full / selective with
//   selective_ac_option "op" (selective_op) or N (every N-th layer: recompute full of the same count of
//   layers per chunk); [compile] enable (or [training] compile); float8 ([model] converters "float8" or
//   "quantize.linear.float8", with [float8] / [quantize.linear.float8] recipe_name tensorwise / rowwise) ->
//   precision fp8. Framework torchtitan, with framework_defaults() for the cluster's GPU.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainsim {

/// The cluster an import is for: its GPU (the framework defaults, e.g. Megatron's attention kernel, depend
/// on it) and its size.
struct ImportTarget {
    std::string gpu = "A100-SXM4-80GB";  ///< GPU catalog name (trainsim/gpu_catalog.hpp)
    /// GPUs to lay the model out on: DP = gpus / (TP * PP * CP). 0: the source's count (Megatron's
    /// --nnodes * --nproc-per-node), else cluster_gpus.
    int gpus = 0;
    int cluster_gpus = 0;  ///< GPUs of the topology the workload will run on (the fallback for gpus)
    std::optional<std::int64_t> seq_len;  ///< sequence length when the source has none or to override it
    std::string name;                     ///< the workload's name; empty: "<kind>-import"
};

/// What an importer produced.
struct Imported {
    /// The workload document ({"name", "description", "model", "layout"}): the fields that differ from the
    /// loader's defaults, plus the required ones and those whose default is derived (kv_heads,
    /// tied_embeddings), so the file reads as the source stated it.
    nlohmann::json workload;
    int gpus = 0;                      ///< the GPUs the layout covers (tp * pp * dp * cp)
    std::vector<std::string> ignored;  ///< flags / keys of the source not used, as written ("--lr")
    std::vector<std::string> notes;    ///< what was assumed or approximated, one line each
};

/// Imports the arguments of a Megatron-LM pretrain_gpt.py launch (the words after `--`; torchrun's --nnodes
/// and --nproc-per-node among them count the GPUs). `source` names them in messages ("megatron" or the
/// args file). Throws InputError for a malformed value ("megatron: --num-layers = \"x\" is not an
/// integer"), a flag without its value, a value trainsim cannot represent (an FP8 recipe it does not model,
/// a layer split it cannot hold, fp32 training) or GPUs that TP x PP x CP does not divide. The layout
/// checks run in finish_import(). NeMo 1.x Hydra overrides among the words are read as their flags.
Imported import_megatron(const std::vector<std::string>& args, const std::string& source,
                         const ImportTarget& target);

/// The words of a launch arguments file: shell-like splitting (boost::program_options::split_unix: quotes
/// and backslash escapes), '\' line continuations joined, comments ('#' at the start of a word, to the end
/// of the line) dropped. Throws InputError "SOURCE: the arguments do not split into words (...)" for an
/// unbalanced quote or a bad escape.
std::vector<std::string> split_args_text(std::string_view text, const std::string& source);

/// Imports a Hugging Face config.json (parsed, read from `file`). Throws InputError naming the file, the key
/// and the value for a missing or malformed key, an unsupported model_type (the supported ones are listed)
/// or a dense/sparse layer pattern trainsim cannot hold.
Imported import_hf_config(const nlohmann::json& config, const std::string& file, const ImportTarget& target);

/// Imports a torchtitan train.toml (its text, read from `file`), parsed with toml++. Throws InputError
/// naming the file, the key and the value for a TOML syntax error, an unknown model or flavor, a
/// schedule or AC mode trainsim does not model, HSDP, or degrees that do not divide the GPUs.
Imported import_torchtitan(std::string_view toml_text, const std::string& file, const ImportTarget& target);

/// Applies `--set` assignments ("layout.tp=8", "model.seq_len=4096", "topology.nodes=4"; apply_override of
/// trainsim/config.hpp, "topology." keys to `topology`) to the imported workload, derives layout.dp again
/// from imp.gpus unless an assignment names layout.dp (then imp.gpus becomes tp * pp * cp * dp), and checks
/// the workload as `trainsim run` would (parse_workload, check_layout for imp.gpus GPUs). The import_*
/// functions return their document unchecked: call this before writing it. With assignments, the topology
/// is checked too (parse_topology, `topology_label` naming it). Throws InputError naming the field and value;
/// a value an assignment gave is blamed on it ("--set \"model.layers=0\": ...", blame_set).
void finish_import(Imported& imp, const std::vector<std::string>& sets, nlohmann::json& topology,
                   const std::string& topology_label = "(default topology)");

/// The workload document as a file: "name", "description", "model", "layout" in that order, the fields of
/// model and layout in the loader's order (model_fields(), layout_fields()), two-space indentation, a final
/// newline.
std::string workload_text(const nlohmann::json& workload);

/// The layout's GPU count from a topology document: nodes * gpus_per_node (0 when absent).
int topology_gpus(const nlohmann::json& topology);

}  // namespace trainsim
