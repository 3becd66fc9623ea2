//===- ds-opt.cpp - mlir-opt with dsc's dialects and passes ---------------===//
#include "compiler/DscMain.h"

int main(int argc, char **argv) { return dsc::runDsOptMain(argc, argv); }
