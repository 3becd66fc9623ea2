//===- Sampler.cpp - text out of a trained model (dsrun --sample) ---------===//
#include "runtime/tooling/Sampler.h"

#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/ProgramNames.h"
#include "runtime/rng/Philox.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

namespace dsc::rt {

namespace {

// Philox stream of sampling draws (initialization uses the variables'
// name streams, dropout its sites' ids).
constexpr uint32_t kSampleStream = 0x53414d50; // "SAMP"

int32_t pick(const float *logits, const SampleOptions &o, uint32_t index) {
  const uint32_t v = o.vocabSize;
  if (o.temperature == 0)
    return int32_t(std::max_element(logits, logits + v) - logits);
  std::vector<int32_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  uint32_t k = o.topK && o.topK < v ? o.topK : v;
  // The k largest, ties to the lower token, in descending order.
  std::partial_sort(
      order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
      });
  double top = logits[order[0]], total = 0;
  std::vector<double> weight(k);
  for (uint32_t i = 0; i < k; ++i)
    total += weight[i] = std::exp((logits[order[i]] - top) / o.temperature);
  double u = rng::uniformAt64(o.seed, kSampleStream, index, 0) * total;
  for (uint32_t i = 0; i < k; ++i) {
    u -= weight[i];
    if (u < 0)
      return order[i];
  }
  return order[k - 1];
}

/// A one-row sampling program (dsc's sample_<T>): tokens [1, T] in, f32
/// logits out, of every position [1, T, V] or, when it also takes the
/// position [1] (i32), of that one [1, 1, V].
struct ShortForward {
  std::string name;
  int64_t length = 0;
  NamedTensor tokens, logits;
  std::optional<NamedTensor> position;
};

bool shortForwardShapes(const std::vector<NamedTensor> &in,
                        const std::vector<NamedTensor> &outs, int64_t t,
                        int64_t v) {
  const std::vector<int64_t> tokens{1, t}, position{1};
  const std::vector<int64_t> rows{1, in.size() == 2 ? 1 : t, v};
  return (in.size() == 1 || in.size() == 2) && in[0].shape == tokens &&
         in[0].ref.dtype == DType::i32 &&
         (in.size() == 1 ||
          (in[1].shape == position && in[1].ref.dtype == DType::i32)) &&
         outs.size() == 1 && outs[0].shape == rows &&
         outs[0].ref.dtype == DType::f32;
}

/// The plan's sampling programs, shortest first. Plans that cut the
/// sequence or the vocabulary over ranks, or the layers (a pipeline), have
/// none (dsc builds them only without), and sample with eval.
bool shortForwards(Session &session, const SampleOptions &o,
                   std::vector<ShortForward> &out, std::string &error) {
  if (o.tensorParallel > 1 || o.sequence.parts > 1 || o.world)
    return true;
  for (const std::string &name : session.programNames()) {
    if (!plan::isSampleProgram(name))
      continue;
    const int64_t t = plan::sampleLength(name);
    std::vector<NamedTensor> in = session.programInputs(name);
    std::vector<NamedTensor> outs = session.programOutputs(name);
    if (t > int64_t(o.seqLen)) {
      error = "plan: " + name + " is longer than the block size " +
              std::to_string(o.seqLen);
      return false;
    }
    if (!shortForwardShapes(in, outs, t, o.vocabSize)) {
      error = "plan: " + name + " is not a sampling program (tokens [1, " +
              std::to_string(t) + "] and maybe the position [1] in, f32 " +
              "logits of one or every position out)";
      return false;
    }
    out.push_back({name, t, in[0], outs[0], std::nullopt});
    if (in.size() == 2)
      out.back().position = in[1];
  }
  std::sort(out.begin(), out.end(),
            [](const ShortForward &a, const ShortForward &b) {
              return a.length < b.length;
            });
  return true;
}

/// Runs `f` on the context's last `len` tokens (the rest of its row zeros)
/// and reads the logits at position len - 1.
bool runShortForward(Session &session, const ShortForward &f,
                     const std::vector<int32_t> &context, size_t len,
                     std::vector<int32_t> &tokens, float *logits, int64_t vocab,
                     std::string &error) {
  tokens.assign(size_t(f.length), 0);
  std::copy(context.end() - long(len), context.end(), tokens.begin());
  const int32_t last = int32_t(len - 1);
  if (!session.writeTensor(f.tokens, tokens.data(), tokens.size() * 4, error) ||
      (f.position &&
       !session.writeTensor(*f.position, &last, sizeof last, error)) ||
      !session.run(f.name, 0, error))
    return false;
  const int64_t row = f.position ? 0 : int64_t(last);
  return session.readFloats(f.logits, row * vocab, logits, vocab, error);
}

/// A token drawn by `program`: one more of it in `counts`.
void count(ForwardCounts *counts, const std::string &program) {
  if (!counts)
    return;
  if (counts->empty() || counts->back().first != program)
    counts->emplace_back(program, 0);
  ++counts->back().second;
}

} // namespace

bool sampleTokens(Session &session, const SampleOptions &o,
                  std::vector<int32_t> &out, std::string &error,
                  ForwardCounts *counts) {
  const std::string program(plan::kEvalProgram);
  if (!session.hasProgram(program)) {
    error = "plan: no program 'eval' to sample with (compile the plan with "
            "this dsc)";
    return false;
  }
  std::vector<ShortForward> shorts;
  if (!shortForwards(session, o, shorts, error))
    return false;
  std::vector<NamedTensor> in = session.programInputs(program);
  std::vector<NamedTensor> outs = session.programOutputs(program);
  const int64_t rows = o.microBatch, t = o.seqLen, v = o.vocabSize;
  // With vocabulary parallelism each rank's eval returns its part of the
  // vocabulary; the row drawn from is gathered whole. With Ulysses each
  // returns its part of the positions; the row comes from the rank that
  // holds the context's last token.
  const int64_t parts = std::max<int64_t>(o.tensorParallel, 1);
  const int64_t seqParts = o.sequence.parts, tl = t / seqParts;
  std::vector<int64_t> logitsShape{rows, tl, v / parts};
  if (outs.size() >= 2 && outs[1].shape != logitsShape)
    logitsShape.back() = v; // the vocabulary whole (it did not split)
  const int64_t vl = logitsShape.back();
  // A pipeline's earlier stages return no logits: they run eval and take
  // the token the last stage drew.
  const bool draws = !o.world || outs.size() >= 2;
  if (in.size() != 2 ||
      (draws && (outs.size() < 2 || outs[1].ref.dtype != DType::f32 ||
                 outs[1].shape != logitsShape))) {
    error = "plan: eval has no f32 logits output [" + std::to_string(rows) +
            ", " + std::to_string(t) + ", " + std::to_string(v) +
            "] to sample from (its loss is not a cross-entropy)";
    return false;
  }
  std::vector<int32_t> context =
      o.prompt.empty() ? std::vector<int32_t>{10} : o.prompt;
  const size_t elems = size_t(rows * t);
  std::vector<int32_t> tokens(elems), targets(elems, 0);
  std::vector<float> logits(static_cast<size_t>(vl)); // the drawn row
  std::vector<float> row(static_cast<size_t>(v * seqParts));
  std::vector<int32_t> part, window;
  for (uint32_t i = 0; i < o.count; ++i) {
    size_t len = std::min<size_t>(context.size(), size_t(t));
    // The shortest one-row forward that holds the context, if any.
    auto fits =
        std::find_if(shorts.begin(), shorts.end(), [&](const ShortForward &f) {
          return f.length >= int64_t(len);
        });
    if (fits != shorts.end()) {
      if (!runShortForward(session, *fits, context, len, window, logits.data(),
                           v, error))
        return false;
      int32_t next = pick(logits.data(), o, i);
      count(counts, fits->name);
      context.push_back(next);
      out.push_back(next);
      continue;
    }
    std::fill(tokens.begin(), tokens.end(), 0);
    for (int64_t r = 0; r < rows; ++r)
      std::copy(context.end() - long(len), context.end(),
                tokens.begin() + r * t);
    const size_t fed = elems / size_t(seqParts);
    const int32_t *feed =
        o.sequence.take(tokens.data(), uint32_t(rows), uint32_t(t), part);
    if (!session.writeTensor(in[0], feed, fed * 4, error) ||
        !session.writeTensor(in[1], targets.data(), fed * 4, error) ||
        !session.run(program, 0, error))
      return false;
    int64_t next = 0;
    if (draws) {
      // Only the row of the context's last position (row 0 of the batch,
      // every row holds the context): GPT-2's whole logits are 200 MB.
      const size_t last = len - 1;
      if (!session.readFloats(outs[1], int64_t(last % size_t(tl)) * vl,
                              logits.data(), vl, error))
        return false;
      const float *mine = logits.data();
      const float *drawn = mine;
      if (seqParts > 1 || vl != v) {
        if (!session.gatherTensorParts(mine, size_t(vl), row.data(), error))
          return false;
        drawn = row.data() + (seqParts > 1 ? last / size_t(tl) * size_t(v) : 0);
      }
      next = pick(drawn, o, i);
    }
    // On a pipeline the last stage's first rank tells every rank.
    if (o.world &&
        !o.world->broadcast(&next, 1, DType::i64, o.drawer, nullptr, error))
      return false;
    count(counts, program);
    context.push_back(int32_t(next));
    out.push_back(int32_t(next));
  }
  return true;
}

} // namespace dsc::rt
