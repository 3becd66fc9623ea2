//===- DataFilesTest.cpp - the data loader and safetensors files ---===//

#include "test/unit/dsrun/DsrunTestSupport.h"

#include <fstream>

#include <sys/stat.h>
#include <unistd.h>

using namespace dsc::rt;
using namespace dsc::rt::dsruntest;

namespace {

//===----------------------------------------------------------------------===//
// DataLoader
//===----------------------------------------------------------------------===//

TEST(DataLoader, BytesFileSamplesAreSlicesOfTheFile) {
  std::string path = writeFile("data.txt", countingBytes(200));
  std::string error;
  auto data = DataLoader::open(path, 256, 3, 8, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->numTokens(), 200u);
  std::vector<int32_t> tokens(24), targets(24);
  BatchKey key{7, 3, 1, 0, 1};
  data->fill(key, tokens.data(), targets.data());
  for (uint32_t row = 0; row < 3; ++row) {
    uint64_t s = data->startOffset(key, row);
    for (uint32_t t = 0; t < 8; ++t) {
      EXPECT_EQ(tokens[row * 8 + t], int32_t(s + t));
      EXPECT_EQ(targets[row * 8 + t], int32_t(s + t + 1));
    }
  }
}

TEST(DataLoader, DeterministicInSeedStepMicroAndRank) {
  std::string path = writeFile("data.txt", countingBytes(4000));
  std::string error;
  auto a = DataLoader::open(path, 256, 4, 16, error);
  auto b = DataLoader::open(path, 256, 4, 16, error);
  ASSERT_TRUE(a && b) << error;
  auto batch = [](const DataLoader &d, BatchKey key) {
    std::vector<int32_t> tokens(64), targets(64);
    d.fill(key, tokens.data(), targets.data());
    return tokens;
  };
  BatchKey key{1337, 5, 1, 1, 2};
  EXPECT_EQ(batch(*a, key), batch(*b, key));
  std::set<std::vector<int32_t>> distinct = {batch(*a, key)};
  for (BatchKey other :
       {BatchKey{1338, 5, 1, 1, 2}, BatchKey{1337, 6, 1, 1, 2},
        BatchKey{1337, 5, 0, 1, 2}, BatchKey{1337, 5, 1, 0, 2}})
    distinct.insert(batch(*a, other));
  EXPECT_EQ(distinct.size(), 5u);
}

TEST(DataLoader, SampleDependsOnGlobalIndexOnly) {
  // Sample (micro * worldSize + rank) * batch + row: 2 ranks x batch 2 at
  // micro-step 1, one rank x batch 4, and one rank x batch 8 all see the
  // same row 7 of the step.
  std::string path = writeFile("data.txt", countingBytes(5000));
  std::string error;
  auto b2 = DataLoader::open(path, 256, 2, 16, error);
  auto b4 = DataLoader::open(path, 256, 4, 16, error);
  auto b8 = DataLoader::open(path, 256, 8, 16, error);
  ASSERT_TRUE(b2 && b4 && b8) << error;
  uint64_t s = b2->startOffset({9, 4, 1, 1, 2}, 1);
  EXPECT_EQ(b4->startOffset({9, 4, 1, 0, 1}, 3), s);
  EXPECT_EQ(b8->startOffset({9, 4, 0, 0, 1}, 7), s);
}

TEST(DataLoader, StartsCoverExactlyTheValidRange) {
  // 11 bytes, seq_len 8: starts 0, 1 and 2 are the only valid ones.
  std::string path = writeFile("data.txt", countingBytes(11));
  std::string error;
  auto data = DataLoader::open(path, 256, 1, 8, error);
  ASSERT_TRUE(data) << error;
  std::set<uint64_t> seen;
  for (uint32_t step = 1; step <= 300; ++step)
    seen.insert(data->startOffset({1, step, 0, 0, 1}, 0));
  EXPECT_EQ(seen, (std::set<uint64_t>{0, 1, 2}));
}

TEST(DataLoader, ExactlyOneSampleFits) {
  std::string path = writeFile("data.txt", countingBytes(9));
  std::string error;
  auto data = DataLoader::open(path, 256, 2, 8, error);
  ASSERT_TRUE(data) << error;
  for (uint32_t step = 1; step < 20; ++step)
    EXPECT_EQ(data->startOffset({3, step, 0, 0, 1}, 1), 0u);
}

TEST(DataLoader, NanoGptBinIsLittleEndianUint16) {
  std::vector<uint16_t> tokens;
  for (uint16_t i = 0; i < 100; ++i)
    tokens.push_back(uint16_t(0x1200 + i));
  std::string path = writeFile("train.bin", uint16File(tokens));
  std::string error;
  auto data = DataLoader::open(path, 50257, 2, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->numTokens(), 100u);
  EXPECT_EQ(data->tokenAt(5), 0x1205u);
  std::vector<int32_t> tok(8), tgt(8);
  data->fill({1, 1, 0, 0, 1}, tok.data(), tgt.data());
  uint64_t s = data->startOffset({1, 1, 0, 0, 1}, 0);
  EXPECT_EQ(tok[0], int32_t(0x1200 + s));
  EXPECT_EQ(tgt[3], int32_t(0x1200 + s + 4));
}

TEST(DataLoader, Errors) {
  std::string error;
  std::string missing = tempPath("missing.bin");
  EXPECT_FALSE(DataLoader::open(missing, 256, 1, 8, error));
  EXPECT_EQ(error, missing + ": cannot open: No such file or directory");

  std::string empty = writeFile("empty.txt", "");
  EXPECT_FALSE(DataLoader::open(empty, 256, 1, 8, error));
  EXPECT_EQ(error, empty + ": empty file");

  std::string shortText = writeFile("short.txt", countingBytes(8));
  EXPECT_FALSE(DataLoader::open(shortText, 256, 1, 8, error));
  EXPECT_EQ(error,
            shortText + ": 8 bytes, but one sample needs seq_len + 1 = 9");

  std::string shortBin = writeFile("short.bin", uint16File({1, 2, 3}));
  EXPECT_FALSE(DataLoader::open(shortBin, 256, 1, 3, error));
  EXPECT_EQ(error,
            shortBin + ": 3 tokens, but one sample needs seq_len + 1 = 4");

  std::string odd = writeFile("odd.bin", "abc");
  EXPECT_FALSE(DataLoader::open(odd, 256, 1, 1, error));
  EXPECT_EQ(error, odd + ": 3 bytes; a nanoGPT .bin file holds uint16 tokens, "
                         "so its size must be even");

  std::string big = writeFile("big.bin", uint16File({1, 2, 3, 4, 5, 300, 6}));
  EXPECT_FALSE(DataLoader::open(big, 256, 1, 2, error));
  EXPECT_EQ(error, big + ": token 300 at position 5 is outside the plan's "
                         "vocabulary (vocab_size 256)");
  EXPECT_TRUE(DataLoader::open(big, 301, 1, 2, error)) << error;

  std::string text = writeFile("text.txt", countingBytes(100));
  EXPECT_FALSE(DataLoader::open(text, 100, 1, 8, error));
  EXPECT_EQ(error, text + ": read as bytes (256 symbols), but the plan's "
                          "vocab_size is 100; use a nanoGPT .bin or a .npy "
                          "token file, or a plan with vocab_size >= 256");
}

/// A .npy file as numpy.save writes it (version 1): magic, version, the
/// header dict padded with spaces to a multiple of 64 bytes, then `body`.
std::string npyFile(const std::string &dict, const std::string &body,
                    char major = 1) {
  std::string header = dict;
  const size_t fixed = major == 1 ? 10 : 12;
  while ((fixed + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + major + '\0';
  const size_t n = header.size();
  out += char(n & 0xff);
  out += char(n >> 8 & 0xff);
  if (major != 1)
    out += std::string(2, '\0');
  return out + header + body;
}

template <class T> std::string littleEndian(const std::vector<T> &values) {
  std::string out;
  for (T v : values)
    for (size_t b = 0; b < sizeof(T); ++b)
      out += char(uint64_t(v) >> (8 * b) & 0xff);
  return out;
}

// numpy.save's files hold what their header declares: the integer dtype,
// its width and sign, and a shape whose elements are the tokens in C order.
TEST(DataLoader, NpyFilesAreReadAsTheirHeaderDeclares) {
  std::vector<int64_t> values;
  for (int64_t i = 0; i < 12; ++i)
    values.push_back(1000 + i);
  std::string path = writeFile(
      "tokens.npy",
      npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 4), }",
              littleEndian(values)));
  std::string error;
  auto data = DataLoader::open(path, 50257, 1, 4, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->numTokens(), 12u);
  EXPECT_EQ(data->tokenAt(0), 1000u);
  EXPECT_EQ(data->tokenAt(11), 1011u);
  EXPECT_EQ(data->description(), path + ": 12 int64 tokens (.npy)");
  std::vector<int32_t> tok(4), tgt(4);
  data->fill({1, 1, 0, 0, 1}, tok.data(), tgt.data());
  uint64_t s = data->startOffset({1, 1, 0, 0, 1}, 0);
  EXPECT_EQ(tok[0], int32_t(1000 + s));
  EXPECT_EQ(tgt[3], int32_t(1000 + s + 4));

  // uint16 in a version 2 header, one-dimensional, Fortran order allowed.
  std::string u16 = writeFile(
      "u16.npy",
      npyFile("{'descr': '<u2', 'fortran_order': True, 'shape': "
              "(6,), }",
              littleEndian(std::vector<uint16_t>{1, 2, 300, 4, 5, 65535}), 2));
  data = DataLoader::open(u16, 65536, 1, 2, error);
  ASSERT_TRUE(data) << error;
  EXPECT_EQ(data->tokenAt(2), 300u);
  EXPECT_EQ(data->tokenAt(5), 65535u);
  EXPECT_EQ(data->description(), u16 + ": 6 uint16 tokens (.npy)");
}

TEST(DataLoader, NpyErrors) {
  std::string error;
  auto fails = [&](const std::string &name, const std::string &bytes,
                   uint32_t vocab = 256) {
    std::string path = writeFile(name, bytes);
    EXPECT_FALSE(DataLoader::open(path, vocab, 1, 2, error)) << name;
    return error.substr(path.size());
  };
  EXPECT_EQ(fails("text.npy", "just text, not an array"),
            ": not a .npy file (it does not start with NumPy's magic "
            "string)");
  EXPECT_EQ(
      fails("float.npy",
            npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
                    std::string(16, '\0'))),
      ": dtype '<f4' is not a token type (little-endian integers: uint8, "
      "uint16, uint32, uint64, int8, int16, int32 or int64)");
  EXPECT_EQ(
      fails("big.npy",
            npyFile("{'descr': '>u2', 'fortran_order': False, 'shape': (4,), }",
                    std::string(8, '\0'))),
      ": dtype '>u2' is not a token type (little-endian integers: uint8, "
      "uint16, uint32, uint64, int8, int16, int32 or int64)");
  EXPECT_EQ(fails("fortran.npy",
                  npyFile("{'descr': '<u2', 'fortran_order': True, 'shape': "
                          "(2, 3), }",
                          std::string(12, '\0'))),
            ": the array is in Fortran order; save a C-ordered one "
            "(numpy.ascontiguousarray)");
  EXPECT_EQ(fails("cut.npy",
                  npyFile("{'descr': '<i4', 'fortran_order': False, 'shape': "
                          "(10,), }",
                          std::string(12, '\0'))),
            ": the header says 10 elements of 4 bytes, but the file holds 3");
  EXPECT_EQ(fails("v9.npy", npyFile("{}", "", 9)),
            ": .npy format version 9 (dsrun reads versions 1 to 3)");
  EXPECT_EQ(fails("noshape.npy",
                  npyFile("{'descr': '<u2', 'fortran_order': False}", "")),
            ": the header has no 'shape' tuple");
  EXPECT_EQ(
      fails("negative.npy",
            npyFile("{'descr': '<i2', 'fortran_order': False, 'shape': (4,), }",
                    littleEndian(std::vector<int16_t>{1, 2, -3, 4}))),
      ": token -3 at position 2 is outside the plan's vocabulary "
      "(vocab_size 256)");
  EXPECT_EQ(
      fails("short.npy",
            npyFile("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }",
                    std::string(2, '\1'))),
      ": 2 tokens, but one sample needs seq_len + 1 = 3");
}

TEST(DataLoader, SyntheticIsAFibonacciSequence) {
  auto data = DataLoader::synthetic(50, 2, 16);
  std::vector<int32_t> tok(32), tgt(32), again(32), tgt2(32);
  data->fill({4, 2, 0, 0, 1}, tok.data(), tgt.data());
  DataLoader::synthetic(50, 2, 16)->fill({4, 2, 0, 0, 1}, again.data(),
                                         tgt2.data());
  EXPECT_EQ(tok, again);
  for (int i = 0; i < 32; ++i) {
    EXPECT_LT(tok[i], 50);
    if (i % 16 != 0) { // the next token follows from the previous two
      EXPECT_EQ(tgt[i], (tok[i] + tok[i - 1]) % 50);
    }
  }
}

//===----------------------------------------------------------------------===//
// Safetensors
//===----------------------------------------------------------------------===//

TEST(Safetensors, RoundTrip) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f};
  std::string path = tempPath("w.safetensors");
  std::string error;
  ASSERT_TRUE(saveSafetensors(path,
                              {{"a", {2, 3}, a.data()}, {"b", {}, b.data()}},
                              {{"format", "pt"}}, error))
      << error;
  EXPECT_FALSE(exists(path + ".tmp." + std::to_string(::getpid())));
  std::string bytes = readFile(path);
  uint64_t headerBytes = 0;
  for (int i = 0; i < 8; ++i)
    headerBytes |= uint64_t(uint8_t(bytes[i])) << (8 * i);
  EXPECT_EQ((8 + headerBytes) % 8, 0u) << "data must start 8-byte aligned";
  EXPECT_EQ(bytes.size(), 8 + headerBytes + 7 * 4);

  auto file = SafetensorsFile::read(path, error);
  ASSERT_TRUE(file) << error;
  ASSERT_EQ(file->tensors().size(), 2u);
  const SafetensorsEntry *ea = file->find("a");
  ASSERT_TRUE(ea);
  EXPECT_EQ(ea->dtype, "F32");
  EXPECT_EQ(ea->shape, (std::vector<int64_t>{2, 3}));
  std::vector<float> back(6);
  ASSERT_TRUE(file->readF32(*ea, back.data(), error)) << error;
  EXPECT_EQ(back, a);
  const SafetensorsEntry *eb = file->find("b");
  ASSERT_TRUE(eb);
  EXPECT_TRUE(eb->shape.empty());
  float scalar = 0;
  ASSERT_TRUE(file->readF32(*eb, &scalar, error));
  EXPECT_EQ(scalar, -0.5f);
  EXPECT_EQ(file->metadata(),
            (std::map<std::string, std::string>{{"format", "pt"}}));
}

// A checkpoint streams each tensor in chunks: pieces make the same file as
// whole writes, and a piece past a tensor's end is refused (nothing
// committed).
TEST(Safetensors, WriterTakesTensorsInPieces) {
  std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {-0.5f, 7};
  const std::vector<TensorToSave> tensors = {
      {"a", {2, 3}, nullptr}, {"empty", {0}, nullptr}, {"b", {2}, nullptr}};
  std::string whole = tempPath("whole.safetensors");
  std::string pieces = tempPath("pieces.safetensors");
  std::string error;
  ASSERT_TRUE(saveSafetensors(
      whole,
      {{"a", {2, 3}, a.data()}, {"empty", {0}, nullptr}, {"b", {2}, b.data()}},
      {}, error))
      << error;
  {
    SafetensorsWriter writer;
    ASSERT_TRUE(writer.open(pieces, tensors, {}, error)) << error;
    ASSERT_TRUE(writer.write(a.data(), 4, error)) << error;
    ASSERT_TRUE(writer.write(a.data() + 4, 2, error)) << error;
    ASSERT_TRUE(writer.write(nullptr, 0, error)) << error; // "empty"
    ASSERT_TRUE(writer.write(b.data(), 1, error)) << error;
    ASSERT_TRUE(writer.write(b.data() + 1, 1, error)) << error;
    ASSERT_TRUE(writer.commit(error)) << error;
  }
  EXPECT_EQ(readFile(pieces), readFile(whole));

  std::string bad = tempPath("bad.safetensors");
  {
    SafetensorsWriter writer;
    ASSERT_TRUE(writer.open(bad, tensors, {}, error)) << error;
    ASSERT_TRUE(writer.write(a.data(), 5, error)) << error;
    EXPECT_FALSE(writer.write(a.data(), 2, error));
    EXPECT_EQ(error, "SafetensorsWriter: tensor 0 written with 7 floats");
    EXPECT_FALSE(writer.commit(error));
    EXPECT_EQ(error, "SafetensorsWriter: 3 tensors not written");
  }
  EXPECT_FALSE(exists(bad));
}

TEST(Safetensors, FailedSaveLeavesNothing) {
  std::string dir = tempPath("no-such-dir");
  std::string path = dir + "/w.safetensors";
  float x = 1;
  std::string error;
  EXPECT_FALSE(saveSafetensors(path, {{"x", {1}, &x}}, {}, error));
  EXPECT_EQ(error, path + ".tmp." + std::to_string(::getpid()) +
                       ": cannot create: No such file or directory");
  EXPECT_FALSE(saveSafetensors(tempPath("w.safetensors"),
                               {{"x", {1}, &x}, {"x", {1}, &x}}, {}, error));
  EXPECT_EQ(error, tempPath("w.safetensors") +
                       ": cannot save a tensor named 'x' (empty, reserved or "
                       "repeated)");
  EXPECT_FALSE(exists(tempPath("w.safetensors")));
}

// Only a regular file is replaced (runtime/core/OutputPath.h): a device is
// written as it is, a directory or a dangling link refused untouched, a
// link to a regular file replaces its target and stays a link.
TEST(Safetensors, WritesOnlyWhatMayBeReplaced) {
  float x = 1;
  std::string error;
  ASSERT_TRUE(saveSafetensors("/dev/null", {{"x", {1}, &x}}, {}, error))
      << error;
  struct stat st;
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null was replaced";

  std::string dir = tempPath("dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  EXPECT_FALSE(saveSafetensors(dir, {{"x", {1}, &x}}, {}, error));
  EXPECT_EQ(error, dir + ": is a directory; refusing to replace it");
  ::rmdir(dir.c_str());

  std::string dangling = tempPath("dangling");
  ASSERT_EQ(::symlink((dangling + ".nowhere").c_str(), dangling.c_str()), 0);
  EXPECT_FALSE(saveSafetensors(dangling, {{"x", {1}, &x}}, {}, error));
  EXPECT_EQ(error,
            dangling + ": a symbolic link to nothing; refusing to replace it");

  std::string target = tempPath("target.safetensors"),
              link = tempPath("link.safetensors");
  { std::ofstream(target) << "old"; }
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_TRUE(saveSafetensors(link, {{"x", {1}, &x}}, {}, error)) << error;
  struct stat ls;
  ASSERT_EQ(::lstat(link.c_str(), &ls), 0);
  EXPECT_TRUE(S_ISLNK(ls.st_mode)) << "the link was renamed over";
  EXPECT_NE(readFile(target), "old");
  EXPECT_TRUE(SafetensorsFile::read(target, error)) << error;
}

// A file with `header` as its JSON and `dataBytes` zero bytes of data.
std::vector<uint8_t> fileWith(const std::string &header, size_t dataBytes) {
  std::vector<uint8_t> bytes(8 + header.size() + dataBytes, 0);
  for (int i = 0; i < 8; ++i)
    bytes[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

std::string parseError(std::vector<uint8_t> bytes) {
  std::string error;
  EXPECT_FALSE(SafetensorsFile::parse(std::move(bytes), "w.st", error));
  return error;
}

TEST(Safetensors, RejectsCorruptFiles) {
  EXPECT_EQ(parseError({1, 2, 3, 4, 5}),
            "w.st: 5 bytes, too short for a safetensors file (it starts with "
            "an 8-byte header length)");
  std::vector<uint8_t> longHeader = fileWith("{}", 10);
  longHeader[0] = 0xe8, longHeader[1] = 0x03; // 1000
  EXPECT_EQ(parseError(longHeader), "w.st: header length 1000 runs past the "
                                    "end of the file (20 bytes)");
  EXPECT_EQ(parseError(fileWith("{not json", 0)),
            "w.st: header is not valid JSON");
  EXPECT_EQ(parseError(fileWith("[1, 2]", 0)),
            "w.st: header is not a JSON object");
  EXPECT_EQ(parseError(fileWith(R"({"a": 3})", 0)),
            "w.st: tensor 'a': expected an object with dtype, shape and "
            "data_offsets");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F7", "shape": [1], "data_offsets": [0, 4]}})",
          4)),
      "w.st: tensor 'a': unknown dtype 'F7'");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})",
          4)),
      "w.st: tensor 'a': shape must be a list of non-negative integers");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})",
          8)),
      "w.st: tensor 'a': data_offsets must be [begin, end] with begin <= end");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]}})",
          16)),
      "w.st: tensor 'a': data_offsets [0, 32] run past the end of the data "
      "(16 bytes)");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})",
          12)),
      "w.st: tensor 'a': F32 [2, 2] needs 16 bytes, but data_offsets [0, 12] "
      "hold 12");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                    "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
          12)),
      "w.st: tensors 'a' and 'b' overlap (data_offsets [0, 8] and [4, 12])");
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
          12)),
      "w.st: data bytes [8, 12) belong to no tensor");
  EXPECT_EQ(parseError(fileWith(
                R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                12)),
            "w.st: data bytes [4, 8) belong to no tensor");
  EXPECT_EQ(parseError(fileWith(R"({"__metadata__": {"k": 1}})", 0)),
            "w.st: __metadata__ is not an object of strings");
  // Names from the file are escaped: a newline cannot split the line
  // (found by SafetensorsFuzzer, docs/fuzzing.md).
  EXPECT_EQ(
      parseError(fileWith(
          R"({"a\nb'": {"dtype": "F\u0007", "shape": [1], "data_offsets": [0, 4]}})",
          4)),
      "w.st: tensor 'a\\x0ab\\x27': unknown dtype 'F\\x07'");
}

TEST(Safetensors, ReadsOnlyF32IntoFloats) {
  std::string error;
  auto file = SafetensorsFile::parse(
      fileWith(
          R"({"h": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})",
          4),
      "w.st", error);
  ASSERT_TRUE(file) << error;
  float out[2];
  EXPECT_FALSE(file->readF32(file->tensors()[0], out, error));
  EXPECT_EQ(error, "w.st: tensor 'h' is BF16; only F32 can be loaded");
}

} // namespace
