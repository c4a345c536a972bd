// DeepSpeed ZeRO-3 as its 2021 releases ran it (v0.3.12, the first with stage 3, to v0.5.8;
// deepspeed/runtime/zero/stage3.py PartitionedParameterCoordinator, partition_parameters.py): every module
// with parameters is a fetch unit (its pre-forward / pre-backward hook). fetch_sub_module all-gathers the
// unit's parameters that are not there and, when it gathered any or one is still in flight,
// _synchronize_communication ends with torch.cuda.synchronize(): the whole device, gradient reductions
// included, is drained before the unit computes. Then prefetch_next_sub_modules issues the next
// not-yet-gathered parameters of the recorded trace (up to stage3_prefetch_bucket_size elements, one
// collective per parameter, each after a torch.cuda.synchronize() in _allgather_param), only when nothing is
// in flight and fewer than stage3_max_live_parameters are gathered. After the unit, release_sub_module frees
// its parameters unless the trace uses them again within stage3_max_reuse_distance elements
// (_keep_for_later). Full recompute runs each layer's forward hooks again before its backward. Weights only:
// biases and norms (< stage3_param_persistence_threshold = 1e5 elements) stay gathered.
#include <algorithm>

#include "stage_builder.hpp"

namespace trainsim::detail {

namespace {

// The defaults of deepspeed/runtime/zero/constants.py at those tags (stage3_prefetch_bucket_size,
// stage3_max_live_parameters, stage3_max_reuse_distance, reduce_bucket_size), in parameter elements
// (ds_numel, the unpartitioned size).
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

}  // namespace

/// The coordinator's state over one step: the recorded trace of unit uses and what is gathered.
struct StageBuilder::Ds3State {
    struct Use {
        int unit = -1;  ///< -1: kernels with no parameters to fetch
        const OpTemplate* compute = nullptr;
        Phase phase = Phase::forward;
        int mb = 0;
        bool backward = false;
        std::vector<MemoryEvent> after = {};
        bool end_of_backward = false;
    };
    enum class Status { not_available, inflight, available };

    std::vector<Use> trace;
    // Units: 0 embedding, 1 + 4i + j layer i's linear j (qkv, proj, fc1, fc2), last the head (with the tied
    // word embedding, a registered external parameter of the output layer).
    std::vector<double> unit_elems;               ///< parameters per rank of each unit
    std::vector<std::vector<double>> unit_grads;  ///< its gradients per rank, in hook order
    std::vector<bool> keep;                       ///< _keep_for_later at each trace position
    double full = 1;                              ///< elements per rank -> ds_numel (the TP degree)
    std::vector<Status> status;
    std::vector<bool> needs_copy_out;
    std::vector<int> inflight;
    double live = 0;                   ///< gathered (or in flight) elements, total_available_parameter_numel
    double bucket = 0;                 ///< elements per rank in the reduction bucket (ipg bucket)
    std::vector<double> bucket_grads;  ///< its gradients
};

namespace {

/// The fetch units' parameter and gradient elements per rank.
void ds3_units(const ProgramShape& shape, const ProgramTemplates& tpl, const ModelSpec& model, int layers,
               std::vector<double>& unit_elems, std::vector<std::vector<double>>& unit_grads) {
    const int head_unit = 1 + 4 * layers;
    unit_elems.assign(static_cast<std::size_t>(head_unit + 1), 0.0);
    unit_grads.assign(static_cast<std::size_t>(head_unit + 1), {});
    unit_elems[0] = shape.emb_params_rank;
    unit_grads[0] = {shape.emb_trainable_rank};
    double linear = 0, bias = 0;
    for (double w : tpl.ds3_weights)
        linear += w;
    for (double b : tpl.ds3_biases)
        bias += b;
    for (int i = 0; i < layers; ++i)
        for (int j = 0; j < 4; ++j) {
            const auto u = static_cast<std::size_t>(1 + 4 * i + j);
            unit_elems[u] = tpl.ds3_weights[static_cast<std::size_t>(j)];
            // The weight's gradient, then the small ones of its module (the norms with qkv).
            double small = tpl.ds3_biases[static_cast<std::size_t>(j)];
            if (j == 0) small += shape.layer_params_rank - linear - bias;
            unit_grads[u] = {tpl.ds3_weights[static_cast<std::size_t>(j)], small};
        }
    unit_elems[static_cast<std::size_t>(head_unit)] =
        shape.head_params_rank + (model.tied_embeddings ? shape.emb_params_rank : 0.0);
    unit_grads[static_cast<std::size_t>(head_unit)] = {shape.head_trainable_rank};
}

/// _keep_for_later: whether the elements used between a unit's use and its next use in the trace
/// (get_reuse_distance_in_numel, ds_numel: unpartitioned counts) stay under stage3_max_reuse_distance.
template <class Use>
std::vector<bool> ds3_keep(const std::vector<Use>& trace, const std::vector<double>& unit_elems,
                           double full) {
    std::vector<bool> keep(trace.size(), false);
    std::vector<int> next_of_unit(unit_elems.size(), -1);
    std::vector<double> suffix(trace.size() + 1, 0.0);
    for (std::size_t k = trace.size(); k-- > 0;) {
        const int u = trace[k].unit;
        suffix[k] = suffix[k + 1] + (u >= 0 ? unit_elems[static_cast<std::size_t>(u)] * full : 0.0);
        if (u < 0) continue;
        const int next = next_of_unit[static_cast<std::size_t>(u)];
        if (next >= 0)
            keep[k] = suffix[k + 1] - suffix[static_cast<std::size_t>(next)] < kDs3MaxReuseDistanceElements;
        next_of_unit[static_cast<std::size_t>(u)] = static_cast<int>(k);
    }
    return keep;
}

}  // namespace

void StageBuilder::deepspeed_stage3(const std::vector<ScheduleItem>& items) {
    using Use = Ds3State::Use;
    Ds3State s;
    const int layers = layers_of_chunk_[0];
    const int head_unit = 1 + 4 * layers;
    ds3_units(shape_, tpl_, model_, layers, s.unit_elems, s.unit_grads);
    // The trace of unit uses, in the order the hooks fire.
    for (const auto& it : items) {
        const int mb = it.micro_batch;
        if (it.forward) {
            s.trace.push_back(
                {0, &tpl_.emb_fwd, Phase::forward, mb, false, {MemoryEvent::embedding_forward}});
            for (int i = 0; i < layers; ++i) {
                s.trace.push_back({-1, &tpl_.ds3_fwd_units[0], Phase::forward, mb});
                for (int j = 0; j < 4; ++j)
                    s.trace.push_back({1 + 4 * i + j, &tpl_.ds3_fwd_units[static_cast<std::size_t>(j + 1)],
                                       Phase::forward, mb});
                s.trace.back().after = {MemoryEvent::layer_forward};
            }
            s.trace.push_back(
                {head_unit, &tpl_.head_fwd, Phase::forward, mb, false, {MemoryEvent::head_forward}});
            continue;
        }
        s.trace.push_back(
            {head_unit, &tpl_.head_bwd, Phase::backward, mb, true, {MemoryEvent::head_backward}});
        for (int i = layers - 1; i >= 0; --i) {
            if (layout_.recompute == Recompute::full) {
                s.trace.push_back({-1, &tpl_.ds3_fwd_units[0], Phase::recompute, mb});
                for (int j = 0; j < 4; ++j)
                    s.trace.push_back({1 + 4 * i + j, &tpl_.ds3_fwd_units[static_cast<std::size_t>(j + 1)],
                                       Phase::recompute, mb});
                s.trace.back().after = {MemoryEvent::layer_recomputed};
            } else {
                s.trace.push_back({-1, &tpl_.layer_rec, Phase::recompute, mb});
                if (layout_.recompute != Recompute::none)
                    s.trace.back().after = {MemoryEvent::layer_recomputed};
            }
            s.trace.push_back({-1, &tpl_.ds3_bwd_units[0], Phase::backward, mb, true});
            for (int j = 3; j >= 0; --j)
                s.trace.push_back({1 + 4 * i + j, &tpl_.ds3_bwd_units[static_cast<std::size_t>(4 - j)],
                                   Phase::backward, mb, true});
            s.trace.back().after = {MemoryEvent::layer_backward};
        }
        s.trace.push_back({0, &tpl_.emb_bwd, Phase::backward, mb, true, {MemoryEvent::embedding_backward}});
        s.trace.back().end_of_backward = true;
    }
    s.full = shape_.t;
    s.keep = ds3_keep(s.trace, s.unit_elems, s.full);
    s.status.assign(static_cast<std::size_t>(head_unit + 1), Ds3State::Status::not_available);
    s.needs_copy_out.assign(s.status.size(), false);
    for (std::size_t k = 0; k < s.trace.size(); ++k) {
        const Use& use = s.trace[k];
        if (use.unit >= 0) ds3_fetch(s, k);
        append(sp_.ops, *use.compute, use.phase, use.mb);
        for (MemoryEvent e : use.after)
            mark(e);
        if (use.unit >= 0) ds3_after_use(s, k);
    }
    sp_.peak_in_flight_microbatches = std::max(sp_.peak_in_flight_microbatches, 1.0);
}

void StageBuilder::ds3_fetch(Ds3State& s, std::size_t k) {
    using Status = Ds3State::Status;
    const auto& use = s.trace[k];
    auto gather = [&](int v) {
        const double e = s.unit_elems[static_cast<std::size_t>(v)];
        param_gather(e);
        mark(MemoryEvent::params_gathered, e);
        s.status[static_cast<std::size_t>(v)] = Status::inflight;
        s.needs_copy_out[static_cast<std::size_t>(v)] = true;
        s.inflight.push_back(v);
        s.live += e * s.full;
    };
    const auto u = static_cast<std::size_t>(use.unit);
    // fetch_sub_module
    bool sync = s.status[u] == Status::inflight;
    if (s.status[u] == Status::not_available) {
        gather(use.unit);
        sync = true;
    }
    if (sync) {
        dp_wait(dp_launched_, use.phase);
        for (int v : s.inflight)
            s.status[static_cast<std::size_t>(v)] = Status::available;
        s.inflight.clear();
    }
    if (s.needs_copy_out[u]) {
        append_copy_out(s.unit_elems[u], use.phase, use.mb);
        s.needs_copy_out[u] = false;
    }
    // prefetch_next_sub_modules
    if (s.inflight.empty() && s.live < kDs3MaxLiveElements) {
        double fetched = 0;
        for (std::size_t i = k; i < s.trace.size() && fetched < kDs3PrefetchBucketElements; ++i) {
            const int v = s.trace[i].unit;
            if (v < 0 || s.status[static_cast<std::size_t>(v)] != Status::not_available) continue;
            if (!s.inflight.empty()) dp_wait(dp_launched_, use.phase);  // _allgather_param's sync
            gather(v);
            fetched += s.unit_elems[static_cast<std::size_t>(v)] * s.full;
        }
    }
}

void StageBuilder::ds3_after_use(Ds3State& s, std::size_t k) {
    const auto& use = s.trace[k];
    const auto u = static_cast<std::size_t>(use.unit);
    auto reduce_bucket = [&]() {
        if (s.bucket <= 0) return;
        dp_launch(kDs3GradReduce, s.bucket * 2.0);  // the 16-bit gradients
        for (double g : s.bucket_grads)
            mark(MemoryEvent::grads_reduced, g);
        s.bucket_grads.clear();
        s.bucket = 0;
    };
    // Gradient hooks (reduce_independent_p_g_buckets_and_remove_grads): a parameter that does not fit the
    // bucket first sends the bucket off.
    if (use.backward)
        for (double g : s.unit_grads[u]) {
            if (g <= 0) continue;
            if (s.bucket + g * s.full > kDs3ReduceBucketElements) reduce_bucket();
            mark(MemoryEvent::grads_unsharded, g);
            s.bucket_grads.push_back(g);
            s.bucket += g;
        }
    // release_sub_module
    if (!s.keep[k]) {
        s.status[u] = Ds3State::Status::not_available;
        s.live -= s.unit_elems[u] * s.full;
        mark(MemoryEvent::params_released, s.unit_elems[u]);
    }
    // independent_gradient_partition_epilogue, after each backward pass: the last bucket, then
    // reduction_stream.synchronize().
    if (use.end_of_backward) {
        reduce_bucket();
        dp_wait(dp_launched_, Phase::backward);
    }
}

}  // namespace trainsim::detail
