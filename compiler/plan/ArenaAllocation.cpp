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

namespace dsc::lowering {

void Lowering::placeTransients(const std::vector<int> &ids) {
  std::vector<int> order(ids);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return slots[a].bytes > slots[b].bytes;
  });
  // Placed slots per category, kept sorted by (offset, end): the first-fit
  // scan below then visits them in address order without sorting the
  // overlapping ones for every slot (that sort made placement the slowest
  // step of deep models).
  std::map<int, std::vector<int>> placedByCategory;
  auto byAddress = [&](int a, int b) {
    const Slot &x = slots[a], &y = slots[b];
    return std::make_pair(x.offset, x.offset + x.bytes) <
           std::make_pair(y.offset, y.offset + y.bytes);
  };
  for (int id : order) {
    Slot &s = slots[id];
    std::vector<int> &placed = placedByCategory[static_cast<int>(s.category)];
    uint64_t offset = 0;
    for (int q : placed) {
      const Slot &o = slots[q];
      if (o.last < s.first || s.last < o.first)
        continue; // never live at the same time
      if (offset + s.bytes <= o.offset)
        break;
      offset = std::max(offset, o.offset + o.bytes);
    }
    s.offset = offset;
    // The predicted peak is the last byte written, as the runtime
    // measures it: alignment padding after the top buffer is not counted.
    uint64_t &peak = transientPeak[static_cast<int>(s.category)];
    peak = std::max(peak, offset + s.used);
    placed.insert(std::upper_bound(placed.begin(), placed.end(), id, byAddress),
                  id);
  }
}

} // namespace dsc::lowering
