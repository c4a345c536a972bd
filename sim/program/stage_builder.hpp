// One pipeline stage's op list, as build_program assembles it: the stage's parameter groups and DP buckets,
// its forward and backward passes in schedule order (P2P, ZeRO-3 / FSDP gathers and reduce-scatters, the DP
// gradient buckets), DeepSpeed's 2021 stage-3 coordinator, and the end of the step (last reductions, tied
// embedding all-reduce, optimizer, parameter all-gather). Internal to sim/program.
#pragma once

#include <string>

#include <tuple>

#include <map>
#include <vector>

#include "layer_ops.hpp"
#include "trainsim/program.hpp"

namespace trainsim::detail {

/// The op templates of one model and layout, built once (BlockBuilder) and shared by every stage.
struct ProgramTemplates {
    OpTemplate layer_fwd, layer_bwd, layer_rec, emb_fwd, emb_bwd, head_fwd, head_bwd;
    /// With Layout::moe_a2a_overlap: where layer_fwd's MLP begins and where layer_bwd's attention backward
    /// begins (BlockBuilder::last_mlp_split); 0 otherwise.
    std::size_t layer_fwd_split = 0, layer_bwd_split = 0;
    /// An MoE layer's forward, backward and recompute (ModelSpec::layer_is_moe); empty for dense models.
    OpTemplate moe_fwd, moe_bwd, moe_rec;
    /// A multi-token-prediction layer's own ops (BlockBuilder::mtp_forward / _backward); empty without MTP.
    OpTemplate mtp_fwd, mtp_bwd;
    /// DeepSpeed ZeRO-3 (framework deepspeed, dp > 1): the layer cut into its fetch units (qkv, proj, fc1,
    /// fc2 and the kernels between), and each linear unit's weight and bias elements per rank.
    std::vector<OpTemplate> ds3_fwd_units, ds3_bwd_units;
    std::vector<double> ds3_weights, ds3_biases;
    /// DeepSpeed BF16_Optimizer's per-micro-batch gradient accumulation, one template per parameter count
    /// (shared by the stages so that equal counts reuse one segment).
    std::map<double, OpTemplate> hp_accumulate;

    ProgramTemplates(BlockBuilder& blocks, const ModelSpec& model, const Layout& layout);
    const OpTemplate& hp_accumulate_for(BlockBuilder& blocks, double params);
};

/// Sizes that every stage shares: pipeline shape, P2P message, parameters per rank per group kind.
struct ProgramShape {
    int pp = 1, vpp = 1, m = 1;      ///< pipeline ranks, chunks per rank, micro-batches per step
    int last_vs = 0;                 ///< index of the last virtual stage (pp * vpp - 1)
    double t = 1;                    ///< TP degree
    double act_bytes = 0;            ///< one micro-batch's activation between stages, all TP ranks together
    double p2p_bytes = 0;            ///< P2P message per rank (act_bytes / t)
    bool gather_after_recv = false;  ///< TP without SP: the receiver all-gathers the split activation
    bool deepspeed = false;
    double grad_bytes = 0;       ///< bytes per reduced gradient element
    double bucket_elements = 0;  ///< DP bucket size, elements
    double layer_params_rank = 0, emb_params_rank = 0, head_params_rank = 0;
    bool frozen = false;  ///< LoRA / QLoRA: base weights frozen
    double layer_trainable_rank = 0, emb_trainable_rank = 0, head_trainable_rank = 0;

    ProgramShape(const ModelSpec& model, const Layout& layout);
};

/// A DP bucket of gradients, filled in reverse parameter order (Megatron-LM's DistributedDataParallel).
struct Bucket {
    double elements = 0;  ///< parameters per rank in this bucket
    int closes_after =
        0;  ///< index, in backward order of the chunk's param groups, of the group that fills it
};

/// Splits a chunk's parameter groups (in backward order) into DP buckets of at least `bucket_elements`.
std::vector<Bucket> make_buckets(const std::vector<double>& groups, double bucket_elements);
/// True when the last pipeline stage holds a copy of the input embedding whose gradient is all-reduced with
/// the first stage's: tied embeddings, or MTP layers (their embedding lookup).
bool shares_embedding(const ModelSpec& m);

/// Appends a template's ops with their phase and micro-batch set.
void append(std::vector<Op>& ops, const OpTemplate& t, Phase phase, int mb);

/// A decoder layer's ops in a pass's op list: [begin, mid) its recomputation (backward), [mid, end) its
/// forward or backward template (StageBuilder::combined_pass).
struct LayerSpan {
    std::size_t begin = 0, mid = 0, end = 0;
    /// A dense layer: mid + split is where its forward's MLP (its backward's attention backward) begins;
    /// 0 for MoE layers (cut at their all-to-alls) and without the overlap.
    std::size_t split = 0;
};

/// Builds the program of pipeline rank `stage`.
class StageBuilder {
  public:
    StageBuilder(const ModelSpec& model, const Layout& layout, BlockBuilder& blocks,
                 ProgramTemplates& templates, const ProgramShape& shape, int stage);
    /// Takes `storage` as the op list (cleared; the ops already emitted kept in front), so that its memory
    /// is reused: call before build().
    void reuse_ops(std::vector<Op>&& storage);
    StageProgram build();

  private:
    // Parameter groups and buckets per chunk (backward order); the stage's totals.
    void plan_groups();
    /// Reserves the op list for `items` schedule items (an estimate; the list still grows if it passes it).
    void reserve_ops(std::size_t items);
    // Op emitters.
    void mark(MemoryEvent e, double elements = 0);
    /// A layer's memory mark; `moe`: the layer is an MoE layer (MemoryMark::dense_layer otherwise).
    void layer_mark(MemoryEvent e, bool moe);
    void append_copy_out(double elements, Phase phase, int mb);
    /// A collective on the DP stream: over DP x CP (group dp), or over expert DP (group edp: routed-expert
    /// gradients and parameters).
    void dp_launch(CollectiveKind kind, double bytes, CommGroup group = CommGroup::dp);
    void dp_wait(int target, Phase phase);
    int param_gather(double elements);
    void launch_grad_bucket(const Bucket& b);
    void launch_expert_grad_bucket(const Bucket& b);
    /// True when layer `index` (0-based, forward order) of model chunk `chunk` is an MoE layer.
    bool moe_layer(int chunk, int index) const;
    void launch_param_gather(int chunk);
    /// Before the first forward of param group `group` (backward-order index) of `chunk` with overlapped
    /// parameter gathers: waits for the all-gather of its bucket, and with `experts` (an MoE layer whose
    /// expert parameters are gathered over expert DP) for its expert bucket's too. Megatron-Core's forward
    /// pre-hook waits for the bucket group of every parameter of the module (`finish_param_sync`), dense
    /// and expert buffers alike (distributed_data_parallel.py `_make_forward_pre_hook`, param_to_bucket_group
    /// built for both).
    void wait_for_group(int chunk, int group, bool experts = false);
    /// A P2P op (send or recv) of one activation or gradient message with virtual stage `vs`.
    void p2p(OpKind kind, int direction, int vs, int mb, Phase phase);
    void recv(int direction, int vs, int mb, Phase phase);
    void send(int direction, int to_vs, int mb, Phase phase);
    // Passes.
    void forward_pass(const ScheduleItem& item);
    void backward_pass(const ScheduleItem& item);
    /// Layout::moe_a2a_overlap: a steady-state forward and the backward after it in the schedule, merged
    /// layer by layer as Megatron-Core's combined 1F1B runs them (combined_pass.cpp).
    void combined_pass(const ScheduleItem& f, const ScheduleItem& b);
    /// True when build() merges the steady-state forward / backward pairs (combined_pass).
    bool combines_passes() const;
    struct BackwardState;
    void plan_data_parallel();
    void backward_group_start(BackwardState& s);
    void backward_group_done(BackwardState& s);
    void deepspeed_stage3(const std::vector<ScheduleItem>& items);
    struct Ds3State;
    void ds3_fetch(Ds3State& s, std::size_t k);
    void ds3_after_use(Ds3State& s, std::size_t k);
    void finish_step();
    /// Layout::activation_offload_layers, after layer `i`'s forward / before its backward (TE's
    /// on_group_commit_forward / _backward): the wait for a copy and the memory mark, where TE syncs.
    void offload_after_forward(int i, int mb);
    void offload_before_backward(int i, int mb);
    /// The copy wait `name` for offloaded layer `group`, hidden by `count` runs of layer `hiding_layer`'s
    /// forward or backward template (cached).
    void offload_wait(const char* name, int group, int hiding_layer, bool backward, int count, int mb);
    /// The MTP layers on the loss stage, forward before the output layer / backward after it.
    void mtp_forward(int mb);
    void mtp_backward(int mb);

    const ModelSpec& model_;
    const Layout& layout_;
    BlockBuilder& blocks_;
    ProgramTemplates& tpl_;
    const ProgramShape& shape_;
    const int r_;  ///< pipeline rank
    StageProgram sp_;

    std::int64_t stage_layers_ = 0;
    std::vector<int> layers_of_chunk_;
    std::vector<std::vector<Bucket>> buckets_;
    /// MoE: per chunk, the routed experts' gradient buckets (reduced over expert DP), in the same group
    /// indices as buckets_ (groups without experts count 0).
    std::vector<std::vector<Bucket>> expert_buckets_;
    std::vector<std::int64_t> first_layer_;  ///< [chunk] global index of its first layer
    double stage_expert_rank_ = 0;           ///< routed-expert parameters of the stage on this GPU
    bool edp_reduce_ = false;                ///< MoE with expert_dp() > 1: expert gradients reduced over EDP
    std::vector<std::vector<double>> group_elements_;   ///< parameters per group (all-gathered by ZeRO-3)
    std::vector<std::vector<double>> group_trainable_;  ///< trainable parameters (gradients) per group
    std::vector<int> backward_count_;
    double stage_params_rank_ = 0, stage_trainable_rank_ = 0;

    bool sharded_ = false, zero2_ = false, zero3_ = false, ds3_ = false;
    bool rebackward_ = true, keep_for_step_ = false;
    bool grad_sync_last_ = false;  ///< FSDP2 under PP: gradients reduce-scattered after the last backward
    double dp_cp_ = 1;             ///< the DP x CP group's size (gradients reduced and state sharded over it)
    std::vector<bool> kept_;
    /// Layout::activation_offload_layers: offload_window_layer of each offloaded layer (empty: off), and the
    /// copy waits built so far by (name, group's kind, hiding kind, backward, count).
    std::vector<std::int64_t> offload_windows_;
    std::map<std::tuple<std::string, bool, bool, bool, int>, OpTemplate> offload_waits_;
    double copy_out_bytes_ = 0;
    bool backward_post_ = false;
    std::map<double, OpTemplate> copy_out_;
    int dp_launched_ = 0;
    double gather_bytes_ = 2.0;
    bool reduce_in_full_ = false, early_gather_ = false;
    std::vector<int> gather_base_;
    std::vector<bool> chunk_started_;
    double in_flight_ = 0;
    /// Where forward_pass / backward_pass record their decoder layers' spans (combined_pass), or null.
    std::vector<LayerSpan>* spans_ = nullptr;
};

}  // namespace trainsim::detail
