//===- ds-opt.cpp - mlir-opt with dsc's dialects and passes ---------------===//
#include "compiler/Pipelines.h"

#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  dsc::registerAll(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "dsc optimizer driver\n", registry));
}
