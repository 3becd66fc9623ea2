//===- dsc.cpp - the dsc compiler driver ----------------------------------===//
#include "compiler/DscMain.h"

int main(int argc, char **argv) { return dsc::runDscMain(argc, argv); }
