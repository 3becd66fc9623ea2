# lit configuration for dsc: FileCheck tests of dialects, passes, tools and
# end-to-end runs. Tests are discovered by suffix; none are listed in CMake.
import os
import sys

import lit.formats

config.name = "dsc"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.excludes = ["unit", "compiler", "support", "fuzz", "CMakeLists.txt",
                   "lit.cfg.py", "lit.site.cfg.py", "Inputs"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dsc_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.dsc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
config.substitutions.append(("%python", config.python_executable))
# A stand-in oneMKL's virtual environment (test/fakes/fake_mkl.c); a site
# configuration written by hand (test/torch/lit-config.test) has none.
config.substitutions.append(
    ("%fake-mkl-venv", getattr(config, "dsc_fake_mkl_venv", "")))
# lit itself, for tests of this file (test/torch/lit-config.test).
config.substitutions.append(
    ("%lit", config.python_executable + " " + os.path.abspath(sys.argv[0])))
config.substitutions.append(
    ("%pipeline-timeline", config.python_executable + " " +
     os.path.join(os.path.dirname(config.test_source_root), "scripts",
                  "pipeline_timeline.py")))
config.substitutions.append(
    ("%expect-exit", config.python_executable + " " +
     os.path.join(config.test_source_root, "tools", "expect-exit.py")))

import shutil
import subprocess


def python_lacks(python, modules):
    """Why `python` cannot import `modules` (None when it can): it may not
    exist at all, which subprocess would raise as a traceback."""
    if not os.access(python, os.X_OK):
        return "no " + python
    try:
        status = subprocess.call([python, "-c", "import " + ", ".join(modules)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as e:
        return python + " cannot run: " + e.strerror
    if status != 0:
        return python + " cannot import " + ", ".join(modules)
    return None


# PyTorch from Debian's python3-torch, for the nanoGPT parity test.
torch_python = "/usr/bin/python3"
why_missing = {"torch": python_lacks(torch_python, ["torch"])}
config.substitutions.append(("%torch-python", torch_python))

# The PyTorch frontend's virtual environment (scripts/install-python.sh:
# torch 2.5, transformers, safetensors), into which every build installs dsc
# (tools/CMakeLists.txt's venv-install, the install rules `pip install .`
# uses): the tests import that installed package, with no PYTHONPATH, and
# run its dsc-train, dsc-launch and the dsrun it finds next to its python.
dsc_python = os.path.join(config.dsc_obj_root, "venv", "bin", "python")
why_missing["torch2"] = python_lacks(
    dsc_python, ["torch.export", "transformers", "safetensors"])
if why_missing["torch2"] is None:  # else that line says it
    why_missing["dsc-installed"] = python_lacks(dsc_python, ["dsc", "_dsc_native"])
for feature, why in why_missing.items():
    if why is None:
        config.available_features.add(feature)
config.substitutions.append(("%dsc-python", dsc_python))
for command in ("dsc-train", "dsc-launch"):
    config.substitutions.append(
        ("%" + command, os.path.join(config.dsc_obj_root, "venv", "bin", command)))
config.environment.pop("PYTHONPATH", None)
config.environment.pop("DSC_TOOLS_DIR", None)

# The CUDA backend: "cuda" when this build has it, "gpu" when a GPU is here
# to run it (the device machine; never in CI).
if config.dsc_have_cuda:
    config.available_features.add("cuda")
    if shutil.which("nvidia-smi") and subprocess.call(
            ["nvidia-smi", "-L"], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL) == 0:
        config.available_features.add("gpu")

# A CPU on which oneDNN (libdnnl-dev) has a bf16 matmul (AVX512-BF16 or
# AMX-BF16): the CPU backend's native bf16 GEMMs can be forced there
# (DSC_BF16_GEMM=onednn); elsewhere bf16 products are widened.
def cpu_has_bf16_gemm():
    try:
        flags = open("/proc/cpuinfo").read().split()
    except OSError:
        return False
    if "avx512_bf16" not in flags and "amx_bf16" not in flags:
        return False
    import ctypes
    try:
        ctypes.CDLL("libdnnl.so.2")
    except OSError:
        return False
    return True
if cpu_has_bf16_gemm():
    config.available_features.add("bf16-gemm")

# OpenMPI's launcher, for multi-rank runs.
if shutil.which("mpirun"):
    config.available_features.add("mpi")

# Two hosts on one machine (network namespaces, test/e2e/two_hosts.py):
# needs root, iproute2 and a kernel that allows namespaces and veth pairs.
two_hosts = [config.python_executable,
             os.path.join(config.test_source_root, "e2e", "two_hosts.py"),
             "probe"]
if subprocess.call(two_hosts, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL) == 0:
    config.available_features.add("netns")

# scripts/install-deps.sh installs both, so a missing one means a broken
# setup, and the tests needing it would turn UNSUPPORTED while ctest's lit
# entry still said Passed. Refuse instead; DSC_ALLOW_UNSUPPORTED=1 runs the
# rest on a machine that lacks them on purpose.
missing = [f for f in ("torch", "torch2", "mpi") if f not in config.available_features]
if "torch2" in config.available_features and "dsc-installed" not in config.available_features:
    missing.append("dsc-installed")
# As root the two hosts must work too (a non-root run cannot build them).
if os.geteuid() == 0 and "netns" not in config.available_features:
    missing.append("netns")
how_to_make = {
    "torch": "apt-get install python3-torch (scripts/install-deps.sh)",
    "torch2": "scripts/install-python.sh " + os.path.join(config.dsc_obj_root, "venv"),
    "dsc-installed": "ninja -C " + config.dsc_obj_root + " venv-install",
    "mpi": "mpirun on PATH: apt-get install openmpi-bin (scripts/install-deps.sh)",
    "netns": "test/e2e/two_hosts.py probe fails, as root",
}
if missing and os.environ.get("DSC_ALLOW_UNSUPPORTED") != "1":
    lit_config.fatal(
        "missing test dependencies: " + "; ".join(
            f + " (" + (why_missing.get(f) + ": " if why_missing.get(f) else "") +
            how_to_make[f] + ")" for f in missing) +
        "; or set DSC_ALLOW_UNSUPPORTED=1 to skip the tests that need them")
