//===- NoMpiCommunicator.cpp - a build without MPI ------------------------===//
//
// createMpiCommunicator for builds configured without MPI (a GPU machine's
// runtime-only build): every multi-rank job is refused with one line.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Communicator.h"

namespace dsc::rt {

std::unique_ptr<Communicator> createMpiCommunicator(std::string &error,
                                                    double timeoutS) {
  (void)timeoutS;
  error = "this dsrun was built without MPI, so it runs one rank per job "
          "(rebuild with OpenMPI for more)";
  return nullptr;
}

} // namespace dsc::rt
