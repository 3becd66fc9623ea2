//===- ArenaAllocation.cpp - liveness placement of transients -------------===//
//
// Everything a program computes lives in a transient arena (activations,
// comm buffers), placed by liveness with greedy-by-size first-fit (as
// TFLite's and XLA's heap simulators): bigger buffers first, each at the
// lowest offset that does not overlap a placed buffer whose lifetime
// intersects its own.
//
//===----------------------------------------------------------------------===//
#include "compiler/plan/LoweringImpl.h"

#include <algorithm>
#include <array>
#include <climits>
#include <utility>
#include <vector>

namespace dsc::lowering {

namespace {

/// The placed slots of one category in address order ((begin, end), then
/// placement order), in chunks of at most kMax entries. The first-fit scan
/// reads what it tests from small packed arrays instead of the Slots, and
/// skips a chunk whole when no entry of it is live with the slot being
/// placed (its lifetime envelope); inserting moves at most one chunk.
/// Placement stays greedy-by-size first-fit, exactly.
class PlacedSlots {
public:
  /// The lowest offset at which `bytes` fit among the placed slots live at
  /// some point of [first, last].
  uint64_t firstFit(uint64_t bytes, int first, int last) const {
    uint64_t offset = 0;
    for (const Chunk &c : chunks) {
      if (c.maxLast < first || last < c.minFirst)
        continue; // nothing here is live at the same time
      for (size_t q = 0, n = c.begin.size(); q < n; ++q) {
        if (c.last[q] < first || last < c.first[q])
          continue;
        if (offset + bytes <= c.begin[q])
          return offset;
        offset = std::max(offset, c.end[q]);
      }
    }
    return offset;
  }

  void insert(uint64_t b, uint64_t e, int f, int l) {
    if (chunks.empty()) {
      chunks.emplace_back();
      Chunk &c = chunks.back();
      c.begin = {b};
      c.end = {e};
      c.first = {f};
      c.last = {l};
      c.envelope();
      return;
    }
    // The first chunk whose last entry sorts after (b, e).
    size_t ci = 0, hi = chunks.size();
    while (ci < hi) {
      size_t mid = (ci + hi) / 2;
      const Chunk &c = chunks[mid];
      if (std::make_pair(c.begin.back(), c.end.back()) <= std::make_pair(b, e))
        ci = mid + 1;
      else
        hi = mid;
    }
    if (ci == chunks.size())
      --ci; // after everything: the last chunk
    Chunk &c = chunks[ci];
    size_t at = 0, top = c.begin.size();
    while (at < top) {
      size_t mid = (at + top) / 2;
      if (std::make_pair(c.begin[mid], c.end[mid]) <= std::make_pair(b, e))
        at = mid + 1;
      else
        top = mid;
    }
    c.begin.insert(c.begin.begin() + at, b);
    c.end.insert(c.end.begin() + at, e);
    c.first.insert(c.first.begin() + at, f);
    c.last.insert(c.last.begin() + at, l);
    c.minFirst = std::min(c.minFirst, f);
    c.maxLast = std::max(c.maxLast, l);
    if (c.begin.size() > kMax)
      split(ci);
  }

private:
  static constexpr size_t kMax = 256;

  struct Chunk {
    std::vector<uint64_t> begin, end;
    std::vector<int> first, last;
    int minFirst = INT_MAX, maxLast = INT_MIN;

    void envelope() {
      minFirst = *std::min_element(first.begin(), first.end());
      maxLast = *std::max_element(last.begin(), last.end());
    }
  };

  void split(size_t ci) {
    Chunk upper;
    Chunk &c = chunks[ci];
    size_t half = c.begin.size() / 2;
    auto move = [&](auto &from, auto &to) {
      to.assign(from.begin() + half, from.end());
      from.resize(half);
    };
    move(c.begin, upper.begin);
    move(c.end, upper.end);
    move(c.first, upper.first);
    move(c.last, upper.last);
    c.envelope();
    upper.envelope();
    chunks.insert(chunks.begin() + ci + 1, std::move(upper));
  }

  std::vector<Chunk> chunks; ///< each non-empty, in address order
};

} // namespace

std::array<uint64_t, kNumCategories>
Lowering::placeTransients(const std::vector<int> &ids) {
  std::array<uint64_t, kNumCategories> own{}; // this program's device peaks
  std::vector<int> order(ids);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return slots[a].bytes > slots[b].bytes;
  });
  // Each (space, category) is an arena of its own.
  std::array<std::array<PlacedSlots, kNumCategories>, 2> placedByArena;
  for (int id : order) {
    Slot &s = slots[id];
    int space = static_cast<int>(s.space);
    PlacedSlots &placed = placedByArena[space][static_cast<int>(s.category)];
    uint64_t offset = placed.firstFit(s.bytes, s.first, s.last);
    s.offset = offset;
    // The predicted peak is the last byte written, as the runtime
    // measures it: alignment padding after the top buffer is not counted.
    uint64_t &peak = transientPeak[space][static_cast<int>(s.category)];
    peak = std::max(peak, offset + s.used);
    if (s.space == Space::Device) {
      uint64_t &mine = own[static_cast<int>(s.category)];
      mine = std::max(mine, offset + s.used);
    }
    placed.insert(offset, offset + s.bytes, s.first, s.last);
  }
  return own;
}

} // namespace dsc::lowering
