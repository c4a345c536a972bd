// The training layout's fields, declared once (include/trainsim/schema.hpp): the workload loader, --set, the
// JSON of `run` and `sweep`, the sweep's axes and docs/inputs.md read them from here.
#include <string>
#include <vector>

#include "trainsim/layout.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {

using schema::Field;
using schema::Range;
using schema::Value;

constexpr const char* kLimits = "trainsim/limits.hpp";

/// The names of enum E's values 0 .. n-1, as to_string writes them (the one place a name is spelled).
template <class E>
std::vector<std::string> names_of(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i)
        out.push_back(to_string(static_cast<E>(i)));
    return out;
}

Range gpus_range() {
    return {1, static_cast<double>(limits::kMaxGpus), kLimits};
}

schema::Table<Layout> make_layout_fields() {
    using schema::boolean_field;
    using schema::enum_field;
    using schema::integer_field;
    schema::Table<Layout> t;
    auto add = [&t](Field<Layout> f, bool summary = false) {
        f.summary = summary;
        t.push_back(std::move(f));
    };
    add(integer_field("tp", &Layout::tp, gpus_range(), "GPUs",
                      "tensor-parallel size (Megatron-LM --tensor-model-parallel-size)", true),
        true);
    add(integer_field("pp", &Layout::pp, gpus_range(), "GPUs", "pipeline-parallel size (stages)", true),
        true);
    add(integer_field("dp", &Layout::dp, gpus_range(), "GPUs",
                      "data-parallel size; tp * pp * dp * cp must equal the cluster's GPUs", true),
        true);
    add(integer_field("cp", &Layout::cp, gpus_range(), "GPUs",
                      "context-parallel size: the sequence split over cp ranks (ring attention; needs a "
                      "fused attention kernel)"),
        true);
    add(integer_field(
        "ep", &Layout::ep, gpus_range(), "GPUs",
        "expert-parallel size (Megatron-Core --expert-model-parallel-size): num_experts / ep routed "
        "experts per rank; EP ranks are carved out of tp * cp * dp as Megatron-Core's "
        "parallel_state.py does; needs a MoE model"));
    {
        auto f = integer_field(
            "etp", &Layout::etp, Range{0, static_cast<double>(limits::kMaxGpus), kLimits}, "GPUs",
            "expert tensor-parallel size (Megatron-Core --expert-tensor-parallel-size): each "
            "routed expert's FFN split over etp ranks; etp * ep divides tp * cp * dp");
        f.default_doc = "0: tp";
        add(std::move(f));
    }
    add(integer_field("vpp", &Layout::vpp, Range{1, static_cast<double>(limits::kMaxLayers), kLimits},
                      "model chunks",
                      "virtual pipeline stages per rank (interleaved 1F1B when > 1; needs pp > 1)"),
        true);
    add(integer_field("micro_batch", &Layout::micro_batch,
                      Range{1, static_cast<double>(limits::kMaxGlobalBatch), kLimits}, "sequences",
                      "micro-batch size per DP rank", true),
        true);
    add(integer_field("global_batch", &Layout::global_batch,
                      Range{1, static_cast<double>(limits::kMaxGlobalBatch), kLimits}, "sequences",
                      "sequences per step; divisible by micro_batch * dp", true),
        true);
    add(enum_field("schedule", &Layout::schedule, names_of<Schedule>(2),
                   "pipeline schedule (1f1b, interleaved when vpp > 1; or GPipe)"),
        true);
    add(boolean_field("sequence_parallel", &Layout::sequence_parallel,
                      "Megatron sequence parallelism: norms and dropout split over the TP ranks"),
        true);
    add(enum_field("recompute", &Layout::recompute, names_of<Recompute>(4),
                   "activation recomputation: none, Megatron selective (attention core), torchtitan per-op "
                   "selective, or full layers"),
        true);
    add(integer_field("recompute_num_layers", &Layout::recompute_num_layers,
                      Range{0, static_cast<double>(limits::kMaxLayers), kLimits}, "layers",
                      "with recompute full: only the first N layers of each model chunk recomputed (Megatron "
                      "--recompute-method block); 0 = every layer"));
    add(integer_field(
        "activation_offload_layers", &Layout::activation_offload_layers,
        Range{0, static_cast<double>(limits::kMaxLayers), kLimits}, "layers",
        "activations of the first N layers copied to host memory after their forward and back "
        "before their backward (Megatron-Core --cpu-offloading-num-layers); pp 1, no recompute"));
    add(boolean_field("recompute_mla_up_proj", &Layout::recompute_mla_up_proj,
                      "with recompute selective and MLA: the q / kv up-projections recomputed too (Megatron "
                      "--recompute-modules mla_up_proj)"));
    {
        Field<Layout> f;
        f.name = "recompute_modules";
        f.kind = schema::Kind::choice_set;
        f.choices = {"core_attn", "layernorm", "mlp", "moe", "moe_act", "shared_experts", "mla_up_proj"};
        f.doc =
            "with recompute selective: the modules recomputed (Megatron --recompute-modules; default "
            "core_attn; mla_up_proj sets recompute_mla_up_proj)";
        f.get = [](const Layout& l) { return Value{l.recompute_modules.names(l.recompute_mla_up_proj)}; };
        f.set = [](Layout& l, const Value& v) {
            RecomputeModules r;
            r.core_attn = false;
            for (const auto& x : std::get<std::vector<std::string>>(v)) {
                r.core_attn |= x == "core_attn";
                r.layernorm |= x == "layernorm";
                r.mlp |= x == "mlp";
                r.moe |= x == "moe";
                r.moe_act |= x == "moe_act";
                r.shared_experts |= x == "shared_experts";
                r.mla_up_proj |= x == "mla_up_proj";
                l.recompute_mla_up_proj |= x == "mla_up_proj";
            }
            l.recompute_modules = r;
        };
        add(std::move(f));
    }
    add(enum_field("precision", &Layout::precision, names_of<Precision>(3),
                   "GEMM precision (fp8: TransformerEngine / torchao FP8 linear layers, bf16 elsewhere)"),
        true);
    add(boolean_field(
        "distributed_optimizer", &Layout::distributed_optimizer,
        "Megatron's distributed optimizer: optimizer state sharded over DP, gradients reduce-scattered"));
    add(integer_field(
        "zero_stage", &Layout::zero_stage, Range{0, 3, ""}, "",
        "ZeRO stage: 1 shards the optimizer state, 2 also the gradients, 3 also the parameters (FSDP)"));
    {
        auto f =
            schema::quantity_field("dp_bucket_size", &Layout::dp_bucket_bytes, Dimension::bytes,
                                   "DP gradient bucket, as bytes of fp32 elements (Megatron's 40M elements = "
                                   "160MB); 0: the framework's "
                                   "default (Megatron-Core: max(40M, 1M x DP x CP) elements; others 40M)");
        f.allow_zero = true;  // "0B": the framework's default, as the field's default value
        add(std::move(f));
    }
    add(boolean_field("overlap_grad_reduce", &Layout::overlap_grad_reduce,
                      "DP gradient reduction overlapped with the last backward"));
    add(boolean_field("overlap_param_gather", &Layout::overlap_param_gather,
                      "distributed optimizer's parameter all-gather overlapped with forward"));
    add(boolean_field("tp_comm_overlap", &Layout::tp_comm_overlap,
                      "TP collectives overlapped with the adjacent GEMMs (TransformerEngine userbuffers)"));
    add(boolean_field("moe_a2a_overlap", &Layout::moe_a2a_overlap,
                      "Megatron --overlap-moe-expert-parallel-comm: EP all-to-alls of one micro-batch under "
                      "another's compute (combined 1F1B)"));
    add(enum_field("moe_dispatcher", &Layout::moe_dispatcher, names_of<MoeDispatcher>(3),
                   "MoE token dispatcher: NCCL all-to-all of top-k copies, or the flex dispatcher's DeepEP / "
                   "HybridEP (one copy per destination rank)"));
    add(boolean_field("moe_fused_grouped_mlp", &Layout::moe_fused_grouped_mlp,
                      "Megatron --use-transformer-engine-op-fuser: the experts as TE fused ops (fc2's bias "
                      "and the routing probabilities applied inside, model.moe_expert_bias)"));
    add(boolean_field(
        "fp8_attention", &Layout::fp8_attention,
        "TransformerEngine FP8 fused attention (Megatron --fp8-dot-product-attention): Q, K, V "
        "and the output gradient in FP8, cuDNN's FP8 kernels; needs precision fp8 and attention "
        "cudnn"));
    add(enum_field(
            "attention", &Layout::attention, names_of<AttentionKernel>(4),
            "attention kernel: FlashAttention-2, cuDNN fused attention, unfused (scores materialised), or "
            "flash1 (a FlashAttention-1-class kernel: flash-attn 1.x, llm-foundry's Triton port)"),
        true);
    add(enum_field(
        "fp8_recipe", &Layout::fp8_recipe, names_of<Fp8Recipe>(5),
        "low-precision recipe of the linear layers (precision fp8): FP8 delayed, per-tensor current, per-row "
        "current; MXFP8 or NVFP4 blocks (Blackwell)"));
    add(boolean_field("reshard_after_forward", &Layout::reshard_after_forward,
                      "ZeRO-3 / FSDP: parameters freed after forward and gathered again for backward"));
    add(boolean_field("fp8_param_gather", &Layout::fp8_param_gather,
                      "Megatron --fp8-param-gather: FP8 weights kept and all-gathered in FP8"));
    add(boolean_field("cross_entropy_fusion", &Layout::cross_entropy_fusion,
                      "Megatron --cross-entropy-loss-fusion (TransformerEngine implementation)"));
    add(boolean_field("grad_reduce_in_bf16", &Layout::grad_reduce_in_bf16,
                      "Megatron --grad-reduce-in-bf16: bf16 gradient buffer and DP reduction"));
    add(boolean_field("apex_distributed_adam", &Layout::apex_distributed_adam,
                      "NeMo 1.x distributed_fused_adam (Apex DistributedFusedAdam) as the optimizer"));
    add(boolean_field("adam_moments_bf16", &Layout::adam_moments_bf16,
                      "Megatron-Core precision-aware optimizer with bf16 Adam moments (--exp-avg-dtype bf16 "
                      "--exp-avg-sq-dtype bf16): 8 B of optimizer state per parameter instead of 12"));
    add(boolean_field("compile", &Layout::torch_compile,
                      "torchtitan: each transformer block compiled with torch.compile (training.compile)"));
    {
        Field<Layout> f;
        f.name = "layers_per_stage";
        f.kind = schema::Kind::integer_list;
        f.unit = "layers";
        f.doc =
            "transformer layers per pipeline stage when uneven (pp entries, summing to model.layers); empty "
            "or null: the even split";
        f.range = Range{0, static_cast<double>(limits::kMaxLayers), kLimits};
        f.nullable = true;
        f.get = [](const Layout& l) { return Value{l.layers_per_stage}; };
        f.set = [](Layout& l, const Value& v) {
            l.layers_per_stage = std::get<std::vector<std::int64_t>>(v);
        };
        add(std::move(f));
    }
    add(boolean_field("account_for_embedding_in_pipeline_split",
                      &Layout::account_for_embedding_in_pipeline_split,
                      "Megatron: the input embedding counts as one layer in the pipeline split"));
    add(boolean_field("account_for_loss_in_pipeline_split", &Layout::account_for_loss_in_pipeline_split,
                      "Megatron: the output layer and loss count as one layer in the pipeline split"));
    add(schema::string_field(
        "pipeline_layout", &Layout::pipeline_layout,
        "Megatron --pipeline-model-parallel-layout: the layers of each virtual stage (E "
        "embedding, t layer, m MTP layer, L loss; stages separated by a vertical bar, x*n "
        "and (...)*n repeat); empty: not used"));
    add(enum_field("optimizer", &Layout::optimizer, names_of<Optimizer>(4),
                   "optimizer, i.e. the state kept per parameter (12, 6, 8 or 4 B with the fp32 master)"));
    add(enum_field("offload_optimizer", &Layout::offload_optimizer, names_of<Offload>(3),
                   "where the optimizer state lives: GPU, host (ZeRO-Offload) or NVMe (ZeRO-Infinity, needs "
                   "zero_stage 3)"));
    add(enum_field("adapter", &Layout::adapter, names_of<Adapter>(3),
                   "parameter-efficient fine-tuning: LoRA or QLoRA (4-bit NF4 base)"));
    add(integer_field("lora_rank", &Layout::lora_rank,
                      Range{1, static_cast<double>(limits::kMaxHidden), kLimits}, "",
                      "rank r of the LoRA / QLoRA adapters; at most model.hidden"));
    {
        Field<Layout> f;
        f.name = "lora_targets";
        f.kind = schema::Kind::choice_set;
        f.choices = {"qkv", "proj", "fc1", "fc2"};
        f.doc = "linear layers that get adapters (at least one)";
        f.get = [](const Layout& l) {
            std::vector<std::string> v;
            if (l.lora_targets.qkv) v.push_back("qkv");
            if (l.lora_targets.proj) v.push_back("proj");
            if (l.lora_targets.fc1) v.push_back("fc1");
            if (l.lora_targets.fc2) v.push_back("fc2");
            return Value{v};
        };
        f.set = [](Layout& l, const Value& v) {
            l.lora_targets = LoraTargets{false, false, false, false};
            for (const auto& x : std::get<std::vector<std::string>>(v)) {
                l.lora_targets.qkv |= x == "qkv";
                l.lora_targets.proj |= x == "proj";
                l.lora_targets.fc1 |= x == "fc1";
                l.lora_targets.fc2 |= x == "fc2";
            }
        };
        add(std::move(f));
    }
    add(enum_field(
        "framework", &Layout::framework, framework_names(),
        "training framework, where its behaviour differs for the same layout (docs/compute-model.md)"));
    add(enum_field("checkpoint_save", &Layout::checkpoint_save, names_of<CheckpointSave>(2),
                   "checkpoint writing: every rank its shard, or rank 0 the full state (trainsim goodput)"));
    return t;
}

}  // namespace

const schema::Table<Layout>& layout_fields() {
    static const schema::Table<Layout> table = make_layout_fields();
    return table;
}

}  // namespace trainsim
