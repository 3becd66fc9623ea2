//===- Mesh.cpp - ranks arranged on named axes, and their groups ----------===//

#include "runtime/comm/Mesh.h"

namespace dsc::rt {

Mesh Mesh::make(std::vector<Axis> axes, std::string &error) {
  Mesh mesh;
  if (axes.empty()) {
    error = "a mesh needs at least one axis";
    return mesh;
  }
  long long total = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const Axis &a = axes[i];
    if (a.name.empty() || a.size < 1) {
      error = "mesh axis " + std::to_string(i) + " ('" + a.name +
              "'): needs a name and a size >= 1, got " + std::to_string(a.size);
      return mesh;
    }
    for (size_t j = 0; j < i; ++j)
      if (axes[j].name == a.name) {
        error = "mesh axis '" + a.name + "' appears twice";
        return mesh;
      }
    total *= a.size;
    if (total > (1 << 24)) {
      error = "a mesh of more than 16777216 ranks";
      return mesh;
    }
  }
  mesh.axes_ = std::move(axes);
  return mesh;
}

int Mesh::size() const {
  int n = 1;
  for (const Axis &a : axes_)
    n *= a.size;
  return n;
}

int Mesh::axisIndex(const std::string &name) const {
  for (size_t i = 0; i < axes_.size(); ++i)
    if (axes_[i].name == name)
      return int(i);
  return -1;
}

std::vector<int> Mesh::coordinates(int rank) const {
  std::vector<int> c(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    c[i] = rank % axes_[i].size;
    rank /= axes_[i].size;
  }
  return c;
}

int Mesh::groupOf(int rank, size_t axis) const {
  std::vector<int> c = coordinates(rank);
  int group = 0;
  for (size_t i = 0; i < axes_.size(); ++i)
    if (i != axis)
      group = group * axes_[i].size + c[i];
  return group;
}

int Mesh::placeIn(int rank, size_t axis) const {
  return coordinates(rank)[axis];
}

std::string Mesh::describe() const {
  std::string out;
  for (const Axis &a : axes_)
    out += (out.empty() ? "" : " x ") + a.name + " " + std::to_string(a.size);
  return out;
}

std::unique_ptr<Communicator> splitAlong(Communicator &world, const Mesh &mesh,
                                         size_t axis, std::string &error) {
  if (!mesh.valid() || axis >= mesh.axes().size()) {
    error = "splitAlong: no axis " + std::to_string(axis) + " in the mesh";
    return nullptr;
  }
  if (mesh.size() != world.size()) {
    error = "the mesh " + mesh.describe() + " has " +
            std::to_string(mesh.size()) + " ranks, the job " +
            std::to_string(world.size());
    return nullptr;
  }
  const int group = mesh.groupOf(world.rank(), axis);
  return world.split(group, mesh.placeIn(world.rank(), axis),
                     mesh.axes()[axis].name + " group " + std::to_string(group),
                     error);
}

} // namespace dsc::rt
