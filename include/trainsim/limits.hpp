// Size limits of the inputs trainsim simulates. Each bounds the time or memory one simulation may take (the
// budget: a run answers within 20 s and 4 GiB on one core) or keeps the arithmetic of sizes, bytes and
// simulated time far from the 64-bit range; all are far above any published training run (docs/inputs.md,
// docs/reliability.md list them). Exceeding one is an InputError naming the field and the limit (exit 2).
#pragma once

#include <cstdint>

namespace trainsim::limits {

/// GPUs of a cluster (topology.nodes * topology.gpus_per_node): 131,072 simulate in seconds (the event count
/// and the network graph grow with the GPUs); the largest published runs use 16,384-100,000.
inline constexpr std::int64_t kMaxGpus = 131072;
/// GPUs in one scale-up domain (topology.gpus_per_node): NVL72 racks have 72, announced NVL576 576.
inline constexpr std::int64_t kMaxGpusPerNode = 1024;
/// GPUs times GPUs per node (topology.nodes * gpus_per_node^2): the data-parallel rings' work grows with
/// both (Release, one core, 2026-11-25, a 16-wide model at DP = GPUs: 32,768 GPUs at 8 per node 0.8 s, 128
/// per node 4.1 s, 512 per node 13.7 s and 1.8 GB, 1,024 per node 26 s and 3.5 GB; 131,072 GPUs at 128 per
/// node 20.3 s and 2.4 GB, at 512 past 30 s and 6 GB). 2^23 admits 131,072 GPUs at 64 per node, 8,192 at
/// 1,024; NVL72 racks described as trays of 4 with scale_up.domain_gpus = 72 (topologies/gb200-nvl72.json)
/// count 4 per node.
inline constexpr std::int64_t kMaxGpusTimesGpusPerNode = std::int64_t{1} << 23;
/// Nodes under one leaf switch (topology.scale_out.nodes_per_leaf): leaf switches have at most a few hundred
/// ports; the spine layer grows with it.
inline constexpr std::int64_t kMaxNodesPerLeaf = 4096;
/// Leaf down:up bandwidth ratio (topology.scale_out.oversubscription).
inline constexpr double kMaxOversubscription = 1024;
/// Transformer layers (model.layers): the largest published dense models have 126-160.
inline constexpr std::int64_t kMaxLayers = 4096;
/// model.hidden and model.ffn_hidden: published models reach 25,600 and 106,496.
inline constexpr std::int64_t kMaxHidden = 1 << 20;
/// model.heads and model.kv_heads.
inline constexpr std::int64_t kMaxHeads = 1 << 16;
/// model.num_experts and model.moe_top_k (routed experts per MoE layer): published models reach 384
/// (Kimi-K2).
inline constexpr std::int64_t kMaxExperts = 1 << 16;
/// model.vocab: published tokenizers reach 256,000.
inline constexpr std::int64_t kMaxVocab = 1 << 24;
/// model.seq_len in tokens: context-parallel runs reach 1,048,576.
inline constexpr std::int64_t kMaxSeqLen = 1 << 24;
/// Tokens of one micro-batch (layout.micro_batch * model.seq_len): bounds activation bytes.
inline constexpr std::int64_t kMaxTokensPerMicroBatch = std::int64_t{1} << 26;
/// Sequences of one step (layout.global_batch): published runs use up to ~16,000.
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 24;
/// Micro-batches one pipeline runs per step (global_batch / (micro_batch * dp)): the schedule holds an
/// operation per micro-batch, layer and stage.
inline constexpr std::int64_t kMaxMicroBatchesPerStep = 16384;
/// Layer passes of the whole cluster per step ((model.layers + model.mtp_layers) * micro-batches per step *
/// layout.dp * layout.cp), the simulation's work: measured on one core (Release), 2^21 passes take about 9 s
/// and 350 MB both on 1,024 GPUs (DP 8, 2,730 micro-batches) and on 131,072 GPUs (DP 1,024, 16
/// micro-batches); Llama 3 405B's published run on 16,384 GPUs needs 2^18.
inline constexpr std::int64_t kMaxLayerPassesPerStep = std::int64_t{1} << 21;
/// GPU layer passes per step (layer passes * layout.tp): every GPU of a layer's TP group runs the layer's
/// kernels and takes part in its TP collectives, whose flows cross more links as the group spans more of a
/// scale-up domain. Measured on one core (Release, 2026-11-24): 2^23 take 14 s for GPT-3 175B at TP 32 on
/// GB200 NVL72 (8 trays per TP group, 152 micro-batches), the costliest case found (TP 8 x CP 8 on Llama 3
/// 8B: 6.5 s); GPT-3 175B at TP 32 with 1,200 micro-batches (2^26) took 174 s before this limit. Published
/// runs reach 3.1 M (Llama 3.1 405B on 1,024 H100, TP 8 x CP 2).
inline constexpr std::int64_t kMaxGpuLayerPassesPerStep = std::int64_t{1} << 23;
/// Layer passes per step ((model.layers + model.mtp_layers) * micro-batches per step * layout.dp * layout.cp)
/// of a layout with TP > 1 on a fabric whose TP groups share their GPUs' ports with the DP and P2P traffic
/// (scale_out.topology rail-only: relayed through the node; scale_up.kind pcie: every flow crosses the GPU's
/// PCIe link): the executor cannot give such a TP group private links, so every TP collective is simulated
/// as flows, about 30 times the events of an NVSwitch node (include/trainsim/executor.hpp,
/// private_tp_links). Measured (Release, 2 cores beside other work, 2026-11-29): Llama 3 8B at TP 2 x DP
/// 65,536 (2^21 passes, inside kMaxLayerPassesPerStep) on 131,072 H100: 3.0 s of CPU on dgx-h100 (2.4 M
/// events), 18.1 s on dgx-h100-rail-only and 22.0 s on pcie-h100 (70.7 M events); TP 4 x DP 32,768 on
/// pcie-h100 22.5 s; TP 2 x PP 2 x DP 32,768 20.8 s. Half of them, 2^20, is about 11 s.
inline constexpr std::int64_t kMaxLayerPassesSharedTpPorts = std::int64_t{1} << 20;
/// GPU layer passes of a what-if study over all its seeds (`run --seeds K`: K perturbed simulations, each of
/// gpu_layer_passes_per_step, besides the unperturbed one). 2^26 admits the documented jitter study, Llama 3
/// 70B on 1,024 H100 over 100 seeds (655,360 passes per step, 6.6e7 in all: 22 s of CPU, 11 s on 2 cores,
/// docs/performance.md), and refuses what ran for hours: 100,000 seeds of the default GPT-3 175B run
/// (1,179,648 passes per step, 0.3 s per seed; at most 56 seeds now).
inline constexpr std::int64_t kMaxGpuLayerPassesPerStudy = std::int64_t{1} << 26;
/// Events of a what-if study's simulations, all together (`run` with --straggler, --jitter or --link and
/// no --max-events: the unperturbed run and the K seeds share it, each simulation stopped past 1/(K + 1) of
/// it with exit 2; a flow-rate update step counts as an event, ExecutionOptions::max_events). The GPU layer
/// passes above are checked before anything runs, but a perturbation can make a simulation far dearer than
/// its passes: jitter desynchronizes the DP rings of Llama 3 8B on 1,024 H100 (TP 2, DP 512), whose flows
/// then share the fabric in ever-changing components, 10.6 M events and about 110 M rate-update steps per
/// seed, 42 s of CPU (the unperturbed run: 1.1 M events, 2.1 M steps, 0.3 s), and 4 seeds took 160 s
/// (2026-11-25). A jittered seed of the default run (every GPU event by event) costs about 1 us of CPU per
/// event (1.1 M events, 1.1 s), so 2^26 let its 56 seeds run 56 s of CPU, 48.7 s on 2 shared cores
/// (2026-11-28, hardening round 6); 2^25 is about 33 s of CPU at most, about 17 s on 2 cores: 28 seeds of
/// the default run. The documented 100-seed jitter study of Llama 3 70B on 1,024 H100 (about 240,000
/// events and steps per seed, 332,000 allowed) is inside.
inline constexpr std::int64_t kMaxWhatIfStudyEvents = std::int64_t{1} << 25;
/// The weight of one DeepSpeed ZeRO-3 layer pass in the GPU layer-pass limit (kMaxGpuLayerPassesPerStep):
/// its per-module weight fetches over DP and per-module gradient reductions make it dearer than a plain
/// pass. Measured (Release, 2026-11-25) on Llama 3 8B over 1,024 H100 (TP 2, DP 512): at global batch
/// 65,536 (2^22 GPU layer passes) 39.7 s of CPU with ZeRO-3 against 10.1 s without, about 4x; at 32,768
/// (2^21) 21.0 s, at 16,384 10.5 s. A weight of 8 admits the 16,384 one and refuses the 32,768 one, so the
/// costliest admitted ZeRO-3 run stays near the ~10 s of the plain limit's. The published ZeRO-3 runs
/// (Narayanan et al. 2021 Table 2, at most 235,200 GPU layer passes, 1.9 M weighted) stay inside.
inline constexpr std::int64_t kDeepSpeedStage3PassWeight = 8;
/// Bytes of a Chrome trace (`run --trace`): refused before the run when the estimate (estimate_trace, the
/// whole iteration) passes it, and stopped with exit 2 when the streamed file passes it (a --trace-window's
/// share is not known before the run), the partial file removed. The default run's 310 MB trace takes
/// about 3 s (docs/performance.md), so 1 GB is about 10 s of writing; `--trace-ranks all` on Llama 3 8B over
/// 1,024 H100 with a 65,536 global batch announced 13.4 GB and ran on past 30 s (2026-11-25).
inline constexpr double kMaxTraceBytes = 1e9;
/// Samples of `memory --json --timeline` (every memory sample of every stage, about 310 bytes of JSON each):
/// refused after the simulation, before anything is written. Llama 3 8B on 8 H100 at PP 8 with 16,384
/// micro-batches gave 1.6 M samples, a 501 MB document, 1.5 GB and 7.7 s of CPU; at 128 layers (6.4 M
/// samples) it passed 5.3 GB and 120 s before writing a byte (2026-11-28).
inline constexpr std::int64_t kMaxMemoryTimelineSamples = std::int64_t{1} << 21;
/// The work of one expected failure in a goodput run, in checkpoint events: a failure is a rollback, a
/// recovery (restarted by failures during it) and, for a Weibull class, a replacement unit's clock. Measured
/// (Release, 2 threads, 2026-11-25) on Llama 3 405B over 54 days on 16,384 H100, 1,000 seeds, the automatic
/// 25-interval sweep: exponential (0.92 G checkpoints, 10.5 M failures) 15.6 s of CPU, Weibull k = 0.5 (the
/// same checkpoints, 145 M failures) 31 s: 16 ns per checkpoint, about 110 ns per failure.
inline constexpr double kGoodputFailureWorkEvents = 7.0;
/// The work of a goodput study over all its seeds and, with the automatic interval sweep, all its
/// intervals (`goodput --seeds K`: K runs of goodput.hpp expected_run_events each, per interval), in
/// checkpoint events (a failure counts kGoodputFailureWorkEvents). At the 16 ns above, 2^30 is about 17 s of
/// CPU, 9 s on 2 cores. It admits the 1,000-seed sweep of the exponential 405B run above (0.99 G) and the
/// documented 1,000 seeds at the 26-step interval (docs/performance.md), and refuses the Weibull k = 0.5
/// one (1.93 G: 62 s of wall time before the units' first lifetimes were drawn lazily, 16 s after; at most
/// 555 seeds now) and what ran for about 10 minutes (1,000,000 seeds at the --seeds range's top, 19,300
/// checkpoints each).
inline constexpr std::int64_t kMaxGoodputStudyEvents = std::int64_t{1} << 30;
/// Grid points of one sweep, over all its cluster sizes (`sweep --gpus N,N,...`, `--vary`): a sweep keeps
/// every point's layout and entry, about 5.5 KB each. Measured (Release, 2026-11-25 (06:00 UTC)):
/// Qwen3-30B-A3B on 12 B200 sizes, 8 to 16,384 GPUs, is 388,416 points, 2.1 GB RSS and 68 s on 2 cores; the
/// default grid of the widest shipped preset is 37,632 points per size.
inline constexpr std::int64_t kMaxSweepPoints = 500000;
/// Program layer passes of one sweep's first phase (layout.hpp program_layer_passes: (model.layers + 3 *
/// model.mtp_layers) * micro-batches per step of each program built, plus 2 per local expert of each;
/// kMtpLayerProgramPassWeight, kSweepProgramPassesPerLocalExpert), counted as the sweep builds them
/// (sweep.hpp sweep_build_work): every layout that passes the grid checks has a program built, hashed and
/// bounded; with pruning (the default) first one of a micro-batch per pipeline stage, whose parameters,
/// gradients and optimizer state screen it, and its own program only where those fit in memory; without
/// (--exhaustive, --top 0, a what-if sweep) its own. Checked before the screening (its programs, or every
/// layout's own without pruning) and again before any layout's own program is built (the screening's work
/// and the programs still to build). About 0.5-0.7 us of CPU per pass counted so, the sweep's simulations
/// included, where those few cost little (Release, 2 shared cores, 2026-11-29): Llama 3 8B on 8 H100, 8.9 M
/// passes, 6.1 s of CPU; on 64 H100 10.9 M, 7.8 s; Mixtral 8x7B on 64 B200 10.4 M, 6.1 s; Qwen3-30B-A3B on
/// 128 B200 17.3 M, 8.3 s, on 16 H100 26.6 M, 14.6 s (2,196 of its 3,432 layouts fit: counting every
/// layout's own program, 35.7 M, refused it from 2026-11-28). 2^25 keeps the first phase near 24 s of CPU
/// (about 12 s on 2 cores). Llama 3 8B on 8 H100 at global batch 65,536 (534 of 546 layouts fit, 172 M:
/// 213 s wall and 5.07 GB before the limit) is refused after a 0.02 s screening.
inline constexpr std::int64_t kMaxSweepProgramLayerPasses = std::int64_t{1} << 25;
/// A local expert (model.num_experts / layout.ep) of a program a sweep builds, in the program layer passes
/// of kMaxSweepProgramLayerPasses: each weighs this many passes, in the screening's program and again in the
/// layout's own. The program of an MoE layout holds one GEMM per local expert and linear layer in each MoE
/// template (sim/program/moe_ops.cpp), built and timed once per program whatever its micro-batches; the cost
/// per expert grows with the experts per program. Measured (Release, 2026-11-29) on a toy MoE on 16 H100
/// (tiny_moe.json, hidden 256, expert FFN 32, 1,872 layouts past the grid checks): 4,096 experts (5.2 M
/// local experts), 0.24 us of CPU per local expert in the screening's program, 1.1 us for both programs;
/// 8,192, 1.6 us for both; 16,384, 1.0 us in the screening alone (7 s user and 14 s system CPU for its
/// 20.7 M, fresh programs each time). About 2 passes of 0.5 us each where it matters: 2, in each program.
/// The 16,384- and 65,536-expert toys (41 M and 166 M) are refused before their screening.
inline constexpr std::int64_t kSweepProgramPassesPerLocalExpert = 2;
/// A multi-token-prediction layer (model.mtp_layers) in program_layer_passes, and so in the sweep's and the
/// what-if study's bounds, weighs this many layer passes: it builds, times and walks the embedding, its own
/// projections, a transformer layer and the output layer. Measured (Release, one core, 2026-11-29):
/// `memory --what-if` of a tiny model of 4,096 layers at PP 16 with 4,096 MTP layers and 64 micro-batches
/// took 34 s of CPU, where 4,096 layers alone with 128 micro-batches (the same count when an MTP layer is one
/// pass) took 20 s: an MTP layer costs 2.4 layers. Rounded up to 3: the largest study admitted then (32
/// micro-batches) takes 17 s.
inline constexpr std::int64_t kMtpLayerProgramPassWeight = 3;
/// Program layer passes of a `memory --what-if` study: program_layer_passes ((model.layers +
/// 3 * model.mtp_layers) * micro-batches per step) of the layout and of each applicable remedy's layout,
/// summed (docs/reliability.md, the limits table; checked by what_if.hpp check_what_if_size). Each is built,
/// timed and walked for memory (and simulated): about 5 us of CPU per pass, whatever the event bound. Before
/// it (2026-11-29), a tiny model at PP 4,096 over 4,096 layers and 512 micro-batches (2^21 passes, inside the
/// per-step limits; `memory` alone 11-14 s) and 128 layers at PP 8, VPP 16 with 16,384 micro-batches ran past
/// 25 s with
/// --what-if; 2^22 is about 21 s of CPU, 11 s on 2 cores.
inline constexpr std::int64_t kMaxWhatIfProgramLayerPasses = std::int64_t{1} << 22;
/// Worker threads of one command (`--jobs` of run, sweep, validate, fit, goodput): each thread holds its own
/// simulation state; `sweep -j 100000` failed to create its threads (exit 1) and `-j 2147483647` passed 15 GB
/// before this limit.
inline constexpr std::int64_t kMaxJobs = 1024;
/// Tokens to train (`--tokens` of run, sweep and goodput): 1e18 is ~60,000 times Llama 3's 15.6T; above it
/// the time and cost to train were printed as `inf`.
inline constexpr double kMaxTrainTokens = 1e18;
/// US dollars per GPU-hour (`--gpu-hour-price`): a thousand times any 2026 cloud list price; with 1e308 the
/// cost printed as `$inf`.
inline constexpr double kMaxGpuHourPriceUsd = 1e6;
/// Rows of one measured-runs file (`runs`, and `collectives`, each): a row is held parsed (~3.4 KB) and
/// reported; 1,000,000 rows of `{}` took 21 s and 3.5 GB to report as errors and 22 M (a 64 MiB file) passed
/// 25 s and 4.6 GB. The shipped files have 100 rows at most.
inline constexpr std::int64_t kMaxMeasuredRows = 65536;

/// Seconds an input that is not a regular file (a pipe such as `--workload /dev/stdin`, a FIFO, a device) is
/// waited for: one that is never closed hung the command (`sleep 30 | trainsim run --workload /dev/stdin` and
/// a FIFO nobody writes to, past 20 s, 2026-11-29). A pipe that delivers its text and closes is read as a
/// file.
inline constexpr int kMaxInputStreamSeconds = 10;

}  // namespace trainsim::limits
