#include "trainsim/layout.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

std::int64_t pipeline_split_layers(const ModelSpec& m, const Layout& l) {
    return m.layers + (l.account_for_embedding_in_pipeline_split ? 1 : 0) +
           (l.account_for_loss_in_pipeline_split ? 1 : 0);
}

std::vector<std::int64_t> virtual_stage_layers(const ModelSpec& m, const Layout& l) {
    const std::size_t pp = static_cast<std::size_t>(l.pp), stages = pp * static_cast<std::size_t>(l.vpp);
    std::vector<std::int64_t> out(stages, 0);
    if (!l.pipeline_layout.empty()) {
        // Parsed once: a caller per virtual stage re-parsing it made pp x vpp = 8,192 stages take hours.
        const std::vector<VirtualStageLayout> parsed = parse_pipeline_layout(l.pipeline_layout);
        for (std::size_t v = 0; v < stages; ++v)
            out[v] = parsed.at(v).decoder_layers;
        return out;
    }
    for (std::size_t v = 0; v < stages; ++v) {
        const int stage = static_cast<int>(v % pp), chunk = static_cast<int>(v / pp);
        if (!l.layers_per_stage.empty()) {
            out[v] = l.layers_per_stage.at(static_cast<std::size_t>(stage)) / l.vpp;
            continue;
        }
        std::int64_t n = pipeline_split_layers(m, l) / (static_cast<std::int64_t>(l.pp) * l.vpp);
        // Megatron-LM get_num_layers_to_build: the embedding (the loss) is not a transformer layer, so the
        // virtual stage that holds it builds one fewer.
        if (l.account_for_embedding_in_pipeline_split && stage == 0 && chunk == 0) --n;
        if (l.account_for_loss_in_pipeline_split && stage == l.pp - 1 && chunk == l.vpp - 1) --n;
        out[v] = n;
    }
    return out;
}

std::int64_t layers_on_virtual_stage(const ModelSpec& m, const Layout& l, int stage, int chunk) {
    return virtual_stage_layers(m, l).at(static_cast<std::size_t>(chunk) * static_cast<std::size_t>(l.pp) +
                                         static_cast<std::size_t>(stage));
}

std::int64_t layers_on_stage(const ModelSpec& m, const Layout& l, int stage) {
    if (!l.layers_per_stage.empty() && l.pipeline_layout.empty())
        return l.layers_per_stage.at(static_cast<std::size_t>(stage));
    const std::vector<std::int64_t> per = virtual_stage_layers(m, l);
    std::int64_t n = 0;
    for (int c = 0; c < l.vpp; ++c)
        n += per.at(static_cast<std::size_t>(c) * static_cast<std::size_t>(l.pp) +
                    static_cast<std::size_t>(stage));
    return n;
}

std::vector<std::int64_t> stage_layer_indices(const ModelSpec& m, const Layout& l, int stage) {
    std::vector<std::int64_t> out;
    const std::vector<std::int64_t> per = virtual_stage_layers(m, l);
    std::int64_t first = 0;
    for (std::size_t v = 0; v < per.size(); ++v) {
        if (static_cast<int>(v % static_cast<std::size_t>(l.pp)) == stage)
            for (std::int64_t i = first; i < first + per[v]; ++i)
                out.push_back(i);
        first += per[v];
    }
    return out;
}

std::vector<std::string> RecomputeModules::names(bool with_mla_up_proj) const {
    std::vector<std::string> out;
    for (const auto& [on, name] : {std::pair{core_attn, "core_attn"},
                                   {layernorm, "layernorm"},
                                   {mlp, "mlp"},
                                   {moe, "moe"},
                                   {moe_act, "moe_act"},
                                   {shared_experts, "shared_experts"},
                                   {with_mla_up_proj, "mla_up_proj"}})
        if (on) out.emplace_back(name);
    return out;
}

namespace {
/// Collects the violations of one layout check after another (the order is the order of the messages).
struct Violations {
    std::vector<LayoutViolation> list;
    void add(LayoutCheck c, std::string message) { list.push_back({c, std::move(message)}); }
    void divides(LayoutCheck c, const char* what, std::int64_t divisor, const char* of, std::int64_t value) {
        if (divisor <= 0 || value % divisor != 0)
            add(c, fmt::format("{} = {} does not divide {} = {}", what, divisor, of, value));
    }
    void positive(LayoutCheck c, const char* what, std::int64_t v) {
        if (v <= 0) add(c, fmt::format("{} = {} must be positive", what, v));
    }
    void at_most(const std::string& what, std::int64_t v, std::int64_t limit) {
        if (v > limit)
            add(LayoutCheck::size_limit,
                fmt::format("{} = {} is above the limit of {} (trainsim/limits.hpp)", what, v, limit));
    }
};

/// Layout::recompute_modules: beyond the default, only with recompute selective; the MoE modules need an
/// MoE model (shared_experts one with shared experts).
/// Layout::recompute_modules as the workload writes it: ["core_attn", "mla_up_proj"].
std::string recompute_modules_text(const Layout& l) {
    std::string out;
    for (const std::string& name : l.recompute_modules.names(l.recompute_modules.mla_up_proj))
        out += fmt::format("{}\"{}\"", out.empty() ? "" : ", ", name);
    return "[" + out + "]";
}

void recompute_module_violations(const ModelSpec& m, const Layout& l, Violations& v) {
    const RecomputeModules& r = l.recompute_modules;
    if (r.beyond_default() && l.recompute != Recompute::selective)
        v.add(LayoutCheck::recompute_layers,
              fmt::format("layout.recompute_modules other than [\"core_attn\"] needs layout.recompute = "
                          "\"selective\" (it is \"{}\")",
                          to_string(l.recompute)));
    if ((r.moe || r.moe_act) && !m.moe())
        v.add(LayoutCheck::recompute_layers,
              "layout.recompute_modules \"moe\" / \"moe_act\" need an MoE model (model.num_experts > 0)");
    if (r.shared_experts && m.moe_shared_expert_ffn_hidden <= 0)
        v.add(LayoutCheck::recompute_layers,
              "layout.recompute_modules \"shared_experts\" needs model.moe_shared_expert_ffn_hidden > 0");
}

/// The model's transformer layers with its MTP layers (both bounded by limits::kMaxLayers: the sum fits).
std::int64_t layers_with_mtp(const ModelSpec& m) {
    return std::max<std::int64_t>(m.layers, 0) + std::max<std::int64_t>(m.mtp_layers, 0);
}

/// The size checks of check_sizes, into `out`.
void size_violations(const ModelSpec& m, const Layout& l, Violations& out) {
    // The model's and the layout's fields with a limit of trainsim/limits.hpp, as their schemas state it.
    for (const auto& f : model_fields())
        if (f.kind == schema::Kind::integer && f.range && !f.range->hi_source.empty())
            out.at_most("model." + f.name, std::get<std::int64_t>(f.get(m)),
                        static_cast<std::int64_t>(f.range->hi));
    for (const auto& f : layout_fields())
        if (f.kind == schema::Kind::integer && f.range && !f.range->hi_source.empty())
            out.at_most("layout." + f.name, std::get<std::int64_t>(f.get(l)),
                        static_cast<std::int64_t>(f.range->hi));
    if (m.seq_len > 0 && l.micro_batch > 0)
        out.at_most("layout.micro_batch * model.seq_len (tokens per micro-batch)", l.micro_batch * m.seq_len,
                    limits::kMaxTokensPerMicroBatch);
    if (l.micro_batch > 0 && l.dp > 0 && l.global_batch > 0) {
        const std::int64_t micro_batches = l.global_batch / (l.micro_batch * l.dp);
        out.at_most("layout.global_batch / (layout.micro_batch * layout.dp) (micro-batches per step)",
                    micro_batches, limits::kMaxMicroBatchesPerStep);
        // One factor at a time, so the product cannot overflow (each is bounded above).
        // The MTP layers (model.mtp_layers, each a transformer layer on the last stage) count as layers.
        std::int64_t passes = layers_with_mtp(m) * micro_batches;
        for (const std::int64_t f : {std::int64_t{1}, std::int64_t{l.dp}, std::int64_t{l.cp}}) {
            passes *= std::max<std::int64_t>(f, 1);
            if (passes > limits::kMaxLayerPassesPerStep) {
                out.at_most(
                    "(model.layers + model.mtp_layers) * micro-batches per step * layout.dp * layout.cp "
                    "(layer "
                    "passes per step)",
                    passes, limits::kMaxLayerPassesPerStep);
                return;
            }
        }
        // DeepSpeed ZeRO-3 fetches every module's weights over DP and reduces its gradients per module: a
        // layer pass costs about 4 plain ones; it weighs 8 (limits::kDeepSpeedStage3PassWeight).
        if (l.framework == Framework::deepspeed && l.zero_stage == 3) {
            out.at_most(
                fmt::format("(model.layers + model.mtp_layers) * micro-batches per step * layout.dp * "
                            "layout.cp * layout.tp * {0} (GPU layer passes per step, a DeepSpeed ZeRO-3 pass "
                            "weighing {0})",
                            limits::kDeepSpeedStage3PassWeight),
                passes * std::max<std::int64_t>(l.tp, 1) * limits::kDeepSpeedStage3PassWeight,
                limits::kMaxGpuLayerPassesPerStep);
            return;
        }
        // passes <= 2^21 here and layout.tp is bounded by its range: the product stays far inside 64 bits.
        out.at_most(
            "(model.layers + model.mtp_layers) * micro-batches per step * layout.dp * layout.cp * layout.tp "
            "(GPU layer passes per step)",
            passes * std::max<std::int64_t>(l.tp, 1), limits::kMaxGpuLayerPassesPerStep);
    }
}
}  // namespace

std::int64_t gpu_layer_passes_per_step(const ModelSpec& m, const Layout& l) {
    const std::int64_t micro_batches = l.global_batch / std::max<std::int64_t>(l.micro_batch * l.dp, 1);
    std::int64_t passes = layers_with_mtp(m) * micro_batches;
    for (const std::int64_t f : {std::int64_t{l.dp}, std::int64_t{l.cp}, std::int64_t{l.tp}})
        passes *= std::max<std::int64_t>(f, 1);
    return passes;
}

std::int64_t program_layer_passes(const ModelSpec& m, const Layout& l) {
    const std::int64_t weighed = std::max<std::int64_t>(m.layers, 0) +
                                 limits::kMtpLayerProgramPassWeight * std::max<std::int64_t>(m.mtp_layers, 0);
    return weighed * (l.global_batch / std::max<std::int64_t>(l.micro_batch * l.dp, 1));
}

void check_sizes(const ModelSpec& m, const Layout& l) {
    Violations v;
    size_violations(m, l, v);
    if (!v.list.empty()) throw InputError(v.list.front().message);
}

namespace {

/// The checks of Layout::pipeline_layout (as Megatron-Core's PipelineParallelLayerLayout.__init__ and
/// validate_layer_layout), into `v`.
void pipeline_layout_violations(const ModelSpec& m, const Layout& l, Violations& v) {
    using C = LayoutCheck;
    const std::string field =
        fmt::format("layout.pipeline_layout = \"{}\"", clip_for_message(l.pipeline_layout));
    if (!l.layers_per_stage.empty() || l.account_for_embedding_in_pipeline_split ||
        l.account_for_loss_in_pipeline_split) {
        v.add(C::layers_per_stage, field +
                                       " cannot be combined with layout.layers_per_stage or the "
                                       "account_for_*_in_pipeline_split flags (Megatron refuses it)");
        return;
    }
    std::vector<VirtualStageLayout> stages;
    try {
        stages = parse_pipeline_layout(l.pipeline_layout);
    } catch (const InputError& e) {
        v.add(C::layers_per_stage, e.what());
        return;
    }
    const std::size_t want = static_cast<std::size_t>(l.pp) * static_cast<std::size_t>(l.vpp);
    if (stages.size() != want) {
        v.add(C::layers_per_stage, fmt::format("{} has {} stages; layout.pp * layout.vpp = {} * {} = {}",
                                               field, stages.size(), l.pp, l.vpp, want));
        return;
    }
    std::int64_t decoders = 0, mtps = 0, embeddings = 0, losses = 0;
    for (const auto& st : stages) {
        decoders += st.decoder_layers;
        mtps += st.mtp_layers;
        embeddings += std::count(st.layers.begin(), st.layers.end(), 'E');
        losses += std::count(st.layers.begin(), st.layers.end(), 'L');
    }
    const auto& first = stages.front().layers;
    const auto& last = stages.back().layers;
    if (embeddings != 1 || first.empty() || first.front() != 'E')
        v.add(C::layers_per_stage, field + " must start with the embedding 'E', once");
    if (losses != 1 || last.empty() || last.back() != 'L')
        v.add(C::layers_per_stage, field + " must end with the loss 'L', once");
    if (decoders != m.layers)
        v.add(C::layers_per_stage,
              fmt::format("{} has {} transformer layers 't'; model.layers = {}", field, decoders, m.layers));
    if (mtps != m.mtp_layers)
        v.add(C::layers_per_stage,
              fmt::format("{} has {} MTP layers 'm'; model.mtp_layers = {}", field, mtps, m.mtp_layers));
    if (mtps > 0 && (stages.back().mtp_layers != mtps || last.find('t', last.find('m')) != std::string::npos))
        v.add(C::layers_per_stage, field +
                                       ": the MTP layers 'm' must be in the last stage, after its 't's "
                                       "(a standalone MTP stage is not modelled)");
}

/// The model's sizes and shape (layout_violations' first checks); false when a size is not positive (the
/// later checks divide by them).
bool model_size_violations(const ModelSpec& m, Violations& v) {
    using C = LayoutCheck;
    v.positive(C::positive, "model.layers", m.layers);
    v.positive(C::positive, "model.hidden", m.hidden);
    v.positive(C::positive, "model.heads", m.heads);
    v.positive(C::positive, "model.kv_heads", m.kv_heads);
    v.positive(C::positive, "model.ffn_hidden", m.ffn_hidden);
    v.positive(C::positive, "model.vocab", m.vocab);
    v.positive(C::positive, "model.seq_len", m.seq_len);
    if (!v.list.empty()) return false;  // the checks below divide by these
    if (m.head_dim_override == 0)       // head_dim = hidden / heads
        v.divides(C::model_shape, "model.heads", m.heads, "model.hidden", m.hidden);
    v.divides(C::model_shape, "model.kv_heads", m.kv_heads, "model.heads", m.heads);
    return true;
}

/// The layout's sizes, limits and recompute settings; sets `bad_size` (a limit exceeded) and returns true
/// when a size the later checks divide by is not positive.
bool layout_size_violations(const ModelSpec& m, const Layout& l, int cluster_gpus, Violations& v,
                            bool& bad_size) {
    using C = LayoutCheck;
    const std::size_t before_positive = v.list.size();
    v.positive(C::positive, "layout.tp", l.tp);
    v.positive(C::positive, "layout.pp", l.pp);
    // dp = 0 is what a rank grid of tp * pp * cp not dividing the GPUs gives (the sweep's derived dp): said
    // so, with the sizes that do not divide (a sweep's `--fix tp=3` on 64 GPUs read "layout.dp = 0 must be
    // positive").
    const std::int64_t cells = std::int64_t{l.tp} * l.pp * l.cp;
    if (l.dp == 0 && l.tp > 0 && l.pp > 0 && l.cp > 0 && cluster_gpus > 0 && cluster_gpus % cells != 0)
        v.add(
            C::gpu_count,
            fmt::format("layout.tp * layout.pp * layout.cp = {} * {} * {} = {} does not divide the cluster's "
                        "GPUs = {} (layout.dp = 0)",
                        l.tp, l.pp, l.cp, cells, cluster_gpus));
    else
        v.positive(C::gpu_count, "layout.dp", l.dp);
    bool not_positive = v.list.size() > before_positive;
    bad_size = false;
    {
        const std::size_t n = v.list.size();
        size_violations(m, l, v);
        bad_size = v.list.size() > n;
    }
    if (l.recompute_num_layers < 0 || (l.recompute_num_layers > 0 && l.recompute != Recompute::full))
        v.add(C::recompute_layers,
              fmt::format("layout.recompute_num_layers = {} needs layout.recompute = \"full\" (it is "
                          "Megatron's block recompute of the first N layers of each model chunk)",
                          l.recompute_num_layers));
    if (l.recompute_mla_up_proj && (l.recompute != Recompute::selective || !m.mla())) {
        // Named as the user wrote it: the recompute_modules list, or the flag itself.
        const std::string what =
            l.recompute_modules.mla_up_proj
                ? fmt::format("layout.recompute_modules = {} lists \"mla_up_proj\", which",
                              recompute_modules_text(l))
                : std::string("layout.recompute_mla_up_proj = true");
        std::string needs;
        if (l.recompute != Recompute::selective)
            needs = fmt::format("layout.recompute = \"selective\" (it is \"{}\")", to_string(l.recompute));
        if (!m.mla())
            needs +=
                fmt::format("{}model.attention_type = \"mla\" (it is \"{}\")", needs.empty() ? "" : " and ",
                            attention_type_names().at(static_cast<std::size_t>(m.attention_type)));
        v.add(C::recompute_layers, fmt::format("{} needs {}", what, needs));
    }
    recompute_module_violations(m, l, v);
    {
        const std::size_t n = v.list.size();
        v.positive(C::positive, "layout.vpp", l.vpp);
        v.positive(C::positive, "layout.micro_batch", l.micro_batch);
        v.positive(C::positive, "layout.global_batch", l.global_batch);
        v.positive(C::positive, "layout.cp", l.cp);
        v.positive(C::positive, "layout.ep", l.ep);
        if (l.etp < 0) v.add(C::positive, fmt::format("layout.etp = {} must be 0 (= tp) or positive", l.etp));
        not_positive = not_positive || v.list.size() > n;
    }
    return not_positive;
}

/// The rank-grid checks: context parallelism, TP, the GPU count, expert parallelism, the batch split.
void grid_violations(const ModelSpec& m, const Layout& l, int cluster_gpus, bool bad_size, Violations& v) {
    using C = LayoutCheck;
    if (l.cp > 1 && m.seq_len % (2 * l.cp) != 0)
        v.add(C::cp_seq_len,
              fmt::format("layout.cp = {}: 2 * cp does not divide model.seq_len = {} (each CP rank holds two "
                          "chunks of the sequence)",
                          l.cp, m.seq_len));
    if (l.cp > 1 && !l.fused_attention())
        v.add(C::cp_attention,
              fmt::format("layout.cp = {} needs layout.attention = \"flash\" (ring attention "
                          "is a fused attention kernel)",
                          l.cp));
    // Neither TransformerEngine's p2p ring nor PyTorch's context_parallel runs a sliding window.
    if (l.cp > 1 && m.sliding_window > 0)
        v.add(C::cp_attention,
              fmt::format("layout.cp = {} with model.sliding_window = {}: context parallelism over a sliding "
                          "window is not modelled",
                          l.cp, m.sliding_window));
    v.divides(C::tp_heads, "layout.tp", l.tp, "model.heads", m.heads);
    v.divides(C::tp_kv_heads, "layout.tp", l.tp, "model.kv_heads", m.kv_heads);
    if (m.moe_layer_count() < m.layers)  // some layer has a dense MLP ffn_hidden wide
        v.divides(C::tp_ffn_hidden, "layout.tp", l.tp, "model.ffn_hidden", m.ffn_hidden);
    if (l.sequence_parallel && m.seq_len % l.tp != 0)
        v.add(C::tp_seq_len,
              fmt::format("layout.tp = {} does not divide model.seq_len = {} (sequence_parallel needs it)",
                          l.tp, m.seq_len));
    if (!bad_size) {  // within the limits the product cannot overflow
        const std::int64_t gpus = static_cast<std::int64_t>(l.tp) * l.pp * l.dp * l.cp;
        if (gpus != cluster_gpus)
            v.add(
                C::gpu_count,
                fmt::format("layout.tp * layout.pp * layout.dp{} = {} does not equal the cluster's GPUs = {}",
                            l.cp > 1 ? fmt::format(" * layout.cp = {} * {} * {} * {}", l.tp, l.pp, l.dp, l.cp)
                                     : fmt::format(" = {} * {} * {}", l.tp, l.pp, l.dp),
                            gpus, cluster_gpus));
    }
    if (m.moe()) {
        // Megatron-LM arguments.py: "Number of experts should be a multiple of expert model parallel_size";
        // parallel_state.py initialize_model_parallel: the expert rank generator (etp-ep-edp) needs
        // expert_tensor_parallel_size * expert_model_parallel_size to divide the ranks of a pipeline stage.
        v.divides(C::ep_experts, "layout.ep", l.ep, "model.num_experts", m.num_experts);
        if (!bad_size) {
            const std::int64_t stage_ranks = static_cast<std::int64_t>(l.tp) * l.cp * l.dp;
            const std::int64_t expert_ranks = static_cast<std::int64_t>(l.expert_tp()) * l.ep;
            if (stage_ranks % expert_ranks != 0)
                v.add(C::ep_grid,
                      fmt::format(
                          "layout.etp * layout.ep = {} * {} = {} does not divide the ranks of a pipeline "
                          "stage, layout.tp * layout.cp * layout.dp = {} * {} * {} = {}{}",
                          l.expert_tp(), l.ep, expert_ranks, l.tp, l.cp, l.dp, stage_ranks,
                          l.etp > 0 ? "" : " (etp = 0: etp is tp)"));
        }
        if (m.expert_ffn() % l.expert_tp() != 0)
            v.add(C::etp_ffn_hidden,
                  fmt::format("layout.etp = {}{} does not divide the routed experts' FFN width "
                              "model.moe_ffn_hidden = {}",
                              l.expert_tp(), l.etp > 0 ? "" : " (etp = 0: etp is tp)", m.expert_ffn()));
    }
    if (l.global_batch % (l.micro_batch * l.dp) != 0)
        v.add(C::batch_split,
              fmt::format("layout.global_batch = {} is not divisible by layout.micro_batch * layout.dp = "
                          "{} * {} = {}",
                          l.global_batch, l.micro_batch, l.dp, l.micro_batch * l.dp));
}

/// The pipeline split: pipeline_layout, layers_per_stage, or the even split (with the account_for_* flags).
void split_violations(const ModelSpec& m, const Layout& l, Violations& v) {
    using C = LayoutCheck;
    if (!l.pipeline_layout.empty()) {
        pipeline_layout_violations(m, l, v);
    } else if (!l.layers_per_stage.empty()) {
        if (l.account_for_embedding_in_pipeline_split || l.account_for_loss_in_pipeline_split)
            v.add(
                C::layers_per_stage,
                "layout.layers_per_stage cannot be combined with "
                "layout.account_for_embedding_in_pipeline_split or layout.account_for_loss_in_pipeline_split "
                "(Megatron-LM refuses the combination)");
        if (static_cast<int>(l.layers_per_stage.size()) != l.pp)
            v.add(C::layers_per_stage, fmt::format("layout.layers_per_stage has {} entries; layout.pp = {}",
                                                   l.layers_per_stage.size(), l.pp));
        bool entries_ok = true;
        for (auto n : l.layers_per_stage) {
            if (n < 0) {
                v.add(C::layers_per_stage, fmt::format("layout.layers_per_stage has a negative entry {}", n));
                entries_ok = false;
                break;
            }
            if (n > limits::kMaxLayers) {
                v.at_most("a layout.layers_per_stage entry", n, limits::kMaxLayers);
                entries_ok = false;
                break;
            }
        }
        if (entries_ok) {  // entries within the limit: the sum cannot overflow
            const auto sum =
                std::accumulate(l.layers_per_stage.begin(), l.layers_per_stage.end(), std::int64_t{0});
            if (sum != m.layers)
                v.add(C::layers_per_stage,
                      fmt::format("layout.layers_per_stage sums to {}; model.layers = {}", sum, m.layers));
        }
        if (l.vpp > 1)
            for (auto n : l.layers_per_stage)
                if (n % l.vpp != 0) {
                    v.add(C::vpp_layers,
                          fmt::format(
                              "layout.vpp = {} does not divide layout.layers_per_stage entry {} (to count "
                              "the embedding and the loss as layers under VPP, set "
                              "account_for_embedding_in_pipeline_split and "
                              "account_for_loss_in_pipeline_split instead of layers_per_stage)",
                              l.vpp, n));
                    break;
                }
    } else {
        const std::int64_t split = pipeline_split_layers(m, l);
        const bool accounted = split != m.layers;
        const std::string counted =
            accounted ? fmt::format("the {} layers of the split (model.layers = {}{}{})", split, m.layers,
                                    l.account_for_embedding_in_pipeline_split ? " + the embedding" : "",
                                    l.account_for_loss_in_pipeline_split ? " + the loss" : "")
                      : "";
        if (split % l.pp != 0)
            v.add(C::pp_layers, accounted
                                    ? fmt::format("layout.pp = {} does not divide {}", l.pp, counted)
                                    : fmt::format("layout.pp = {} does not divide model.layers = {}; state "
                                                  "the uneven split in layout.layers_per_stage or "
                                                  "layout.pipeline_layout",
                                                  l.pp, m.layers));
        if ((split / l.pp) % l.vpp != 0)
            v.add(C::vpp_layers,
                  fmt::format("layout.vpp = {} does not divide the {} layers per pipeline stage{}", l.vpp,
                              split / l.pp, accounted ? " (" + counted + ")" : ""));
    }
}

/// The schedule, ZeRO, adapter, offload and bucket settings.
void option_violations(const ModelSpec& m, const Layout& l, Violations& v) {
    using C = LayoutCheck;
    if (l.vpp > 1 && l.pp == 1)
        v.add(C::vpp_needs_pp, fmt::format("layout.vpp = {} needs layout.pp > 1", l.vpp));
    if (l.vpp > 1 && l.schedule != Schedule::one_f_one_b)
        v.add(C::vpp_schedule, "layout.vpp > 1 needs layout.schedule = \"1f1b\" (interleaved 1F1B)");
    if (l.vpp > 1 && l.micro_batches() % l.pp != 0)
        v.add(C::vpp_micro_batches,
              fmt::format("layout.vpp = {} (interleaved 1F1B) needs the {} micro-batches per pipeline to "
                          "be a multiple of layout.pp = {}",
                          l.vpp, l.micro_batches(), l.pp));
    if (l.zero_stage < 0 || l.zero_stage > 3)
        v.add(C::zero_stage, fmt::format("layout.zero_stage = {} must be 0, 1, 2 or 3", l.zero_stage));
    if (l.adapter != Adapter::none) {
        v.positive(C::adapter, "layout.lora_rank", l.lora_rank);
        if (l.lora_rank > m.hidden)
            v.add(C::adapter,
                  fmt::format("layout.lora_rank = {} exceeds model.hidden = {}", l.lora_rank, m.hidden));
        const auto& t = l.lora_targets;
        if (!t.qkv && !t.proj && !t.fc1 && !t.fc2)
            v.add(C::adapter, "layout.lora_targets is empty: name at least one of qkv, proj, fc1, fc2");
    }
    if (l.offload_optimizer == Offload::nvme && l.zero_stage != 3)
        v.add(C::offload,
              fmt::format(
                  "layout.offload_optimizer = \"nvme\" needs layout.zero_stage = 3 (ZeRO-Infinity), not {}",
                  l.zero_stage));
    if (!(l.dp_bucket_bytes >= 0))
        v.add(C::dp_bucket,
              fmt::format("layout.dp_bucket_size = {} B must be 0 (the framework's default) or positive",
                          l.dp_bucket_bytes));
    if (l.apex_distributed_adam && (l.optimizer != Optimizer::adam || l.offload_optimizer != Offload::none ||
                                    l.zero_stage != 0 || l.framework != Framework::megatron))
        v.add(C::optimizer_impl,
              fmt::format(
                  "layout.apex_distributed_adam = true needs optimizer \"adam\", no offload, zero_stage "
                  "0 and framework \"megatron\" (NeMo's Apex DistributedFusedAdam), not \"{}\", "
                  "\"{}\", {}, \"{}\"",
                  to_string(l.optimizer), to_string(l.offload_optimizer), l.zero_stage,
                  to_string(l.framework)));
    if (l.fp8_attention && (l.precision != Precision::fp8 || l.attention != AttentionKernel::cudnn))
        v.add(C::fp8_attention,
              fmt::format("layout.fp8_attention = true needs precision \"fp8\" and attention \"cudnn\" "
                          "(TransformerEngine's FP8 fused attention), not \"{}\" and \"{}\"",
                          to_string(l.precision), to_string(l.attention)));
    if (l.adam_moments_bf16 &&
        (l.optimizer != Optimizer::adam || l.offload_optimizer != Offload::none || l.apex_distributed_adam))
        v.add(C::adam_moments,
              fmt::format("layout.adam_moments_bf16 = true needs optimizer \"adam\" on the GPU without "
                          "apex_distributed_adam (Megatron-Core's precision-aware FusedAdam), not \"{}\", "
                          "offload \"{}\", apex_distributed_adam {}",
                          to_string(l.optimizer), to_string(l.offload_optimizer), l.apex_distributed_adam));
    if (l.activation_offload_layers != 0 &&
        (l.activation_offload_layers < 0 || l.activation_offload_layers >= m.layers || l.pp != 1 ||
         l.recompute != Recompute::none || l.framework != Framework::megatron || l.moe_a2a_overlap))
        v.add(
            C::activation_offload,
            fmt::format(
                "layout.activation_offload_layers = {} needs 0 <= N < model.layers = {}, layout.pp = 1 "
                "(it is {}), layout.recompute = \"none\" (it is \"{}\"), framework \"megatron\" (it "
                "is \"{}\") and no moe_a2a_overlap, as Megatron-Core's --cpu-offloading-num-layers",
                l.activation_offload_layers, m.layers, l.pp, to_string(l.recompute), to_string(l.framework)));
}

/// Expert parallelism without experts, and the MoE and MLA fields' consistency.
void moe_mla_violations(const ModelSpec& m, const Layout& l, Violations& v) {
    using C = LayoutCheck;
    if (!m.moe() && (l.ep > 1 || l.etp > 0))
        v.add(C::ep_needs_moe,
              fmt::format(
                  "layout.ep = {}, layout.etp = {}: expert parallelism needs a mixture-of-experts model "
                  "(model.num_experts = 0)",
                  l.ep, l.etp));
    if (l.moe_a2a_overlap && l.pp > 1 && l.vpp <= 1)
        v.add(C::moe_shape,
              fmt::format("layout.moe_a2a_overlap with layout.pp = {} needs layout.vpp > 1 (Megatron-Core "
                          "asserts it for --overlap-moe-expert-parallel-comm)",
                          l.pp));
    if (m.moe()) {
        if (m.moe_top_k > m.num_experts)
            v.add(C::moe_shape, fmt::format("model.moe_top_k = {} exceeds model.num_experts = {}",
                                            m.moe_top_k, m.num_experts));
        if (m.moe_layer_count() == 0)
            v.add(C::moe_shape,
                  fmt::format("model.moe_first_dense_layers = {} leaves no MoE layer of model.layers = {}",
                              m.moe_first_dense_layers, m.layers));
        if (m.moe_shared_expert_ffn_hidden % l.tp != 0)
            v.add(C::moe_shape,
                  fmt::format("layout.tp = {} does not divide model.moe_shared_expert_ffn_hidden = {} "
                              "(the shared experts are split over TP)",
                              l.tp, m.moe_shared_expert_ffn_hidden));
    }
    if (m.mla()) {
        if (m.kv_lora_rank <= 0 || m.v_head_dim <= 0)
            v.add(C::mla_shape,
                  fmt::format("model.attention_type = \"mla\" needs model.kv_lora_rank and model.v_head_dim "
                              "(got {} and {})",
                              m.kv_lora_rank, m.v_head_dim));
        if (m.kv_heads != m.heads)
            v.add(C::mla_shape,
                  fmt::format(
                      "model.attention_type = \"mla\" has no grouped-query attention: model.kv_heads = {} "
                      "must equal model.heads = {}",
                      m.kv_heads, m.heads));
        if (m.qk_layernorm)
            v.add(C::mla_shape,
                  "model.qk_layernorm = true with model.attention_type = \"mla\": MLA's q / kv latent norms "
                  "are part of its attention (leave qk_layernorm false)");
        if (m.sliding_window > 0)
            v.add(C::mla_shape, fmt::format("model.sliding_window = {} with model.attention_type = \"mla\": "
                                            "windowed MLA is not modelled",
                                            m.sliding_window));
    } else if (m.q_lora_rank > 0 || m.kv_lora_rank > 0 || m.qk_rope_head_dim > 0 || m.v_head_dim > 0) {
        // Each field given is named with its value (a --set of one is then blamed on that --set).
        std::string given;
        for (const auto& [name, value] : {std::pair<const char*, std::int64_t>{"q_lora_rank", m.q_lora_rank},
                                          {"kv_lora_rank", m.kv_lora_rank},
                                          {"qk_rope_head_dim", m.qk_rope_head_dim},
                                          {"v_head_dim", m.v_head_dim}})
            if (value > 0) given += fmt::format("{}model.{} = {}", given.empty() ? "" : ", ", name, value);
        v.add(C::mla_shape, given +
                                ": model.q_lora_rank, kv_lora_rank, qk_rope_head_dim and v_head_dim need "
                                "model.attention_type = \"mla\"");
    }
    // What the program builder does not model, refused here with the same words so that a --set that asks
    // for it is blamed on that --set (resolve_inputs), not on the file, and before any simulation.
    if (m.moe() && l.zero_stage >= 3 && l.dp * l.cp > 1)
        v.add(C::zero_stage,
              fmt::format("layout.zero_stage = {}: ZeRO-3 / FSDP with an MoE model (model.num_experts "
                          "= {}) is not modelled",
                          l.zero_stage, m.num_experts));
    if (m.mla() && l.adapter != Adapter::none)
        v.add(C::adapter, fmt::format("layout.adapter = \"{}\" with model.attention_type = \"mla\": adapters "
                                      "on multi-head latent attention are not modelled",
                                      to_string(l.adapter)));
    if (m.mla() && l.framework == Framework::deepspeed && l.zero_stage >= 3 && l.dp > 1)
        v.add(C::mla_shape,
              "model.attention_type = \"mla\" with DeepSpeed ZeRO-3 (layout.framework = \"deepspeed\", "
              "zero_stage 3): its per-module weight fetches are not modelled for MLA");
}

}  // namespace

std::vector<LayoutViolation> layout_violations(const ModelSpec& m, const Layout& l, int cluster_gpus) {
    Violations v;
    if (!model_size_violations(m, v)) return v.list;
    bool bad_size = false;
    if (layout_size_violations(m, l, cluster_gpus, v, bad_size))
        return v.list;  // the checks below divide by these
    grid_violations(m, l, cluster_gpus, bad_size, v);
    split_violations(m, l, v);
    option_violations(m, l, v);
    moe_mla_violations(m, l, v);
    return v.list;
}

void check_layout(const ModelSpec& m, const Layout& l, int cluster_gpus) {
    const auto v = layout_violations(m, l, cluster_gpus);
    if (!v.empty()) throw InputError(v.front().message);
}

bool is_grid_check(LayoutCheck c) {
    return static_cast<int>(c) <= static_cast<int>(LayoutCheck::etp_ffn_hidden);
}

std::int64_t offload_window_layer(std::int64_t layers, std::int64_t offloaded, std::int64_t group) {
    if (offloaded <= 0 || offloaded >= layers || group < 0 || group >= offloaded)
        throw InternalError(
            fmt::format("offload_window_layer({}, {}, {}): out of range", layers, offloaded, group));
    const std::int64_t rem = layers % offloaded;
    const std::int64_t w = (layers / offloaded) * (group + 1) - 1;
    return w + (group < rem ? group + 1 : rem);
}

std::string to_string(LayoutCheck c) {
    switch (c) {
        case LayoutCheck::gpu_count:
            return "tp*pp*cp does not divide the GPUs";
        case LayoutCheck::cp_seq_len:
            return "2*cp does not divide seq_len";
        case LayoutCheck::cp_attention:
            return "cp > 1 needs flash attention and no sliding window";
        case LayoutCheck::tp_heads:
            return "tp does not divide heads";
        case LayoutCheck::tp_kv_heads:
            return "tp does not divide kv_heads";
        case LayoutCheck::tp_ffn_hidden:
            return "tp does not divide ffn_hidden";
        case LayoutCheck::tp_seq_len:
            return "tp does not divide seq_len (sequence parallel)";
        case LayoutCheck::batch_split:
            return "global_batch not divisible by micro_batch*dp";
        case LayoutCheck::pp_layers:
            return "pp does not divide layers";
        case LayoutCheck::vpp_layers:
            return "vpp does not divide the layers per stage";
        case LayoutCheck::vpp_schedule:
            return "vpp > 1 needs the 1f1b schedule";
        case LayoutCheck::vpp_micro_batches:
            return "vpp > 1: micro-batches not a multiple of pp";
        case LayoutCheck::ep_experts:
            return "ep does not divide num_experts";
        case LayoutCheck::ep_grid:
            return "etp*ep does not divide tp*cp*dp";
        case LayoutCheck::etp_ffn_hidden:
            return "etp does not divide moe_ffn_hidden";
        case LayoutCheck::positive:
            return "a size is not positive";
        case LayoutCheck::model_shape:
            return "heads do not divide hidden or kv_heads do not divide heads";
        case LayoutCheck::size_limit:
            return "above a limit of trainsim/limits.hpp";
        case LayoutCheck::recompute_layers:
            return "recompute_num_layers needs recompute full";
        case LayoutCheck::layers_per_stage:
            return "layers_per_stage does not match pp or the layers";
        case LayoutCheck::vpp_needs_pp:
            return "vpp > 1 needs pp > 1";
        case LayoutCheck::zero_stage:
            return "zero_stage not 0, 1, 2 or 3";
        case LayoutCheck::adapter:
            return "LoRA rank or targets invalid";
        case LayoutCheck::offload:
            return "nvme offload needs zero_stage 3";
        case LayoutCheck::dp_bucket:
            return "dp_bucket_size negative";
        case LayoutCheck::ep_needs_moe:
            return "ep > 1 needs a MoE model";
        case LayoutCheck::moe_shape:
            return "MoE fields inconsistent";
        case LayoutCheck::mla_shape:
            return "MLA fields inconsistent";
        case LayoutCheck::optimizer_impl:
            return "apex_distributed_adam needs adam without ZeRO or offload";
        case LayoutCheck::adam_moments:
            return "adam_moments_bf16 needs adam on the GPU";
        case LayoutCheck::activation_offload:
            return "activation_offload_layers needs 0 <= N < layers, pp 1, no recompute";
        case LayoutCheck::fp8_attention:
            return "fp8_attention needs precision fp8 and attention cudnn";
    }
    return "?";
}

std::string to_string(Schedule s) {
    return s == Schedule::gpipe ? "gpipe" : "1f1b";
}

std::string to_string(Recompute r) {
    switch (r) {
        case Recompute::none:
            return "none";
        case Recompute::selective:
            return "selective";
        case Recompute::selective_op:
            return "selective_op";
        case Recompute::full:
            return "full";
    }
    return "?";
}

std::string to_string(AttentionKernel a) {
    switch (a) {
        case AttentionKernel::flash:
            return "flash";
        case AttentionKernel::cudnn:
            return "cudnn";
        case AttentionKernel::unfused:
            return "unfused";
        case AttentionKernel::flash1:
            return "flash1";
    }
    return "?";
}

std::string to_string(Fp8Recipe r) {
    switch (r) {
        case Fp8Recipe::delayed:
            return "delayed";
        case Fp8Recipe::tensorwise:
            return "tensorwise";
        case Fp8Recipe::rowwise:
            return "rowwise";
        case Fp8Recipe::mxfp8:
            return "mxfp8";
        case Fp8Recipe::nvfp4:
            return "nvfp4";
    }
    return "?";
}

double adapter_params_per_layer(const ModelSpec& m, const Layout& l) {
    if (l.adapter == Adapter::none) return 0.0;
    const double r = static_cast<double>(l.lora_rank);
    const double h = static_cast<double>(m.hidden);
    const double q = static_cast<double>(m.heads * m.head_dim());
    const double kv = static_cast<double>(m.kv_heads * m.head_dim());
    const double f = static_cast<double>(m.ffn_hidden);
    const bool swiglu = m.mlp == MlpKind::swiglu;
    double p = 0;
    if (l.lora_targets.qkv) p += r * (3 * h + q + 2 * kv);  // q, k, v projections, one adapter each
    if (l.lora_targets.proj) p += r * (q + h);
    if (l.lora_targets.fc1) p += (swiglu ? 2.0 : 1.0) * r * (h + f);
    if (l.lora_targets.fc2) p += r * (f + h);
    return p;
}

double Layout::optimizer_bytes_per_param() const {
    switch (optimizer) {
        case Optimizer::adam:
            if (adam_moments_bf16) return 4.0 + 2.0 + 2.0;
            return apex_param_remainders() ? kApexParamRemainderBytes + 8.0 : 12.0;
        case Optimizer::adam_8bit:
            return 4.0 + 2.0 * (1.0 + 4.0 / 2048.0);
        case Optimizer::sgd_momentum:
            return 8.0;
        case Optimizer::sgd:
            return 4.0;
    }
    return 12.0;
}

std::string to_string(Optimizer o) {
    switch (o) {
        case Optimizer::adam:
            return "adam";
        case Optimizer::adam_8bit:
            return "adam_8bit";
        case Optimizer::sgd_momentum:
            return "sgd_momentum";
        case Optimizer::sgd:
            return "sgd";
    }
    return "?";
}

std::string to_string(Offload o) {
    return o == Offload::none ? "none" : o == Offload::cpu ? "cpu" : "nvme";
}

std::string to_string(Adapter a) {
    return a == Adapter::none ? "none" : a == Adapter::lora ? "lora" : "qlora";
}

const std::vector<std::string>& framework_names() {
    static const std::vector<std::string> names = {"megatron", "deepspeed", "torchtitan", "composer",
                                                   "pytorch"};
    return names;
}

std::optional<Framework> framework_from_string(const std::string& name) {
    const auto& n = framework_names();
    for (std::size_t i = 0; i < n.size(); ++i)
        if (n[i] == name) return static_cast<Framework>(i);
    return std::nullopt;
}

std::string to_string(Framework f) {
    return framework_names().at(static_cast<std::size_t>(f));
}

std::string to_string(CheckpointSave c) {
    return c == CheckpointSave::sharded ? "sharded" : "rank0";
}

std::string to_string(MoeDispatcher d) {
    switch (d) {
        case MoeDispatcher::alltoall:
            return "alltoall";
        case MoeDispatcher::deepep:
            return "deepep";
        case MoeDispatcher::hybridep:
            return "hybridep";
    }
    return "?";
}

}  // namespace trainsim
