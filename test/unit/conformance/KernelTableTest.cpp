//===- KernelTableTest.cpp - the CPU kernel table, and coverage -----------===//
//
// The CPU backend's table against runtime/kernels/Kernel.h (every contract
// kernel registered with its arity; junk arguments give one-line errors),
// and the check that every kernel of every registered backend has a
// conformance case in this directory.
//
//===----------------------------------------------------------------------===//

#include "test/unit/conformance/KernelTestSupport.h"
#if DSC_HAVE_CUDA
#include "runtime/backends/cuda/CudaBackend.h"
#endif

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

using namespace dsc;
using namespace dsc::conformance;

namespace {

//===--- The kernel table -------------------------------------------------===//

struct Arity {
  int in, out, ints, floats;
};

// Kernel.h's declared arity; -1 = any.
const std::map<std::string, Arity> kDeclared = {
    {"ds.add", {2, 1, 0, 0}},
    {"ds.sub", {2, 1, 0, 0}},
    {"ds.mul", {2, 1, 0, 0}},
    {"ds.div", {2, 1, 0, 0}},
    {"ds.minimum", {2, 1, 0, 0}},
    {"ds.overflow_guard", {2, 1, 0, 0}},
    {"ds.maximum", {2, 1, 0, 0}},
    {"ds.equal", {2, 1, 0, 0}},
    {"ds.neg", {1, 1, 0, 0}},
    {"ds.exp", {1, 1, 0, 0}},
    {"ds.log", {1, 1, 0, 0}},
    {"ds.tanh", {1, 1, 0, 0}},
    {"ds.sqrt", {1, 1, 0, 0}},
    {"ds.rsqrt", {1, 1, 0, 0}},
    {"ds.relu", {1, 1, 0, 0}},
    {"ds.silu", {1, 1, 0, 0}},
    {"ds.gelu", {1, 1, 1, 0}},
    {"ds.relu_grad", {2, 1, 0, 0}},
    {"ds.silu_grad", {2, 1, 0, 0}},
    {"ds.gelu_grad", {2, 1, 1, 0}},
    {"ds.cast", {1, 1, 0, 0}},
    {"ds.dropout", {1, 1, 1, 1}},
    {"ds.matmul", {2, 1, 2, 0}},
    {"ds.matmul_bias", {3, 1, 2, 0}},
    {"ds.matmul_bias_gelu", {3, 2, 3, 0}},
    {"ds.matmul_gelu_grad", {3, 2, 3, 0}},
    {"ds.layer_norm", {-1, 1, 0, 1}},
    {"ds.layer_norm_grad", {3, 3, 0, 1}},
    {"ds.rms_norm", {2, 1, 0, 1}},
    {"ds.rms_norm_grad", {3, 2, 0, 1}},
    {"ds.softmax", {1, 1, 0, 0}},
    {"ds.softmax_grad", {2, 1, 0, 0}},
    {"ds.attention", {3, 1, 1, 1}},
    {"ds.attention_grad", {4, 3, 1, 1}},
    {"ds.rotary", {1, 1, 1, 1}},
    {"ds.embedding", {2, 1, 0, 0}},
    {"ds.embedding_grad", {2, 1, 0, 0}},
    {"ds.cross_entropy", {2, 1, 1, 0}},
    {"ds.cross_entropy_grad", {3, 1, 1, 0}},
    {"ds.transpose", {1, 1, -1, 0}},
    {"ds.slice", {1, 1, -1, 0}},
    {"ds.pad", {1, 1, -1, 0}},
    {"ds.concat", {-1, 1, 1, 0}},
    {"ds.split", {1, -1, 1, 0}},
    {"ds.broadcast", {1, 1, 0, 0}},
    {"ds.reduce_sum", {1, 1, -1, 0}},
    {"ds.reduce_mean", {1, 1, -1, 0}},
    {"ds.reduce_max", {1, 1, -1, 0}},
    {"ds.iota", {0, 1, 1, 0}},
    {"ds.adamw", {7, 3, 0, 4}},
    {"ds.adamw_round", {7, 4, 0, 4}},
    {"ds.copy", {1, 1, 0, 0}},
    {"ds.fill", {0, 1, 0, 1}},
    {"ds.bias_gelu", {2, 2, 1, 0}},
    {"ds.add_layer_norm", {-1, 2, 0, 1}},
    {"comm.all_reduce", {1, 1, 0, 1}},
    {"comm.reduce_scatter", {1, 1, 0, 1}},
    {"comm.all_gather", {1, 1, 0, 0}},
    {"comm.broadcast", {1, 1, 1, 0}},
    {"dist.shard", {1, 1, 1, 0}},
};

// The kernel names in Kernel.h's header comment.
std::set<std::string> namesInKernelHeader(std::string &error) {
  std::string path = __FILE__;
  size_t at = path.rfind("test/unit/");
  if (at == std::string::npos) {
    error = "cannot locate the source tree from " + path;
    return {};
  }
  path = path.substr(0, at) + "runtime/kernels/Kernel.h";
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return {};
  }
  std::set<std::string> names;
  std::regex name(R"((ds|comm|dist)\.[a-z_]+)");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("//", 0) != 0)
      continue;
    for (std::sregex_iterator it(line.begin(), line.end(), name), end;
         it != end; ++it)
      names.insert(it->str());
  }
  return names;
}

TEST(CpuKernelTable, EveryContractKernelIsRegisteredWithItsArity) {
  std::string error;
  std::set<std::string> names = namesInKernelHeader(error);
  ASSERT_EQ(error, "");
  ASSERT_FALSE(names.empty());
  for (const std::string &n : names) {
    EXPECT_TRUE(kDeclared.count(n)) << n << " is new in Kernel.h";
    const rt::KernelInfo *k = rt::findCpuKernel(n);
    ASSERT_NE(k, nullptr) << n << " is not registered";
    EXPECT_EQ(k->name, n);
    EXPECT_NE(k->fn, nullptr) << n;
  }
  for (const auto &[n, arity] : kDeclared) {
    EXPECT_TRUE(names.count(n)) << n << " is not in Kernel.h any more";
    const rt::KernelInfo *k = rt::findCpuKernel(n);
    ASSERT_NE(k, nullptr) << n;
    EXPECT_EQ(k->numInputs, arity.in) << n;
    EXPECT_EQ(k->numOutputs, arity.out) << n;
    EXPECT_EQ(k->numIntAttrs, arity.ints) << n;
    EXPECT_EQ(k->numFloatAttrs, arity.floats) << n;
  }
  // Nothing else is registered (a name may have several dtype variants).
  std::set<std::string_view> registered;
  for (const rt::KernelInfo &k : rt::cpuKernels())
    registered.insert(k.name);
  EXPECT_EQ(registered.size(), kDeclared.size());
  EXPECT_EQ(rt::findCpuKernel("ds.nonexistent"), nullptr);
  EXPECT_EQ(rt::findCpuKernel(""), nullptr);
}

// Every variant declares a well-formed dtype signature, with as many fixed
// operands as a fixed arity has; variants of one name share the arity.
TEST(CpuKernelTable, VariantsHaveWellFormedSignaturesAndOneArity) {
  const std::vector<rt::KernelInfo> &t = rt::cpuKernels();
  for (size_t i = 0; i < t.size(); ++i) {
    const rt::KernelInfo &k = t[i];
    std::string error;
    EXPECT_TRUE(rt::checkSignature(k.dtypes, error))
        << k.name << " '" << k.dtypes << "': " << error;
    if (i > 0 && t[i - 1].name == k.name) {
      EXPECT_EQ(k.numInputs, t[i - 1].numInputs) << k.name;
      EXPECT_EQ(k.numOutputs, t[i - 1].numOutputs) << k.name;
      EXPECT_EQ(k.numIntAttrs, t[i - 1].numIntAttrs) << k.name;
      EXPECT_EQ(k.numFloatAttrs, t[i - 1].numFloatAttrs) << k.name;
    }
    size_t arrow = k.dtypes.find("->");
    ASSERT_NE(arrow, std::string_view::npos) << k.name;
    auto fixedCount = [](std::string_view side) -> int {
      if (side.empty())
        return 0;
      if (side.back() == '*')
        return -1;
      return int(std::count(side.begin(), side.end(), ',')) + 1;
    };
    int in = fixedCount(k.dtypes.substr(0, arrow));
    int out = fixedCount(k.dtypes.substr(arrow + 2));
    if (in >= 0) {
      EXPECT_EQ(in, k.numInputs) << k.name << " '" << k.dtypes << "'";
    }
    if (out >= 0) {
      EXPECT_EQ(out, k.numOutputs) << k.name << " '" << k.dtypes << "'";
    }
  }
  // The variant the dtypes select, or none.
  std::vector<rt::DType> f32x2 = {rt::DType::f32, rt::DType::f32},
                         f32 = {rt::DType::f32},
                         bf16x2 = {rt::DType::bf16, rt::DType::bf16};
  rt::Backend *cpu = cpuBackend();
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->findKernel("ds.matmul", {f32x2.data(), 2}, {f32.data(), 1}),
            rt::findCpuKernel("ds.matmul"));
  std::vector<rt::DType> i32x2 = {rt::DType::i32, rt::DType::i32};
  EXPECT_EQ(cpu->findKernel("ds.matmul", {i32x2.data(), 2}, {f32.data(), 1}),
            nullptr);
  EXPECT_EQ(cpu->findKernel("ds.nope", {f32x2.data(), 2}, {f32.data(), 1}),
            nullptr);
  EXPECT_TRUE(cpu->kernelVariants("ds.nope").empty());
  // The f32 matmul, then its 16-bit variant (Widening.h).
  rt::KernelVariants mm = cpu->kernelVariants("ds.matmul");
  ASSERT_EQ(mm.size, 2u);
  EXPECT_EQ(mm.data[0].dtypes, "f32,f32->f32");
  EXPECT_EQ(mm.data[1].dtypes, "f32|f16|bf16,f32|f16|bf16->f32|f16|bf16");
  EXPECT_EQ(cpu->findKernel("ds.matmul", {bf16x2.data(), 2}, {f32.data(), 1}),
            &mm.data[1]);
}

// Junk arguments never crash a kernel: each call fails with a line that
// starts with the kernel's name, or succeeds.
TEST(CpuKernelTable, BadArgumentsGiveOneLineErrorsNamingTheKernel) {
  for (const rt::KernelInfo &k : rt::cpuKernels()) {
    std::string prefix = std::string(k.name) + ": ";
    int nIn = k.numInputs < 0 ? 2 : k.numInputs;
    int nOut = k.numOutputs < 0 ? 2 : k.numOutputs;
    int nInts = k.numIntAttrs < 0 ? 1 : k.numIntAttrs;
    int nFloats = k.numFloatAttrs;
    // Too many inputs (when fixed): an arity error.
    if (k.numInputs >= 0) {
      std::vector<Buf> bufs(size_t(nIn + 1), Buf({2, 3}));
      std::vector<Buf> outs(size_t(nOut), Buf({2, 3}));
      std::vector<Buf *> in, out;
      for (Buf &b : bufs)
        in.push_back(&b);
      for (Buf &b : outs)
        out.push_back(&b);
      std::string e = run(std::string(k.name), in, out,
                          std::vector<int64_t>(size_t(nInts), 0),
                          std::vector<double>(size_t(nFloats), 0.5));
      EXPECT_EQ(e.rfind(prefix + "expects", 0), 0u) << e;
    }
    // Several ill-matched shapes with the right arity.
    std::vector<Shape> shapes = {{}, {0}, {3}, {2, 3}, {4, 1, 5}, {2, 3, 4, 5}};
    for (size_t s = 0; s < shapes.size(); ++s) {
      std::vector<Buf> bufs, outs;
      for (int i = 0; i < nIn; ++i)
        bufs.push_back(filled(shapes[(s + size_t(i)) % shapes.size()], 1.0));
      for (int i = 0; i < nOut; ++i)
        outs.push_back(poisoned(shapes[(s + 2 + size_t(i)) % shapes.size()]));
      std::vector<Buf *> in, out;
      for (Buf &b : bufs)
        in.push_back(&b);
      for (Buf &b : outs)
        out.push_back(&b);
      std::string e = run(std::string(k.name), in, out,
                          std::vector<int64_t>(size_t(nInts), 1),
                          std::vector<double>(size_t(nFloats), 0.5));
      if (!e.empty()) {
        EXPECT_EQ(e.rfind(prefix, 0), 0u) << e;
        EXPECT_EQ(e.find('\n'), std::string::npos) << e;
      }
    }
  }
  // A negative dim, a null shape, and missing data are refused up front.
  Buf x({2, 3}), y({2, 3});
  std::vector<int64_t> bad = {2, -3};
  rt::TensorRef refs[2] = {x.ref(), y.ref()};
  refs[0].shape = bad.data();
  rt::KernelArgs a;
  a.inputs = refs;
  a.numInputs = 1;
  a.outputs = refs + 1;
  a.numOutputs = 1;
  std::string err;
  EXPECT_FALSE(rt::findCpuKernel("ds.neg")->fn(a, err));
  EXPECT_EQ(err, "ds.neg: input 0 has a negative dim in [2, -3]");
  refs[0] = x.ref();
  refs[0].data = nullptr;
  EXPECT_FALSE(rt::findCpuKernel("ds.neg")->fn(a, err));
  EXPECT_EQ(err, "ds.neg: input 0 of shape [2, 3] has no data");
}

// f16 and bf16 have variants (WideningTest.cpp); integers reach the f32
// body, which names them.
TEST(CpuKernelTable, UnsupportedDtypesAreNamed) {
  Buf a({3}, DType::i32), b({3}, DType::i32), out({3}, DType::i32);
  EXPECT_RUN_ERROR(run("ds.add", {&a, &b}, {&out}),
                   "ds.add: unsupported dtype i32 for input 0 (expected f32)");
  Buf x({2, 4}, DType::i32), w({4}), y({2, 4});
  EXPECT_RUN_ERROR(run("ds.layer_norm", {&x, &w}, {&y}, {}, {1e-5}),
                   "ds.layer_norm: unsupported dtype i32 for input 0 (expected "
                   "f32)");
  Buf h({3}, DType::f16), g({3}, DType::f16), sum({3}, DType::f16);
  EXPECT_RUN_ERROR(run("ds.add", {&h, &g}, {&sum}), "");
}

TEST(CpuKernelTable, PartialOverlapIsRefused) {
  Buf big({8}), x({4});
  rt::TensorRef in = big.ref(), out = big.ref();
  int64_t four = 4;
  in.shape = &four;
  out.shape = &four;
  out.data = big.f32() + 2; // overlaps the input's second half
  in.rank = out.rank = 1;
  rt::KernelArgs a;
  a.inputs = &in;
  a.numInputs = 1;
  a.outputs = &out;
  a.numOutputs = 1;
  std::string err;
  EXPECT_FALSE(rt::findCpuKernel("ds.neg")->fn(a, err));
  EXPECT_EQ(err, "ds.neg: output 0 overlaps input 0 (only an exact in-place "
                 "update is allowed)");
  Buf m({4, 4});
  EXPECT_RUN_ERROR(
      run("ds.matmul", {&m, &m}, {&m}, {0, 0}),
      "ds.matmul: output 0 overlaps input 0 (this kernel cannot run in "
      "place)");
}

//===--- Other backends' tables -------------------------------------------===//

// Every backend's static table, GPU or not: the tables are data, so CI
// checks them on machines where the backend itself cannot start.
std::map<std::string, const std::vector<rt::KernelInfo> *> otherTables() {
  std::map<std::string, const std::vector<rt::KernelInfo> *> tables;
#if DSC_HAVE_CUDA
  tables["cuda"] = &rt::cuda::cudaKernels();
#endif
  return tables;
}

// A kernel of the CPU backend is on every other backend, with the same
// arity, or listed as pending there (KernelTestSupport.h); a listed kernel
// that has arrived must leave the list.
TEST(BackendKernelTables, EveryCpuKernelHasACounterpart) {
  for (const auto &[backend, table] : otherTables()) {
    std::map<std::string_view, const rt::KernelInfo *> theirs;
    for (const rt::KernelInfo &k : *table)
      theirs.emplace(k.name, &k);
    std::set<std::string_view> cpuNames;
    for (const rt::KernelInfo &k : rt::cpuKernels()) {
      if (!cpuNames.insert(k.name).second)
        continue;
      auto it = theirs.find(k.name);
      std::string name(k.name);
      if (it == theirs.end()) {
        EXPECT_TRUE(isPending(backend, name))
            << "CPU kernel " << name << " has no " << backend
            << " counterpart (nor is it listed as pending)";
        continue;
      }
      EXPECT_FALSE(isPending(backend, name))
          << name << " is in the " << backend
          << " table now: take it off kPendingKernels";
      const rt::KernelInfo &o = *it->second;
      EXPECT_EQ(o.numInputs, k.numInputs) << backend << " " << name;
      EXPECT_EQ(o.numOutputs, k.numOutputs) << backend << " " << name;
      EXPECT_EQ(o.numIntAttrs, k.numIntAttrs) << backend << " " << name;
      EXPECT_EQ(o.numFloatAttrs, k.numFloatAttrs) << backend << " " << name;
    }
    for (const auto &[name, info] : theirs) {
      EXPECT_TRUE(cpuNames.count(name))
          << backend << " kernel " << name << " is not a CPU kernel";
      std::string error;
      EXPECT_TRUE(rt::checkSignature(info->dtypes, error))
          << backend << " " << name << " '" << info->dtypes << "': " << error;
    }
  }
}

// The CPU backend's f32 signature of each kernel is accepted by a variant
// of every other backend that has the kernel: a plan compiled for f32 runs
// there.
TEST(BackendKernelTables, F32PlansFindAVariant) {
  for (const auto &[backend, table] : otherTables())
    for (const rt::KernelInfo &k : rt::cpuKernels()) {
      if (k.dtypes.find("f32") == std::string_view::npos ||
          k.dtypes.find('*') != std::string_view::npos ||
          k.dtypes.find("idx") != std::string_view::npos)
        continue; // variadic, index or generic operands: checked by cases
      bool has = false, accepted = false;
      std::vector<rt::DType> in(size_t(k.numInputs), DType::f32),
          out(size_t(k.numOutputs), DType::f32);
      for (const rt::KernelInfo &o : *table) {
        if (o.name != k.name)
          continue;
        has = true;
        accepted |= rt::signatureMatches(o.dtypes, {in.data(), in.size()},
                                         {out.data(), out.size()});
      }
      if (has && rt::signatureMatches(k.dtypes, {in.data(), in.size()},
                                      {out.data(), out.size()})) {
        EXPECT_TRUE(accepted)
            << backend << " " << k.name << " has no all-f32 variant";
      }
    }
}

// The kernel families of the conformance suite (CpuKernelTable above is
// about the CPU backend's own table and stays a plain test).
//===--- Coverage ---------------------------------------------------------===//

// Every kernel of every registered backend has a conformance case: its name
// appears in a case file of this directory (the *Test.cpp files but this
// one, whose table names every kernel), or it is listed with the suite that
// covers it instead.
TEST(Conformance, EveryRegisteredKernelHasACase) {
  static const std::map<std::string, std::string, std::less<>> elsewhere = {
      {"comm.all_gather", "CommTest (needs ranks)"},
      {"comm.all_reduce", "CommTest (needs ranks)"},
      {"comm.broadcast", "CommTest (needs ranks)"},
      {"comm.reduce_scatter", "CommTest (needs ranks)"},
  };
  namespace fs = std::filesystem;
  const fs::path self(__FILE__);
  std::string text;
  int files = 0;
  for (const fs::directory_entry &e :
       fs::directory_iterator(self.parent_path())) {
    std::string name = e.path().filename().string();
    if (e.path().extension() != ".cpp" || name == self.filename().string() ||
        name.find("Test.cpp") == std::string::npos)
      continue;
    std::ifstream in(e.path());
    ASSERT_TRUE(in) << "cannot read " << e.path();
    text.append(std::istreambuf_iterator<char>(in),
                std::istreambuf_iterator<char>());
    ++files;
  }
  ASSERT_GE(files, 3) << "no case files next to " << self;
  for (const std::string &name : rt::backendNames()) {
    std::string error;
    std::unique_ptr<rt::Backend> b = rt::createBackend(name, error);
    if (!b)
      continue; // not available here: its instances skip too
    for (const rt::KernelInfo &k : rt::cpuKernels()) {
      if (b->findKernel(k.name) == nullptr || elsewhere.count(k.name))
        continue;
      EXPECT_NE(text.find("\"" + std::string(k.name) + "\""), std::string::npos)
          << name << " kernel " << k.name << " has no conformance case";
    }
  }
}

} // namespace
