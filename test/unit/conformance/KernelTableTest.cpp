//===- KernelTableTest.cpp - the CPU kernel table, and coverage -----------===//
//
// The kernel contracts (generated from ODS, runtime/kernels/KernelContract.h)
// against every backend's table: each declared dtype variant registered
// with the contract's arity, nothing undeclared; the CPU table's lookups and
// one-line errors on junk arguments; and the check that every kernel of
// every registered backend has a conformance case in this directory.
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/KernelContract.h"
#include "runtime/kernels/KernelSignature.h"
#include "test/unit/conformance/KernelTestSupport.h"
#if DSC_HAVE_CUDA
#include "runtime/backends/cuda/CudaBackend.h"
#endif

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

using namespace dsc;
using namespace dsc::conformance;

namespace {

//===--- The contracts ----------------------------------------------------===//

std::string what(const rt::KernelContract &c, rt::KernelColumn column,
                 std::string_view signature) {
  return std::string(c.name) + "'s " +
         std::string(rt::kernelColumnName(column)) + " variant '" +
         std::string(signature) + "'";
}

constexpr rt::KernelColumn kColumns[] = {
    rt::KernelColumn::Full, rt::KernelColumn::Half, rt::KernelColumn::F8};

// The generated table (runtime/kernels/generated/KernelContracts.inc) is in
// name order, indexed by KernelId, with well-formed signatures whose fixed
// operand counts are the kernel's arity.
TEST(KernelContracts, AreOrderedAndWellFormed) {
  ASSERT_EQ(std::size(rt::kKernelContracts), rt::kNumKernels);
  for (size_t i = 0; i < rt::kNumKernels; ++i) {
    const rt::KernelContract &c = rt::kKernelContracts[i];
    if (i > 0) {
      EXPECT_LT(rt::kKernelContracts[i - 1].name, c.name);
    }
    EXPECT_EQ(rt::findKernelContract(c.name), &c);
    EXPECT_EQ(&rt::kernelContract(rt::KernelId(i)), &c);
    for (rt::KernelColumn column : kColumns)
      for (std::string_view sig : c.column(column)) {
        std::string error;
        EXPECT_TRUE(rt::checkSignature(sig, error))
            << what(c, column, sig) << ": " << error;
      }
  }
  EXPECT_EQ(rt::findKernelContract("ds.nonexistent"), nullptr);
  const rt::KernelContract &mm = rt::kernelContract(rt::KernelId::Matmul);
  EXPECT_EQ(mm.name, "ds.matmul");
  EXPECT_EQ(mm.numInputs, 2);
  EXPECT_EQ(mm.intAttrs, "transpose_lhs, transpose_rhs");
  EXPECT_EQ(mm.alias, rt::KernelAlias::None);
  const rt::KernelContract *ln = rt::findKernelContract("ds.layer_norm");
  ASSERT_NE(ln, nullptr);
  EXPECT_EQ(ln->numInputs, -1); // the bias is optional
  EXPECT_EQ(ln->inputs, "x, weight, bias?");
}

// Every backend takes every variant its kernels' contracts declare, with
// the contract's arity, and nothing else; a backend leaves a column out
// only where it declares the gap (isCudaKernelGap).
TEST(KernelContracts, EveryBackendTakesEveryDeclaredVariant) {
  struct Table {
    std::string name;
    const std::vector<rt::KernelInfo> *kernels;
    bool (*gap)(rt::KernelId, rt::KernelColumn);
  };
  std::vector<Table> tables = {
      {"cpu", &rt::cpuKernels(),
       [](rt::KernelId, rt::KernelColumn) { return false; }}};
#if DSC_HAVE_CUDA
  tables.push_back(
      {"cuda", &rt::cuda::cudaKernels(), rt::cuda::isCudaKernelGap});
#endif
  for (const Table &t : tables) {
    std::set<std::pair<std::string_view, std::string_view>> declared;
    for (size_t i = 0; i < rt::kNumKernels; ++i) {
      const rt::KernelContract &c = rt::kKernelContracts[i];
      for (rt::KernelColumn column : kColumns)
        for (std::string_view sig : c.column(column)) {
          declared.insert({c.name, sig});
          const rt::KernelInfo *found = nullptr;
          for (const rt::KernelInfo &k : *t.kernels)
            if (k.name == c.name && k.dtypes == sig)
              found = &k;
          if (t.gap(rt::KernelId(i), column)) {
            EXPECT_EQ(found, nullptr)
                << t.name << " declares a gap at " << what(c, column, sig)
                << " but has it: take the gap out";
            continue;
          }
          ASSERT_NE(found, nullptr)
              << t.name << " lacks " << what(c, column, sig);
          EXPECT_EQ(found->numInputs, c.numInputs) << t.name << " " << c.name;
          EXPECT_EQ(found->numOutputs, c.numOutputs) << t.name << " " << c.name;
          EXPECT_EQ(found->numIntAttrs, c.numIntAttrs)
              << t.name << " " << c.name;
          EXPECT_EQ(found->numFloatAttrs, c.numFloatAttrs)
              << t.name << " " << c.name;
          EXPECT_NE(found->fn, nullptr) << t.name << " " << c.name;
        }
    }
    for (const rt::KernelInfo &k : *t.kernels)
      EXPECT_TRUE(declared.count({k.name, k.dtypes}))
          << t.name << " registers " << k.name << " '" << k.dtypes
          << "', which no contract declares";
  }
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
  ASSERT_EQ(mm.size, 3u);
  EXPECT_EQ(mm.data[0].dtypes, "f32,f32->f32");
  EXPECT_EQ(mm.data[1].dtypes, "bf16,bf16->bf16|f32");
  EXPECT_EQ(mm.data[2].dtypes, "f16,f16->f16|f32");
  EXPECT_EQ(cpu->findKernel("ds.matmul", {bf16x2.data(), 2}, {f32.data(), 1}),
            &mm.data[1]);
  // The contract declares no mixed-width matmul (CUDA's cuBLASLt takes
  // one dtype for both operands).
  std::vector<rt::DType> mixed = {rt::DType::bf16, rt::DType::f32};
  EXPECT_EQ(cpu->findKernel("ds.matmul", {mixed.data(), 2}, {f32.data(), 1}),
            nullptr);
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
      {"comm.all_to_all", "CommTest (needs ranks)"},
      {"comm.broadcast", "CommTest (needs ranks)"},
      {"comm.reduce_scatter", "CommTest (needs ranks)"},
      {"comm.recv", "CommTest (needs ranks)"},
      {"comm.send", "CommTest (needs ranks)"},
  };
  namespace fs = std::filesystem;
  const fs::path self(DSC_SOURCE_DIR
                      "/test/unit/conformance/KernelTableTest.cpp");
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
