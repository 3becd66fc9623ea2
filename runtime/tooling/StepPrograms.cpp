//===- StepPrograms.cpp - binding and running a step's programs -----------===//
#include "runtime/tooling/StepPrograms.h"

#include "runtime/checkpoint/Safetensors.h"
#include "runtime/plan/ProgramNames.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace dsc::rt {

namespace {

std::string describe(const NamedTensor &t) {
  return std::string(dtypeName(t.ref.dtype)) + " " + formatShape(t.shape);
}

bool matches(const NamedTensor &t, const Slot &slot) {
  if (t.ref.dtype != slot.dtype)
    return false;
  if (!slot.shape.empty())
    return t.shape == slot.shape;
  return std::all_of(t.shape.begin(), t.shape.end(),
                     [](int64_t d) { return d == 1; });
}

std::string describe(const Slot &slot) {
  return std::string(dtypeName(slot.dtype)) +
         (slot.shape.empty() ? " scalar" : " " + formatShape(slot.shape));
}

} // namespace

bool bindProgram(Session &session, const std::string &program,
                 const std::vector<Slot> &inputs, const char *inputNames,
                 const Slot &output, const char *outputName,
                 std::vector<NamedTensor> &in, NamedTensor &out,
                 std::string &error) {
  if (!session.hasProgram(program)) {
    error = "plan: no program '" + program + "'";
    return false;
  }
  in = session.programInputs(program);
  std::vector<NamedTensor> outs = session.programOutputs(program);
  if (in.size() != inputs.size()) {
    error = "plan: " + program + " has " + std::to_string(in.size()) +
            " inputs; dsrun passes " + std::to_string(inputs.size()) + " (" +
            inputNames + ")";
    return false;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (!matches(in[i], inputs[i])) {
      error = "plan: " + program + " input " + std::to_string(i) + " ('" +
              in[i].name + "') is " + describe(in[i]) + "; dsrun passes " +
              describe(inputs[i]);
      return false;
    }
  if (outs.empty()) {
    error = "plan: " + program + " has no outputs; dsrun reads " + outputName +
            " from output 0";
    return false;
  }
  if (!matches(outs[0], output)) {
    error = "plan: " + program + " output 0 ('" + outs[0].name + "') is " +
            describe(outs[0]) + "; dsrun expects " + describe(output);
    return false;
  }
  out = outs[0];
  return true;
}

bool bindPrograms(Session &session, const StepShape &shape, ProgramIO &io,
                  std::string &error) {
  Slot batch{DType::i32,
             {shape.microBatch, shape.seqLen / shape.sequence.parts}};
  Slot scalar{DType::f32, {}};
  io.microBatch = shape.microBatch;
  io.seqLen = shape.seqLen;
  io.sequence = shape.sequence;
  const bool scaled = shape.lossScaled;
  std::vector<NamedTensor> in;
  auto bindMicro = [&](std::string_view name, MicroIO &out) {
    std::vector<Slot> slots{batch, batch};
    if (scaled)
      slots.push_back(scalar);
    if (!bindProgram(session, std::string(name), slots,
                     scaled ? "tokens, targets, loss scale" : "tokens, targets",
                     scalar, "the loss", in, out.loss, error))
      return false;
    out.tokens = in[0];
    out.targets = in[1];
    if (scaled)
      out.lossScale = in[2];
    return true;
  };
  if (!bindMicro(plan::kMicroStepProgram, io.micro))
    return false;
  io.hasSync = session.hasProgram(plan::kMicroStepSyncProgram);
  if (io.hasSync && !bindMicro(plan::kMicroStepSyncProgram, io.sync))
    return false;
  // apply(lr, step[, beta1][, loss scale])
  const bool cycled = shape.cyclesMomentum;
  std::vector<Slot> applySlots{scalar, scalar};
  std::string names = "lr, step";
  for (auto [given, name] :
       {std::pair(cycled, ", beta1"), std::pair(scaled, ", loss scale")})
    if (given) {
      applySlots.push_back(scalar);
      names += name;
    }
  if (!bindProgram(session, std::string(plan::kApplyProgram), applySlots,
                   names.c_str(), scalar, "the gradient norm", in, io.gradNorm,
                   error))
    return false;
  io.lr = in[0];
  io.step = in[1];
  if (cycled)
    io.beta1 = in[2];
  if (scaled)
    io.lossScale = in.back();
  return true;
}

bool readScalar(Session &session, const NamedTensor &t, double &value,
                std::string &error) {
  float v = 0;
  if (!session.readTensor(t, &v, sizeof(v), error))
    return false;
  value = v;
  return true;
}

bool writeScalar(Session &session, const NamedTensor &t, double value,
                 std::string &error) {
  float v = float(value);
  return session.writeTensor(t, &v, sizeof(v), error);
}

const int32_t *SequencePart::take(const int32_t *whole, uint32_t rows,
                                  uint32_t seqLen,
                                  std::vector<int32_t> &scratch) const {
  if (parts <= 1)
    return whole;
  const size_t n = seqLen / parts;
  scratch.resize(size_t(rows) * n);
  for (uint32_t r = 0; r < rows; ++r)
    std::copy_n(whole + size_t(r) * seqLen + size_t(index) * n, n,
                scratch.begin() + ptrdiff_t(size_t(r) * n));
  return scratch.data();
}

bool runMicroStep(Session &session, const ProgramIO &io, bool last,
                  const int32_t *tokens, const int32_t *targets,
                  std::optional<double> lossScale, uint32_t tag, double &loss,
                  std::string &error) {
  const bool sync = io.hasSync && last;
  const MicroIO &mio = sync ? io.sync : io.micro;
  const size_t bytes = size_t(mio.tokens.numel()) * sizeof(int32_t);
  std::vector<int32_t> tokenPart, targetPart;
  tokens = io.sequence.take(tokens, io.microBatch, io.seqLen, tokenPart);
  targets = io.sequence.take(targets, io.microBatch, io.seqLen, targetPart);
  return session.writeTensor(mio.tokens, tokens, bytes, error) &&
         session.writeTensor(mio.targets, targets, bytes, error) &&
         (!lossScale ||
          writeScalar(session, mio.lossScale, *lossScale, error)) &&
         session.run(std::string(sync ? plan::kMicroStepSyncProgram
                                      : plan::kMicroStepProgram),
                     tag, error) &&
         readScalar(session, mio.loss, loss, error);
}

bool runApply(Session &session, const ProgramIO &io, const LrSchedule &schedule,
              uint64_t applied, std::optional<double> lossScale,
              bool skipsOverflow, uint32_t tag, ApplyOutcome &outcome,
              std::string &error) {
  outcome.lr = schedule.lrAt(applied + 1);
  outcome.hasBeta1 = schedule.cyclesMomentum();
  if (outcome.hasBeta1) {
    outcome.beta1 = schedule.beta1At(applied + 1);
    if (!writeScalar(session, io.beta1, outcome.beta1, error))
      return false;
  }
  if (!writeScalar(session, io.lr, outcome.lr, error) ||
      !writeScalar(session, io.step, double(applied + 1), error) ||
      (lossScale && !writeScalar(session, io.lossScale, *lossScale, error)) ||
      !session.run(std::string(plan::kApplyProgram), tag, error) ||
      !readScalar(session, io.gradNorm, outcome.gradNorm, error))
    return false;
  // The norm is global (all-reduced, or computed from all-reduced
  // gradients), so every rank takes the same decision.
  outcome.skipped = skipsOverflow && !std::isfinite(outcome.gradNorm);
  return true;
}

} // namespace dsc::rt
