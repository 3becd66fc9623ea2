//===- CommMain.cpp - CommTest's main: the job's communicator ----------===//

#include "test/unit/comm/CommTestSupport.h"

using namespace dsc;
using namespace dsc::commtest;

namespace {

/// On ranks other than 0: only failures, each line prefixed with the rank.
class RankFailurePrinter : public testing::EmptyTestEventListener {
public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_,
                   result.file_name() ? result.file_name() : "?",
                   result.line_number(), result.message());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  // `CommTest --write-plan PATH N`: writes bigramPlan for N ranks (the fault
  // tests in comm_faults.py train it with dsrun) and exits.
  if (argc == 4 && std::string(argv[1]) == "--write-plan") {
    std::vector<uint8_t> bytes = bigramPlan(std::atoi(argv[3]), kRows).build();
    std::FILE *f = std::fopen(argv[2], "wb");
    bool ok =
        f && std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
    ok = f && std::fclose(f) == 0 && ok;
    return ok ? 0 : 1;
  }
  testing::InitGoogleTest(&argc, argv);
  dsc::rt::registerAvailableBackends(); // the in-process dsrun runs need it
  std::string error;
  std::unique_ptr<Communicator> comm = rt::createCommunicator(error);
  if (!comm) {
    std::fprintf(stderr, "CommTest: %s\n", error.c_str());
    return 1;
  }
  comm->setTimeout(60); // a failing test costs a minute, not a hang
  gWorld = comm.get();
  if (comm->rank() != 0) {
    testing::TestEventListeners &listeners =
        testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(comm->rank()));
  }
  int status = RUN_ALL_TESTS();
  gWorld = nullptr;
  comm.reset();
  return status;
}