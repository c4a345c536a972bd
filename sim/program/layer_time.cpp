#include "trainsim/layer_time.hpp"

#include "layer_ops.hpp"

namespace trainsim {

namespace {
double compute_seconds(const detail::OpTemplate& ops, const std::vector<Segment>& segments,
                       const ComputeModel& compute) {
    double s = 0;
    for (const auto& op : ops)
        if (op.kind == OpKind::compute)
            for (const auto& k : segments[static_cast<std::size_t>(op.segment)].kernels)
                s += compute.seconds(k);
    return s;
}
}  // namespace

LayerComputeTime layer_compute_time(const ModelSpec& m, const Layout& l, const ComputeModel& compute) {
    std::vector<Segment> segments;
    detail::BlockBuilder b(m, l, segments);
    const auto fwd = b.layer_forward();
    const auto bwd = b.layer_backward();
    return {compute_seconds(fwd, segments, compute), compute_seconds(bwd, segments, compute)};
}

ModelSpec layer_model(const ProfileLayer& row) {
    ModelSpec m;
    m.name = row.label;
    m.layers = 1;
    m.hidden = row.hidden;
    m.heads = row.heads;
    m.kv_heads = row.kv_heads;
    m.ffn_hidden = row.ffn_hidden;
    m.vocab = 32000;  // unused: no embedding or head is built
    m.seq_len = row.seq;
    m.mlp = row.mlp == "swiglu" ? MlpKind::swiglu : MlpKind::gelu;
    m.dropout = false;
    return m;
}

Layout layer_layout(const ProfileLayer& row) {
    Layout l;
    l.tp = row.tp;
    l.micro_batch = row.micro_batch;
    l.global_batch = row.micro_batch;
    l.precision = Precision::bf16;
    l.sequence_parallel = false;
    l.attention = row.attention_backend;
    return l;
}

}  // namespace trainsim
