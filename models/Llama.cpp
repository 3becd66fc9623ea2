//===- Llama.cpp - Llama with Hugging Face LlamaForCausalLM names ---------===//
//
// Pre-RMSNorm decoder with rotary position embeddings (rotate_half form), a
// SwiGLU MLP and an untied lm_head; no biases. Parameter names are those of
// the Hugging Face state dict. Keys and values have as many heads as queries
// (no grouped-query attention).
//
//===----------------------------------------------------------------------===//

#include "models/Models.h"

#include "models/builder/GraphBuilder.h"

#include <string>

using namespace mlir;
using namespace dsc::models;
using dsc::builder::GraphBuilder;

namespace {

struct LlamaConfig {
  int64_t dim, nLayer, nHead, hiddenDim, vocabSize, blockSize;
  double normEps, ropeTheta;

  explicit LlamaConfig(const ModelOptions &o)
      : dim(o.getInt("dim")), nLayer(o.getInt("n_layer")),
        nHead(o.getInt("n_head")), hiddenDim(o.getInt("hidden_dim")),
        vocabSize(o.getInt("vocab_size")), blockSize(o.getInt("block_size")),
        normEps(o.getFloat("norm_eps")), ropeTheta(o.getFloat("rope_theta")) {}
};

} // namespace

static constexpr double kInitStd = 0.02;

static const OptionSpec llamaOptions[] = {
    {"dim", OptionKind::Int, "4096", "model width"},
    {"n_layer", OptionKind::Int, "32", "decoder layers"},
    {"n_head", OptionKind::Int, "32",
     "attention heads (must divide dim; dim/n_head must be even)"},
    {"hidden_dim", OptionKind::Int, "",
     "MLP width; auto: the smallest multiple of 32 >= 8*dim/3"},
    {"vocab_size", OptionKind::Int, "32000", "vocabulary"},
    {"block_size", OptionKind::Int, "2048", "sequence length T"},
    {"norm_eps", OptionKind::Float, "1e-5", "RMSNorm epsilon"},
    {"rope_theta", OptionKind::Float, "10000", "rotary embedding base"},
};

static std::string finalizeLlama(ModelOptions &opts) {
  int64_t dim = opts.getInt("dim"), nHead = opts.getInt("n_head");
  if (!opts.has("hidden_dim")) {
    // Smallest multiple of 32, m, with 3m >= 8 dim.
    opts.setInt("hidden_dim", 32 * ((8 * dim + 95) / 96));
  }
  if (dim % nHead)
    return "n_head=" + std::to_string(nHead) +
           " must divide dim=" + std::to_string(dim);
  if ((dim / nHead) % 2)
    return "head size dim/n_head=" + std::to_string(dim / nHead) +
           " must be even for rotary embeddings";
  if (double eps = opts.getFloat("norm_eps"); eps < 0)
    return "norm_eps=" + formatNumber(eps) + " must be non-negative";
  if (double theta = opts.getFloat("rope_theta"); theta <= 0)
    return "rope_theta=" + formatNumber(theta) + " must be positive";
  return "";
}

static Value buildAttention(GraphBuilder &gb, const LlamaConfig &c, Value h) {
  GraphBuilder::Scope attn(gb, "self_attn");
  auto project = [&](StringRef name) {
    Value y = gb.linear(h, name, c.dim, c.dim, /*bias=*/false, kInitStd);
    gb.markAttentionHeads(gb.qualify(name) + ".weight", c.nHead);
    return gb.splitHeads(y, c.nHead);
  };
  Value q = project("q_proj");
  Value k = project("k_proj");
  Value v = project("v_proj");
  q = gb.rotary(q, c.ropeTheta);
  k = gb.rotary(k, c.ropeTheta);
  Value y = gb.mergeHeads(gb.causalAttention(q, k, v));
  return gb.linear(y, "o_proj", c.dim, c.dim, /*bias=*/false, kInitStd);
}

static Value buildMlp(GraphBuilder &gb, const LlamaConfig &c, Value h) {
  GraphBuilder::Scope mlp(gb, "mlp");
  Value gate = gb.linear(h, "gate_proj", c.dim, c.hiddenDim, false, kInitStd);
  Value up = gb.linear(h, "up_proj", c.dim, c.hiddenDim, false, kInitStd);
  Value act = gb.mul(gb.silu(gate), up);
  return gb.linear(act, "down_proj", c.hiddenDim, c.dim, false, kInitStd);
}

static Value buildLlama(GraphBuilder &gb, const ModelOptions &opts,
                        int64_t batchSize, int64_t seqLen) {
  LlamaConfig c(opts);
  gb.beginForward(batchSize, seqLen);

  Value x;
  {
    GraphBuilder::Scope model(gb, "model");
    x = gb.embedding(gb.tokens(), "embed_tokens", c.vocabSize, c.dim, kInitStd);
    for (int64_t i = 0; i < c.nLayer; ++i) {
      GraphBuilder::Scope layer(gb, "layers." + std::to_string(i));
      Value h = gb.rmsNorm(x, "input_layernorm", c.dim, c.normEps);
      x = gb.add(x, buildAttention(gb, c, h));
      h = gb.rmsNorm(x, "post_attention_layernorm", c.dim, c.normEps);
      x = gb.add(x, buildMlp(gb, c, h));
    }
    x = gb.rmsNorm(x, "norm", c.dim, c.normEps);
  }
  Value logits =
      gb.linear(x, "lm_head", c.dim, c.vocabSize, /*bias=*/false, kInitStd);
  GraphBuilder::Scope loss(gb, "loss");
  return gb.crossEntropy(logits, gb.targets());
}

const ModelDef &dsc::models::llamaModel() {
  static const ModelDef def = {"llama",
                               "Llama with Hugging Face LlamaForCausalLM names",
                               llamaOptions, finalizeLlama, buildLlama};
  return def;
}
