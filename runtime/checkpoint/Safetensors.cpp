//===- Safetensors.cpp - safetensors files, written and validated ---------===//
#include "runtime/checkpoint/Safetensors.h"

#include "runtime/core/InputFile.h"
#include "runtime/core/MappedFile.h"
#include "runtime/core/Printable.h"

#include "runtime/core/OutputPath.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>

#include <unistd.h>

namespace dsc::rt {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this code copies host floats as is"
#endif

namespace {

using Json = nlohmann::json;

// The reference implementation refuses larger headers; so do we, before
// handing a huge buffer to the JSON parser.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Element sizes of the dtypes the format defines (sub-byte ones excluded).
int dtypeBytes(const std::string &dtype) {
  static const std::map<std::string, int> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"I64", 8}, {"U64", 8},     {"F64", 8}};
  auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

std::string rangeString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// numel * elementBytes, or false on overflow or a negative dimension.
bool byteSize(const std::vector<int64_t> &shape, uint64_t elementBytes,
              uint64_t &bytes) {
  bytes = elementBytes;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, uint64_t(d), &bytes))
      return false;
  return true;
}

bool readUnsignedList(const Json &value, std::vector<uint64_t> &out) {
  if (!value.is_array())
    return false;
  for (const Json &v : value) {
    if (!v.is_number_unsigned())
      return false;
    out.push_back(v.get<uint64_t>());
  }
  return true;
}

} // namespace

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t SafetensorsEntry::numel() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= uint64_t(d);
  return n;
}

SafetensorsWriter::SafetensorsWriter() : out_(new OutputFile()) {}
SafetensorsWriter::~SafetensorsWriter() = default;

bool SafetensorsWriter::open(const std::string &path,
                             const std::vector<TensorToSave> &tensors,
                             const std::map<std::string, std::string> &metadata,
                             std::string &error) {
  // ordered_json keeps the header in data order, which reads better.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty())
    header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  sizes_.clear();
  for (const TensorToSave &t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" ||
        !names.insert(t.name).second) {
      error = path + ": cannot save a tensor named '" + t.name +
              "' (empty, reserved or repeated)";
      return false;
    }
    uint64_t bytes = 0;
    if (!byteSize(t.shape, sizeof(float), bytes)) {
      error = path + ": tensor '" + t.name + "' has an invalid shape " +
              formatShape(t.shape);
      return false;
    }
    header[t.name] = {{"dtype", "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    sizes_.push_back(bytes / sizeof(float));
  }
  std::string text = header.dump(
      -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  // Pad with spaces so the data starts 8-byte aligned, as the reference
  // writer does; readers may then map the floats in place.
  text.append((8 - text.size() % 8) % 8, ' ');

  // A regular file is replaced through a temporary beside it; a device or
  // FIFO is written as it is (runtime/core/OutputPath.h).
  if (!out_->open(path, error))
    return false;
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  next_ = 0;
  inTensor_ = 0;
  return put(length, 8, error) && put(text.data(), text.size(), error);
}

bool SafetensorsWriter::put(const void *data, uint64_t size,
                            std::string &error) {
  sum_.update(data, size_t(size));
  return out_->write(data, size_t(size), error);
}

bool SafetensorsWriter::write(const float *data, uint64_t count,
                              std::string &error) {
  if (next_ >= sizes_.size()) {
    error = "SafetensorsWriter: a write past the last of " +
            std::to_string(sizes_.size()) + " tensors";
    return false;
  }
  if (count > sizes_[next_] - inTensor_) {
    error = "SafetensorsWriter: tensor " + std::to_string(next_) +
            " written with " + std::to_string(inTensor_ + count) + " floats";
    return false;
  }
  inTensor_ += count;
  if (inTensor_ == sizes_[next_]) {
    ++next_;
    inTensor_ = 0;
  }
  return put(data, count * sizeof(float), error);
}

bool SafetensorsWriter::commit(std::string &error) {
  if (next_ != sizes_.size()) {
    error = "SafetensorsWriter: " + std::to_string(sizes_.size() - next_) +
            " tensors not written";
    return false;
  }
  return out_->commit(error);
}

bool saveSafetensors(const std::string &path,
                     const std::vector<TensorToSave> &tensors,
                     const std::map<std::string, std::string> &metadata,
                     std::string &error, FileChecksum *written) {
  SafetensorsWriter writer;
  if (!writer.open(path, tensors, metadata, error))
    return false;
  for (const TensorToSave &t : tensors) {
    uint64_t bytes = 0;
    byteSize(t.shape, sizeof(float), bytes);
    if (!writer.write(t.data, bytes / sizeof(float), error))
      return false;
  }
  if (written)
    *written = writer.written();
  return writer.commit(error);
}

SafetensorsFile::~SafetensorsFile() = default;

std::unique_ptr<SafetensorsFile> SafetensorsFile::read(const std::string &path,
                                                       std::string &error) {
  std::vector<uint8_t> bytes;
  if (!readRegularFile(path, bytes, error))
    return nullptr;
  return parse(std::move(bytes), path, error);
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::map(const std::string &path,
                                                      std::string &error) {
  std::unique_ptr<MappedFile> mapped =
      MappedFile::open(path, "checkpoint file", error);
  if (!mapped)
    return nullptr;
  const uint8_t *data = mapped->data();
  uint64_t size = mapped->size();
  std::unique_ptr<SafetensorsFile> file = parse(data, size, path, error);
  if (file)
    file->mapped_ = std::move(mapped);
  return file;
}

std::unique_ptr<SafetensorsFile>
SafetensorsFile::parse(std::vector<uint8_t> bytes, const std::string &what,
                       std::string &error) {
  std::unique_ptr<SafetensorsFile> file =
      parse(bytes.data(), bytes.size(), what, error);
  if (file)
    file->owned_ = std::move(bytes); // moving keeps the heap block
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t *bytes,
                                                        uint64_t size,
                                                        const std::string &what,
                                                        std::string &error) {
  auto fail = [&](const std::string &message) {
    error = what + ": " + message;
    return nullptr;
  };
  if (size < 8)
    return fail(std::to_string(size) +
                " bytes, too short for a safetensors file (it starts with an "
                "8-byte header length)");
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(bytes[i]) << (8 * i);
  if (headerBytes > size - 8)
    return fail("header length " + std::to_string(headerBytes) +
                " runs past the end of the file (" + std::to_string(size) +
                " bytes)");
  if (headerBytes > kMaxHeaderBytes)
    return fail("header length " + std::to_string(headerBytes) +
                " exceeds the limit of " + std::to_string(kMaxHeaderBytes));
  Json header = Json::parse(bytes + 8, bytes + 8 + headerBytes, nullptr,
                            /*allow_exceptions=*/false);
  if (header.is_discarded())
    return fail("header is not valid JSON");
  if (!header.is_object())
    return fail("header is not a JSON object");

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  uint64_t dataBytes = size - 8 - headerBytes;
  for (const auto &[name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object())
        return fail("__metadata__ is not an object of strings");
      for (const auto &[key, v] : value.items()) {
        if (!v.is_string())
          return fail("__metadata__ is not an object of strings");
        file->metadata_[key] = v.get<std::string>();
      }
      continue;
    }
    std::string tensor = "tensor '" + printable(name) + "': ";
    if (!value.is_object())
      return fail(tensor + "expected an object with dtype, shape and "
                           "data_offsets");
    SafetensorsEntry entry;
    entry.name = name;
    auto dtype = value.find("dtype");
    if (dtype == value.end() || !dtype->is_string())
      return fail(tensor + "missing dtype");
    entry.dtype = dtype->get<std::string>();
    int elementBytes = dtypeBytes(entry.dtype);
    if (elementBytes == 0)
      return fail(tensor + "unknown dtype '" + printable(entry.dtype) + "'");
    std::vector<uint64_t> dims, offsets;
    auto shape = value.find("shape");
    if (shape == value.end() || !readUnsignedList(*shape, dims))
      return fail(tensor + "shape must be a list of non-negative integers");
    for (uint64_t d : dims) {
      if (d > uint64_t(INT64_MAX))
        return fail(tensor + "shape must be a list of non-negative integers");
      entry.shape.push_back(int64_t(d));
    }
    auto range = value.find("data_offsets");
    if (range == value.end() || !readUnsignedList(*range, offsets) ||
        offsets.size() != 2 || offsets[0] > offsets[1])
      return fail(tensor + "data_offsets must be [begin, end] with begin <= "
                           "end");
    entry.begin = offsets[0];
    entry.end = offsets[1];
    std::string where = rangeString(entry.begin, entry.end);
    if (entry.end > dataBytes)
      return fail(tensor + "data_offsets " + where +
                  " run past the end of the data (" +
                  std::to_string(dataBytes) + " bytes)");
    uint64_t need = 0;
    if (!byteSize(entry.shape, elementBytes, need))
      return fail(tensor + "shape " + formatShape(entry.shape) +
                  " is too large");
    if (need != entry.end - entry.begin)
      return fail(tensor + entry.dtype + " " + formatShape(entry.shape) +
                  " needs " + std::to_string(need) +
                  " bytes, but data_offsets " + where + " hold " +
                  std::to_string(entry.end - entry.begin));
    file->entries_.push_back(std::move(entry));
  }

  // The data must be covered exactly once: overlapping tensors would alias
  // and uncovered bytes could smuggle in anything (the format forbids both).
  std::sort(file->entries_.begin(), file->entries_.end(),
            [](const SafetensorsEntry &a, const SafetensorsEntry &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t covered = 0;
  const SafetensorsEntry *previous = nullptr;
  for (const SafetensorsEntry &e : file->entries_) {
    if (e.begin < covered)
      return fail("tensors '" + printable(previous->name) + "' and '" +
                  printable(e.name) + "' overlap (data_offsets " +
                  rangeString(previous->begin, previous->end) + " and " +
                  rangeString(e.begin, e.end) + ")");
    if (e.begin > covered)
      return fail("data bytes [" + std::to_string(covered) + ", " +
                  std::to_string(e.begin) + ") belong to no tensor");
    covered = e.end;
    previous = &e;
  }
  if (covered != dataBytes)
    return fail("data bytes [" + std::to_string(covered) + ", " +
                std::to_string(dataBytes) + ") belong to no tensor");

  file->what_ = what;
  file->dataStart_ = 8 + headerBytes;
  file->base_ = bytes;
  return file;
}

const SafetensorsEntry *SafetensorsFile::find(std::string_view name) const {
  for (const SafetensorsEntry &e : entries_)
    if (e.name == name)
      return &e;
  return nullptr;
}

bool SafetensorsFile::readF32(const SafetensorsEntry &entry, float *out,
                              std::string &error) const {
  if (entry.dtype != "F32") {
    error = what_ + ": tensor '" + printable(entry.name) + "' is " +
            printable(entry.dtype) + "; only F32 can be loaded";
    return false;
  }
  if (entry.end > entry.begin)
    std::memcpy(out, data(entry), entry.end - entry.begin);
  return true;
}

} // namespace dsc::rt
