// Expands a pipeline schedule into each stage's ops: per micro-batch the forward and backward of the stage's
// layers (with recomputation), embedding and LM head on the first and last virtual stage, P2P transfers
// between stages, the DP gradient reduction in buckets, and the optimizer step.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "layer_ops.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

namespace {

// DeepSpeed ZeRO-3 as its 2021 releases ran it (v0.3.12, the first with stage 3, to v0.5.8): the defaults of
// deepspeed/runtime/zero/constants.py at those tags (stage3_prefetch_bucket_size, stage3_max_live_parameters,
// stage3_max_reuse_distance, reduce_bucket_size), in parameter elements (ds_numel, the unpartitioned size).
constexpr double kDs3PrefetchBucketElements = 5e7;
constexpr double kDs3MaxLiveElements = 1e9;
constexpr double kDs3MaxReuseDistanceElements = 1e9;
constexpr double kDs3ReduceBucketElements = 5e8;
// contiguous_gradients defaults to False for stage 3 up to v0.4.x (ZERO3_OPTIMIZATION_CONTIGUOUS_GRADIENTS_
// DEFAULT, constants.py v0.3.12-v0.4.5; True from v0.5.0): stage3.py reduce_ipg_grads then takes
// buffered_reduce_fallback -> allreduce_bucket, a dist.all_reduce of the flattened 16-bit bucket, and keeps
// the owned slice afterwards (partition_previous_reduced_grads). Narayanan et al. 2021 (April 2021) ran one
// of those releases.
constexpr CollectiveKind kDs3GradReduce = CollectiveKind::all_reduce;

struct Bucket {
    double elements = 0;  ///< parameters per rank in this bucket
    int closes_after =
        0;  ///< index, in backward order of the chunk's param groups, of the group that fills it
};

/// Splits a chunk's parameter groups (in backward order) into DP buckets of at least `bucket_elements`, as
/// Megatron-LM's DistributedDataParallel fills buckets in reverse parameter order.
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

void append(std::vector<Op>& ops, const detail::OpTemplate& t, Phase phase, int mb) {
    for (Op op : t) {
        op.phase = phase;
        op.micro_batch = mb;
        ops.push_back(op);
    }
}

}  // namespace

Program build_program(const ModelSpec& model, const Layout& layout) {
    Program prog;
    detail::BlockBuilder blocks(model, layout, prog.segments);
    const auto layer_fwd = blocks.layer_forward();
    const auto layer_bwd = blocks.layer_backward();
    const auto layer_rec = blocks.layer_recompute();
    const auto emb_fwd = blocks.embedding_forward();
    const auto emb_bwd = blocks.embedding_backward();
    const auto head_fwd = blocks.head_forward();
    const auto head_bwd = blocks.head_backward();
    // DeepSpeed ZeRO-3: the layer cut into its fetch units (see the stage loop).
    const bool ds3_any = layout.framework == Framework::deepspeed && layout.zero_stage >= 3 && layout.dp > 1;
    const auto ds3_fwd_units = ds3_any ? blocks.layer_forward_units() : std::vector<detail::OpTemplate>{};
    const auto ds3_bwd_units = ds3_any ? blocks.layer_backward_units() : std::vector<detail::OpTemplate>{};
    const auto ds3_weights = blocks.layer_linear_unit_weights();
    const auto ds3_biases = blocks.layer_linear_unit_biases();
    // DeepSpeed BF16_Optimizer's per-micro-batch gradient accumulation, one template per parameter count.
    std::map<double, detail::OpTemplate> hp_accumulate;
    auto hp_accumulate_for = [&](double params) -> const detail::OpTemplate& {
        auto it = hp_accumulate.find(params);
        if (it == hp_accumulate.end())
            it = hp_accumulate.emplace(params, blocks.bf16_hp_grad_accumulate(params)).first;
        return it->second;
    };

    const int pp = layout.pp;
    const int vpp = layout.vpp;
    const int m = static_cast<int>(layout.micro_batches());
    const int last_vs = pp * vpp - 1;
    const double t = layout.tp;
    const double act_bytes = static_cast<double>(layout.micro_batch * model.seq_len * model.hidden) *
                             layout.activation_bytes() / layout.cp;
    // P2P message per rank: with TP, each rank sends its 1/t share (sequence parallelism shards the
    // activation; without it, Megatron's scatter-gather optimization, Narayanan et al. 2021 Sec. 4.1, splits
    // it and the receiver all-gathers over NVLink).
    // (DeepSpeed's pipeline engine does the same: is_pipe_partitioned / is_grad_partitioned when model
    // parallel, PartitionedTensor rebuilt with an all-gather by the receiver.)
    const bool deepspeed = layout.framework == Framework::deepspeed;
    const double p2p_bytes = act_bytes / t;
    const bool gather_after_recv = layout.tp > 1 && !layout.sequence_parallel;
    const double grad_bytes = layout.grad_reduce_bytes_per_element();
    const double bucket_elements = layout.dp_bucket_bytes / 4.0;
    const double layer_params_rank = model.layer_params() / t;
    const double emb_params_rank = model.embedding_params() / t;
    const double head_params_rank =
        model.output_params() / t +
        (model.tied_embeddings && last_vs > 0 ? model.embedding_params() / t : 0.0);
    // Trainable parameters per group: everything, or only the LoRA / QLoRA adapters (base frozen: no
    // gradients, no optimizer state, nothing reduced over DP for it).
    const bool frozen = layout.frozen_base();
    const double layer_trainable_rank =
        frozen ? adapter_params_per_layer(model, layout) / t : layer_params_rank;
    const double emb_trainable_rank = frozen ? 0.0 : emb_params_rank;
    const double head_trainable_rank = frozen ? 0.0 : head_params_rank;

    for (int r = 0; r < pp; ++r) {
        StageProgram sp;
        const std::int64_t stage_layers = layers_on_stage(model, layout, r);
        // Layers per model chunk: even, or one fewer where the embedding / loss counts in the split.
        std::vector<int> layers_of_chunk(static_cast<std::size_t>(vpp));
        for (int c = 0; c < vpp; ++c)
            layers_of_chunk[static_cast<std::size_t>(c)] =
                static_cast<int>(layers_on_virtual_stage(model, layout, r, c));
        // Parameter groups and buckets per chunk, in backward order.
        std::vector<std::vector<Bucket>> buckets(static_cast<std::size_t>(vpp));
        // Parameters (all-gathered by ZeRO-3) and trainable parameters (gradients) per group, backward order.
        std::vector<std::vector<double>> group_elements(static_cast<std::size_t>(vpp));
        std::vector<std::vector<double>> group_trainable(static_cast<std::size_t>(vpp));
        std::vector<int> backward_count(static_cast<std::size_t>(vpp), 0);
        double stage_params_rank = 0, stage_trainable_rank = 0;
        for (int c = 0; c < vpp; ++c) {
            const int vs = c * pp + r;
            const int chunk_layers = layers_of_chunk[static_cast<std::size_t>(c)];
            std::vector<double> groups, trainable;
            if (vs == last_vs) {
                groups.push_back(head_params_rank);
                trainable.push_back(head_trainable_rank);
            }
            for (int i = 0; i < chunk_layers; ++i) {
                groups.push_back(layer_params_rank);
                trainable.push_back(layer_trainable_rank);
            }
            if (vs == 0) {
                groups.push_back(emb_params_rank);
                trainable.push_back(emb_trainable_rank);
            }
            for (double g : groups)
                stage_params_rank += g;
            for (double g : trainable)
                stage_trainable_rank += g;
            buckets[static_cast<std::size_t>(c)] = make_buckets(trainable, bucket_elements);
            group_elements[static_cast<std::size_t>(c)] = groups;
            group_trainable[static_cast<std::size_t>(c)] = trainable;
            if (vs == 0) sp.embedding_params += emb_params_rank * t;
            if (vs == last_vs) sp.embedding_params += head_params_rank * t;
            sp.has_embedding = sp.has_embedding || vs == 0;
            sp.has_head = sp.has_head || vs == last_vs;
        }
        sp.params = stage_params_rank * t;
        sp.trainable_params = stage_trainable_rank * t;
        sp.layers = stage_layers;
        auto mark = [&](MemoryEvent e, double elements = 0) {
            sp.memory_marks.push_back(MemoryMark{sp.ops.size(), e, elements});
        };
        const bool sharded = layout.sharded_optimizer() && layout.dp > 1;
        const bool zero2 = layout.zero_stage == 2 && layout.dp > 1;
        const bool zero3 = layout.zero_stage >= 3 && layout.dp > 1;
        // DeepSpeed's own stage-3 coordinator (below); it has no pipeline engine path (stage 3 with PP is
        // refused by DeepSpeed) and no frozen-base adapters here. A run that states reshard_after_forward =
        // false (not a DeepSpeed setting) keeps the generic gather-once path.
        const bool ds3 = deepspeed && zero3 && pp == 1 && vpp == 1 && !frozen && layout.reshard_after_forward;
        // ZeRO-3 / FSDP: reshard_after_forward = false keeps the gathered parameters from forward to backward
        // (no backward all-gather); under PP torchtitan also defers the reshard after backward to the last
        // micro-batch (torch/distributed/pipelining/stage.py), so each group is gathered once per step.
        const bool rebackward = layout.reshard_after_forward;
        const bool keep_for_step = !layout.reshard_after_forward && pp > 1;
        std::vector<bool> kept(static_cast<std::size_t>(vpp), false);
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
        const double copy_out_bytes = layout.framework == Framework::torchtitan  ? 4.0
                                      : layout.framework == Framework::pytorch   ? 4.0
                                      : layout.framework == Framework::deepspeed ? 6.0
                                                                                 : 0.0;
        // Backward prefetch: the next group's all-gather is issued before the current group's gradient
        // computation (FSDP BACKWARD_PRE, FSDP2's explicit backward prefetch, DeepSpeed's trace prefetch),
        // overlapping it; or after it (FSDP1 BACKWARD_POST, Composer's default, composer/trainer/
        // dist_strategy.py set_fsdp_default; PyTorch torch/distributed/fsdp/api.py BackwardPrefetch: it
        // "overlaps the current reduce-scatter and the next gradient computation", not the next all-gather).
        const bool backward_post = layout.framework == Framework::composer;
        std::map<double, detail::OpTemplate> copy_out;
        auto append_copy_out = [&](double elements, Phase phase, int mb) {
            if (copy_out_bytes <= 0 || elements <= 0) return;
            auto it = copy_out.find(elements);
            if (it == copy_out.end())
                it = copy_out
                         .emplace(elements, ds3 ? blocks.list_all_gather_copy_out(elements, layout.dp)
                                                : blocks.memory_pass("zero3_all_gather_copy_out",
                                                                     copy_out_bytes * elements))
                         .first;
            append(sp.ops, it->second, phase, mb);
        };
        int dp_launched = 0;
        auto dp_launch = [&](CollectiveKind kind, double bytes) {
            if (layout.dp <= 1) return;
            Op op;
            op.kind = OpKind::dp_launch;
            op.phase = Phase::backward;
            op.collective = kind;
            op.bytes = bytes;
            sp.ops.push_back(op);
            ++dp_launched;
        };
        auto dp_wait = [&](int target, Phase phase) {
            if (layout.dp <= 1) return;
            Op op;
            op.kind = OpKind::dp_wait;
            op.phase = phase;
            op.dp_target = target;
            sp.ops.push_back(op);
        };
        // Launches a 16-bit all-gather of one parameter group; returns its index on the DP stream.
        // Bytes per all-gathered parameter: 16-bit, or (fp8_param_gather) FP8 for the linear weights and
        // 16-bit for the rest, averaged over the stage's parameters.
        const double stage_linear_rank = static_cast<double>(stage_layers) * model.linear_params() / t;
        const double gather_bytes =
            layout.precision == Precision::fp8 && layout.fp8_param_gather && stage_params_rank > 0
                ? 2.0 - std::min(stage_linear_rank, stage_params_rank) / stage_params_rank
                : 2.0;
        auto param_gather = [&](double elements) {
            dp_launch(CollectiveKind::all_gather, elements * gather_bytes);
            return dp_launched - 1;
        };
        // DeepSpeed's BF16_Optimizer (bf16 + ZeRO-1) all-reduces the fp32 gradients, then all-gathers the
        // weights after its partitioned step.
        const bool reduce_in_full =
            deepspeed && layout.zero_stage == 1 && layout.precision == Precision::bf16;
        auto launch_grad_bucket = [&](const Bucket& b) {
            dp_launch(
                sharded && !reduce_in_full ? CollectiveKind::reduce_scatter : CollectiveKind::all_reduce,
                b.elements * grad_bytes);
        };
        auto launch_param_gather = [&](int c) {
            // Parameters are all-gathered in 16-bit (or FP8, see gather_bytes), in forward order.
            const auto& bs = buckets[static_cast<std::size_t>(c)];
            for (auto it = bs.rbegin(); it != bs.rend(); ++it) {
                dp_launch(CollectiveKind::all_gather, it->elements * gather_bytes);
                sp.ops.back().phase = Phase::forward;
            }
        };

        // Distributed optimizer with overlapped parameter all-gather: the gathers of this iteration's
        // parameters are dispatched at its start, in forward order, and the first forward of each parameter
        // group waits for the bucket that holds it (Megatron-LM --overlap-param-gather: a forward pre-hook
        // waits per bucket).
        const bool early_gather = sharded && layout.overlap_param_gather && !zero3;
        std::vector<int> gather_base(static_cast<std::size_t>(vpp), 0);
        if (early_gather)
            for (int c = 0; c < vpp; ++c) {
                gather_base[static_cast<std::size_t>(c)] = dp_launched;
                launch_param_gather(c);
            }
        std::vector<bool> chunk_started(static_cast<std::size_t>(vpp), false);
        // Waits, before the forward of param group `g` (backward-order index) of chunk `c`, for its bucket.
        auto wait_for_group = [&](int c, int g) {
            const auto& bs = buckets[static_cast<std::size_t>(c)];
            for (std::size_t k = 0; k < bs.size(); ++k)
                if (g <= bs[k].closes_after) {
                    dp_wait(gather_base[static_cast<std::size_t>(c)] + static_cast<int>(bs.size() - k),
                            Phase::forward);
                    return;
                }
        };

        auto recv = [&](int direction, int vs, int mb, Phase phase) {
            Op op;
            op.kind = OpKind::recv;
            op.phase = phase;
            op.direction = direction;
            op.virtual_stage = vs;
            op.micro_batch = mb;
            op.bytes = p2p_bytes;
            sp.ops.push_back(op);
            if (gather_after_recv) {
                Op ag;
                ag.kind = OpKind::tp_launch;
                ag.phase = phase;
                ag.collective = CollectiveKind::all_gather;
                ag.bytes = act_bytes;
                ag.micro_batch = mb;
                sp.ops.push_back(ag);
                Op w;
                w.kind = OpKind::tp_wait;
                w.phase = phase;
                w.micro_batch = mb;
                sp.ops.push_back(w);
            }
        };
        auto send = [&](int direction, int to_vs, int mb, Phase phase) {
            Op op;
            op.kind = OpKind::send;
            op.phase = phase;
            op.direction = direction;
            op.virtual_stage = to_vs;
            op.micro_batch = mb;
            op.bytes = p2p_bytes;
            sp.ops.push_back(op);
        };

        double in_flight = 0;
        const auto items = pipeline_schedule(layout.schedule, pp, r, m, vpp);
        // DeepSpeed ZeRO-3 of 2021 (v0.3.12-v0.5.8, deepspeed/runtime/zero/stage3.py
        // PartitionedParameterCoordinator, partition_parameters.py): every module with parameters is a fetch
        // unit (its pre-forward / pre-backward hook). fetch_sub_module all-gathers the unit's parameters that
        // are not there and, when it gathered any or one is still in flight, _synchronize_communication
        // ends with torch.cuda.synchronize(): the whole device, gradient reductions included, is drained
        // before the unit computes. Then prefetch_next_sub_modules issues the next not-yet-gathered
        // parameters of the recorded trace (up to stage3_prefetch_bucket_size elements, one collective per
        // parameter, each after a torch.cuda.synchronize() in _allgather_param), only when nothing is in
        // flight and fewer than stage3_max_live_parameters are gathered. After the unit, release_sub_module
        // frees its parameters unless the trace uses them again within stage3_max_reuse_distance elements
        // (_keep_for_later). Full recompute runs each layer's forward hooks again before its backward.
        // Weights only: biases and norms (< stage3_param_persistence_threshold = 1e5 elements) stay gathered.
        if (ds3) {
            struct Use {
                int unit = -1;  ///< -1: kernels with no parameters to fetch
                const detail::OpTemplate* compute = nullptr;
                Phase phase = Phase::forward;
                int mb = 0;
                bool backward = false;
                std::vector<MemoryEvent> after = {};
                bool end_of_backward = false;
            };
            // Units: 0 embedding, 1 + 4i + j layer i's linear j (qkv, proj, fc1, fc2), last the head (with
            // the tied word embedding, a registered external parameter of the output layer).
            const int layers = layers_of_chunk[0];
            const int head_unit = 1 + 4 * layers;
            std::vector<double> unit_elems(static_cast<std::size_t>(head_unit + 1));
            std::vector<std::vector<double>> unit_grads(static_cast<std::size_t>(head_unit + 1));
            unit_elems[0] = emb_params_rank;
            unit_grads[0] = {emb_trainable_rank};
            double linear = 0, bias = 0;
            for (double w : ds3_weights)
                linear += w;
            for (double b : ds3_biases)
                bias += b;
            for (int i = 0; i < layers; ++i)
                for (int j = 0; j < 4; ++j) {
                    const auto u = static_cast<std::size_t>(1 + 4 * i + j);
                    unit_elems[u] = ds3_weights[static_cast<std::size_t>(j)];
                    // The weight's gradient, then the small ones of its module (the norms with qkv).
                    double small = ds3_biases[static_cast<std::size_t>(j)];
                    if (j == 0) small += layer_params_rank - linear - bias;
                    unit_grads[u] = {ds3_weights[static_cast<std::size_t>(j)], small};
                }
            unit_elems[static_cast<std::size_t>(head_unit)] =
                head_params_rank + (model.tied_embeddings ? emb_params_rank : 0.0);
            unit_grads[static_cast<std::size_t>(head_unit)] = {head_trainable_rank};

            std::vector<Use> trace;
            for (const auto& it : items) {
                const int mb = it.micro_batch;
                if (it.forward) {
                    trace.push_back(
                        {0, &emb_fwd, Phase::forward, mb, false, {MemoryEvent::embedding_forward}});
                    for (int i = 0; i < layers; ++i) {
                        trace.push_back({-1, &ds3_fwd_units[0], Phase::forward, mb});
                        for (int j = 0; j < 4; ++j)
                            trace.push_back({1 + 4 * i + j, &ds3_fwd_units[static_cast<std::size_t>(j + 1)],
                                             Phase::forward, mb});
                        trace.back().after = {MemoryEvent::layer_forward};
                    }
                    trace.push_back(
                        {head_unit, &head_fwd, Phase::forward, mb, false, {MemoryEvent::head_forward}});
                    continue;
                }
                trace.push_back(
                    {head_unit, &head_bwd, Phase::backward, mb, true, {MemoryEvent::head_backward}});
                for (int i = layers - 1; i >= 0; --i) {
                    if (layout.recompute == Recompute::full) {
                        trace.push_back({-1, &ds3_fwd_units[0], Phase::recompute, mb});
                        for (int j = 0; j < 4; ++j)
                            trace.push_back({1 + 4 * i + j, &ds3_fwd_units[static_cast<std::size_t>(j + 1)],
                                             Phase::recompute, mb});
                        trace.back().after = {MemoryEvent::layer_recomputed};
                    } else {
                        trace.push_back({-1, &layer_rec, Phase::recompute, mb});
                        if (layout.recompute != Recompute::none)
                            trace.back().after = {MemoryEvent::layer_recomputed};
                    }
                    trace.push_back({-1, &ds3_bwd_units[0], Phase::backward, mb, true});
                    for (int j = 3; j >= 0; --j)
                        trace.push_back({1 + 4 * i + j, &ds3_bwd_units[static_cast<std::size_t>(4 - j)],
                                         Phase::backward, mb, true});
                    trace.back().after = {MemoryEvent::layer_backward};
                }
                trace.push_back({0, &emb_bwd, Phase::backward, mb, true, {MemoryEvent::embedding_backward}});
                trace.back().end_of_backward = true;
            }
            // _keep_for_later: the elements used between a unit's use and its next use in the trace
            // (get_reuse_distance_in_numel, ds_numel: unpartitioned counts).
            const double full = t;  // elements per rank -> ds_numel
            std::vector<bool> keep(trace.size(), false);
            {
                std::vector<int> next_of_unit(static_cast<std::size_t>(head_unit + 1), -1);
                std::vector<double> suffix(trace.size() + 1, 0.0);
                for (std::size_t k = trace.size(); k-- > 0;) {
                    const int u = trace[k].unit;
                    suffix[k] =
                        suffix[k + 1] + (u >= 0 ? unit_elems[static_cast<std::size_t>(u)] * full : 0.0);
                    if (u < 0) continue;
                    const int next = next_of_unit[static_cast<std::size_t>(u)];
                    if (next >= 0)
                        keep[k] = suffix[k + 1] - suffix[static_cast<std::size_t>(next)] <
                                  kDs3MaxReuseDistanceElements;
                    next_of_unit[static_cast<std::size_t>(u)] = static_cast<int>(k);
                }
            }
            enum class Status { not_available, inflight, available };
            std::vector<Status> status(static_cast<std::size_t>(head_unit + 1), Status::not_available);
            std::vector<bool> needs_copy_out(status.size(), false);
            std::vector<int> inflight;
            double live = 0;  // gathered (or in flight) elements, total_available_parameter_numel
            auto ds_gather = [&](int u) {
                const double e = unit_elems[static_cast<std::size_t>(u)];
                param_gather(e);
                mark(MemoryEvent::params_gathered, e);
                status[static_cast<std::size_t>(u)] = Status::inflight;
                needs_copy_out[static_cast<std::size_t>(u)] = true;
                inflight.push_back(u);
                live += e * full;
            };
            double bucket = 0;                 // elements per rank in the reduction bucket (ipg bucket)
            std::vector<double> bucket_grads;  // its gradients
            auto reduce_bucket = [&]() {
                if (bucket <= 0) return;
                dp_launch(kDs3GradReduce, bucket * 2.0);  // the 16-bit gradients
                for (double g : bucket_grads)
                    mark(MemoryEvent::grads_reduced, g);
                bucket_grads.clear();
                bucket = 0;
            };
            for (std::size_t k = 0; k < trace.size(); ++k) {
                const Use& use = trace[k];
                if (use.unit < 0) {
                    append(sp.ops, *use.compute, use.phase, use.mb);
                    for (MemoryEvent e : use.after)
                        mark(e);
                    continue;
                }
                const auto u = static_cast<std::size_t>(use.unit);
                // fetch_sub_module
                bool sync = status[u] == Status::inflight;
                if (status[u] == Status::not_available) {
                    ds_gather(use.unit);
                    sync = true;
                }
                if (sync) {
                    dp_wait(dp_launched, use.phase);
                    for (int v : inflight)
                        status[static_cast<std::size_t>(v)] = Status::available;
                    inflight.clear();
                }
                if (needs_copy_out[u]) {
                    append_copy_out(unit_elems[u], use.phase, use.mb);
                    needs_copy_out[u] = false;
                }
                // prefetch_next_sub_modules
                if (inflight.empty() && live < kDs3MaxLiveElements) {
                    double fetched = 0;
                    for (std::size_t i = k; i < trace.size() && fetched < kDs3PrefetchBucketElements; ++i) {
                        const int v = trace[i].unit;
                        if (v < 0 || status[static_cast<std::size_t>(v)] != Status::not_available) continue;
                        if (!inflight.empty()) dp_wait(dp_launched, use.phase);  // _allgather_param's sync
                        ds_gather(v);
                        fetched += unit_elems[static_cast<std::size_t>(v)] * full;
                    }
                }
                append(sp.ops, *use.compute, use.phase, use.mb);
                for (MemoryEvent e : use.after)
                    mark(e);
                // Gradient hooks (reduce_independent_p_g_buckets_and_remove_grads): a parameter that
                // does not fit the bucket first sends the bucket off.
                if (use.backward)
                    for (double g : unit_grads[u]) {
                        if (g <= 0) continue;
                        if (bucket + g * full > kDs3ReduceBucketElements) reduce_bucket();
                        mark(MemoryEvent::grads_unsharded, g);
                        bucket_grads.push_back(g);
                        bucket += g;
                    }
                // release_sub_module
                if (!keep[k]) {
                    status[u] = Status::not_available;
                    live -= unit_elems[u] * full;
                    mark(MemoryEvent::params_released, unit_elems[u]);
                }
                // independent_gradient_partition_epilogue, after each backward pass: the last bucket, then
                // reduction_stream.synchronize().
                if (use.end_of_backward) {
                    reduce_bucket();
                    dp_wait(dp_launched, Phase::backward);
                }
            }
            sp.peak_in_flight_microbatches = std::max(sp.peak_in_flight_microbatches, 1.0);
        }
        for (const auto& it : ds3 ? std::vector<ScheduleItem>{} : items) {
            const int c = it.chunk;
            const int vs = c * pp + r;
            const int mb = it.micro_batch;
            const int chunk_layers = layers_of_chunk[static_cast<std::size_t>(c)];
            if (it.forward) {
                const bool first = early_gather && !chunk_started[static_cast<std::size_t>(c)];
                chunk_started[static_cast<std::size_t>(c)] = true;
                const int groups = (vs == last_vs ? 1 : 0) + chunk_layers + (vs == 0 ? 1 : 0);
                const auto& elems = group_elements[static_cast<std::size_t>(c)];
                // ZeRO-3 / FSDP: each parameter group is all-gathered just in time, the next one prefetched
                // while this one computes (PyTorch FSDP forward prefetch, DeepSpeed stage-3 prefetch).
                int gathered = -1;
                auto gather = [&](int k) {  // all-gather of forward-order group k
                    const double e = elems[static_cast<std::size_t>(groups - 1 - k)];
                    const int id = param_gather(e);
                    mark(MemoryEvent::params_gathered, e);
                    return id;
                };
                const bool skip_gather = keep_for_step && kept[static_cast<std::size_t>(c)];
                kept[static_cast<std::size_t>(c)] = true;
                auto zero3_gather = [&](int k) {  // k: forward-order index of the group about to run
                    if (!zero3 || skip_gather) return;
                    if (gathered < 0) gathered = gather(k);
                    const int next = k + 1 < groups ? gather(k + 1) : -1;
                    dp_wait(gathered + 1, Phase::forward);
                    gathered = next;
                    append_copy_out(elems[static_cast<std::size_t>(groups - 1 - k)], Phase::forward, mb);
                };
                auto zero3_release = [&](int k) {  // after the compute of forward-order group k
                    if (zero3 && rebackward)
                        mark(MemoryEvent::params_released, elems[static_cast<std::size_t>(groups - 1 - k)]);
                };
                // TransformerEngine's delayed-scaling FP8 casts every weight (and its transpose) once per
                // step, in the first micro-batch's forward.
                if (mb == 0) {  // FP8 weight casts once per step, per chunk (its own layer count)
                    const auto weight_casts =
                        blocks.fp8_weight_casts_per_step(static_cast<double>(chunk_layers));
                    if (!weight_casts.empty()) append(sp.ops, weight_casts, Phase::forward, mb);
                }
                if (vs > 0) recv(+1, vs, mb, Phase::forward);
                int k = 0;
                if (vs == 0) {
                    if (first) wait_for_group(c, groups - 1);
                    zero3_gather(k);
                    append(sp.ops, emb_fwd, Phase::forward, mb);
                    mark(MemoryEvent::embedding_forward);
                    zero3_release(k++);
                }
                for (int i = 0; i < chunk_layers; ++i) {
                    if (first) wait_for_group(c, (vs == last_vs ? 1 : 0) + chunk_layers - 1 - i);
                    zero3_gather(k);
                    append(sp.ops, layer_fwd, Phase::forward, mb);
                    mark(layout.layer_recomputed(i) || layout.recompute == Recompute::none
                             ? MemoryEvent::layer_forward
                             : MemoryEvent::layer_forward_kept);
                    zero3_release(k++);
                }
                if (vs == last_vs) {
                    if (first) wait_for_group(c, 0);
                    zero3_gather(k);
                    append(sp.ops, head_fwd, Phase::forward, mb);
                    mark(MemoryEvent::head_forward);
                    zero3_release(k++);
                } else {
                    send(+1, vs + 1, mb, Phase::forward);
                }
                in_flight += 1.0 / vpp;
                sp.peak_in_flight_microbatches = std::max(sp.peak_in_flight_microbatches, in_flight);
            } else {
                const bool last_backward = ++backward_count[static_cast<std::size_t>(c)] == m;
                // ZeRO-2 (DeepSpeed) reduces the gradients of every micro-batch as its buckets fill;
                // Megatron's DDP and distributed optimizer only in the last micro-batch (no_sync before),
                // when overlapped.
                const bool overlap = (layout.overlap_grad_reduce && last_backward) || zero2;
                const auto& bs = buckets[static_cast<std::size_t>(c)];
                const auto& elems = group_elements[static_cast<std::size_t>(c)];
                const auto& grads = group_trainable[static_cast<std::size_t>(c)];
                const int groups = static_cast<int>(elems.size());
                std::size_t next_bucket = 0;
                int group = 0;  // index of the param group whose gradients are complete, in backward order
                int gathered = -1;
                // ZeRO-3 / FSDP backward: gather the group's parameters again (prefetching the next), and
                // reduce-scatter its gradients as soon as they are computed.
                auto gather = [&](int g) {
                    const double e = elems[static_cast<std::size_t>(g)];
                    const int id = param_gather(e);
                    mark(MemoryEvent::params_gathered, e);
                    return id;
                };
                auto group_start = [&]() {
                    if (!zero3 || !rebackward) return;
                    if (gathered < 0) gathered = gather(group);
                    const int next = !backward_post && group + 1 < groups ? gather(group + 1) : -1;
                    dp_wait(gathered + 1, Phase::backward);
                    gathered = next;
                    append_copy_out(elems[static_cast<std::size_t>(group)], Phase::backward, mb);
                };
                double unsharded = 0;  // ZeRO-3: the previous group's gradients, until its reduce-scatter
                auto group_done = [&]() {
                    const double g = grads[static_cast<std::size_t>(group)];
                    if (zero3) {
                        if (!keep_for_step || last_backward)
                            mark(MemoryEvent::params_released, elems[static_cast<std::size_t>(group)]);
                        // BACKWARD_POST: the next group's all-gather is issued after this group's gradient
                        // computation, ahead of its reduce-scatter on the one NCCL stream.
                        if (backward_post && rebackward && group + 1 < groups) gathered = gather(group + 1);
                        if (unsharded > 0) mark(MemoryEvent::grads_reduced, unsharded);
                        unsharded = 0;
                        if (g > 0) {
                            mark(MemoryEvent::grads_unsharded, g);
                            dp_launch(CollectiveKind::reduce_scatter, g * grad_bytes);
                            unsharded = g;
                        }
                    } else if (overlap && next_bucket < bs.size() && bs[next_bucket].closes_after == group) {
                        launch_grad_bucket(bs[next_bucket++]);
                    }
                    ++group;
                };
                if (vs < last_vs) recv(-1, vs, mb, Phase::backward);
                if (vs == last_vs) {
                    group_start();
                    append(sp.ops, head_bwd, Phase::backward, mb);
                    mark(MemoryEvent::head_backward);
                    group_done();
                }
                for (int i = 0; i < chunk_layers; ++i) {
                    group_start();
                    if (layout.layer_recomputed(chunk_layers - 1 -
                                                i)) {  // backward runs the last layer first
                        append(sp.ops, layer_rec, Phase::recompute, mb);
                        mark(MemoryEvent::layer_recomputed);
                    }
                    append(sp.ops, layer_bwd, Phase::backward, mb);
                    mark(MemoryEvent::layer_backward);
                    group_done();
                }
                if (vs == 0) {
                    group_start();
                    append(sp.ops, emb_bwd, Phase::backward, mb);
                    mark(MemoryEvent::embedding_backward);
                    group_done();
                }
                // DeepSpeed BF16_Optimizer: the micro-batch's gradients go into the fp32 copies before the
                // pipeline engine sends the input gradient on (its BackwardPass instruction ends with it).
                if (layout.deepspeed_bf16_optimizer()) {
                    double chunk_trainable = 0;
                    for (double g : group_trainable[static_cast<std::size_t>(c)])
                        chunk_trainable += g;
                    append(sp.ops, hp_accumulate_for(chunk_trainable), Phase::backward, mb);
                }
                if (vs > 0) send(-1, vs - 1, mb, Phase::backward);
                // The last group's reduce-scatter is in flight; its buffer is counted until the pass ends.
                if (unsharded > 0) mark(MemoryEvent::grads_reduced, unsharded);
                in_flight -= 1.0 / vpp;
            }
        }
        if (!layout.overlap_grad_reduce && !zero2 && !zero3)
            for (int c = 0; c < vpp; ++c)
                for (const auto& b : buckets[static_cast<std::size_t>(c)])
                    launch_grad_bucket(b);
        dp_wait(dp_launched, Phase::backward);
        // Tied input embedding and output layer on different stages: Megatron-LM (finalize_model_grads,
        // _allreduce_embedding_grads) and DeepSpeed (tied modules) all-reduce the embedding's gradients
        // between the first and the last stage after the backward pass, before the optimizer step.
        const bool holds_tied_copy = r == 0 || r == pp - 1;
        if (model.tied_embeddings && pp > 1 && holds_tied_copy) {
            Op ar;
            ar.kind = OpKind::tp_launch;
            ar.group = CommGroup::embedding;
            ar.phase = Phase::backward;
            ar.collective = CollectiveKind::all_reduce;
            ar.bytes = emb_params_rank * grad_bytes;
            sp.ops.push_back(ar);
            Op w;
            w.kind = OpKind::tp_wait;
            w.phase = Phase::backward;
            sp.ops.push_back(w);
        }
        if (layout.deepspeed_bf16_optimizer())
            append(sp.ops, blocks.bf16_step_gradient_passes(stage_trainable_rank), Phase::optimizer, -1);
        append(sp.ops, blocks.optimizer(sharded ? stage_trainable_rank / layout.dp : stage_trainable_rank),
               Phase::optimizer, -1);
        if (sharded && !early_gather && !zero3) {
            for (int c = 0; c < vpp; ++c)
                launch_param_gather(c);
            dp_wait(dp_launched, Phase::optimizer);
        }
        prog.stages.push_back(std::move(sp));
    }
    for (auto& st : prog.stages)
        for (const auto& op : st.ops)
            if (op.kind == OpKind::compute)
                st.hardware_flops += prog.segments[static_cast<std::size_t>(op.segment)].flops;
    return prog;
}

void assign_durations(Program& program, const ComputeModel& compute) {
    for (auto& seg : program.segments) {
        seg.seconds = 0;
        for (const auto& k : seg.kernels)
            seg.seconds += compute.seconds(k);
    }
}

}  // namespace trainsim
