//===- DsKernelContract.td - kernel contracts -----------*- tablegen -*-===//
//
// Every kernel a plan can call has one contract, written here in ODS: on the
// op that runs it (`let kernel = DS_Kernel<...>` in DsOps.td), or, for a
// kernel no single op lowers to (copies, fills, the fused optimizer step,
// collectives), as a DS_KernelDef beside the dialect that owns it. The
// contract is the kernel's ABI in plans:
//
//   - its inputs and outputs: an op's operands and results, in order (a
//     DS_KernelDef names them; "x?" is optional, "x..." any number);
//   - its positional attributes, ints and floats, in the order the
//     instruction carries them ("axes..." is any number; the op's
//     KernelOpInterface::getKernelAttributes writes them, DsKernelFacts.cpp);
//   - the operand dtypes every backend must take, as columns of signatures
//     (runtime/kernels/KernelSignature.h notation):
//       full   computed at the operands' own width: f32, f64, integers, or a
//              dtype-generic kernel (T, any, float);
//       half   f16/bf16 storage with f32 compute;
//       f8     8-bit storage: no kernel has one yet; a new column is an
//              edit here, and every backend without it is named by
//              test/unit/conformance/KernelTableTest.cpp;
//   - which aliasing of outputs and inputs it tolerates: "none",
//     "any_input" (an output may be exactly any input), "update" (an
//     optimizer's p' and new states may be p and its states: inputs 0, 2,
//     3, ...), "tensor_update" (as "update", for a rule that reads whole
//     tensors, such as Lamb's norms: never merged over a flat range).
//
// dialects/gen_kernel_contracts.py reads these records (llvm-tblgen
// --dump-json) and writes the runtime's contract table, each backend's list
// of kernel bodies, the interpreter's dispatch and the Python exporter's op
// table; docs/ds-dialect.md says how to add a kernel.
//
//===----------------------------------------------------------------------===//

#ifndef DS_KERNEL_CONTRACT_TD
#define DS_KERNEL_CONTRACT_TD

class DS_Kernel<list<string> intAttrs, list<string> floatAttrs,
                list<string> full, list<string> half, string aliasing> {
  list<string> ints = intAttrs;
  list<string> floats = floatAttrs;
  list<string> fullTypes = full;
  list<string> halfTypes = half;
  list<string> f8Types = [];
  string alias = aliasing;
}

/// A kernel over f32 operands (and index operands) whose 16-bit variant takes
/// f32, f16 or bf16 for each float operand, in any mix.
class DS_F32Kernel<list<string> intAttrs, list<string> floatAttrs,
                   string f32Signature, string aliasing>
    : DS_Kernel<intAttrs, floatAttrs, [f32Signature],
                [!subst("f32", "f32|f16|bf16", f32Signature)], aliasing>;

/// A kernel that takes one dtype for all its operands, whatever it is.
class DS_GenericKernel<list<string> intAttrs, string signature,
                       string aliasing = "none">
    : DS_Kernel<intAttrs, [], [signature], [], aliasing>;

/// A kernel no single op lowers to, with the names of its operands.
class DS_KernelDef<string kernelName, list<string> inputs,
                   list<string> outputs, DS_Kernel contract> {
  string name = kernelName;
  list<string> ins = inputs;
  list<string> outs = outputs;
  DS_Kernel kernel = contract;
}

#endif // DS_KERNEL_CONTRACT_TD
