// sim/importers: Megatron-LM arguments, Hugging Face config.json and torchtitan TOML -> workload documents
// that load with the strict workload loader and match the presets they reproduce.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/importers.hpp"
#include "trainsim/schema.hpp"
#include "trainsim/schema_json.hpp"

using namespace trainsim;
using nlohmann::json;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

const std::string kSrc = TRAINSIM_SOURCE_DIR;
const std::string kData = kSrc + "/tests/data/importers/";

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

ImportTarget target_of(int gpus, const std::string& gpu = "A100-SXM4-80GB") {
    ImportTarget t;
    t.gpu = gpu;
    t.cluster_gpus = gpus;
    return t;
}

/// The import checked as `trainsim import` does, then loaded as `run --workload` would.
Workload load(Imported imp, const std::vector<std::string>& sets = {}) {
    json topo = default_topology_json();
    finish_import(imp, sets, topo);
    return parse_workload(json::parse(imp.workload.dump()), "imported.json");
}

json model_of(const Workload& w) {
    json j = schema::to_json(model_fields(), w.model);
    j.erase("name");
    return j;
}

Workload preset(const std::string& name) {
    return parse_workload(read_json_file(kSrc + "/workloads/" + name + ".json"), name);
}

std::vector<std::string> words(const std::string& text) {
    return split_args_text(text, "args");
}

const std::string kGpt3Args =
    "--num-layers 96 --hidden-size 12288 --num-attention-heads 96 --seq-length 2048 --tokenizer-type "
    "GPT2BPETokenizer --micro-batch-size 1 --global-batch-size 1536 --tensor-model-parallel-size 8 "
    "--pipeline-model-parallel-size 16 --recompute-granularity full --recompute-method uniform --fp16";

}  // namespace

TEST_CASE("megatron: the GPT-3 175B launch file reproduces the preset's model and layout") {
    const auto args = split_args_text(slurp(kData + "gpt3_175b_megatron.args"), "gpt3.args");
    const Imported imp = import_megatron(args, "gpt3.args", target_of(8));  // nnodes x nproc = 1024 wins
    CHECK(imp.gpus == 1024);
    const Workload w = load(imp);
    Workload p = preset("gpt3-175b");
    CHECK(model_of(w) == model_of(p));
    // The launch file sets no --ddp-bucket-size: the framework's default (0); the preset pins 40M elements.
    CHECK(w.layout.dp_bucket_bytes == 0);
    CHECK(p.layout.dp_bucket_bytes == doctest::Approx(160e6));
    p.layout.dp_bucket_bytes = 0;
    CHECK(schema::to_json(layout_fields(), w.layout) == schema::to_json(layout_fields(), p.layout));
    // Flags without a field are reported, with the multi-valued --rampup-batch-size taking its three words.
    CHECK(contains(fmt::format("{}", fmt::join(imp.ignored, " ")), "--lr --lr-decay-style"));
    CHECK(std::find(imp.ignored.begin(), imp.ignored.end(), "--rampup-batch-size") != imp.ignored.end());
    CHECK(std::find(imp.ignored.begin(), imp.ignored.end(), "pretrain_gpt.py") != imp.ignored.end());
    CHECK(std::find(imp.ignored.begin(), imp.ignored.end(), "--tensorboard-dir") != imp.ignored.end());
    CHECK(std::find(imp.ignored.begin(), imp.ignored.end(), "16") == imp.ignored.end());
}

TEST_CASE("megatron: vocabulary padding, SwiGLU FFN default, GQA, untied embeddings, dropout") {
    auto args = words(kGpt3Args);
    Workload w = load(import_megatron(args, "m", target_of(1024)));
    CHECK(w.model.vocab == 51200);  // GPT-2's 50257 padded to 128 x TP 8
    CHECK(w.model.dropout);
    CHECK(w.layout.dp == 8);
    CHECK(w.layout.attention == AttentionKernel::unfused);  // Megatron on A100 (framework_defaults)
    const auto llama = words(
        "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
        "--num-query-groups 8 "
        "--swiglu --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0 "
        "--seq-length "
        "8192 --tokenizer-type NullTokenizer --vocab-size 128255 --tensor-model-parallel-size 2 --bf16 "
        "--sequence-parallel --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather");
    w = load(import_megatron(llama, "m", target_of(1024, "H100-SXM5-80GB")));
    CHECK(w.model.kv_heads == 8);
    CHECK(w.model.ffn_hidden == 10880);  // int(4 * 4096 * 2/3 / 64) * 64 (arguments.py)
    CHECK(w.model.vocab == 128256);      // NullTokenizer's 128255 + EOD, a multiple of 256 already
    CHECK(!w.model.tied_embeddings);
    CHECK(!w.model.dropout);
    CHECK(w.model.mlp == MlpKind::swiglu);
    CHECK(w.layout.attention == AttentionKernel::cudnn);  // Megatron on H100
    CHECK(w.layout.dp == 512);
    CHECK(w.layout.global_batch == 512);  // micro-batch 1 x DP
    CHECK((w.layout.sequence_parallel && w.layout.distributed_optimizer && w.layout.overlap_grad_reduce &&
           w.layout.overlap_param_gather && !w.layout.tp_comm_overlap));
}

TEST_CASE("megatron: pipeline split, virtual stages, recompute block, FP8, MoE layer pattern") {
    auto base = kGpt3Args + " --decoder-first-pipeline-num-layers 5 --decoder-last-pipeline-num-layers 7";
    Workload w = load(import_megatron(words(base), "m", target_of(1024)));
    REQUIRE(w.layout.layers_per_stage.size() == 16);
    CHECK(w.layout.layers_per_stage.front() == 5);
    CHECK(w.layout.layers_per_stage[1] == 6);  // (96 - 5 - 7) / 14
    CHECK(w.layout.layers_per_stage.back() == 7);
    CHECK(contains(message_of<InputError>([&] {
                       import_megatron(words(kGpt3Args + " --decoder-first-pipeline-num-layers 4"), "m",
                                       target_of(1024));
                   }),
                   "do not divide over the 15 other pipeline stages"));
    w = load(import_megatron(words(kGpt3Args + " --num-layers-per-virtual-pipeline-stage 2"), "m",
                             target_of(1024)));
    CHECK(w.layout.vpp == 3);
    w = load(
        import_megatron(words(kGpt3Args + " --recompute-method block --recompute-num-layers 2 --fp8-format "
                                          "hybrid --fp8-recipe tensorwise"),
                        "m", target_of(1024, "H100-SXM5-80GB")));
    CHECK(w.layout.recompute_num_layers == 2);
    CHECK(w.layout.precision == Precision::fp8);
    CHECK(w.layout.fp8_recipe == Fp8Recipe::tensorwise);
    const auto moe = words(
        "--num-layers 8 --hidden-size 1024 --num-attention-heads 16 --seq-length 4096 --vocab-size 32000 "
        "--bf16 "
        "--swiglu --num-experts 16 --moe-router-topk 4 --moe-ffn-hidden-size 512 --moe-layer-freq "
        "([0]*2+[1]*6) "
        "--expert-model-parallel-size 8 --moe-shared-expert-intermediate-size 1024");
    w = load(import_megatron(moe, "m", target_of(16)));
    CHECK(w.model.num_experts == 16);
    CHECK(w.model.moe_top_k == 4);
    CHECK(w.model.moe_ffn_hidden == 512);
    CHECK(w.model.moe_first_dense_layers == 2);
    CHECK(w.model.moe_layer_freq == 1);
    CHECK(w.model.moe_shared_expert_ffn_hidden == 1024);
    CHECK(w.layout.ep == 8);
    CHECK(w.model.vocab == 32000);  // 32000 is a multiple of 128 already
    CHECK(w.layout.activation_offload_layers == 0);
    auto offload = moe;
    for (const char* word : {"--cpu-offloading", "--cpu-offloading-num-layers", "3"})
        offload.emplace_back(word);
    w = load(import_megatron(offload, "m", target_of(16)));
    CHECK(w.layout.activation_offload_layers == 3);  // --cpu-offloading-num-layers
}

TEST_CASE("megatron: malformed and unrepresentable values are one-line errors naming the flag and value") {
    const auto err = [](const std::string& text) {
        return message_of<InputError>([&] { import_megatron(words(text), "megatron", target_of(1024)); });
    };
    CHECK(err(kGpt3Args + " --num-layers abc") == "megatron: --num-layers = \"abc\" is not an integer");
    CHECK(err(kGpt3Args + " --micro-batch-size 0") ==
          "megatron: --micro-batch-size = \"0\" must be at least 1");
    CHECK(err(kGpt3Args + " --recompute-granularity some") ==
          "megatron: --recompute-granularity = \"some\" is not one of full, selective");
    CHECK(err(kGpt3Args + " --fp8-format e4m3 --fp8-recipe blockwise") ==
          "megatron: --fp8-recipe = \"blockwise\" is not modeled (trainsim: delayed, tensorwise, mxfp8, "
          "nvfp4)");
    CHECK(err(kGpt3Args + " --hidden-size") == "megatron: --hidden-size needs a value");
    CHECK(err(kGpt3Args + " --tensor-model-parallel-size 99999999999") ==
          "megatron: --tensor-model-parallel-size = \"99999999999\" must be at most 131072");
    CHECK(err(kGpt3Args + " --num-layers 5000") == "megatron: --num-layers = \"5000\" must be at most 4096");
    CHECK(err(kGpt3Args + " --attention-dropout 5") ==
          "megatron: --attention-dropout = \"5\" must be at most 1");
    CHECK(err(kGpt3Args + " --bf16=yes") ==
          "megatron: --bf16 = \"yes\" is given a value; the flag takes none");
    CHECK(contains(
        err("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 --vocab-size 10"),
        "neither --bf16 nor --fp16"));
    CHECK(contains(err("--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 8 --bf16"),
                   "the vocabulary size is not known"));
    CHECK(contains(err(kGpt3Args + " --tensor-model-parallel-size 7"),
                   "1024 GPUs are not a multiple of TP x PP x CP"));
    CHECK(contains(err(kGpt3Args + " --num-experts 8 --moe-layer-freq [1,0,0]"),
                   "has 3 entries for 96 layers"));
}

TEST_CASE("megatron args files: continuations, quotes and comments") {
    const auto w =
        split_args_text("# a comment\n--a 1 \\\n  --b \"two words\" # trailing\n\n--c '3'\\\r\n--d\n", "f");
    CHECK(w == std::vector<std::string>{"--a", "1", "--b", "two words", "--c", "3", "--d"});
    CHECK(contains(message_of<InputError>([] { split_args_text("--a x\\q", "f.args"); }),
                   "f.args: the arguments do not split into words ("));
    // An unclosed quote took every argument after it (split_unix does not throw): refused, naming its line.
    CHECK(message_of<InputError>([] {
              split_args_text("--a 1\n--data-path \"abc --b 2\n--c 3\n", "f.args");
          }) == "f.args: the arguments do not split into words (the quote opened on line 2 is not closed)");
    CHECK(contains(message_of<InputError>([] { split_args_text("--num-layers '32", "f.args"); }),
                   "the quote opened on line 1 is not closed"));
    CHECK(split_args_text("--a \\\" --b 2", "f") == std::vector<std::string>{"--a", "\"", "--b", "2"});
}

TEST_CASE("megatron, round 15: a byte-order mark, dispatcher choices, NeMo values trainsim does not read") {
    // A UTF-8 BOM hid the first line's comment, whose apostrophe then opened a quote blamed on a later line.
    CHECK(split_args_text("\xEF\xBB\xBF# Megatron-LM's run\n--a 1\n--b \"x\"\n", "f") ==
          std::vector<std::string>{"--a", "1", "--b", "x"});
    const auto err = [](const std::string& text) {
        return message_of<InputError>([&] { import_megatron(words(text), "megatron", target_of(1024)); });
    };
    // Another value was read as the all-to-all dispatcher without a word; Megatron's argparse refuses it.
    CHECK(
        err(kGpt3Args + " --num-experts 8 --moe-token-dispatcher-type bogus") ==
        "megatron: --moe-token-dispatcher-type = \"bogus\" is not one of allgather, alltoall, alltoall_seq, "
        "flex");
    CHECK(err(kGpt3Args +
              " --num-experts 8 --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend x") ==
          "megatron: --moe-flex-dispatcher-backend = \"x\" is not one of deepep, hybridep");
    CHECK(
        err(kGpt3Args + " --position-embedding-type rotary") ==
        "megatron: --position-embedding-type = \"rotary\" is not one of learned_absolute, rope, mrope, yarn, "
        "relative, none");
    // A NeMo key's value trainsim does not read was taken as false or the default; it is listed as ignored.
    const Imported imp = import_megatron(
        words(kGpt3Args + " model.sequence_parallel=yes trainer.precision=bf32 model.activation=geglu "
                          "model.fp8=maybe model.ub_tp_comm_overlap=True"),
        "nemo", target_of(1024));
    CHECK(imp.ignored == std::vector<std::string>{"model.sequence_parallel=yes", "trainer.precision=bf32",
                                                  "model.activation=geglu", "model.fp8=maybe"});
    CHECK(load(imp).layout.tp_comm_overlap);
}

TEST_CASE("hf: Llama 3 8B and Mixtral 8x7B configs give the presets' models") {
    Workload w = load(
        import_hf_config(read_json_file(kData + "llama3_8b_config.json"), "llama.json", target_of(1024)));
    CHECK(model_of(w) == model_of(preset("llama3-8b")));
    CHECK(w.layout.dp == 1024);
    ImportTarget t = target_of(64);
    t.seq_len = 4096;
    const Imported mix =
        import_hf_config(read_json_file(kData + "mixtral_8x7b_config.json"), "mixtral.json", t);
    CHECK(std::find(mix.ignored.begin(), mix.ignored.end(), "router_aux_loss_coef") != mix.ignored.end());
    w = load(mix, {"layout.ep=8", "layout.etp=1"});
    CHECK(model_of(w) == model_of(preset("mixtral-8x7b")));
    CHECK(w.layout.ep == 8);
}

TEST_CASE("hf: Qwen3-MoE and Qwen2-MoE sparse layers; bad configs") {
    json q = {{"model_type", "qwen3_moe"},
              {"num_hidden_layers", 48},
              {"hidden_size", 2048},
              {"num_attention_heads", 32},
              {"num_key_value_heads", 4},
              {"head_dim", 128},
              {"intermediate_size", 6144},
              {"vocab_size", 151936},
              {"max_position_embeddings", 40960},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", false},
              {"num_experts", 128},
              {"num_experts_per_tok", 8},
              {"moe_intermediate_size", 768},
              {"decoder_sparse_step", 1},
              {"mlp_only_layers", json::array()}};
    ImportTarget t = target_of(16);
    t.seq_len = 4096;
    Workload w = load(import_hf_config(q, "qwen3.json", t), {"layout.ep=16", "layout.etp=1"});
    CHECK(model_of(w) == model_of(preset("qwen3-30b-a3b")));
    CHECK(w.model.qk_layernorm);  // Qwen3's q_norm / k_norm
    json q2 = q;
    q2["model_type"] = "qwen2_moe";
    q2["decoder_sparse_step"] = 2;
    q2["shared_expert_intermediate_size"] = 5632;
    w = load(import_hf_config(q2, "qwen2.json", t));
    CHECK_FALSE(w.model.qk_layernorm);
    CHECK(w.model.moe_first_dense_layers == 1);  // (i + 1) % 2 == 0: layers 1, 3, 5, ...
    CHECK(w.model.moe_layer_freq == 2);
    CHECK(w.model.moe_shared_expert_ffn_hidden == 5632);
    q2["mlp_only_layers"] = {5};
    CHECK(contains(message_of<InputError>([&] { import_hf_config(q2, "qwen2.json", t); }),
                   "a layer pattern trainsim cannot hold"));
    json bad = q;
    bad["model_type"] = "t5";
    CHECK(contains(message_of<InputError>([&] { import_hf_config(bad, "c.json", t); }),
                   "c.json: model_type = \"t5\" is not supported (supported: llama, mistral"));
    bad = q;
    bad["hidden_size"] = "2048";
    CHECK(message_of<InputError>([&] { import_hf_config(bad, "c.json", t); }) ==
          "c.json: hidden_size = \"2048\" is not an integer");
    bad = q;
    bad["attention_dropout"] = 3;  // a probability (was read as "dropout on")
    CHECK(message_of<InputError>([&] { import_hf_config(bad, "c.json", t); }) ==
          "c.json: attention_dropout = 3 must be 0 .. 1");
    bad = q;
    bad["hidden_dropout"] = -0.5;
    CHECK(message_of<InputError>([&] { import_hf_config(bad, "c.json", t); }) ==
          "c.json: hidden_dropout = -0.5 must be 0 .. 1");
}

TEST_CASE("torchtitan: the Llama 3 8B TOML gives the 8B model with FSDP and per-op selective AC") {
    const Imported imp = import_torchtitan(slurp(kData + "llama3_8b.toml"), "llama3_8b.toml", target_of(64));
    const Workload w = load(imp);
    json expected = model_of(preset("llama3-8b"));
    CHECK(model_of(w) == expected);
    CHECK(w.layout.framework == Framework::torchtitan);
    CHECK(w.layout.zero_stage == 3);
    CHECK(w.layout.dp == 64);
    CHECK(w.layout.global_batch == 64);
    CHECK(w.layout.recompute == Recompute::selective_op);
    CHECK(w.layout.attention == AttentionKernel::flash);
    CHECK(std::find(imp.ignored.begin(), imp.ignored.end(), "optimizer.lr") != imp.ignored.end());
}

TEST_CASE("torchtitan: flavors, TP/PP split, float8, and refused settings") {
    const std::string head =
        "[model]\nname = \"llama3\"\nflavor = \"70B\"\n[training]\nlocal_batch_size = 8\nseq_len = 4096\n";
    Imported imp =
        import_torchtitan(head +
                              "[parallelism]\ntensor_parallel_degree = 8\npipeline_parallel_degree = 4\n"
                              "[activation_checkpoint]\nmode = \"full\"\n",
                          "t.toml", target_of(256, "H100-SXM5-80GB"));
    Workload w = load(imp);
    CHECK(w.model.ffn_hidden == 28672);
    CHECK(w.model.layers == 80);
    CHECK(w.layout.tp == 8);
    CHECK(w.layout.sequence_parallel);
    CHECK(w.layout.dp == 8);
    CHECK(w.layout.micro_batch == 1);  // pipeline_parallel_microbatch_size
    CHECK(w.layout.global_batch == 64);
    CHECK(!w.layout.reshard_after_forward);  // torchtitan: not with PP
    // 80 layers + 1 + 1 over 4 stages: 21 21 20 20 less the embedding and the output: 20 21 20 19.
    CHECK(w.layout.layers_per_stage == std::vector<std::int64_t>{20, 21, 20, 19});
    CHECK(w.layout.recompute == Recompute::full);
    imp = import_torchtitan(
        "[model]\nflavor = \"405B\"\nconverters = [\"float8\"]\n[float8]\nrecipe_name = \"rowwise\"\n",
        "t.toml", target_of(1024, "H100-SXM5-80GB"));
    w = load(imp, {"layout.tp=8", "model.seq_len=8192"});
    CHECK(w.model.ffn_hidden == 53248);
    CHECK(w.layout.precision == Precision::fp8);
    CHECK(w.layout.fp8_recipe == Fp8Recipe::rowwise);
    CHECK(w.layout.dp == 128);  // derived again after --set layout.tp=8
    const auto err = [](const std::string& text) {
        return message_of<InputError>([&] { import_torchtitan(text, "t.toml", target_of(64)); });
    };
    CHECK(
        contains(err("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 32\n"),
                 "is HSDP"));
    CHECK(err("[model]\nflavor = \"9B\"\n") ==
          "t.toml: model.flavor = \"9B\" is not a llama3 flavor trainsim knows (debugmodel, 8B, 70B, 405B)");
    CHECK(err("[parallelism]\ntensor_parallel_degree = \"2\"\n") ==
          "t.toml: parallelism.tensor_parallel_degree = \"2\" is not an integer");
    CHECK(contains(err("[training\n"), "t.toml:1: "));
    CHECK(contains(
        err("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_schedule = \"ZBVZeroBubble\"\n"),
        "is not modeled (trainsim: 1F1B, GPipe, Interleaved1F1B)"));
    CHECK(contains(err("[activation_checkpoint]\nmode = \"memory_budget\"\n"), "is not modeled"));
    CHECK(err("[parallelism]\npipeline_parallel_degree = 2\npipeline_parallel_layers_per_stage = 0\n") ==
          "t.toml: parallelism.pipeline_parallel_layers_per_stage = 0 must be at least 1");
    // Tables nested past kMaxJsonDepth levels (a dotted key of 50,000 parts overflowed toml++'s recursion).
    std::string deep = "[job]\nx = 1\na";
    for (int i = 0; i < 50000; ++i)
        deep += ".a";
    CHECK(err(deep + " = 1\n") ==
          "t.toml:3: tables and arrays nested deeper than 64 levels (dotted keys, headers, arrays and inline "
          "tables)");
    CHECK(
        contains(err("[" + std::string(200, 'a') + std::string(100, '.') + "b]\n"), "t.toml:1: tables and"));
    std::string dotted = "b";
    for (int i = 0; i < 70; ++i)
        dotted += ".c";
    CHECK(contains(err("x = [{a = [{" + dotted + " = 1}]}]\n"),
                   "t.toml:1: tables and arrays nested deeper than 64"));
    // Dots in values, strings and comments are not keys; a long array of dotted inline tables is shallow.
    std::string wide = "[model]\nflavor = \"8B\" # a.b.c\n[job]\ndescription = \"" + std::string(100, '.') +
                       "\"\nfloats = [";
    for (int i = 0; i < 100; ++i)
        wide += "1.5, ";
    wide += "]\ntables = [";
    for (int i = 0; i < 100; ++i)
        wide += "{a.b.c = 1.25}, ";
    wide += "]\nnotes = '''\nx.y.z.w = 1\n'''\n";
    CHECK(import_torchtitan(wide, "t.toml", target_of(64)).ignored.size() == 4);
}

TEST_CASE("megatron: NeMo 1.x Hydra overrides read as the Megatron flags they configure") {
    const auto nemo = words(
        "trainer.num_nodes=128 trainer.devices=8 trainer.precision=16 model.num_layers=96 "
        "model.hidden_size=12288 "
        "model.num_attention_heads=96 model.encoder_seq_length=2048 model.tensor_model_parallel_size=8 "
        "model.pipeline_model_parallel_size=16 model.micro_batch_size=1 model.global_batch_size=1536 "
        "model.activations_checkpoint_granularity=full model.activations_checkpoint_method=uniform "
        "model.num_query_groups=null ++model.share_embeddings_and_output_weights=True model.optim.lr=6e-5 "
        "--tokenizer-type GPT2BPETokenizer");
    const Imported imp = import_megatron(nemo, "nemo", target_of(8));
    CHECK(imp.ignored == std::vector<std::string>{"model.optim.lr=6e-5"});
    CHECK(model_of(load(imp)) == model_of(preset("gpt3-175b")));
    Workload gpt3 = preset("gpt3-175b");
    gpt3.layout.dp_bucket_bytes = 0;  // no bucket size given: the framework's default (above)
    CHECK(schema::to_json(layout_fields(), load(imp).layout) ==
          schema::to_json(layout_fields(), gpt3.layout));
    const Workload w = load(import_megatron(
        words(kGpt3Args +
              " model.activation=fast-swiglu model.num_query_groups=8 model.sequence_parallel=True "
              "model.optim.name=distributed_fused_adam model.fp8=True model.fp8_hybrid=True"),
        "nemo", target_of(1024, "H100-SXM5-80GB")));
    CHECK(w.model.mlp == MlpKind::swiglu);
    CHECK(w.model.kv_heads == 8);
    CHECK((w.layout.sequence_parallel && w.layout.distributed_optimizer &&
           w.layout.precision == Precision::fp8));
}

TEST_CASE("torchtitan: Interleaved1F1B keeps each rank's layers and splits them over its chunks") {
    const std::string toml =
        "[model]\nflavor = \"8B\"\n[training]\nlocal_batch_size = 4\n[parallelism]\n"
        "pipeline_parallel_degree = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n";
    Imported imp = import_torchtitan(toml, "t.toml", target_of(16));
    Workload w = load(imp);
    CHECK(w.layout.vpp == 2);
    // 32 + 1 + 1 over 4 stages: 9 9 8 8 less the embedding and the output: 8 9 8 7; ranks hold 16 and 16.
    CHECK(w.layout.layers_per_stage.empty());
    CHECK(contains(fmt::format("{}", fmt::join(imp.notes, "\n")),
                   "as 8 9 8 7; trainsim keeps each rank's layers (16 16)"));
    imp = import_torchtitan(toml +
                                "pipeline_parallel_first_stage_less_layers = 0\n"
                                "pipeline_parallel_last_stage_less_layers = 0\n",
                            "t.toml", target_of(16));
    CHECK(!contains(fmt::format("{}", fmt::join(imp.notes, "\n")), "virtual stages"));
    CHECK(load(imp).layout.vpp == 2);
    CHECK(contains(message_of<InputError>([&] {
                       import_torchtitan(toml + "pipeline_parallel_first_stage_less_layers = 3\n", "t.toml",
                                         target_of(16));
                   }),
                   "which its 2 chunks cannot share evenly"));
}

TEST_CASE("megatron: DeepSeek-V3's MLA and MoE flags give the preset's model") {
    const auto args = words(
        "--num-layers 61 --hidden-size 7168 --num-attention-heads 128 --multi-latent-attention --q-lora-rank "
        "1536 "
        "--kv-lora-rank 512 --qk-head-dim 128 --qk-pos-emb-head-dim 64 --v-head-dim 128 --ffn-hidden-size "
        "18432 "
        "--swiglu --untie-embeddings-and-output-weights --attention-dropout 0.0 --hidden-dropout 0.0 "
        "--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 "
        "--moe-shared-expert-intermediate-size "
        "2048 --moe-layer-freq ([0]*3+[1]*58) --tokenizer-type HuggingFaceTokenizer --vocab-size 129280 "
        "--seq-length 4096 --mtp-num-layers 1 --tensor-model-parallel-size 2 --expert-model-parallel-size 8 "
        "--bf16");
    const Workload w = load(import_megatron(args, "m", target_of(16, "H100-SXM5-80GB")));
    CHECK(model_of(w) == model_of(preset("deepseek-v3")));
}

TEST_CASE("hf: GPT-NeoX is a GELU block with its own FFN width") {
    const json neox = {
        {"model_type", "gpt_neox"},        {"num_hidden_layers", 32},    {"hidden_size", 2560},
        {"num_attention_heads", 32},       {"intermediate_size", 10240}, {"vocab_size", 50432},
        {"max_position_embeddings", 2048}, {"hidden_act", "gelu"},       {"use_parallel_residual", true},
        {"tie_word_embeddings", false}};
    const Imported imp = import_hf_config(neox, "neox.json", target_of(8));
    const Workload w = load(imp);
    CHECK(w.model.mlp == MlpKind::gelu);
    CHECK(w.model.ffn_hidden == 10240);
    CHECK(w.model.kv_heads == 32);
    CHECK(!w.model.tied_embeddings);
    CHECK(!w.model.dropout);
    CHECK(imp.ignored == std::vector<std::string>{"use_parallel_residual"});
}
