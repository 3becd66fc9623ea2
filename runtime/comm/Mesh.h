//===- Mesh.h - ranks arranged on named axes, and their groups --*- C++ -*-===//
//
// A job's ranks as a mesh: named axes, outermost first, the last innermost,
// rank r at the row-major coordinates of r. dsc's meshes are data x
// pipeline x tensor (tensor innermost, so a tensor-parallel group is
// consecutive ranks, on one host as Megatron places them; any axis may be
// 1) and data x sequence (runtime/exec/RankGroups.h cuts them). A group along
// an axis is the ranks that agree on every other coordinate; its ranks are
// numbered by their coordinate along the axis, so a tensor group's rank i
// holds shard i of every tensor-parallel tensor.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_COMM_MESH_H
#define DSC_RUNTIME_COMM_MESH_H

#include "runtime/comm/Communicator.h"

#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

class Mesh {
public:
  struct Axis {
    std::string name;
    int size;
  };

  /// The mesh of `axes` (each size >= 1, names distinct and non-empty);
  /// else an invalid mesh (valid() false) and one line.
  static Mesh make(std::vector<Axis> axes, std::string &error);

  bool valid() const { return !axes_.empty(); }
  const std::vector<Axis> &axes() const { return axes_; }
  /// The number of ranks: the product of the axis sizes.
  int size() const;
  /// The index of axis `name`, or -1.
  int axisIndex(const std::string &name) const;
  /// Rank r's coordinate along each axis (r in [0, size())).
  std::vector<int> coordinates(int rank) const;
  /// The group along `axis` that holds `rank`: its number among the groups
  /// along that axis (the row-major index of the other coordinates) and
  /// the rank's place in it (its coordinate along the axis).
  int groupOf(int rank, size_t axis) const;
  int placeIn(int rank, size_t axis) const;
  /// "data 2 x tensor 4".
  std::string describe() const;

private:
  std::vector<Axis> axes_;
};

/// The communicator of the group along `axis` that holds `world`'s rank,
/// named "<axis> group <n>": a collective on `world` (every rank calls it
/// for the same axis at the same point). The mesh must span `world`. Null
/// and one line on failure.
std::unique_ptr<Communicator> splitAlong(Communicator &world, const Mesh &mesh,
                                         size_t axis, std::string &error);

} // namespace dsc::rt

#endif // DSC_RUNTIME_COMM_MESH_H
