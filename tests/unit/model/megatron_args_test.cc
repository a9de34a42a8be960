// Megatron-LM command line -> job document: tokenizing, defaults, mapping and errors.
#include "model/megatron_args.h"

#include <gtest/gtest.h>

#include "model/moe_freq_pattern.h"
#include "model/shell_words.h"

namespace memtune::model {
namespace {

MegatronArgsJob Convert(const std::string& text) {
  auto r = MegatronArgsToJobNode(text);
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().Describe());
  return r ? *r : MegatronArgsJob{};
}

Error Fail(const std::string& text) {
  auto r = MegatronArgsToJobNode(text);
  EXPECT_FALSE(r.has_value());
  return r ? Error{} : r.error();
}

TEST(ShellWordsTest, QuotesEscapesContinuationsComments) {
  auto words = SplitShellWords("a 'b c' \"d \\\"e\\\" $X\" f\\ g \\\n h # comment\n i");
  ASSERT_TRUE(words.has_value());
  EXPECT_EQ(*words, (std::vector<std::string>{"a", "b c", "d \"e\" $X", "f g", "h", "i"}));
  EXPECT_EQ(*SplitShellWords("x'y'\"z\""), std::vector<std::string>{"xyz"});
  EXPECT_EQ(*SplitShellWords("''"), std::vector<std::string>{""});
}

TEST(ShellWordsTest, UnterminatedQuote) {
  auto words = SplitShellWords("--seq-length '4096");
  ASSERT_FALSE(words.has_value());
  EXPECT_EQ(words.error().Describe(), "command line: unterminated ' quote");
}

TEST(MegatronArgsTest, Llama8BLaunchLine) {
  const auto r = Convert(
      "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True CUDA_DEVICE_MAX_CONNECTIONS=1 \\\n"
      "torchrun --nproc_per_node 8 --nnodes 2 --master_addr x pretrain_gpt.py \\\n"
      "  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 \\\n"
      "  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \\\n"
      "  --num-attention-heads 32 --group-query-attention --num-query-groups 8 \\\n"
      "  --seq-length 8192 --max-position-embeddings 8192 --swiglu --normalization RMSNorm \\\n"
      "  --disable-bias-linear --untie-embeddings-and-output-weights \\\n"
      "  --position-embedding-type rope --vocab-size 128256 --micro-batch-size 1 \\\n"
      "  --bf16 --use-distributed-optimizer --sequence-parallel --lr 3e-4 --log-interval 1 \\\n"
      "  --recompute-activations 2>&1 | tee log.txt");
  EXPECT_EQ(YAML::Dump(r.job),
            "model:\n"
            "  num_layers: 32\n"
            "  hidden_size: 4096\n"
            "  ffn_hidden_size: 14336\n"
            "  num_attention_heads: 32\n"
            "  vocab_size: 128256\n"
            "  max_position_embeddings: 8192\n"
            "  num_query_groups: 8\n"
            "  make_vocab_size_divisible_by: 128\n"
            "  should_pad_vocab: true\n"
            "  share_embeddings_and_output_weights: false\n"
            "  gated_linear_unit: true\n"
            "  bias_activation_fusion: true\n"
            "  activation_func: silu\n"
            "  normalization: RMSNorm\n"
            "  add_bias_linear: false\n"
            "  add_qkv_bias: false\n"
            "  qk_layernorm: false\n"
            "  hidden_dropout: 0.1\n"
            "  attention_dropout: 0.1\n"
            "  position_embedding_type: rope\n"
            "  tensor_model_parallel_size: 2\n"
            "  pipeline_model_parallel_size: 2\n"
            "  sequence_parallel: true\n"
            "  seq_length: 8192\n"
            "  recompute_granularity: selective\n"
            "  cross_entropy_loss_fusion: false\n"
            "train:\n"
            "  micro_batch_size: 1\n"
            "  global_batch_size: 4\n"
            "optimizer:\n"
            "  optimizer: adam\n"
            "  use_distributed_optimizer: true\n"
            "  use_precision_aware_optimizer: false\n"
            "  optimizer_cpu_offload: false\n"
            "ddp:\n"
            "  grad_reduce_in_fp32: true\n"
            "  use_distributed_optimizer: true\n"
            "  overlap_grad_reduce: false\n"
            "  overlap_param_gather: false\n"
            "  use_megatron_fsdp: false\n"
            "  nccl_ub: false\n"
            "mixed_precision:\n"
            "  bf16: true\n"
            "  fp16: false\n"
            "  params_dtype: bf16\n"
            "  pipeline_dtype: bf16\n"
            "  grad_reduce_in_fp32: true\n"
            "  fp8_param: false\n"
            "  fp8_param_gather: false\n"
            "dataset:\n"
            "  seq_length: 8192\n"
            "memtune:\n"
            "  framework: megatron\n"
            "  world_size: 16\n"
            "  gpus_per_node: 8\n"
            "  env:\n"
            "    PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\n"
            "    CUDA_DEVICE_MAX_CONNECTIONS: 1");
  EXPECT_EQ(r.ignored_flags, (std::vector<std::string>{"--lr", "--log-interval"}));
}

TEST(MegatronArgsTest, MegatronDefaultsDifferFromBridge) {
  const auto r = Convert("--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --swiglu");
  const YAML::Node m = r.job["model"];
  EXPECT_EQ(m["ffn_hidden_size"].as<int>(), 2730 / 64 * 64);  // int(4h * 2/3 / 64) * 64
  EXPECT_TRUE(m["should_pad_vocab"].as<bool>());
  EXPECT_EQ(m["normalization"].as<std::string>(), "LayerNorm");
  EXPECT_TRUE(m["add_bias_linear"].as<bool>());
  EXPECT_TRUE(m["share_embeddings_and_output_weights"].as<bool>());
  EXPECT_EQ(m["position_embedding_type"].as<std::string>(), "learned_absolute");
  EXPECT_FALSE(m["num_query_groups"]);  // no --group-query-attention: one group per head
  EXPECT_EQ(r.job["mixed_precision"]["params_dtype"].as<std::string>(), "fp32");
  EXPECT_FALSE(r.job["memtune"]["world_size"]);
  const auto plain = Convert("--hidden-size 1024");
  EXPECT_EQ(plain.job["model"]["ffn_hidden_size"].as<int>(), 4096);
  EXPECT_EQ(plain.job["model"]["activation_func"].as<std::string>(), "gelu");
}

// arguments.py validate_args: without --seq-length, seq_length = encoder_seq_length.
TEST(MegatronArgsTest, EncoderSeqLengthStandsInForSeqLength) {
  EXPECT_EQ(Convert("--encoder-seq-length 2048").job["model"]["seq_length"].as<int>(), 2048);
  EXPECT_EQ(
      Convert("--seq-length 4096 --encoder-seq-length 2048").job["model"]["seq_length"].as<int>(),
      4096);
}

TEST(MegatronArgsTest, TokenizerGivesTheVocabularySize) {
  // pretrain_gpt.py defaults the tokenizer to GPT2BPETokenizer: the GPT-2 BPE vocabulary.
  EXPECT_EQ(Convert("--vocab-file gpt2-vocab.json --merge-file m.txt")
                .job["model"]["vocab_size"]
                .as<int>(),
            50257);
  EXPECT_EQ(Convert("--tokenizer-type TikTokenizer --tokenizer-model t.json")
                .job["model"]["vocab_size"]
                .as<int>(),
            131072);  // tiktoken_tokenizer.py DEFAULT_TIKTOKEN_MAX_VOCAB
  EXPECT_EQ(Convert("--tokenizer-type TikTokenizer --vocab-size 1000")
                .job["model"]["vocab_size"]
                .as<int>(),
            1000);
  EXPECT_EQ(Convert("--tokenizer-type NullTokenizer --vocab-size 131073")
                .job["model"]["vocab_size"]
                .as<int>(),
            131073);
  EXPECT_FALSE(Convert("--tokenizer-type HuggingFaceTokenizer --tokenizer-model x")
                   .job["model"]["vocab_size"]);
  // Well-known tokenizers by hub id or local directory name: len(tokenizer).
  EXPECT_EQ(Convert("--tokenizer-type HuggingFaceTokenizer --tokenizer-model "
                    "meta-llama/Llama-3.1-8B-Instruct")
                .job["model"]["vocab_size"]
                .as<int>(),
            128256);
  EXPECT_EQ(Convert("--tokenizer-type HuggingFaceTokenizer --tokenizer-model /ckpt/Mistral-7B-v0.1")
                .job["model"]["vocab_size"]
                .as<int>(),
            32000);
  EXPECT_EQ(Convert("--tokenizer-type TikTokenizer --tokenizer-model gpt2")
                .job["model"]["vocab_size"]
                .as<int>(),
            131072);  // TikTokenizer's size is --vocab-size, whatever the file
  // An unknown one: the error names the tokenizer and how to give the size.
  const auto r =
      MegatronArgsToJobNode("--tokenizer-type HuggingFaceTokenizer --tokenizer-model /t/mine");
  ASSERT_TRUE(r);
  EXPECT_NE(r->vocab_hint.find("'/t/mine'"), std::string::npos);
  EXPECT_NE(r->vocab_hint.find("--vocab-size N"), std::string::npos);
}

TEST(MegatronArgsTest, AttentionImplementationFlags) {
  const auto r = Convert(
      "--attention-backend unfused --transformer-impl local --no-masked-softmax-fusion "
      "--attention-softmax-in-fp32");
  const YAML::Node m = r.job["model"];
  EXPECT_EQ(m["attention_backend"].as<std::string>(), "unfused");
  EXPECT_EQ(m["transformer_impl"].as<std::string>(), "local");
  EXPECT_FALSE(m["masked_softmax_fusion"].as<bool>());
  EXPECT_TRUE(m["attention_softmax_in_fp32"].as<bool>());
  const auto plain = Convert("--hidden-size 1024").job["model"];
  EXPECT_FALSE(plain["masked_softmax_fusion"]);  // Bridge's defaults agree with Megatron-LM's
  EXPECT_FALSE(plain["attention_softmax_in_fp32"]);
}

TEST(MegatronArgsTest, BiasActivationFusionFollowsTheActivation) {
  EXPECT_TRUE(Convert("--swiglu").job["model"]["bias_activation_fusion"].as<bool>());
  EXPECT_FALSE(Convert("--swiglu --no-bias-swiglu-fusion")
                   .job["model"]["bias_activation_fusion"]
                   .as<bool>());
  EXPECT_TRUE(Convert("--hidden-size 8").job["model"]["bias_activation_fusion"].as<bool>());
  // validate_args: no bias-GeLU fusion without linear biases.
  EXPECT_FALSE(Convert("--disable-bias-linear").job["model"]["bias_activation_fusion"].as<bool>());
  EXPECT_FALSE(Convert("--no-bias-gelu-fusion").job["model"]["bias_activation_fusion"].as<bool>());
  // arguments.py --no-gradient-accumulation-fusion (store_false; absent: the default, on).
  EXPECT_FALSE(Convert("--no-gradient-accumulation-fusion")
                   .job["model"]["gradient_accumulation_fusion"]
                   .as<bool>());
  EXPECT_FALSE(Convert("--hidden-size 8").job["model"]["gradient_accumulation_fusion"]);
  // --use-te-activation-func: TE's activation ops (kept as written; absent: not emitted).
  EXPECT_TRUE(Convert("--swiglu --use-te-activation-func")
                  .job["model"]["use_te_activation_func"]
                  .as<bool>());
  EXPECT_FALSE(Convert("--swiglu").job["model"]["use_te_activation_func"]);
}

TEST(MegatronArgsTest, MoeMlaMtpAndPatterns) {
  const auto r = Convert(
      "python pretrain_gpt.py --num-layers 4 --hidden-size 7168 --num-attention-heads 128 "
      "--num-experts 256 --moe-router-topk 8 --moe-ffn-hidden-size 2048 "
      "--moe-shared-expert-intermediate-size 2048 --moe-layer-freq '([0]*1+[1]*3)' "
      "--moe-grouped-gemm --moe-token-dispatcher-type alltoall "
      "--moe-router-enable-expert-bias --multi-latent-attention --q-lora-rank 1536 "
      "--kv-lora-rank 512 --mtp-num-layers 1 --expert-model-parallel-size 8 "
      "--expert-tensor-parallel-size 1");
  const YAML::Node m = r.job["model"];
  EXPECT_EQ(m["num_moe_experts"].as<int>(), 256);
  EXPECT_EQ(m["moe_layer_freq"].as<std::vector<int>>(), (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(m["q_lora_rank"].as<int>(), 1536);
  EXPECT_EQ(m["kv_lora_rank"].as<int>(), 512);
  EXPECT_EQ(m["qk_pos_emb_head_dim"].as<int>(), 64);
  EXPECT_EQ(m["mtp_num_layers"].as<int>(), 1);
  EXPECT_EQ(m["expert_model_parallel_size"].as<int>(), 8);
  EXPECT_EQ(m["expert_tensor_parallel_size"].as<int>(), 1);
  EXPECT_EQ(m["moe_token_dispatcher_type"].as<std::string>(), "alltoall");
  EXPECT_FALSE(m["moe_router_force_load_balancing"].as<bool>());
  EXPECT_TRUE(Convert("--num-experts 4 --moe-router-force-load-balancing")
                  .job["model"]["moe_router_force_load_balancing"]
                  .as<bool>());
  const auto mla_defaults =
      Convert("--multi-latent-attention --num-experts 4 --ffn-hidden-size 64");
  EXPECT_EQ(mla_defaults.job["model"]["kv_lora_rank"].as<int>(), 32);  // arguments.py default
  EXPECT_TRUE(mla_defaults.job["model"]["q_lora_rank"].IsNull());
  EXPECT_EQ(mla_defaults.job["model"]["moe_ffn_hidden_size"].as<int>(), 64);
  EXPECT_EQ(mla_defaults.job["model"]["moe_router_topk"].as<int>(), 2);
}

TEST(MegatronArgsTest, VirtualPipelineFromLayersPerStage) {
  const auto r = Convert(
      "--num-layers 80 --pipeline-model-parallel-size 4 "
      "--num-layers-per-virtual-pipeline-stage 5");
  EXPECT_EQ(r.job["model"]["virtual_pipeline_model_parallel_size"].as<int>(), 4);
  const auto accounted = Convert(
      "--num-layers 30 --pipeline-model-parallel-size 4 --num-layers-per-virtual-pipeline-stage 4 "
      "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
  EXPECT_EQ(accounted.job["model"]["virtual_pipeline_model_parallel_size"].as<int>(), 2);
  const auto one = Convert(
      "--num-layers 8 --pipeline-model-parallel-size 2 "
      "--num-virtual-stages-per-pipeline-rank 1");
  EXPECT_FALSE(one.job["model"]["virtual_pipeline_model_parallel_size"]);
  const Error e = Fail(
      "--num-layers 80 --pipeline-model-parallel-size 4 "
      "--num-layers-per-virtual-pipeline-stage 3");
  EXPECT_EQ(e.code, ErrorCode::kInvalidConfig);
  EXPECT_EQ(e.Describe(),
            "--num-layers-per-virtual-pipeline-stage: 3 does not divide the 80 "
            "layers into 4 pipeline stages evenly");
}

TEST(MegatronArgsTest, PrecisionLeversAndOffload) {
  const auto r = Convert(
      "--fp16 --fp8-format hybrid --fp8-param-gather --use-precision-aware-optimizer "
      "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 --main-params-dtype fp16 "
      "--optimizer-cpu-offload --optimizer-offload-fraction 0.5 --use-megatron-fsdp "
      "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
      "--recompute-modules core_attn mlp --cuda-graph-impl transformer_engine "
      "--cuda-graph-scope attn mlp --cross-entropy-loss-fusion --use-nccl-ub "
      "--cpu-offloading --cpu-offloading-num-layers 2");
  const YAML::Node mp = r.job["mixed_precision"];
  EXPECT_EQ(mp["params_dtype"].as<std::string>(), "fp16");
  EXPECT_FALSE(mp["grad_reduce_in_fp32"].as<bool>());  // fp16: only with the explicit flag
  EXPECT_EQ(mp["fp8"].as<std::string>(), "hybrid");
  EXPECT_EQ(mp["fp8_recipe"].as<std::string>(), "delayed");
  EXPECT_TRUE(mp["fp8_param_gather"].as<bool>());
  const YAML::Node o = r.job["optimizer"];
  EXPECT_EQ(o["exp_avg_dtype"].as<std::string>(), "bf16");
  EXPECT_EQ(o["main_params_dtype"].as<std::string>(), "fp16");
  EXPECT_DOUBLE_EQ(o["optimizer_offload_fraction"].as<double>(), 0.5);
  EXPECT_EQ(r.job["ddp"]["data_parallel_sharding_strategy"].as<std::string>(),
            "optim_grads_params");
  EXPECT_TRUE(r.job["ddp"]["nccl_ub"].as<bool>());
  const YAML::Node m = r.job["model"];
  EXPECT_EQ(m["recompute_modules"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"core_attn", "mlp"}));
  EXPECT_EQ(m["cuda_graph_scope"].as<std::vector<std::string>>(),
            (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_EQ(m["cpu_offloading_num_layers"].as<int>(), 2);
  const auto bf16 = Convert("--bf16 --grad-reduce-in-bf16");
  EXPECT_FALSE(bf16.job["ddp"]["grad_reduce_in_fp32"].as<bool>());
}

TEST(MegatronArgsTest, EqualsFormAndLastOccurrenceWins) {
  const auto r = Convert("--num-layers=4 --num-layers 6 --lr=3e-4 --hidden-size=64");
  EXPECT_EQ(r.job["model"]["num_layers"].as<int>(), 6);
  EXPECT_EQ(r.ignored_flags, std::vector<std::string>{"--lr"});
}

TEST(MegatronArgsTest, ElasticNodesTakeTheMaximum) {
  const auto r = Convert("torchrun --nnodes=1:4 --nproc-per-node=8 train.py --micro-batch-size 2");
  EXPECT_EQ(r.job["memtune"]["world_size"].as<int>(), 32);
  EXPECT_EQ(r.job["train"]["global_batch_size"].as<int>(), 64);
}

TEST(MegatronArgsTest, Errors) {
  EXPECT_EQ(Fail("--num-layers --hidden-size 4").Describe(), "--num-layers: expects a value");
  EXPECT_EQ(Fail("--hidden-size 4 --seq-length").Describe(), "--seq-length: expects a value");
  EXPECT_EQ(Fail("--num-layers $NUM_LAYERS").Describe(),
            "--num-layers: expects an integer, got '$NUM_LAYERS'");
  EXPECT_EQ(Fail("--bf16=true").Describe(), "--bf16: takes no value, got 'true'");
  EXPECT_EQ(Fail("--recompute-modules").Describe(),
            "--recompute-modules: expects one or more values");
  const Error choice = Fail("--normalization rmsnorm");
  EXPECT_EQ(choice.Describe(), "--normalization: 'rmsnorm' is not allowed");
  EXPECT_EQ(choice.hint, "allowed: LayerNorm, RMSNorm");
  EXPECT_EQ(Fail("--hidden-dropout abc").Describe(),
            "--hidden-dropout: expects a number, got 'abc'");
  EXPECT_EQ(Fail("--num-experts 4 --moe-layer-freq '[1,0'").Describe(),
            "--moe-layer-freq: expects a positive integer or a Python list expression such as "
            "([0]*3+[1]*58), got '[1,0'");
}

TEST(MoeFreqPatternTest, Expressions) {
  EXPECT_EQ(ParseMoeFreq("2", "f")->every, 2);
  EXPECT_FALSE(ParseMoeFreq("2", "f")->is_list);
  EXPECT_EQ(ParseMoeFreq("([1]*3+[0]*2)*2", "f")->pattern,
            (std::vector<int>{1, 1, 1, 0, 0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(ParseMoeFreq("2*[0, 1]", "f")->pattern, (std::vector<int>{0, 1, 0, 1}));
  EXPECT_EQ(ParseMoeFreq("[]", "f")->pattern, std::vector<int>{});
  EXPECT_FALSE(ParseMoeFreq("0", "f").has_value());
  EXPECT_FALSE(ParseMoeFreq("[1]*[2]", "f").has_value());
  EXPECT_FALSE(ParseMoeFreq("[1]*999999999", "f").has_value());
  EXPECT_FALSE(ParseMoeFreq("999999999*999999999*999999999", "f").has_value());
}

}  // namespace
}  // namespace memtune::model
