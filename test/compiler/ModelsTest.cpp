//===- ModelsTest.cpp - the built-in models and their specs ---------------===//

#include "models/Models.h"

#include "dialects/ds/DsOps.h"
#include "models/builder/GraphBuilder.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace mlir;
using dsc::models::buildModel;

namespace {

constexpr const char *kTinyGpt2 =
    "gpt2:n_layer=2,n_head=2,n_embd=16,block_size=8,vocab_size=32";
constexpr const char *kTinyLlama =
    "llama:dim=16,n_layer=2,n_head=2,vocab_size=32,block_size=8";

class ModelsTest : public ::testing::Test {
protected:
  OwningOpRef<ModuleOp> build(llvm::StringRef spec, int64_t batch = 2) {
    std::string error;
    OwningOpRef<ModuleOp> module = buildModel(ctx, spec, batch, error);
    EXPECT_TRUE(module) << spec.str() << ": " << error;
    EXPECT_EQ(error, "");
    return module;
  }

  std::string errorOf(llvm::StringRef spec) {
    std::string error;
    OwningOpRef<ModuleOp> module = buildModel(ctx, spec, 2, error);
    EXPECT_FALSE(module) << spec.str();
    return error;
  }

  static std::vector<ds::VariableOp> variables(ModuleOp module) {
    auto ops = module.getOps<ds::VariableOp>();
    return std::vector<ds::VariableOp>(ops.begin(), ops.end());
  }

  static std::vector<std::string> sortedNames(ModuleOp module) {
    std::vector<std::string> names;
    for (ds::VariableOp var : variables(module))
      names.push_back(var.getSymName().str());
    std::sort(names.begin(), names.end());
    return names;
  }

  static ds::VariableOp variable(ModuleOp module, llvm::StringRef name) {
    return module.lookupSymbol<ds::VariableOp>(name);
  }

  template <typename OpT> static std::vector<OpT> opsOf(ModuleOp module) {
    std::vector<OpT> ops;
    module.walk([&](OpT op) { ops.push_back(op); });
    return ops;
  }

  MLIRContext ctx;
};

} // namespace

TEST_F(ModelsTest, EachModelBuildsInTheInputContract) {
  for (const char *spec : {kTinyGpt2,
                           "gpt2:n_layer=1,n_head=4,n_embd=16,block_size=8,"
                           "vocab_size=32,bias=0,dropout=0.1",
                           kTinyLlama, "mlp", "mlp:n_layer=0,block_size=8"}) {
    OwningOpRef<ModuleOp> module = build(spec);
    ASSERT_TRUE(module);
    EXPECT_TRUE(succeeded(verify(*module))) << spec;
    auto forward = module->lookupSymbol<func::FuncOp>("forward");
    ASSERT_TRUE(forward) << spec;
    FunctionType type = forward.getFunctionType();
    auto ids = RankedTensorType::get({2, 8}, IntegerType::get(&ctx, 32));
    if (llvm::StringRef(spec) == "mlp")
      ids = RankedTensorType::get({2, 16}, IntegerType::get(&ctx, 32));
    EXPECT_EQ(type.getInputs(), llvm::ArrayRef<Type>({ids, ids})) << spec;
    EXPECT_EQ(type.getResults(), llvm::ArrayRef<Type>(RankedTensorType::get(
                                     {}, Float32Type::get(&ctx))))
        << spec;
    EXPECT_EQ(opsOf<ds::CrossEntropyOp>(*module).size(), 1u) << spec;
  }
}

TEST_F(ModelsTest, Gpt2ParameterCountMatchesNanoGpt) {
  OwningOpRef<ModuleOp> module =
      build("gpt2:n_layer=12,n_head=12,n_embd=768,block_size=1024,"
            "vocab_size=50257",
            /*batch=*/1);
  ASSERT_TRUE(module);
  int64_t count = 0;
  for (ds::VariableOp var : variables(*module))
    count += var.getTensorType().getNumElements();
  // nanoGPT's GPT-2 124M, the tied wte counted once.
  EXPECT_EQ(count, 124439808);
}

TEST_F(ModelsTest, Gpt2TinyParameterNames) {
  OwningOpRef<ModuleOp> module = build(kTinyGpt2);
  ASSERT_TRUE(module);
  std::vector<std::string> expected = {
      "transformer.h.0.attn.c_attn.bias",
      "transformer.h.0.attn.c_attn.weight",
      "transformer.h.0.attn.c_proj.bias",
      "transformer.h.0.attn.c_proj.weight",
      "transformer.h.0.ln_1.bias",
      "transformer.h.0.ln_1.weight",
      "transformer.h.0.ln_2.bias",
      "transformer.h.0.ln_2.weight",
      "transformer.h.0.mlp.c_fc.bias",
      "transformer.h.0.mlp.c_fc.weight",
      "transformer.h.0.mlp.c_proj.bias",
      "transformer.h.0.mlp.c_proj.weight",
      "transformer.h.1.attn.c_attn.bias",
      "transformer.h.1.attn.c_attn.weight",
      "transformer.h.1.attn.c_proj.bias",
      "transformer.h.1.attn.c_proj.weight",
      "transformer.h.1.ln_1.bias",
      "transformer.h.1.ln_1.weight",
      "transformer.h.1.ln_2.bias",
      "transformer.h.1.ln_2.weight",
      "transformer.h.1.mlp.c_fc.bias",
      "transformer.h.1.mlp.c_fc.weight",
      "transformer.h.1.mlp.c_proj.bias",
      "transformer.h.1.mlp.c_proj.weight",
      "transformer.ln_f.bias",
      "transformer.ln_f.weight",
      "transformer.wpe.weight",
      "transformer.wte.weight",
  };
  EXPECT_EQ(sortedNames(*module), expected);
  auto shape = [&](llvm::StringRef name) {
    return llvm::to_vector(variable(*module, name).getTensorType().getShape());
  };
  using Shape = llvm::SmallVector<int64_t>;
  EXPECT_EQ(shape("transformer.wte.weight"), Shape({32, 16}));
  EXPECT_EQ(shape("transformer.wpe.weight"), Shape({8, 16}));
  EXPECT_EQ(shape("transformer.h.0.attn.c_attn.weight"), Shape({48, 16}));
  EXPECT_EQ(shape("transformer.h.0.attn.c_attn.bias"), Shape({48}));
  EXPECT_EQ(shape("transformer.h.0.mlp.c_fc.weight"), Shape({64, 16}));
  EXPECT_EQ(shape("transformer.h.0.mlp.c_proj.weight"), Shape({16, 64}));
}

TEST_F(ModelsTest, Gpt2InitializationMatchesNanoGpt) {
  OwningOpRef<ModuleOp> module = build(kTinyGpt2);
  ASSERT_TRUE(module);
  const double projStd = 0.02 / std::sqrt(2.0 * 2);
  for (ds::VariableOp var : variables(*module)) {
    llvm::StringRef name = var.getSymName();
    SCOPED_TRACE(name.str());
    EXPECT_EQ(var.getKind(), ds::VariableKind::param);
    if (name.contains(".ln_")) {
      EXPECT_EQ(var.getInit(), name.ends_with(".weight") ? ds::InitKind::ones
                                                         : ds::InitKind::zeros);
    } else if (name.ends_with(".bias")) {
      EXPECT_EQ(var.getInit(), ds::InitKind::zeros);
    } else {
      ASSERT_EQ(var.getInit(), ds::InitKind::normal);
      double expected = name.ends_with("c_proj.weight") ? projStd : 0.02;
      EXPECT_DOUBLE_EQ(var.getStd()->convertToDouble(), expected);
    }
  }
}

TEST_F(ModelsTest, Gpt2TiesLmHeadToWte) {
  OwningOpRef<ModuleOp> module = build(kTinyGpt2);
  ASSERT_TRUE(module);
  int wteLoads = 0;
  for (ds::LoadOp load : opsOf<ds::LoadOp>(*module))
    wteLoads += load.getName() == "transformer.wte.weight";
  EXPECT_EQ(wteLoads, 2);
  auto matmuls = opsOf<ds::MatmulOp>(*module);
  ASSERT_FALSE(matmuls.empty());
  ds::MatmulOp head = matmuls.back();
  EXPECT_TRUE(head.getTransposeRhs());
  auto load = head.getRhs().getDefiningOp<ds::LoadOp>();
  ASSERT_TRUE(load);
  EXPECT_EQ(load.getName(), "transformer.wte.weight");
  EXPECT_EQ(llvm::to_vector(head.getType().getShape()),
            llvm::SmallVector<int64_t>({2, 8, 32}));
}

TEST_F(ModelsTest, Gpt2WithoutBias) {
  OwningOpRef<ModuleOp> module = build(std::string(kTinyGpt2) + ",bias=0");
  ASSERT_TRUE(module);
  for (const std::string &name : sortedNames(*module))
    EXPECT_FALSE(llvm::StringRef(name).ends_with(".bias")) << name;
  auto norms = opsOf<ds::LayerNormOp>(*module);
  EXPECT_EQ(norms.size(), 5u);
  for (ds::LayerNormOp norm : norms)
    EXPECT_FALSE(norm.getBias());
}

TEST_F(ModelsTest, Gpt2DropoutSitesHaveUniqueIds) {
  OwningOpRef<ModuleOp> module = build(std::string(kTinyGpt2) + ",dropout=0.1");
  ASSERT_TRUE(module);
  auto drops = opsOf<ds::DropoutOp>(*module);
  // Embedding, then attention and MLP residual per block.
  ASSERT_EQ(drops.size(), 5u);
  std::vector<int64_t> ids;
  for (ds::DropoutOp drop : drops) {
    EXPECT_DOUBLE_EQ(drop.getRate().convertToDouble(), 0.1);
    ids.push_back(drop.getId());
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());

  OwningOpRef<ModuleOp> noDropout = build(kTinyGpt2);
  ASSERT_TRUE(noDropout);
  EXPECT_TRUE(opsOf<ds::DropoutOp>(*noDropout).empty());
}

TEST_F(ModelsTest, Gpt2LocationsNameTheLayer) {
  OwningOpRef<ModuleOp> module = build(kTinyGpt2);
  ASSERT_TRUE(module);
  auto attention = opsOf<ds::AttentionOp>(*module);
  ASSERT_EQ(attention.size(), 2u);
  auto loc = dyn_cast<NameLoc>(attention[1].getLoc());
  ASSERT_TRUE(loc);
  EXPECT_EQ(loc.getName().str(), "transformer.h.1.attn");
  EXPECT_DOUBLE_EQ(attention[1].getScale().convertToDouble(),
                   1.0 / std::sqrt(8.0));
  EXPECT_TRUE(attention[1].getCausal());
}

TEST_F(ModelsTest, LlamaTinyParameterNames) {
  OwningOpRef<ModuleOp> module =
      build("llama:dim=16,n_layer=1,n_head=2,vocab_size=32,block_size=8");
  ASSERT_TRUE(module);
  std::vector<std::string> expected = {
      "lm_head.weight",
      "model.embed_tokens.weight",
      "model.layers.0.input_layernorm.weight",
      "model.layers.0.mlp.down_proj.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.post_attention_layernorm.weight",
      "model.layers.0.self_attn.k_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.v_proj.weight",
      "model.norm.weight",
  };
  EXPECT_EQ(sortedNames(*module), expected);
  EXPECT_EQ(opsOf<ds::RotaryOp>(*module).size(), 2u);
  EXPECT_EQ(opsOf<ds::RmsNormOp>(*module).size(), 3u);
}

TEST_F(ModelsTest, LlamaHiddenDimDefault) {
  auto hiddenDim = [&](llvm::StringRef spec) -> int64_t {
    OwningOpRef<ModuleOp> module = build(spec, /*batch=*/1);
    if (!module)
      return -1;
    return variable(*module, "model.layers.0.mlp.up_proj.weight")
        .getTensorType()
        .getDimSize(0);
  };
  // The smallest multiple of 32 at or above 8 * dim / 3.
  EXPECT_EQ(hiddenDim("llama:dim=16,n_layer=1,n_head=2,block_size=4"), 64);
  EXPECT_EQ(hiddenDim("llama:dim=48,n_layer=1,n_head=2,block_size=4"), 128);
  EXPECT_EQ(hiddenDim("llama:n_layer=1,block_size=4"), 10944);
  EXPECT_EQ(hiddenDim("llama:dim=16,n_layer=1,n_head=2,hidden_dim=40"), 40);
}

TEST_F(ModelsTest, MlpParameterNames) {
  OwningOpRef<ModuleOp> module = build("mlp");
  ASSERT_TRUE(module);
  std::vector<std::string> expected = {
      "head.bias",     "head.weight",     "layers.0.bias", "layers.0.weight",
      "layers.1.bias", "layers.1.weight", "wte.weight",
  };
  EXPECT_EQ(sortedNames(*module), expected);
  EXPECT_EQ(opsOf<ds::ReluOp>(*module).size(), 2u);
}

TEST_F(ModelsTest, BatchSizeInSpecOverridesArgument) {
  OwningOpRef<ModuleOp> module = build("mlp:batch_size=3", /*batch=*/2);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("forward");
  EXPECT_EQ(cast<RankedTensorType>(forward.getArgumentTypes()[0]).getShape(),
            llvm::ArrayRef<int64_t>({3, 16}));
}

TEST_F(ModelsTest, BadSpecsGetOneClearLine) {
  EXPECT_EQ(errorOf("gpt2:n_layers=2"),
            "gpt2: unknown option 'n_layers' (did you mean 'n_layer'?)");
  EXPECT_EQ(errorOf("gpt2:n_head=3,n_embd=64"),
            "gpt2: n_head=3 must divide n_embd=64");
  EXPECT_EQ(errorOf("gpt3"), "unknown model 'gpt3' (known: gpt2, llama, mlp)");
  EXPECT_EQ(errorOf("gpt2:n_layer=two"),
            "gpt2: 'n_layer' expects an integer, got 'two'");
  EXPECT_EQ(errorOf("gpt2:bias=yes"), "gpt2: 'bias' expects 0 or 1, got 'yes'");
  EXPECT_EQ(errorOf("gpt2:dropout=high"),
            "gpt2: 'dropout' expects a number, got 'high'");
  EXPECT_EQ(errorOf("gpt2:dropout=1"), "gpt2: dropout=1 must be in [0, 1)");
  EXPECT_EQ(errorOf("gpt2:n_layer=0"), "gpt2: n_layer=0 must be positive");
  EXPECT_EQ(errorOf("gpt2:n_layer=1,n_layer=2"),
            "gpt2: option 'n_layer' given twice");
  EXPECT_EQ(errorOf("gpt2:n_layer"), "gpt2: expected key=value, got 'n_layer'");
  EXPECT_EQ(errorOf("mlp:n_layer=-1"), "mlp: n_layer=-1 must be at least 0");
  EXPECT_EQ(errorOf("mlp:batch_size=0"), "mlp: batch_size=0 must be positive");
  EXPECT_EQ(errorOf("llama:dim=64,n_head=3"),
            "llama: n_head=3 must divide dim=64");
  EXPECT_EQ(errorOf("llama:dim=40,n_head=8"),
            "llama: head size dim/n_head=5 must be even for rotary "
            "embeddings");
  EXPECT_EQ(errorOf("llama:foo=1"),
            "llama: unknown option 'foo' (known: dim, n_layer, n_head, "
            "hidden_dim, vocab_size, block_size, norm_eps, rope_theta, "
            "batch_size)");
}

TEST_F(ModelsTest, NonPositiveBatchArgumentIsRejected) {
  std::string error;
  EXPECT_FALSE(buildModel(ctx, "mlp", 0, error));
  EXPECT_EQ(error, "mlp: batch size 0 must be positive");
}

TEST_F(ModelsTest, HelpListsEveryModelAndOption) {
  std::string help;
  llvm::raw_string_ostream os(help);
  dsc::models::printModelHelp(os);
  for (const char *text :
       {"gpt2:", "llama:", "mlp:", "n_layer=12", "n_embd=768",
        "vocab_size=50304", "bias=1", "dropout=0.0", "dim=4096",
        "hidden_dim=auto", "rope_theta=10000", "norm_eps=1e-5", "hidden=64",
        "batch_size=N"})
    EXPECT_NE(help.find(text), std::string::npos) << text << "\n" << help;
}

TEST_F(ModelsTest, BuilderDeclaresEachParameterOnce) {
  dsc::builder::GraphBuilder gb(ctx, "toy");
  gb.beginForward(/*batch=*/2, /*seqLen=*/4);
  Value x;
  {
    dsc::builder::GraphBuilder::Scope scope(gb, "enc");
    x = gb.embedding(gb.tokens(), "emb", 8, 6, 0.02);
    // Asking again for enc.emb.weight loads it without a second declaration.
    Value again = gb.param("emb.weight", {8, 6}, ds::InitKind::normal, 0.02);
    x = gb.matmul(x, again, /*transposeRhs=*/true);
    EXPECT_EQ(gb.dropout(x, 0.0), x);
  }
  OwningOpRef<ModuleOp> module = gb.finish(gb.crossEntropy(x, gb.targets()));
  ASSERT_TRUE(module);
  EXPECT_TRUE(succeeded(verify(*module)));
  EXPECT_EQ(sortedNames(*module), std::vector<std::string>({"enc.emb.weight"}));
  EXPECT_EQ(opsOf<ds::LoadOp>(*module).size(), 2u);
  EXPECT_EQ(module->getSymName(), "toy");
}
