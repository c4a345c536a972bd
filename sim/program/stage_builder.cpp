// One pipeline stage's op list: parameter groups and DP buckets, the forward and backward passes in schedule
// order, and the end of the step. DeepSpeed's 2021 ZeRO-3 coordinator is in deepspeed_stage3.cpp.
#include "stage_builder.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim::detail {

std::vector<Bucket> make_buckets(const std::vector<double>& groups, double bucket_elements) {
    std::vector<Bucket> buckets;
    double acc = 0;
    for (std::size_t i = 0; i < groups.size(); ++i) {
        acc += groups[i];
        if (acc >= bucket_elements || i + 1 == groups.size()) {
            if (acc > 0) buckets.push_back({acc, static_cast<int>(i)});
            acc = 0;
        }
    }
    return buckets;
}

bool shares_embedding(const ModelSpec& m) {
    return m.tied_embeddings || m.mtp_layers > 0;
}

void append(std::vector<Op>& ops, const OpTemplate& t, Phase phase, int mb) {
    const std::size_t from = ops.size();
    ops.insert(ops.end(), t.begin(), t.end());
    for (auto it = ops.begin() + static_cast<std::ptrdiff_t>(from); it != ops.end(); ++it) {
        it->phase = phase;
        it->micro_batch = mb;
    }
}

ProgramTemplates::ProgramTemplates(BlockBuilder& blocks, const ModelSpec& model, const Layout& layout) {
    layer_fwd = blocks.layer_forward();
    layer_fwd_split = blocks.last_mlp_split();
    layer_bwd = blocks.layer_backward();
    layer_bwd_split = blocks.last_mlp_split();
    layer_rec = blocks.layer_recompute();
    if (model.moe()) {
        moe_fwd = blocks.layer_forward(true);
        moe_bwd = blocks.layer_backward(true);
        moe_rec = blocks.layer_recompute(true);
    }
    if (model.mtp_layers > 0) {
        mtp_fwd = blocks.mtp_forward();
        mtp_bwd = blocks.mtp_backward();
    }
    emb_fwd = blocks.embedding_forward();
    emb_bwd = blocks.embedding_backward();
    head_fwd = blocks.head_forward();
    head_bwd = blocks.head_backward();
    const bool ds3_any = layout.framework == Framework::deepspeed && layout.zero_stage >= 3 && layout.dp > 1;
    if (ds3_any) {
        ds3_fwd_units = blocks.layer_forward_units();
        ds3_bwd_units = blocks.layer_backward_units();
    }
    ds3_weights = blocks.layer_linear_unit_weights();
    ds3_biases = blocks.layer_linear_unit_biases();
}

const OpTemplate& ProgramTemplates::hp_accumulate_for(BlockBuilder& blocks, double params) {
    auto it = hp_accumulate.find(params);
    if (it == hp_accumulate.end())
        it = hp_accumulate.emplace(params, blocks.bf16_hp_grad_accumulate(params)).first;
    return it->second;
}

ProgramShape::ProgramShape(const ModelSpec& model, const Layout& layout) {
    pp = layout.pp;
    vpp = layout.vpp;
    m = static_cast<int>(layout.micro_batches());
    last_vs = pp * vpp - 1;
    t = layout.tp;
    act_bytes = static_cast<double>(layout.micro_batch * model.seq_len * model.hidden) *
                layout.activation_bytes() / layout.cp;
    // P2P message per rank: with TP, each rank sends its 1/t share (sequence parallelism shards the
    // activation; without it, Megatron's scatter-gather optimization, Narayanan et al. 2021 Sec. 4.1, splits
    // it and the receiver all-gathers over NVLink).
    // (DeepSpeed's pipeline engine does the same: is_pipe_partitioned / is_grad_partitioned when model
    // parallel, PartitionedTensor rebuilt with an all-gather by the receiver.)
    deepspeed = layout.framework == Framework::deepspeed;
    p2p_bytes = act_bytes / t;
    gather_after_recv = layout.tp > 1 && !layout.sequence_parallel;
    grad_bytes = layout.grad_reduce_bytes_per_element();
    bucket_elements = layout.dp_bucket_elements();
    layer_params_rank = model.layer_params() / t;
    // MLA's duplicated down-projections and the q / k norms are whole on every TP rank (ModelSpec).
    layer_params_rank += model.tp_replicated_attention_params() * (1.0 - 1.0 / t);
    emb_params_rank = model.embedding_params() / t;
    // The last stage's copy of the input embedding: tied to the output layer, or (MTP) for the MTP layers'
    // embedding lookup (Megatron GPTModel builds it where mtp_process; finalize_model_grads all-reduces its
    // gradient with the first stage's). The MTP layers' dense parameters count with the output layer's group.
    head_params_rank = model.output_params() / t +
                       (shares_embedding(model) && last_vs > 0 ? model.embedding_params() / t : 0.0) +
                       (model.mtp_params() - model.mtp_expert_params()) / t;
    head_params_rank +=
        static_cast<double>(model.mtp_layers) * model.tp_replicated_attention_params() * (1.0 - 1.0 / t);
    // Trainable parameters per group: everything, or only the LoRA / QLoRA adapters (base frozen: no
    // gradients, no optimizer state, nothing reduced over DP for it).
    frozen = layout.frozen_base();
    layer_trainable_rank = frozen ? adapter_params_per_layer(model, layout) / t : layer_params_rank;
    emb_trainable_rank = frozen ? 0.0 : emb_params_rank;
    head_trainable_rank = frozen ? 0.0 : head_params_rank;
}

StageBuilder::StageBuilder(const ModelSpec& model, const Layout& layout, BlockBuilder& blocks,
                           ProgramTemplates& templates, const ProgramShape& shape, int stage)
    : model_(model), layout_(layout), blocks_(blocks), tpl_(templates), shape_(shape), r_(stage) {
    const auto vpp = static_cast<std::size_t>(shape_.vpp);
    stage_layers_ = layers_on_stage(model_, layout_, r_);
    layers_of_chunk_.resize(vpp);
    buckets_.resize(vpp);
    expert_buckets_.resize(vpp);
    first_layer_.assign(vpp, 0);
    group_elements_.resize(vpp);
    group_trainable_.resize(vpp);
    backward_count_.assign(vpp, 0);
    kept_.assign(vpp, false);
    gather_base_.assign(vpp, 0);
    chunk_started_.assign(vpp, false);
    plan_groups();
    if (layout_.activation_offload_layers > 0 && shape_.vpp == 1)
        for (std::int64_t g = 0; g < layout_.activation_offload_layers; ++g)
            offload_windows_.push_back(
                offload_window_layer(layers_of_chunk_[0], layout_.activation_offload_layers, g));

    plan_data_parallel();
    // The copy the framework makes of each all-gathered group on the compute stream before its compute:
    // FSDP2 copy-out (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py
    // foreach_all_gather_copy_out: split_with_sizes_copy from the gathered flat buffer into each
    // parameter, read and write 2 B per element); DeepSpeed stage 3 (2021, partition_parameters.py
    // _allgather_param: torch.zeros of the full flat buffer, 2 B, then torch.distributed.all_gather into
    // a list of partitions, which ProcessGroupNCCL runs on a flattened copy and copies out, 2 + 2 B): 6
    // B, the copy out being one copy_ per partition (ProcessGroupNCCL::allgather in PyTorch 1.8-1.10,
    // torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp: outputTensors[i][j].copy_(outputFlattened[i][j])
    // for each of the DP world's partitions): DP kernels, each paying the kernel overhead, so the
    // gather's fixed cost grows with the number of GPUs. FSDP1 (Composer) gathers into the flat
    // parameter itself: none.
    copy_out_bytes_ = layout_.framework == Framework::torchtitan  ? 4.0
                      : layout_.framework == Framework::pytorch   ? 4.0
                      : layout_.framework == Framework::deepspeed ? 6.0
                                                                  : 0.0;
    // Backward prefetch: the next group's all-gather is issued before the current group's gradient
    // computation (FSDP BACKWARD_PRE, FSDP2's explicit backward prefetch, DeepSpeed's trace prefetch),
    // overlapping it; or after it (FSDP1 BACKWARD_POST, Composer's default, composer/trainer/
    // dist_strategy.py set_fsdp_default; PyTorch torch/distributed/fsdp/api.py BackwardPrefetch: it
    // "overlaps the current reduce-scatter and the next gradient computation", not the next all-gather).
    backward_post_ = layout_.framework == Framework::composer;
    // Bytes per all-gathered parameter: 16-bit, or (fp8_param_gather) FP8 for the linear weights and
    // 16-bit for the rest, averaged over the stage's parameters.
    const double stage_linear_rank = static_cast<double>(stage_layers_) * model_.linear_params() / shape_.t;
    gather_bytes_ = layout_.fp8_weights_gathered_in_fp8() && stage_params_rank_ > 0
                        ? 2.0 - std::min(stage_linear_rank, stage_params_rank_) / stage_params_rank_
                        : 2.0;
    // DeepSpeed's BF16_Optimizer (bf16 + ZeRO-1) all-reduces the fp32 gradients, then all-gathers the
    // weights after its partitioned step.
    reduce_in_full_ = shape_.deepspeed && layout_.zero_stage == 1 && layout_.precision == Precision::bf16;
    // Distributed optimizer with overlapped parameter all-gather: the gathers of this iteration's
    // parameters are dispatched at its start, in forward order, and the first forward of each parameter
    // group waits for the bucket that holds it (Megatron-LM --overlap-param-gather: a forward pre-hook
    // waits per bucket).
    early_gather_ = sharded_ && layout_.overlap_param_gather && !zero3_;
}

/// The data-parallel flags: sharding, ZeRO stage, the expert-DP reduction, DeepSpeed's stage-3 path and
/// FSDP's gather and gradient-sync policy.
void StageBuilder::plan_data_parallel() {
    // ZeRO, FSDP and the distributed optimizer shard over the DP x CP group (Megatron-Core's
    // data-parallel group with context parallelism; torchtitan's FSDP mesh dp_shard x cp), the group DP
    // collectives run on (CommGroup::dp), as the memory model shards (static_piles.cpp): CP ranks hold the
    // same parameters, so their gradients are reduced even at dp = 1.
    dp_cp_ = static_cast<double>(layout_.dp) * layout_.cp;
    sharded_ = layout_.sharded_optimizer() && dp_cp_ > 1;
    zero2_ = layout_.zero_stage == 2 && dp_cp_ > 1;
    zero3_ = layout_.zero_stage >= 3 && dp_cp_ > 1;
    if (model_.moe() && zero3_)
        throw InputError(
            fmt::format("layout.zero_stage = {}: ZeRO-3 / FSDP with an MoE model (model.num_experts "
                        "= {}) is not modelled",
                        layout_.zero_stage, model_.num_experts));
    edp_reduce_ = model_.moe() && layout_.expert_dp() > 1;
    // DeepSpeed's own stage-3 coordinator (deepspeed_stage3.cpp); it has no pipeline engine path (stage 3
    // with PP is refused by DeepSpeed) and no frozen-base adapters here. A run that states
    // reshard_after_forward = false (not a DeepSpeed setting) keeps the generic gather-once path.
    ds3_ = layout_.deepspeed_stage3_2021();
    // ZeRO-3 / FSDP: reshard_after_forward = false keeps the gathered parameters from forward to backward
    // (no backward all-gather); under PP torchtitan also defers the reshard after backward to the last
    // micro-batch (torch/distributed/pipelining/stage.py), so each group is gathered once per step.
    rebackward_ = layout_.reshard_after_forward;
    keep_for_step_ = !layout_.reshard_after_forward && shape_.pp > 1;
    // ... and runs every backward but the last with requires_gradient_sync off (stage.py
    // backward_maybe_with_nosync for an FSDPModule: set_requires_gradient_sync(False), the post-backward run
    // by hand after the last): FSDP2 keeps the unsharded gradients, in the reduce dtype
    // (FSDPParam.to_accumulated_grad_if_needed), and reduce-scatters them once per step.
    grad_sync_last_ = zero3_ && shape_.pp > 1 &&
                      (layout_.framework == Framework::torchtitan || layout_.framework == Framework::pytorch);
}

void StageBuilder::plan_groups() {
    // Layers per model chunk: even, or one fewer where the embedding / loss counts in the split.
    // The global index of each chunk's first layer: the layers of the virtual stages before it (virtual stage
    // v is chunk v / pp of pipeline rank v % pp).
    const std::vector<std::int64_t> per_virtual_stage = virtual_stage_layers(model_, layout_);
    std::int64_t before = 0;
    for (std::size_t v = 0; v < per_virtual_stage.size(); ++v) {
        if (static_cast<int>(v % static_cast<std::size_t>(shape_.pp)) == r_) {
            const std::size_t c = v / static_cast<std::size_t>(shape_.pp);
            layers_of_chunk_[c] = static_cast<int>(per_virtual_stage[v]);
            first_layer_[c] = before;
        }
        before += per_virtual_stage[v];
    }
    // Routed experts on this GPU: num_experts / ep experts, each split over expert TP.
    const double expert_shards = static_cast<double>(layout_.ep) * layout_.expert_tp();
    for (int c = 0; c < shape_.vpp; ++c) {
        const int vs = c * shape_.pp + r_;
        const int chunk_layers = layers_of_chunk_[static_cast<std::size_t>(c)];
        std::vector<double> groups, trainable, experts;
        if (vs == shape_.last_vs) {
            groups.push_back(shape_.head_params_rank);
            trainable.push_back(shape_.head_trainable_rank);
            const double mtp_experts = model_.mtp_expert_params() / expert_shards;  // MTP's routed experts
            experts.push_back(shape_.frozen ? 0.0 : mtp_experts);
            stage_expert_rank_ += mtp_experts;
        }
        for (int i = chunk_layers; i-- > 0;) {  // backward order: the last layer first
            if (!model_.moe()) {
                groups.push_back(shape_.layer_params_rank);
                trainable.push_back(shape_.layer_trainable_rank);
                experts.push_back(0);
                continue;
            }
            // MoE model: the dense part of a layer (attention, norms, router, shared experts; Megatron's
            // dense parameters) is reduced over DP x CP, its routed experts over expert DP.
            const std::int64_t layer = first_layer_[static_cast<std::size_t>(c)] + i;
            double dense = model_.layer_dense_params(layer) / shape_.t;
            dense += model_.tp_replicated_attention_params() * (1.0 - 1.0 / shape_.t);
            const double expert = model_.layer_expert_params(layer) / expert_shards;
            groups.push_back(dense);
            trainable.push_back(shape_.frozen ? adapter_params_per_layer(model_, layout_) / shape_.t : dense);
            experts.push_back(shape_.frozen ? 0.0 : expert);
            stage_expert_rank_ += expert;
        }
        if (vs == 0) {
            groups.push_back(shape_.emb_params_rank);
            trainable.push_back(shape_.emb_trainable_rank);
            experts.push_back(0);
        }
        for (double g : groups)
            stage_params_rank_ += g;
        for (double g : trainable)
            stage_trainable_rank_ += g;
        buckets_[static_cast<std::size_t>(c)] = make_buckets(trainable, shape_.bucket_elements);
        if (model_.moe())
            expert_buckets_[static_cast<std::size_t>(c)] = make_buckets(experts, shape_.bucket_elements);
        group_elements_[static_cast<std::size_t>(c)] = groups;
        group_trainable_[static_cast<std::size_t>(c)] = trainable;
        if (vs == 0) sp_.embedding_params += shape_.emb_params_rank * shape_.t;
        if (vs == shape_.last_vs) sp_.embedding_params += shape_.head_params_rank * shape_.t;
        sp_.has_embedding = sp_.has_embedding || vs == 0;
        sp_.has_head = sp_.has_head || vs == shape_.last_vs;
    }
    // MoE: the routed experts count as parameters of this GPU (params / t is per GPU, as the memory model
    // reads it); expert_params_rank says how many of them are experts (sharded over expert DP).
    sp_.params = (stage_params_rank_ + stage_expert_rank_) * shape_.t;
    sp_.trainable_params = (stage_trainable_rank_ + (shape_.frozen ? 0.0 : stage_expert_rank_)) * shape_.t;
    sp_.expert_params_rank = stage_expert_rank_;
    sp_.layers = stage_layers_;
}

void StageBuilder::mark(MemoryEvent e, double elements) {
    sp_.memory_marks.push_back(MemoryMark{sp_.ops.size(), e, elements});
}

void StageBuilder::layer_mark(MemoryEvent e, bool moe) {
    sp_.memory_marks.push_back(MemoryMark{sp_.ops.size(), e, 0.0, model_.moe() && !moe});
}

void StageBuilder::append_copy_out(double elements, Phase phase, int mb) {
    if (copy_out_bytes_ <= 0 || elements <= 0) return;
    auto it = copy_out_.find(elements);
    if (it == copy_out_.end())
        it = copy_out_
                 .emplace(elements,
                          ds3_ ? blocks_.list_all_gather_copy_out(elements, layout_.dp)
                               : blocks_.memory_pass("zero3_all_gather_copy_out", copy_out_bytes_ * elements))
                 .first;
    append(sp_.ops, it->second, phase, mb);
}

void StageBuilder::dp_launch(CollectiveKind kind, double bytes, CommGroup group) {
    if (group == CommGroup::edp ? !edp_reduce_ : dp_cp_ <= 1) return;
    Op op;
    op.kind = OpKind::dp_launch;
    op.group = group;
    op.phase = Phase::backward;
    op.collective = kind;
    op.bytes = bytes;
    sp_.ops.push_back(op);
    ++dp_launched_;
}

void StageBuilder::dp_wait(int target, Phase phase) {
    if (dp_cp_ <= 1 && !edp_reduce_) return;
    Op op;
    op.kind = OpKind::dp_wait;
    op.phase = phase;
    op.dp_target = target;
    sp_.ops.push_back(op);
}

int StageBuilder::param_gather(double elements) {
    dp_launch(CollectiveKind::all_gather, elements * gather_bytes_);
    return dp_launched_ - 1;
}

void StageBuilder::launch_grad_bucket(const Bucket& b) {
    dp_launch(sharded_ && !reduce_in_full_ ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
              b.elements * shape_.grad_bytes);
}

void StageBuilder::launch_expert_grad_bucket(const Bucket& b) {
    dp_launch(layout_.sharded_optimizer() ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
              b.elements * shape_.grad_bytes, CommGroup::edp);
}

bool StageBuilder::moe_layer(int chunk, int index) const {
    return model_.moe() && model_.layer_is_moe(first_layer_[static_cast<std::size_t>(chunk)] + index);
}

void StageBuilder::launch_param_gather(int chunk) {
    // Parameters are all-gathered in 16-bit (or FP8, see gather_bytes_), in forward order.
    const auto& bs = buckets_[static_cast<std::size_t>(chunk)];
    for (auto it = bs.rbegin(); it != bs.rend(); ++it) {
        dp_launch(CollectiveKind::all_gather, it->elements * gather_bytes_);
        sp_.ops.back().phase = Phase::forward;
    }
    const auto& es = expert_buckets_[static_cast<std::size_t>(chunk)];
    for (auto it = es.rbegin(); it != es.rend() && edp_reduce_ && layout_.sharded_optimizer(); ++it) {
        dp_launch(CollectiveKind::all_gather, it->elements * gather_bytes_, CommGroup::edp);
        sp_.ops.back().phase = Phase::forward;
    }
}

void StageBuilder::wait_for_group(int chunk, int group, bool experts) {
    // The chunk's gathers were launched from gather_base_: its dense buckets in forward order (the last
    // bucket first), then its expert buckets likewise (launch_param_gather); the DP stream completes them in
    // that order, so the wait's target counts up to the bucket's gather.
    const auto ci = static_cast<std::size_t>(chunk);
    const auto& bs = buckets_[ci];
    int target = 0;
    for (std::size_t k = 0; k < bs.size(); ++k)
        if (group <= bs[k].closes_after) {
            target = gather_base_[ci] + static_cast<int>(bs.size() - k);
            break;
        }
    if (experts && edp_reduce_ && layout_.sharded_optimizer()) {
        const auto& es = expert_buckets_[ci];
        for (std::size_t k = 0; k < es.size(); ++k)
            if (group <= es[k].closes_after) {
                target = std::max(target, gather_base_[ci] + static_cast<int>(bs.size() + es.size() - k));
                break;
            }
    }
    if (target > 0) dp_wait(target, Phase::forward);
}

void StageBuilder::p2p(OpKind kind, int direction, int vs, int mb, Phase phase) {
    Op op;
    op.kind = kind;
    op.phase = phase;
    op.direction = direction;
    op.virtual_stage = vs;
    op.micro_batch = mb;
    op.bytes = shape_.p2p_bytes;
    sp_.ops.push_back(op);
}

void StageBuilder::recv(int direction, int vs, int mb, Phase phase) {
    p2p(OpKind::recv, direction, vs, mb, phase);
    if (shape_.gather_after_recv) {
        Op ag;
        ag.kind = OpKind::tp_launch;
        ag.phase = phase;
        ag.collective = CollectiveKind::all_gather;
        ag.bytes = shape_.act_bytes;
        ag.micro_batch = mb;
        sp_.ops.push_back(ag);
        Op w;
        w.kind = OpKind::tp_wait;
        w.phase = phase;
        w.micro_batch = mb;
        sp_.ops.push_back(w);
    }
}

void StageBuilder::send(int direction, int to_vs, int mb, Phase phase) {
    p2p(OpKind::send, direction, to_vs, mb, phase);
}

StageProgram StageBuilder::build() {
    if (early_gather_)
        for (int c = 0; c < shape_.vpp; ++c) {
            gather_base_[static_cast<std::size_t>(c)] = dp_launched_;
            launch_param_gather(c);
        }
    const bool combine = combines_passes();
    const auto items = pipeline_schedule(layout_.schedule, shape_.pp, r_, shape_.m, shape_.vpp, combine);
    reserve_ops(items.size());
    if (ds3_) {
        deepspeed_stage3(items);
    } else {
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (combine && items[i].steady && i + 1 < items.size() && !items[i + 1].forward) {
                combined_pass(items[i], items[i + 1]);
                ++i;
            } else if (items[i].forward) {
                forward_pass(items[i]);
            } else {
                backward_pass(items[i]);
            }
        }
    }
    finish_step();
    return std::move(sp_);
}

void StageBuilder::reuse_ops(std::vector<Op>&& storage) {
    storage.clear();
    storage.insert(storage.end(), sp_.ops.begin(), sp_.ops.end());
    sp_.ops.swap(storage);
}

void StageBuilder::reserve_ops(std::size_t items) {
    // An estimate of the ops to come, so that the list is not copied as it grows (a small-cluster sweep
    // builds thousands of programs of millions of ops): each pass's layers at the larger of the forward
    // and the recompute-and-backward templates, plus a few ops per layer for gathers, waits and messages.
    std::size_t per_layer = 0;
    for (const auto* t : {&tpl_.layer_fwd, &tpl_.moe_fwd, &tpl_.mtp_fwd})
        per_layer = std::max(per_layer, t->size());
    per_layer = std::max(per_layer, tpl_.layer_rec.size() + tpl_.layer_bwd.size());
    per_layer = std::max(per_layer, tpl_.moe_rec.size() + tpl_.moe_bwd.size());
    const int layers = *std::max_element(layers_of_chunk_.begin(), layers_of_chunk_.end());
    const std::size_t ends =
        tpl_.emb_fwd.size() + tpl_.emb_bwd.size() + tpl_.head_fwd.size() + tpl_.head_bwd.size();
    sp_.ops.reserve(sp_.ops.size() + items * (static_cast<std::size_t>(layers) * (per_layer + 4) + ends + 8));
}

void StageBuilder::forward_pass(const ScheduleItem& item) {
    const int c = item.chunk;
    const auto ci = static_cast<std::size_t>(c);
    const int vs = c * shape_.pp + r_;
    const int mb = item.micro_batch;
    const int chunk_layers = layers_of_chunk_[ci];
    const bool first = early_gather_ && !chunk_started_[ci];
    chunk_started_[ci] = true;
    const int groups = (vs == shape_.last_vs ? 1 : 0) + chunk_layers + (vs == 0 ? 1 : 0);
    const auto& elems = group_elements_[ci];
    // ZeRO-3 / FSDP: each parameter group is all-gathered just in time, the next one prefetched while this
    // one computes (PyTorch FSDP forward prefetch, DeepSpeed stage-3 prefetch).
    int gathered = -1;
    auto gather = [&](int k) {  // all-gather of forward-order group k
        const double e = elems[static_cast<std::size_t>(groups - 1 - k)];
        const int id = param_gather(e);
        mark(MemoryEvent::params_gathered, e);
        return id;
    };
    const bool skip_gather = keep_for_step_ && kept_[ci];
    kept_[ci] = true;
    auto zero3_gather = [&](int k) {  // k: forward-order index of the group about to run
        if (!zero3_ || skip_gather) return;
        if (gathered < 0) gathered = gather(k);
        const int next = k + 1 < groups ? gather(k + 1) : -1;
        dp_wait(gathered + 1, Phase::forward);
        gathered = next;
        append_copy_out(elems[static_cast<std::size_t>(groups - 1 - k)], Phase::forward, mb);
    };
    auto zero3_release = [&](int k) {  // after the compute of forward-order group k
        if (zero3_ && rebackward_)
            mark(MemoryEvent::params_released, elems[static_cast<std::size_t>(groups - 1 - k)]);
    };
    // TransformerEngine's delayed-scaling FP8 casts every weight (and its transpose) once per step, in the
    // first micro-batch's forward (per chunk: its own layer count).
    if (mb == 0) {
        int moe_layers = 0;
        for (int i = 0; i < chunk_layers; ++i)
            moe_layers += moe_layer(c, i) ? 1 : 0;
        const auto weight_casts =
            blocks_.fp8_weight_casts_per_step(static_cast<double>(chunk_layers - moe_layers), moe_layers);
        if (!weight_casts.empty()) append(sp_.ops, weight_casts, Phase::forward, mb);
    }
    if (vs > 0) recv(+1, vs, mb, Phase::forward);
    int k = 0;
    if (vs == 0) {
        if (first) wait_for_group(c, groups - 1);
        zero3_gather(k);
        append(sp_.ops, tpl_.emb_fwd, Phase::forward, mb);
        mark(MemoryEvent::embedding_forward);
        zero3_release(k++);
    }
    for (int i = 0; i < chunk_layers; ++i) {
        if (first) wait_for_group(c, (vs == shape_.last_vs ? 1 : 0) + chunk_layers - 1 - i, moe_layer(c, i));
        zero3_gather(k);
        const std::size_t begin = sp_.ops.size();
        append(sp_.ops, moe_layer(c, i) ? tpl_.moe_fwd : tpl_.layer_fwd, Phase::forward, mb);
        layer_mark(layout_.layer_recomputed(i) || layout_.recompute == Recompute::none
                       ? MemoryEvent::layer_forward
                       : MemoryEvent::layer_forward_kept,
                   moe_layer(c, i));
        if (spans_)
            spans_->push_back({begin, begin, sp_.ops.size(), moe_layer(c, i) ? 0 : tpl_.layer_fwd_split});
        offload_after_forward(i, mb);
        zero3_release(k++);
    }
    if (vs == shape_.last_vs) {
        if (first) wait_for_group(c, 0);
        zero3_gather(k);
        mtp_forward(mb);
        append(sp_.ops, tpl_.head_fwd, Phase::forward, mb);
        mark(MemoryEvent::head_forward);
        zero3_release(k++);
    } else {
        send(+1, vs + 1, mb, Phase::forward);
    }
    in_flight_ += 1.0 / shape_.vpp;
    sp_.peak_in_flight_microbatches = std::max(sp_.peak_in_flight_microbatches, in_flight_);
}

/// A backward pass's progress over the chunk's parameter groups (backward order).
struct StageBuilder::BackwardState {
    int chunk = 0, mb = 0, groups = 0;
    bool first_backward = false, last_backward = false;
    bool overlap = false;  ///< gradient buckets reduced as they fill
    std::size_t next_bucket = 0;
    std::size_t next_expert_bucket = 0;
    int group = 0;         ///< index of the param group whose gradients are complete next
    int gathered = -1;     ///< ZeRO-3: DP index of the all-gather in flight for the next group, or -1
    double unsharded = 0;  ///< ZeRO-3: the previous group's gradients, until its reduce-scatter
};

void StageBuilder::backward_group_start(BackwardState& s) {
    // ZeRO-3 / FSDP backward: gather the group's parameters again (prefetching the next).
    if (!zero3_ || !rebackward_) return;
    const auto& elems = group_elements_[static_cast<std::size_t>(s.chunk)];
    auto gather = [&](int g) {
        const double e = elems[static_cast<std::size_t>(g)];
        const int id = param_gather(e);
        mark(MemoryEvent::params_gathered, e);
        return id;
    };
    if (s.gathered < 0) s.gathered = gather(s.group);
    const int next = !backward_post_ && s.group + 1 < s.groups ? gather(s.group + 1) : -1;
    dp_wait(s.gathered + 1, Phase::backward);
    s.gathered = next;
    append_copy_out(elems[static_cast<std::size_t>(s.group)], Phase::backward, s.mb);
}

void StageBuilder::backward_group_done(BackwardState& s) {
    const auto ci = static_cast<std::size_t>(s.chunk);
    const auto& elems = group_elements_[ci];
    const double g = group_trainable_[ci][static_cast<std::size_t>(s.group)];
    if (zero3_) {
        if (!keep_for_step_ || s.last_backward)
            mark(MemoryEvent::params_released, elems[static_cast<std::size_t>(s.group)]);
        // BACKWARD_POST: the next group's all-gather is issued after this group's gradient computation,
        // ahead of its reduce-scatter on the one NCCL stream.
        if (backward_post_ && rebackward_ && s.group + 1 < s.groups) {
            const double e = elems[static_cast<std::size_t>(s.group + 1)];
            s.gathered = param_gather(e);
            mark(MemoryEvent::params_gathered, e);
        }
        if (s.unsharded > 0) mark(MemoryEvent::grads_reduced, s.unsharded);
        s.unsharded = 0;
        // Under PP with FSDP2 (torchtitan, plain PyTorch) the pipeline stage runs every backward but the
        // last with requires_gradient_sync off: the unsharded gradients accumulate in the reduce dtype from
        // the first backward and are reduce-scattered once, after the last (grad_sync_last_).
        if (g > 0 && (!grad_sync_last_ || s.first_backward)) mark(MemoryEvent::grads_unsharded, g);
        if (g > 0 && (!grad_sync_last_ || s.last_backward)) {
            dp_launch(CollectiveKind::reduce_scatter, g * shape_.grad_bytes);
            s.unsharded = g;
        }
    } else {
        const auto& bs = buckets_[ci];
        if (s.overlap && s.next_bucket < bs.size() && bs[s.next_bucket].closes_after == s.group)
            launch_grad_bucket(bs[s.next_bucket++]);
        const auto& es = expert_buckets_[ci];
        if (s.overlap && s.next_expert_bucket < es.size() && es[s.next_expert_bucket].closes_after == s.group)
            launch_expert_grad_bucket(es[s.next_expert_bucket++]);
    }
    ++s.group;
}

void StageBuilder::backward_pass(const ScheduleItem& item) {
    const int c = item.chunk;
    const auto ci = static_cast<std::size_t>(c);
    const int vs = c * shape_.pp + r_;
    const int mb = item.micro_batch;
    const int chunk_layers = layers_of_chunk_[ci];
    BackwardState s;
    s.chunk = c;
    s.mb = mb;
    s.groups = static_cast<int>(group_elements_[ci].size());
    s.last_backward = ++backward_count_[ci] == shape_.m;
    s.first_backward = backward_count_[ci] == 1;
    // ZeRO-2 (DeepSpeed) reduces the gradients of every micro-batch as its buckets fill; Megatron's DDP and
    // distributed optimizer only in the last micro-batch (no_sync before), when overlapped.
    s.overlap = (layout_.overlap_grad_reduce && s.last_backward) || zero2_;
    if (vs < shape_.last_vs) recv(-1, vs, mb, Phase::backward);
    if (vs == shape_.last_vs) {
        backward_group_start(s);
        append(sp_.ops, tpl_.head_bwd, Phase::backward, mb);
        mark(MemoryEvent::head_backward);
        mtp_backward(mb);
        backward_group_done(s);
    }
    for (int i = 0; i < chunk_layers; ++i) {
        backward_group_start(s);
        offload_before_backward(chunk_layers - 1 - i, mb);
        const bool moe = moe_layer(c, chunk_layers - 1 - i);
        const std::size_t begin = sp_.ops.size();
        if (layout_.layer_recomputed(chunk_layers - 1 - i)) {  // backward runs the last layer first
            append(sp_.ops, moe ? tpl_.moe_rec : tpl_.layer_rec, Phase::recompute, mb);
            layer_mark(MemoryEvent::layer_recomputed, moe);
        }
        const std::size_t mid = sp_.ops.size();
        append(sp_.ops, moe ? tpl_.moe_bwd : tpl_.layer_bwd, Phase::backward, mb);
        layer_mark(MemoryEvent::layer_backward, moe);
        if (spans_) spans_->push_back({begin, mid, sp_.ops.size(), moe ? 0 : tpl_.layer_bwd_split});
        backward_group_done(s);
    }
    if (vs == 0) {
        backward_group_start(s);
        append(sp_.ops, tpl_.emb_bwd, Phase::backward, mb);
        mark(MemoryEvent::embedding_backward);
        backward_group_done(s);
    }
    // DeepSpeed BF16_Optimizer: the micro-batch's gradients go into the fp32 copies before the pipeline
    // engine sends the input gradient on (its BackwardPass instruction ends with it).
    if (layout_.deepspeed_bf16_optimizer()) {
        double chunk_trainable = 0;
        for (double g : group_trainable_[ci])
            chunk_trainable += g;
        append(sp_.ops, tpl_.hp_accumulate_for(blocks_, chunk_trainable), Phase::backward, mb);
    }
    if (vs > 0) send(-1, vs - 1, mb, Phase::backward);
    // The last group's reduce-scatter is in flight; its buffer is counted until the pass ends.
    if (s.unsharded > 0) mark(MemoryEvent::grads_reduced, s.unsharded);
    in_flight_ -= 1.0 / shape_.vpp;
}

void StageBuilder::offload_wait(const char* name, int group, int hiding_layer, bool backward, int count,
                                int mb) {
    const bool group_moe = moe_layer(0, group), hiding_moe = moe_layer(0, hiding_layer);
    const auto key = std::make_tuple(std::string(name), group_moe, hiding_moe, backward, count);
    auto it = offload_waits_.find(key);
    if (it == offload_waits_.end()) {
        const OpTemplate& hiding = backward ? (hiding_moe ? tpl_.moe_bwd : tpl_.layer_bwd)
                                            : (hiding_moe ? tpl_.moe_fwd : tpl_.layer_fwd);
        const auto copy = model_.moe() && !group_moe ? ActivationCopy::dense_layer : ActivationCopy::layer;
        it = offload_waits_.emplace(key, blocks_.activation_copy_wait(name, copy, hiding, count)).first;
    }
    append(sp_.ops, it->second, backward ? Phase::backward : Phase::forward, mb);
}

void StageBuilder::offload_after_forward(int i, int mb) {
    // TE: group 0's copy starts after layer 0; at the end of layer w(k) the main stream waits for group k's
    // copy (started after layer w(k-1), or layer 0), frees its GPU copy and starts group k+1's.
    const auto& w = offload_windows_;
    const auto k = std::find(w.begin(), w.end(), i) - w.begin();
    if (k == static_cast<std::ptrdiff_t>(w.size())) return;
    const auto started = k == 0 ? 0 : w[static_cast<std::size_t>(k - 1)];
    offload_wait("activation_offload_d2h", static_cast<int>(k), i, false, static_cast<int>(i - started), mb);
    mark(MemoryEvent::activations_offloaded, static_cast<double>(i - k));
}

void StageBuilder::offload_before_backward(int i, int mb) {
    // TE: at the start of layer w(j)'s backward the main stream waits for the copy back of group j+1 (started
    // at layer w(j+1)), then starts group j's; at layer 0's it waits for group 0's (started at layer w(0)).
    const auto& w = offload_windows_;
    if (w.empty()) return;
    const auto j = std::find(w.begin(), w.end(), i) - w.begin();
    const auto n = static_cast<std::ptrdiff_t>(w.size());
    if (j < n) {
        if (j + 1 < n)
            offload_wait("activation_reload_h2d", static_cast<int>(j + 1), i, true,
                         static_cast<int>(w[static_cast<std::size_t>(j + 1)] - i), mb);
        mark(MemoryEvent::activations_reloaded, static_cast<double>(i - j));
    } else if (i == 0) {
        offload_wait("activation_reload_h2d", 0, i, true, static_cast<int>(w[0]), mb);
    }
}

void StageBuilder::mtp_forward(int mb) {
    // Each MTP layer on the loss stage: the next token's embedding, its own ops, a transformer layer of the
    // last decoder layer's kind, then the shared output layer and loss (model.hpp, mtp_layers).
    const bool moe = model_.layer_is_moe(model_.layers - 1);
    for (std::int64_t j = 0; j < model_.mtp_layers; ++j) {
        append(sp_.ops, tpl_.emb_fwd, Phase::forward, mb);
        mark(MemoryEvent::embedding_forward);
        append(sp_.ops, tpl_.mtp_fwd, Phase::forward, mb);
        append(sp_.ops, moe ? tpl_.moe_fwd : tpl_.layer_fwd, Phase::forward, mb);
        layer_mark(MemoryEvent::layer_forward,
                   moe);  // recomputed (mtp_backward) whenever the decoder's layers are
        append(sp_.ops, tpl_.head_fwd, Phase::forward, mb);
        mark(MemoryEvent::head_forward);
    }
}

void StageBuilder::mtp_backward(int mb) {
    const bool moe = model_.layer_is_moe(model_.layers - 1);
    for (std::int64_t j = 0; j < model_.mtp_layers; ++j) {
        append(sp_.ops, tpl_.head_bwd, Phase::backward, mb);
        mark(MemoryEvent::head_backward);
        if (layout_.recompute != Recompute::none) {
            append(sp_.ops, moe ? tpl_.moe_rec : tpl_.layer_rec, Phase::recompute, mb);
            layer_mark(MemoryEvent::layer_recomputed, moe);
        }
        append(sp_.ops, moe ? tpl_.moe_bwd : tpl_.layer_bwd, Phase::backward, mb);
        layer_mark(MemoryEvent::layer_backward, moe);
        append(sp_.ops, tpl_.mtp_bwd, Phase::backward, mb);
        append(sp_.ops, tpl_.emb_bwd, Phase::backward, mb);
        mark(MemoryEvent::embedding_backward);
    }
}

void StageBuilder::finish_step() {
    if (!layout_.overlap_grad_reduce && !zero2_ && !zero3_)
        for (int c = 0; c < shape_.vpp; ++c) {
            for (const auto& b : buckets_[static_cast<std::size_t>(c)])
                launch_grad_bucket(b);
            for (const auto& b : expert_buckets_[static_cast<std::size_t>(c)])
                launch_expert_grad_bucket(b);
        }
    dp_wait(dp_launched_, Phase::backward);
    // Tied input embedding and output layer on different stages: Megatron-LM (finalize_model_grads,
    // _allreduce_embedding_grads) and DeepSpeed (tied modules) all-reduce the embedding's gradients
    // between the first and the last stage after the backward pass, before the optimizer step.
    const bool holds_tied_copy = r_ == 0 || r_ == shape_.pp - 1;
    if (shares_embedding(model_) && shape_.pp > 1 && holds_tied_copy) {
        Op ar;
        ar.kind = OpKind::tp_launch;
        ar.group = CommGroup::embedding;
        ar.phase = Phase::backward;
        ar.collective = CollectiveKind::all_reduce;
        ar.bytes = shape_.emb_params_rank * shape_.grad_bytes;
        sp_.ops.push_back(ar);
        Op w;
        w.kind = OpKind::tp_wait;
        w.phase = Phase::backward;
        sp_.ops.push_back(w);
    }
    if (layout_.deepspeed_bf16_optimizer())
        append(sp_.ops, blocks_.bf16_step_gradient_passes(stage_trainable_rank_), Phase::optimizer, -1);
    double optimizer_params = sharded_ ? stage_trainable_rank_ / dp_cp_ : stage_trainable_rank_;
    if (model_.moe() && !shape_.frozen)  // routed experts: sharded over expert DP
        optimizer_params +=
            layout_.sharded_optimizer() ? stage_expert_rank_ / layout_.expert_dp() : stage_expert_rank_;
    append(sp_.ops, blocks_.optimizer(optimizer_params), Phase::optimizer, -1);
    if (sharded_ && !early_gather_ && !zero3_) {
        for (int c = 0; c < shape_.vpp; ++c)
            launch_param_gather(c);
        dp_wait(dp_launched_, Phase::optimizer);
    }
}

}  // namespace trainsim::detail
