//===- LambShard.h - which parameter each element of a ZeRO shard is -----===//
//
// A sharded ds.lamb and ds.lamb_norms see one rank's slice of a flat group:
// the group's parameters (`members`, their element counts) lie one after
// another from element 0, then padding up to the group's size; rank r
// holds elements [r n, (r + 1) n) for a shard of n. Both backends walk the
// shard as runs of elements of one member each, so each run takes its
// member's norms or trust ratio.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_KERNELS_LAMBSHARD_H
#define DSC_RUNTIME_KERNELS_LAMBSHARD_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc::rt {

/// Elements [begin, end) of the shard belong to member `member`, or to the
/// padding when it is -1.
struct LambRun {
  int64_t begin, end, member;
};

/// The shard's runs in order; they cover [0, shardSize) exactly.
inline std::vector<LambRun> lambShardRuns(int64_t shardSize, int rank,
                                          const int64_t *members,
                                          size_t count) {
  std::vector<LambRun> runs;
  const int64_t first = int64_t(rank) * shardSize, last = first + shardSize;
  int64_t at = 0; // the member's first element in the group
  for (size_t j = 0; j < count && at < last; at += members[j++]) {
    const int64_t b = std::max(at, first), e = std::min(at + members[j], last);
    if (b < e)
      runs.push_back({b - first, e - first, int64_t(j)});
  }
  const int64_t covered = runs.empty() ? 0 : runs.back().end;
  if (covered < shardSize)
    runs.push_back({covered, shardSize, -1});
  return runs;
}

} // namespace dsc::rt

#endif // DSC_RUNTIME_KERNELS_LAMBSHARD_H
