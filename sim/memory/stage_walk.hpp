// One stage's memory walk: its memory marks in the executed order, each creating or freeing the tensors of
// the op it follows (layer activations, the loss head's logits, ZeRO-3 / FSDP gathered parameters and
// unsharded gradients), sampled through a PileWalk (docs/memory.md, "Timeline"). Private to sim/memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "pile_walk.hpp"
#include "static_piles.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim::memory_walk {

/// What the walk of every stage of one run shares: the layer activations and the shapes and framework
/// behaviours of the embedding and the loss head. Bytes and elements per GPU.
struct WalkShapes {
    LayerActivations act;  ///< a layer of the (possibly recomputed) block
    LayerActivations
        act_kept;  ///< a layer outside Megatron's recomputed block (Layout::recompute_num_layers)
    /// The same two for a dense layer of an MoE model (MemoryMark::dense_layer).
    LayerActivations act_dense, act_dense_kept;
    double E = 2;                 ///< bytes per activation element
    double T = 0;                 ///< tokens of one micro-batch on this GPU: b · s / cp
    double h = 0;                 ///< hidden size
    double TV = 0;                ///< logits per GPU (vocab-parallel / loss-parallel under TP)
    double rep_div = 1;           ///< the split of the LayerNorm region: TP with sequence parallelism, else 1
    double head_in_div = 1;       ///< the split of the stored LM-head input
    double embedding_stored = 0;  ///< the embedding's stored tensors, bytes
    double grad_bytes = 4;        ///< bytes per gradient element (gradient_bytes_per_element)
    bool eager_ce = false;        ///< PyTorch's eager cross entropy on fp32 logits
    bool flash_attn_ce = false;   ///< flash-attn's fused cross entropy (llm-foundry, Composer)
    bool loss_parallel = false;   ///< torchtitan's DTensor loss_parallel (TP > 1)
    bool fsdp2 = false;           ///< PyTorch FSDP (pytorch_fsdp)
    bool torchtitan = false;
};
WalkShapes walk_shapes(const ModelSpec& m, const Layout& l);

/// The memory phase of a compute op's phase (recomputation is part of the backward).
MemoryPhase phase_of(Phase p);

/// The early part of a stage's walk: its marks up to and including the one that ends the backward of its
/// first micro-batch (the stage's layers' count of layer_backward marks); every mark when there are fewer.
std::size_t early_walk_marks(const StageProgram& sp);

/// The times of stage `stage`'s compute op ends, or nullptr when there are none (no times on the samples).
const std::vector<double>* stage_compute_end_s(const std::vector<std::vector<double>>* compute_end_s,
                                               int stage);

class StageWalk {
  public:
    /// `stat` (the stage's static piles), `s` and `sp` must outlive the walk; `mem` receives the samples.
    StageWalk(const Layout& l, const WalkShapes& s, const StageProgram& sp, int stage,
              const std::vector<double>* compute_end_s, const StaticPiles& stat, StageMemory& mem,
              bool keep_timeline, double capacity_bytes);
    /// Walks every memory mark, then the optimizer step and a checkpoint save, and fills the stage's peaks
    /// (early_peak_bytes among them). Throws InternalError when activations or buffers are left after the
    /// iteration (a builder bug).
    void run();
    /// Walks only the early marks (early_walk_marks) and fills StageMemory::early_peak_bytes alone.
    void run_early();

  private:
    /// Walks marks [from, to).
    void walk_marks(std::size_t from, std::size_t to);
    /// The highest sample so far (device bytes).
    double highest_sample_bytes() const;

    /// A ZeRO-3 / FSDP parameter group: gathered and in use, or gathered and kept (not resharded). Groups
    /// are known by their size only: a kept buffer serves a later gather of the same size, in the backward
    /// or in the forward of another micro-batch (within one forward pass every gather is a new group).
    struct Group {
        double elements = 0;
        Tensor buffer;
        int kept_in_forward_of = -2;  ///< the micro-batch whose forward kept it; -2: kept in a backward
    };
    /// What computed last: the FSDP2 root unit (embedding, head) stays gathered under torchtitan.
    enum class Last { none, embedding, layer, head };

    /// Where a mark falls: the phase of the last compute op before it, its op's micro-batch, its time.
    struct At {
        MemoryPhase phase;
        int micro_batch;
        double time_s;
    };

    double time_at(std::size_t op);
    void computed(Last what);
    void push(int mb, std::vector<Tensor> v);
    void pop(int mb);
    void on_mark(const MemoryMark& mk, const At& at);

    void layer_forward(const LayerActivations& la, const At& at);
    void layer_recomputed(const LayerActivations& la, const At& at);
    void layer_backward(const LayerActivations& la, const At& at);
    void head_forward(const At& at);
    void head_backward(const At& at);
    void params_gathered(const MemoryMark& mk, const At& at);
    void params_released(const MemoryMark& mk, const At& at);
    void grads_unsharded(const MemoryMark& mk, const At& at);
    void grads_reduced(const MemoryMark& mk);
    /// Layout::activation_offload_layers: the stored tensors of the entry `depth` below the micro-batch's
    /// most recent one leave the GPU (their sizes kept) / are allocated again.
    void activations_offloaded(int mb, std::size_t depth);
    void activations_reloaded(int mb, std::size_t depth, const At& at);
    void finish();

    const Layout& l_;
    const WalkShapes& s_;
    const StageProgram& sp_;
    int stage_;
    const std::vector<double>* times_;
    const StaticPiles& stat_;
    StageMemory& mem_;
    PileWalk w_;

    std::size_t op_cursor_ = 0, computes_done_ = 0;  // time_at's position
    std::size_t phase_cursor_ = 0;                   // walk_marks's position in the ops
    MemoryPhase last_phase_ = MemoryPhase::forward;  // the phase of the last compute op before it
    double stage_layers_ = 1;
    long long layers_alive_ = 0;  // layer activations alive, counted in layers of one micro-batch
    /// Stored tensors by micro-batch, as a stack: the backward frees them in reverse order.
    std::map<int, std::vector<std::vector<Tensor>>> stored_;
    /// The sizes of offloaded entries, by micro-batch and entry index in stored_.
    std::map<std::pair<int, std::size_t>, std::vector<double>> offloaded_;
    std::vector<Group> in_use_, kept_;
    std::vector<Tensor> gather_outputs_;                    // FSDP2 all-gather outputs, until copied out
    std::vector<std::pair<double, Tensor>> reduce_inputs_;  // FSDP2 fp32 reduce-scatter inputs
    Last last_ = Last::none;
    std::int64_t layers_this_pass_ = 0;
    int last_mb_ = -1;  // the micro-batch of the last compute op before the current mark
    /// The compute op at or after each op: a parameter gather serves the compute that follows it.
    std::vector<std::size_t> next_compute_;
};

}  // namespace trainsim::memory_walk
