//===- PathRules.h - an output never overwrites an input ---------*- C++
//-*-===//
//
// The one rule every tool applies before it opens anything for writing
// (dsc, ds-opt, dsrun; frontends/torch/dsc/files.py mirrors it for the
// Python side): an output that is the same file as one of the run's inputs,
// or as another of its outputs, is refused. "The same file" is the same
// device and inode, through symbolic links; an output that does not exist
// yet is identified by its resolved directory and name, so `--metrics x
// --trace x` is caught before either is created. /dev/null and "-" (the
// standard streams) are never the same file as anything. Header-only, POSIX.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CORE_PATHRULES_H
#define DSC_RUNTIME_CORE_PATHRULES_H

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include <sys/stat.h>

namespace dsc {

/// A path the user gave and how to name it in a message: `what` is the
/// flag ("--metrics") or a phrase for a positional argument ("the plan").
struct NamedPath {
  std::string what;
  std::string path;
  std::string describe() const { return what + " " + path; }
};

/// The file `path` names, for comparison. `kind` 0: nothing to compare
/// (empty, "-", /dev/null, unreachable); 1: an existing file (dev, ino);
/// 2: not there yet (`where`: its resolved directory and last name).
struct FileIdentity {
  int kind = 0;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string where;

  bool operator==(const FileIdentity &o) const {
    if (kind == 0 || kind != o.kind)
      return false;
    return kind == 1 ? dev == o.dev && ino == o.ino : where == o.where;
  }
};

/// True for the null device (by device number, so /dev/./null and links to
/// it count).
inline bool isNullDevice(const struct stat &st) {
  struct stat null;
  return S_ISCHR(st.st_mode) && ::stat("/dev/null", &null) == 0 &&
         st.st_rdev == null.st_rdev;
}

inline FileIdentity identifyPath(const std::string &path) {
  FileIdentity id;
  if (path.empty() || path == "-")
    return id;
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (isNullDevice(st))
      return id;
    id.kind = 1;
    id.dev = st.st_dev;
    id.ino = st.st_ino;
    return id;
  }
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  if (dir.empty())
    dir = "/";
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  char resolved[PATH_MAX];
  if (name.empty() || !::realpath(dir.c_str(), resolved))
    return id; // the write itself will say what is wrong
  id.kind = 2;
  id.where = std::string(resolved) + "/" + name;
  return id;
}

/// False + one line if an output is the same file as an input ("--metrics
/// d.txt: is the same file as --data d.txt; refusing to overwrite an
/// input") or as an earlier output ("--trace x: is the same file as
/// --metrics x; give each output its own file"). Empty paths are skipped.
inline bool checkOutputsDistinct(const std::vector<NamedPath> &inputs,
                                 const std::vector<NamedPath> &outputs,
                                 std::string &error) {
  std::vector<FileIdentity> inIds, outIds;
  for (const NamedPath &in : inputs)
    inIds.push_back(identifyPath(in.path));
  for (size_t o = 0; o < outputs.size(); ++o) {
    FileIdentity id = identifyPath(outputs[o].path);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (id == inIds[i]) {
        error = outputs[o].describe() + ": is the same file as " +
                inputs[i].describe() + "; refusing to overwrite an input";
        return false;
      }
    for (size_t k = 0; k < o; ++k)
      if (id == outIds[k]) {
        error = outputs[o].describe() + ": is the same file as " +
                outputs[k].describe() + "; give each output its own file";
        return false;
      }
    outIds.push_back(id);
  }
  return true;
}

} // namespace dsc

#endif // DSC_RUNTIME_CORE_PATHRULES_H
