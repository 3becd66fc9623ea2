//===- Sampler.h - text out of a trained model (dsrun --sample) -*- C++ -*-===//
//
// Autoregressive sampling through the plan's one-row sampling programs
// (sample_<T>, dsc builds them for its built-in models) or its `eval`
// program (its output 1, the logits). Shapes are static, so each new token
// runs a whole window: the context's last block_size tokens sit at
// positions 0..L-1 of row 0 (the rest zeros, which causal attention keeps
// from reaching position L-1) and the next token comes from the logits at
// L-1. The window is the shortest sample_<T> with T >= L, else eval's
// [eval batch, block_size], every row a copy of the context. Temperature 0 is
// greedy (argmax, the lowest token on a tie); otherwise softmax(logits /
// T) over the top-k tokens, drawn with Philox keyed by (seed, the token's
// index), so a run is reproducible. Every rank runs it in step (ZeRO-3
// gathers inside eval) and gets the same tokens. On a pipeline only the
// last stage's eval returns logits: its first rank draws each token and
// broadcasts it to every rank before the next window runs.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TOOLING_SAMPLER_H
#define DSC_RUNTIME_TOOLING_SAMPLER_H

#include "runtime/exec/Session.h"
#include "runtime/tooling/StepPrograms.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

struct SampleOptions {
  uint32_t count = 0;          ///< tokens to generate
  std::vector<int32_t> prompt; ///< empty: starts from token 10 ('\n')
  double temperature = 1.0;    ///< 0: greedy
  uint32_t topK = 0;           ///< 0: every token
  uint64_t seed = 1337;
  uint32_t microBatch = 1, seqLen = 1, vocabSize = 256;
  /// Ranks of a tensor-parallel group (eval's logits may be cut along the
  /// vocabulary over them).
  uint32_t tensorParallel = 1;
  /// A Ulysses group's cut of the sequence: eval takes this rank's part of
  /// the tokens and returns its part of the logits.
  SequencePart sequence;
  /// A pipeline: the world, and the rank that draws each token (the last
  /// stage's first); null: every rank draws the same token itself.
  Communicator *world = nullptr;
  int drawer = 0;
};

/// How many tokens each program drew (dsrun reports it: a short forward
/// per token is the point of sample_<T>), in the order first used.
using ForwardCounts = std::vector<std::pair<std::string, uint32_t>>;

/// Appends options.count generated tokens to `out` and, when `counts` is
/// given, counts the programs that drew them. False + one line on error
/// ("plan: ..." when the plan cannot sample).
bool sampleTokens(Session &session, const SampleOptions &options,
                  std::vector<int32_t> &out, std::string &error,
                  ForwardCounts *counts = nullptr);

} // namespace dsc::rt

#endif // DSC_RUNTIME_TOOLING_SAMPLER_H
