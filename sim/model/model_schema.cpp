// The model's fields, declared once (include/trainsim/schema.hpp): the workload loader's "model" object,
// --set and docs/inputs.md read them from here.
#include "trainsim/limits.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

namespace {

using schema::Range;

constexpr const char* kLimits = "trainsim/limits.hpp";

Range up_to(std::int64_t limit) {
    return {1, static_cast<double>(limit), kLimits};
}

schema::Table<ModelSpec> make_model_fields() {
    using schema::integer_field;
    schema::Table<ModelSpec> t;
    {
        auto f = schema::string_field("name", &ModelSpec::name, "the model's name in reports");
        f.default_doc = "the workload's name";
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("layers", &ModelSpec::layers, up_to(limits::kMaxLayers), "layers",
                              "transformer layers", true));
    t.push_back(integer_field("hidden", &ModelSpec::hidden, up_to(limits::kMaxHidden), "",
                              "hidden size (model width); divisible by heads", true));
    t.push_back(integer_field("heads", &ModelSpec::heads, up_to(limits::kMaxHeads), "",
                              "attention heads; head_dim = hidden / heads", true));
    {
        auto f = integer_field("kv_heads", &ModelSpec::kv_heads, up_to(limits::kMaxHeads), "",
                               "key/value heads (grouped-query attention when < heads); divides heads");
        f.derive_default = [](ModelSpec& m) { m.kv_heads = m.heads; };
        f.default_doc = "heads";
        t.push_back(std::move(f));
    }
    t.push_back(integer_field("ffn_hidden", &ModelSpec::ffn_hidden, up_to(limits::kMaxHidden), "",
                              "MLP inner size", true));
    t.push_back(integer_field("vocab", &ModelSpec::vocab, up_to(limits::kMaxVocab), "tokens",
                              "vocabulary size", true));
    t.push_back(integer_field("seq_len", &ModelSpec::seq_len, up_to(limits::kMaxSeqLen), "tokens",
                              "sequence length", true));
    t.push_back(
        schema::enum_field("mlp", &ModelSpec::mlp, mlp_kind_names(),
                           "block style: gelu = GPT (LayerNorm, biases, two MLP matrices), swiglu = Llama "
                           "(RMSNorm, no biases, gate/up/down)",
                           true));
    {
        auto f = schema::boolean_field("tied_embeddings", &ModelSpec::tied_embeddings,
                                       "the output layer shares the input embedding's weights");
        f.derive_default = [](ModelSpec& m) { m.tied_embeddings = m.mlp == MlpKind::gelu; };
        f.default_doc = "true for gelu, false for swiglu";
        t.push_back(std::move(f));
    }
    t.push_back(schema::boolean_field("dropout", &ModelSpec::dropout,
                                      "dropout after the attention softmax and the attention and MLP blocks "
                                      "(1-byte masks kept as activations)"));
    return t;
}

}  // namespace

const std::vector<std::string>& mlp_kind_names() {
    static const std::vector<std::string> names = {"gelu", "swiglu"};
    return names;
}

const schema::Table<ModelSpec>& model_fields() {
    static const schema::Table<ModelSpec> table = make_model_fields();
    return table;
}

}  // namespace trainsim
