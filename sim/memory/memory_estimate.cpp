// First per-stage memory model (docs/memory.md).
//  parameters  16-bit weights: 2 B per parameter on this GPU
//  gradients   Megatron-LM DDP main_grad buffer: 4 B (fp32, bf16 runs) or 2 B (fp16 runs) per parameter
//  optimizer   Adam mixed precision: fp32 master weight, m, v = 12 B per parameter, divided by DP when the
//              optimizer state is sharded (distributed optimizer / ZeRO-1): Megatron
//              theoretical_memory_usage.py
//  activations per layer and micro-batch (Korthikanti et al. 2022, Table 2; 16-bit activations, 1-byte
//  masks):
//              no recompute, TP without SP: s·b·h·(10 + 24/t + 5·a·s/(h·t))
//              no recompute, TP with SP:    s·b·h/t·(34 + 5·a·s/h)
//              selective recompute, or flash attention: the 5·a·s/h score terms are not stored
//              full recompute: 2·s·b·h (the layer input; /t with SP) kept per layer, plus one layer's full
//              set alive while it is recomputed times the peak number of micro-batches in flight on the
//              stage, taken from the schedule.
//  last stage: the fp32 logits of one micro-batch, s·b·V/t · 4 B.
#include <algorithm>

#include "trainsim/report.hpp"

namespace trainsim {

namespace {
double layer_activation_bytes(const ModelSpec& m, const Layout& l, bool store_scores) {
    // Context parallelism splits the sequence: every term is per token of this GPU (s / cp).
    const double s = static_cast<double>(m.seq_len) / l.cp, b = static_cast<double>(l.micro_batch);
    const double h = static_cast<double>(m.hidden), a = static_cast<double>(m.heads), t = l.tp;
    const double scores = store_scores ? 5.0 * a * s / h : 0.0;
    if (l.sequence_parallel) return s * b * h / t * (34.0 + scores);
    return s * b * h * (10.0 + 24.0 / t + scores / t);
}
}  // namespace

std::vector<StageMemory> estimate_memory(const ModelSpec& m, const Layout& l, const Program& p) {
    std::vector<StageMemory> out;
    const bool sharded = l.sharded_optimizer() && l.dp > 1;
    const double s = static_cast<double>(m.seq_len) / l.cp, b = static_cast<double>(l.micro_batch);
    const double h = static_cast<double>(m.hidden), t = l.tp;
    const bool unfused = l.attention == AttentionKernel::unfused;
    const bool store_scores = unfused && l.recompute == Recompute::none;
    const double full_layer = layer_activation_bytes(m, l, store_scores);
    // The layer being recomputed holds its whole set, attention scores included when they are materialized.
    const double recomputed_layer = layer_activation_bytes(m, l, unfused);
    for (int st = 0; st < l.pp; ++st) {
        const StageProgram& sp = p.stages[static_cast<std::size_t>(st)];
        StageMemory mem;
        mem.stage = st;
        const double params_rank = sp.params / t;
        const double dp = l.dp > 1 ? l.dp : 1.0;
        // ZeRO-3 / FSDP keep 1/dp of the 16-bit weights, plus the gathered layer in use and the prefetched
        // one.
        const double gathered_layers = 2.0 * 2.0 * m.layer_params() / t;
        mem.parameters_bytes =
            l.zero_stage >= 3 ? 2.0 * params_rank / dp + gathered_layers : 2.0 * params_rank;
        mem.gradients_bytes =
            l.grad_reduce_bytes_per_element() * params_rank / (l.zero_stage >= 2 ? dp : 1.0);
        mem.optimizer_bytes = 12.0 * params_rank / (sharded ? l.dp : 1);
        const double layers = static_cast<double>(layers_on_stage(m, l, st));
        mem.in_flight_microbatches = sp.peak_in_flight_microbatches;
        if (l.recompute == Recompute::full) {
            const double kept = 2.0 * s * b * h / (l.sequence_parallel ? t : 1.0);
            mem.activations_bytes = kept * layers * sp.peak_in_flight_microbatches + recomputed_layer;
        } else {
            mem.activations_bytes = full_layer * layers * sp.peak_in_flight_microbatches;
        }
        if (st == l.pp - 1) mem.activations_bytes += s * b * static_cast<double>(m.vocab) / t * 4.0;
        out.push_back(mem);
    }
    return out;
}

}  // namespace trainsim
