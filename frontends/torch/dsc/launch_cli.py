"""`dsc-launch --num_gpus N [--hostfile FILE] SCRIPT ARGS...`: DeepSpeed's
`deepspeed --num_gpus N train.py` for dsc. Starts N processes of the
user's script under mpirun (Open MPI), each with this Python; in each,
dsc.initialize joins the run: its rank and the world size come from
mpirun, the plan is compiled for that world size (ZeRO as the config says)
and the engine's DataLoader gives each rank its shard. --hostfile spreads
the ranks over the hosts it lists (mpirun's format), as dsrun's does.
Exit status: the job's (mpirun's)."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

from .command_line import USAGE_ERROR


def mpirun_command(mpirun, np, hostfile, script, args, session_base=None):
    """The mpirun line: dsrun's launcher flags (runtime/tooling/Launch.cpp),
    this Python, the script. The ranks get this process's environment
    (PYTHONPATH and the DSC_ variables are passed by name for other hosts).
    `session_base`: a folder of this launch's own for Open MPI's session
    files on this host (Launch.h, makeSessionBase: two jobs sharing one
    ompi.HOST.UID folder race when one ends as the other starts)."""
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
           "--stdin", "none", "-np", str(np)]
    if hostfile:
        cmd += ["--hostfile", hostfile]
    if session_base:
        cmd += ["--mca", "orte_tmpdir_base", session_base]
    for name in sorted(os.environ):
        if name == "PYTHONPATH" or name.startswith("DSC_"):
            cmd += ["-x", name]
    return cmd + [sys.executable, script] + list(args)


def _session_base(hostfile):
    """A folder of this launch's own for Open MPI's session files
    (Launch.h, makeSessionBase), or None for Open MPI's default: when the
    user chose one, across hosts (it would have to exist on each), or when
    none can be made or its path is long (the session's sockets live
    under it, and a socket's path has ~100 bytes)."""
    if hostfile or os.environ.get("OMPI_MCA_orte_tmpdir_base") or \
            os.environ.get("OMPI_MCA_orte_local_tmpdir_base"):
        return None
    try:
        path = tempfile.mkdtemp(prefix="dsc-launch-mpi-")
    except OSError:
        return None
    if len(path) > 64:
        os.rmdir(path)
        return None
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="dsc-launch", description=__doc__.split("\n\n")[0],
        usage="dsc-launch --num_gpus N [--hostfile FILE] SCRIPT [ARGS...]")
    ap.add_argument("--num_gpus", "--num_procs", "--np", dest="np", type=int, default=1,
                    help="processes (ranks) to start [1]")
    ap.add_argument("--hostfile", help="mpirun's hostfile: the hosts to run on")
    ap.add_argument("script")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    if a.np < 1:
        print(f"dsc-launch: --num_gpus {a.np}: at least 1", file=sys.stderr)
        return USAGE_ERROR
    if not os.path.isfile(a.script):
        print(f"dsc-launch: {a.script}: no such script", file=sys.stderr)
        return USAGE_ERROR
    if a.hostfile and not os.path.isfile(a.hostfile):
        print(f"dsc-launch: --hostfile {a.hostfile}: no such file", file=sys.stderr)
        return USAGE_ERROR
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        print("dsc-launch: mpirun is not on PATH (Debian: openmpi-bin)", file=sys.stderr)
        return USAGE_ERROR
    session_base = _session_base(a.hostfile)
    cmd = mpirun_command(mpirun, a.np, a.hostfile, a.script, a.args, session_base)
    proc = None
    try:
        # mpirun shares this terminal's process group: Ctrl-C reaches it
        # and it ends every rank.
        proc = subprocess.Popen(cmd)
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.send_signal(signal.SIGINT)
            return proc.wait()
    finally:
        # Never under a live mpirun (a second Ctrl-C while it ends).
        if session_base and (proc is None or proc.poll() is not None):
            shutil.rmtree(session_base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
