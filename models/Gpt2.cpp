//===- Gpt2.cpp - GPT-2 as nanoGPT defines it -----------------------------===//
//
// Architecture, parameter names and initialization follow nanoGPT's model.py
// (GPTConfig, GPT._init_weights), so a checkpoint maps one to one onto its
// state dict. The lm_head is tied to transformer.wte. Differences: GELU is
// GPT-2's tanh form, and ds.attention has no dropout on the attention
// probabilities (nanoGPT's attn_dropout); residual and embedding dropout are
// kept.
//
//===----------------------------------------------------------------------===//

#include "models/Models.h"

#include "models/builder/GraphBuilder.h"

#include <cmath>
#include <string>

using namespace mlir;
using namespace dsc::models;
using dsc::builder::GraphBuilder;

namespace {

struct Gpt2Config {
  int64_t nLayer, nHead, nEmbd, blockSize, vocabSize;
  bool bias;
  double dropout;

  explicit Gpt2Config(const ModelOptions &o)
      : nLayer(o.getInt("n_layer")), nHead(o.getInt("n_head")),
        nEmbd(o.getInt("n_embd")), blockSize(o.getInt("block_size")),
        vocabSize(o.getInt("vocab_size")), bias(o.getInt("bias") != 0),
        dropout(o.getFloat("dropout")) {}
};

} // namespace

static constexpr double kInitStd = 0.02;
static constexpr double kLayerNormEps = 1e-5;

static const OptionSpec gpt2Options[] = {
    {"n_layer", OptionKind::Int, "12", "transformer blocks"},
    {"n_head", OptionKind::Int, "12", "attention heads (must divide n_embd)"},
    {"n_embd", OptionKind::Int, "768", "embedding width"},
    {"block_size", OptionKind::Int, "1024", "sequence length T"},
    {"vocab_size", OptionKind::Int, "50304",
     "vocabulary (GPT-2's 50257 padded to a multiple of 64)"},
    {"bias", OptionKind::Bool, "1", "biases in Linear and LayerNorm layers"},
    {"dropout", OptionKind::Float, "0.0",
     "embedding and residual dropout rate, in [0, 1)"},
};

static std::string finalizeGpt2(ModelOptions &opts) {
  Gpt2Config c(opts);
  if (c.nEmbd % c.nHead)
    return "n_head=" + std::to_string(c.nHead) +
           " must divide n_embd=" + std::to_string(c.nEmbd);
  if (c.dropout < 0 || c.dropout >= 1)
    return "dropout=" + formatNumber(c.dropout) + " must be in [0, 1)";
  return "";
}

/// x + attn(ln_1(x)), then x + mlp(ln_2(x)): one pre-LN transformer block.
static Value buildBlock(GraphBuilder &gb, const Gpt2Config &c, Value x) {
  const int64_t C = c.nEmbd;
  // GPT-2 scales the residual projections by 1/sqrt(number of residual adds).
  const double projStd = kInitStd / std::sqrt(2.0 * c.nLayer);

  Value h = gb.layerNorm(x, "ln_1", C, c.bias, kLayerNormEps);
  {
    GraphBuilder::Scope attn(gb, "attn");
    Value qkv = gb.linear(h, "c_attn", C, 3 * C, c.bias, kInitStd);
    SmallVector<Value> parts = gb.split(qkv, /*axis=*/2, {C, C, C});
    Value q = gb.splitHeads(parts[0], c.nHead);
    Value k = gb.splitHeads(parts[1], c.nHead);
    Value v = gb.splitHeads(parts[2], c.nHead);
    Value y = gb.mergeHeads(gb.causalAttention(q, k, v));
    y = gb.linear(y, "c_proj", C, C, c.bias, projStd);
    x = gb.add(x, gb.dropout(y, c.dropout));
  }

  h = gb.layerNorm(x, "ln_2", C, c.bias, kLayerNormEps);
  {
    GraphBuilder::Scope mlp(gb, "mlp");
    Value y = gb.linear(h, "c_fc", C, 4 * C, c.bias, kInitStd);
    y = gb.gelu(y, ds::GeluApproximation::tanh);
    y = gb.linear(y, "c_proj", 4 * C, C, c.bias, projStd);
    x = gb.add(x, gb.dropout(y, c.dropout));
  }
  return x;
}

static Value buildGpt2(GraphBuilder &gb, const ModelOptions &opts,
                       int64_t batchSize, int64_t seqLen) {
  Gpt2Config c(opts);
  const int64_t T = seqLen;
  gb.beginForward(batchSize, T);

  Value x;
  {
    GraphBuilder::Scope transformer(gb, "transformer");
    Value tok =
        gb.embedding(gb.tokens(), "wte", c.vocabSize, c.nEmbd, kInitStd);
    Value pos =
        gb.embedding(gb.iota({T}, 0), "wpe", c.blockSize, c.nEmbd, kInitStd);
    x = gb.add(tok, pos);
    {
      GraphBuilder::Scope drop(gb, "drop");
      x = gb.dropout(x, c.dropout);
    }
    for (int64_t i = 0; i < c.nLayer; ++i) {
      GraphBuilder::Scope block(gb, "h." + std::to_string(i));
      x = buildBlock(gb, c, x);
    }
    x = gb.layerNorm(x, "ln_f", c.nEmbd, c.bias, kLayerNormEps);
  }

  Value logits;
  {
    GraphBuilder::Scope head(gb, "lm_head");
    // Weight tying: lm_head reads transformer.wte instead of owning a weight.
    Value wte = gb.load("transformer.wte.weight");
    logits = gb.matmul(x, wte, /*transposeRhs=*/true);
  }
  GraphBuilder::Scope loss(gb, "loss");
  return gb.crossEntropy(logits, gb.targets());
}

const ModelDef &dsc::models::gpt2Model() {
  static const ModelDef def = {
      "gpt2", "GPT-2 as in nanoGPT (its state-dict names, tied lm_head)",
      gpt2Options, finalizeGpt2, buildGpt2};
  return def;
}
