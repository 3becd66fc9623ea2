//===- Mlp.cpp - a tiny token MLP language model for tests ----------------===//
//
// Each position is predicted from its own token only: embedding, n_layer
// Linear+ReLU layers and a Linear head. Small enough to check gradients and
// losses by hand.
//
//===----------------------------------------------------------------------===//

#include "models/Models.h"

#include "models/builder/GraphBuilder.h"

#include <string>

using namespace mlir;
using namespace dsc::models;
using dsc::builder::GraphBuilder;

static constexpr double kInitStd = 0.02;

static const OptionSpec mlpOptions[] = {
    {"vocab_size", OptionKind::Int, "256", "vocabulary"},
    {"block_size", OptionKind::Int, "16", "sequence length T"},
    {"n_embd", OptionKind::Int, "32", "embedding width"},
    {"hidden", OptionKind::Int, "64", "width of the hidden layers"},
    {"n_layer", OptionKind::Int, "2", "hidden Linear+ReLU layers", 0},
};

static std::string finalizeMlp(ModelOptions &) { return ""; }

static Value buildMlp(GraphBuilder &gb, const ModelOptions &opts,
                      int64_t batchSize, int64_t seqLen) {
  int64_t vocab = opts.getInt("vocab_size"), nEmbd = opts.getInt("n_embd"),
          hidden = opts.getInt("hidden"), nLayer = opts.getInt("n_layer");
  gb.beginForward(batchSize, seqLen);

  Value x = gb.embedding(gb.tokens(), "wte", vocab, nEmbd, kInitStd);
  int64_t width = nEmbd;
  for (int64_t i = 0; i < nLayer; ++i) {
    std::string name = "layers." + std::to_string(i);
    x = gb.linear(x, name, width, hidden, /*bias=*/true, kInitStd);
    GraphBuilder::Scope layer(gb, name);
    x = gb.relu(x);
    width = hidden;
  }
  Value logits = gb.linear(x, "head", width, vocab, /*bias=*/true, kInitStd);
  GraphBuilder::Scope loss(gb, "loss");
  return gb.crossEntropy(logits, gb.targets());
}

const ModelDef &dsc::models::mlpModel() {
  static const ModelDef def = {"mlp", "a tiny token MLP language model",
                               mlpOptions, finalizeMlp, buildMlp};
  return def;
}
