// The training program: for each pipeline stage, the ordered work of one iteration as Megatron-LM issues it.
// All TP and DP ranks of one stage run the same op list (they differ only in their groups), so a program for
// 16K GPUs holds one list per stage, not one per GPU.
//
// Streams (as in Megatron-LM): a main stream runs compute, P2P receives wait on it; a TP stream runs TP
// collectives (waited for by the main stream right away, or after the next GEMM with TP communication
// overlap); a DP stream runs the gradient reduction buckets and the distributed optimizer's parameter
// all-gathers.
//
// Kernel shapes follow Megatron-LM's ColumnParallelLinear / RowParallelLinear (megatron/core/tensor_parallel/
// layers.py): backward of a column-parallel linear launches the all-reduce (reduce-scatter with sequence
// parallelism) of the input gradient asynchronously and overlaps it with the weight-gradient GEMM; with
// sequence parallelism the input is all-gathered again in backward and overlapped with the data-gradient
// GEMM.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainsim/collective_kind.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/parallel_groups.hpp"

namespace trainsim {

enum class Phase { forward, backward, recompute, optimizer };
/// The group a collective runs over (the executor's communicator registry maps each to a GroupKind of
/// include/trainsim/parallel_groups.hpp). On the TP stream: tp, cp, embedding, ep, etp; on the DP stream: dp
/// (the default for dp_launch: any value but edp) and edp.
enum class CommGroup {
    tp,
    cp,
    embedding,  ///< the first and last pipeline stage's ranks of one (tp, cp, dp): tied embedding gradients
    ep,         ///< MoE token dispatch / combine all-to-all over the expert-parallel group (blocking)
    etp,        ///< MoE: the expert-TP group's all-gather / reduce-scatter of the dispatched tokens
    dp,         ///< dense gradients and parameters over DP x CP
    edp,        ///< routed-expert gradients over the expert-data-parallel group
};
enum class OpKind {
    compute,    ///< run segment `segment` on the main stream
    tp_launch,  ///< enqueue a TP collective on the TP stream
    tp_wait,    ///< main stream waits until the TP stream is idle
    send,  ///< asynchronous P2P send of `bytes` to the neighbour stage in `direction` (+1 next, -1 previous)
    recv,  ///< main stream waits for the P2P message (virtual stage, micro-batch, direction)
    dp_launch,  ///< enqueue a DP collective on the DP stream
    dp_wait,    ///< main stream waits until the DP stream has completed `dp_target` collectives
};

/// Which layer's saved activations a segment's host copy moves (Layout::activation_offload_layers): none, a
/// layer of the model's kind (an MoE layer in an MoE model), a dense layer of an MoE model. Their bytes are
/// set by the memory model (set_activation_copy_bytes in include/trainsim/memory.hpp), which owns the
/// activation sizes.
enum class ActivationCopy { none, layer, dense_layer };

/// A run of kernels executed back to back on the main stream. Shared by every op that runs the same work.
struct Segment {
    std::string name;
    std::vector<Kernel> kernels;
    double seconds = 0;  ///< filled by assign_durations()
    double flops = 0;    ///< hardware FLOPs of the kernels
    /// A wait for a copy on a side stream that ran beside other segments (activation offloading): the
    /// segment lasts max(0, its kernels' time - sum of count x seconds of each (segment, count) here), the
    /// part of the copy those segments did not hide. Empty: the kernels' time.
    std::vector<std::pair<int, double>> hidden_by;
    ActivationCopy activation_copy =
        ActivationCopy::none;  ///< a host copy's layer kind (its bytes set later)
};

struct Op {
    OpKind kind = OpKind::compute;
    Phase phase = Phase::forward;
    int segment = -1;                                        ///< compute
    CollectiveKind collective = CollectiveKind::all_reduce;  ///< tp_launch, dp_launch
    double bytes = 0;                                        ///< collective or P2P message bytes per rank
    int direction = 0;      ///< send/recv: +1 toward the next stage (activations),
                            ///< -1 toward the previous one (gradients)
    int virtual_stage = 0;  ///< send/recv: the receiving model chunk (global index chunk*pp + pp_rank)
    int micro_batch = -1;
    int dp_target = 0;                ///< dp_wait
    CommGroup group = CommGroup::tp;  ///< tp_launch: tp, cp, embedding, ep, etp; dp_launch: edp, else DP x CP
};

/// The communicator a collective op runs over, as the executor's TP and DP streams pick it (arrive_tp,
/// arrive_dp) and the sweep's lower bound times it: a dp_launch over the expert-DP group (CommGroup::edp) or
/// else DP x CP; a tp_launch (any other op) over its group's kind (cp, embedding, ep, etp; tp otherwise).
GroupKind group_kind_of(const Op& op);

/// What a point of a stage's op list does to memory. The builder marks the points; the memory model
/// (include/trainsim/memory.hpp) turns them into bytes by pile and walks them in the executed order.
enum class MemoryEvent {
    layer_forward,  ///< a transformer layer's forward is done: its activations are stored
    /// a layer outside the recomputed block (Layout::recompute_num_layers) is done: it stores every
    /// activation, as without recompute
    layer_forward_kept,
    layer_recomputed,    ///< a layer was recomputed before its backward: the recomputed set is alive
    layer_backward,      ///< a layer's backward is done: its activations and recomputed set are freed
    embedding_forward,   ///< the embedding's stored tensors (token ids, dropout mask)
    embedding_backward,  ///< ... freed
    head_forward,        ///< final norm, LM head and cross-entropy: logits in fp32 stored
    head_backward,       ///< ... freed
    params_gathered,     ///< ZeRO-3 / FSDP: `elements` parameters per rank all-gathered into a buffer
    params_released,     ///< ... that buffer freed (after the group's compute)
    grads_unsharded,     ///< ZeRO-3 / FSDP: a group's full gradients, alive until reduce-scattered
    grads_reduced,       ///< ... freed
    /// Layout::activation_offload_layers: the stored activations of the layer `elements` entries below the
    /// micro-batch's most recent one leave the GPU (their copy to the host was waited for) ...
    activations_offloaded,
    activations_reloaded,  ///< ... and are allocated again (the copy back starts), `elements` as above
};

/// A memory event at the point just before op `op` of the stage (op == ops.size(): after the last op).
struct MemoryMark {
    std::size_t op = 0;
    MemoryEvent event = MemoryEvent::layer_forward;
    double elements = 0;  ///< parameters per rank, for the ZeRO-3 events
    /// The layer events of a dense layer of an MoE model (ModelSpec::layer_is_moe false): its activations
    /// are the dense MLP's (layer_activations with moe_layer = false).
    bool dense_layer = false;
};

struct StageProgram {
    std::vector<Op> ops;
    std::vector<MemoryMark> memory_marks;  ///< in op order
    /// Most micro-batches whose activations are held at once on this stage (forward done, backward not yet),
    /// counted in units of a full stage's layers, from the executed schedule order.
    double peak_in_flight_microbatches = 0;
    double hardware_flops = 0;    ///< per rank, including recomputation
    double params = 0;            ///< parameters held by this stage (all TP shards together)
    double embedding_params = 0;  ///< of which embedding / output layer
    /// MoE: the routed experts' parameters on one GPU of this stage (num_experts / ep experts of each MoE
    /// layer, each split over expert TP), included in params / tp; their gradients are reduced (and with a
    /// sharded optimizer their optimizer state sharded) over expert DP (Layout::expert_dp). 0 for dense
    /// models.
    double expert_params_rank = 0;
    double trainable_params = 0;  ///< trainable parameters of the stage (all TP shards): all, or the adapters
    std::int64_t layers = 0;      ///< transformer layers on this stage (all its chunks)
    bool has_embedding = false, has_head = false;
};

struct Program {
    std::vector<Segment> segments;
    std::vector<StageProgram> stages;  ///< [pp rank]
};

/// One item of a pipeline schedule on one pipeline rank.
struct ScheduleItem {
    bool forward = true;
    int chunk = 0;  ///< model chunk (virtual stage index on this rank), 0 .. vpp-1
    int micro_batch = 0;
    /// A forward of the steady 1F1B phase: the backward after it is its 1F1B partner, which Megatron-Core's
    /// combined schedule (Layout::moe_a2a_overlap) runs merged with it. Warm-up forwards are not, even when
    /// a cool-down backward follows the last of them (one micro-batch per pipeline, or all passes warm-up).
    bool steady = false;
};

/// The order of forward and backward passes on pipeline rank `rank` of `pp`, for `m` micro-batches and `vpp`
/// chunks: GPipe (all forwards, then all backwards), 1F1B (warm-up of p-rank-1 forwards, steady 1F1B,
/// cool-down; Narayanan et al. 2021 Fig. 4), or interleaved 1F1B for vpp > 1 (Megatron-LM
/// megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving).
/// `a2a_overlap` (Layout::moe_a2a_overlap, 1F1B only): one more warm-up forward, as Megatron-Core's combined
/// 1F1B schedule runs it (schedules.py get_pp_rank_microbatches; combined_1f1b.py for pp = 1), so that each
/// steady-state forward is followed by the backward it is merged with.
std::vector<ScheduleItem> pipeline_schedule(Schedule schedule, int pp, int rank, int m, int vpp,
                                            bool a2a_overlap = false);

/// Builds the program of every stage. Throws InputError for layouts the builder cannot express.
/// ZeRO-3 with framework deepspeed (pp = 1) follows DeepSpeed's 2021 stage-3 coordinator (v0.3.12-v0.5.8,
/// runtime/zero/stage3.py): per-module all-gathers, a full wait on the DP stream at each fetch, one prefetch
/// in flight, release by reuse distance, and 16-bit bucketed gradient all-reduces (docs/compute-model.md,
/// "DeepSpeed ZeRO-3 as its 2021 releases ran it").
Program build_program(const ModelSpec& model, const Layout& layout);
/// The same program, its stages' op lists built in the memory of `recycled`'s (any earlier program, whose
/// contents are discarded): a sweep builds thousands of programs of millions of ops, and fresh lists of that
/// size cost as much in page faults as the building.
Program build_program(const ModelSpec& model, const Layout& layout, Program recycled);

/// MoE: copies of each token the EP dispatch all-to-all moves per rank (the combine moves as many back), by
/// Layout::moe_dispatcher: the alltoall dispatcher sends moe_top_k copies (one per chosen expert); the flex
/// dispatchers (DeepEP, HybridEP) send one copy to each EP rank holding at least one of the token's
/// experts: ep · (1 − C(n − n/ep, k) / C(n, k)) for k experts drawn uniformly without replacement from n
/// (Megatron's --moe-router-force-load-balancing draws them so; a balanced router is the same on average).
/// 1 ≤ result ≤ min(k, ep) for flex. Sources: MoeDispatcher.
double moe_dispatch_copies_per_token(const ModelSpec& model, const Layout& layout);

/// MoE with expert biases (ModelSpec::moe_expert_bias) and without the TE op fuser
/// (Layout::moe_fused_grouped_mlp): bytes per element of the experts' fc2 output [R, hidden] that
/// Megatron-Core's TEGroupedMLP._apply_bias moves, forward or backward (0 when it does not run): per expert
/// `t + b * p`, torch.cat, .to(bf16) and their autograd backward (experts.py, core b0cc270 / d0b3b77). With
/// fp32 probabilities (the flex dispatchers upcast them) the middle runs in fp32: 28 B forward, 40 B
/// backward; with 16-bit ones (alltoall, no --moe-router-dtype) 12 B and 16 B. Sources:
/// docs/compute-model.md, "Expert biases".
double moe_expert_bias_bytes_per_element(const ModelSpec& model, const Layout& layout, bool backward);

/// Gated MoE with a clamped activation (ModelSpec::moe_activation_clamp) and without the TE op fuser
/// (Layout::moe_fused_grouped_mlp): bytes per element of the experts' fc1 output [R, 2 f_e / etp] (16-bit)
/// that Megatron-Core's eager clamp moves before the fused activation, forward or backward (0 when it does
/// not run). Forward (fused_bias_geglu.py weighted_bias_quick_geglu_impl, core b0cc270 / d7288711):
/// `x_glu, x_linear = input.chunk(2, -1)` (views), `x_glu.clamp(max=c)` and `x_linear.clamp(-c, c)` (each
/// reads and writes its half: 2 + 2 B per element of the whole), `torch.cat` (reads and writes the whole:
/// 2 + 2 B): 8 B. Backward (autograd; PyTorch's clamp_backward, torch/csrc/autograd/FunctionsManual.cpp):
/// `where(self <= max, grad, 0)` for the gate's half (a comparison, 2 + 1 B, and the where, 1 + 2 + 2 B:
/// 8 B), `where((self >= min).logical_and_(self <= max), grad, 0)` for the linear half (two comparisons,
/// the and 1 + 1 + 1 B, the where: 14 B), (8 + 14) / 2 = 11 B per element of the whole; the chunk's backward
/// concatenates the two halves' gradients (2 + 2 B): 15 B. A recompute of the activation
/// (Layout::recompute_modules moe_act) repeats the forward. Sources: docs/compute-model.md, "Expert
/// activation clamp".
double moe_activation_clamp_bytes_per_element(const ModelSpec& model, const Layout& layout, bool backward);

/// Standard attention under the megatron framework with a YaRN concentration factor other than 1
/// (ModelSpec::yarn_concentration_factor): bytes per element of the query or the key [s, b, heads / t, d]
/// that Megatron-Core's unfused RoPE moves, forward or backward (0 when it does not run); E is the
/// activation element size (Layout::activation_bytes). Forward (rope_utils.py _apply_rotary_pos_emb_bshd,
/// core b0cc270 / d7288711 / cd4afff; the rotary part is the whole head, so `t[..., :rot_dim]` is `t` itself
/// and `t_pass` empty): `t * cos_` (2E), `_rotate_half`'s negation of one half (E) and `torch.cat` (2E), `*
/// sin_` (2E), the sum (3E), the final `torch.cat((t, t_pass))` (2E): 12E, in 6 kernels (and 6 small ones per
/// call over the [s, 1, 1, d] fp32 frequencies: cos, sin, `* mscale`, `.to`). Backward (autograd): the two
/// products with sin_ and cos_ (2E each), the negation's (E), the chunk's cat (2E), the sum of the two
/// branches' gradients (3E), the empty `t_pass` slice's SliceBackward (a zero fill, E) and its sum (3E): 14E,
/// in 7 kernels. Sources: docs/compute-model.md, "YaRN RoPE".
double rope_unfused_bytes_per_element(const ModelSpec& model, const Layout& layout, bool backward);

/// Keys per query that a fused attention kernel computes for a sliding window of `window` tokens over a
/// sequence of `seq_len` (ModelSpec::sliding_window), averaged over the queries: query tile m of M = seq_len
/// / 128 computes min(m, W) whole key tiles of 128, W = ceil(window / 128), plus the diagonal tile counted
/// half, as 0.5 · seq_len counts the causal triangle's: 128 · (W + 1/2 - W (W + 1) / (2M)), W at most M - 1;
/// never more than 0.5 · seq_len. FlashAttention-2 window_size (flash_fwd_kernel.h n_block_min /
/// n_block_max), cuDNN's sliding-window mask. Units: keys (tokens).
double window_key_span(double seq_len, double window);

/// True when the framework copies K and V to every query head before the attention kernel: torchtitan's
/// Llama (models/llama/model.py repeat_kv, as of 9dec370, 2024-12) with grouped-query attention (kv_heads <
/// heads), standard attention. The attention core, context parallelism's K/V collectives and the K/V the
/// kernel keeps for its backward then have `heads` heads (sim/program/layer_ops.cpp, sim/memory/
/// activations.cpp).
bool repeats_kv(const ModelSpec& model, const Layout& layout);

/// Fills Segment::seconds from the compute model.
void assign_durations(Program& program, const ComputeModel& compute);

std::string to_string(Phase p);

}  // namespace trainsim
