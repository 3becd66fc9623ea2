#!/usr/bin/env python3
"""two_hosts.py probe | run | cut [--after-step N] -- DSRUN ARGS...
   two_hosts.py launch -- COMMAND ARGS...

Two hosts on one machine: network namespaces A and B joined by a veth pair
with addresses of their own (10.X.Y.1 and .2), each with its own host name
(a UTS namespace), and `mpirun --hostfile` across them, two ranks per host,
with an rsh agent that starts B's daemon through `ip netns exec`. Ranks
talk over OpenMPI's TCP transport between the hosts (shared memory within
one), as on two machines.

  probe  exit 0 when this machine can build the two hosts (root, ip netns,
         veth), 1 otherwise
  run    runs the job; prints "exit N" and its output
  cut    runs the job and, once rank 0's --metrics file (required among the
         ARGS) has step N (default 3), takes B's link down: B is lost. Prints
         the cut, the job's output, how long after the cut the job ended
         and whether anything outlived it. The job must end within
         DSC_COMM_TIMEOUT (required in the environment) + GRACE_S.
  launch runs COMMAND on host A with Open MPI's settings for the two hosts
         in its environment (OMPI_MCA_*: the rsh agent, the subnet), each
         argument {hostfile} replaced by the hosts file (two slots each): a
         launcher of its own, such as dsc-launch --hostfile, runs mpirun.

Everything the script made (namespaces, links, temporary files) is removed
at the end, and any process left of the job is killed and reported."""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

GRACE_S = 8  # a survivor's guard ends mpirun 5 s after it gave up; + slack


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True)


class TwoHosts:
    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.ns = [f"dsc{tag}a", f"dsc{tag}b"]
        self.links = [f"dsc{tag}va", f"dsc{tag}vb"]
        n = os.getpid() % 250 + 1
        self.subnet = f"10.{200 + n % 50}.{n}"
        self.addr = [f"{self.subnet}.1", f"{self.subnet}.2"]
        self.dir = tempfile.mkdtemp(prefix="dsc-two-hosts-")

    def __enter__(self):
        try:
            for ns in self.ns:
                sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", self.links[0], "type", "veth", "peer",
               "name", self.links[1])
            for i in range(2):
                sh("ip", "link", "set", self.links[i], "netns", self.ns[i])
                sh("ip", "-n", self.ns[i], "addr", "add",
                   self.addr[i] + "/24", "dev", self.links[i])
                sh("ip", "-n", self.ns[i], "link", "set", "lo", "up")
                sh("ip", "-n", self.ns[i], "link", "set", self.links[i], "up")
        except (subprocess.CalledProcessError, OSError):
            self.__exit__(None, None, None)
            raise
        self.agent = os.path.join(self.dir, "agent.sh")
        with open(self.agent, "w") as f:
            f.write("#!/bin/sh\n"
                    "# mpirun's rsh agent: HOST COMMAND... in that host's "
                    "namespaces\n"
                    "host=$1; shift\n"
                    f"case \"$host\" in {self.addr[1]}) ns={self.ns[1]}; "
                    f"name=hostb ;; *) ns={self.ns[0]}; name=hosta ;; esac\n"
                    "exec ip netns exec \"$ns\" unshare --uts sh -c "
                    "\"hostname $name; $*\"\n")
        os.chmod(self.agent, 0o755)
        self.hostfile = os.path.join(self.dir, "hosts")
        with open(self.hostfile, "w") as f:
            f.write(f"{self.addr[0]} slots=2\n{self.addr[1]} slots=2\n")
        return self

    def __exit__(self, *exc):
        for ns in self.ns:
            sh("ip", "netns", "del", ns, check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def command(self, dsrun_args):
        """mpirun on host A (its own namespaces) over both hosts."""
        subnet = self.subnet + ".0/24"
        mpirun = ["mpirun", "--allow-run-as-root", "--hostfile", self.hostfile,
                  "--mca", "plm_rsh_agent", self.agent,
                  "--mca", "oob_tcp_if_include", subnet,
                  "--mca", "btl_tcp_if_include", subnet,
                  "--mca", "btl", "self,vader,tcp", "--bind-to", "none",
                  "-x", "DSC_COMM_TIMEOUT", "-x", "OPENBLAS_NUM_THREADS",
                  "-np", "4"] + dsrun_args
        return self.on_host_a(mpirun)

    def mca_environment(self):
        """command()'s mpirun settings as Open MPI's environment variables,
        for a launcher that runs mpirun itself (mpirun passes them on)."""
        subnet = self.subnet + ".0/24"
        return {"OMPI_MCA_plm_rsh_agent": self.agent, "OMPI_MCA_oob_tcp_if_include": subnet,
                "OMPI_MCA_btl_tcp_if_include": subnet, "OMPI_MCA_btl": "self,vader,tcp"}

    def on_host_a(self, args):
        quoted = " ".join("'" + a.replace("'", "'\\''") + "'" for a in args)
        return ["ip", "netns", "exec", self.ns[0], "unshare", "--uts", "sh",
                "-c", "hostname hosta; exec " + quoted]

    def cut(self):
        sh("ip", "-n", self.ns[1], "link", "set", self.links[1], "down")


def job_pids(namespaces):
    """Processes of the job (ranks, launchers, orted daemons) still alive:
    those in its hosts' network namespaces. Matching command lines would
    also take another test's job running the same script at the same
    time."""
    inodes = set()
    for ns in namespaces:
        try:
            inodes.add(os.stat(f"/var/run/netns/{ns}").st_ino)
        except OSError:
            pass
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            link = os.readlink(f"/proc/{entry}/ns/net")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        inode = int(link[link.index("[") + 1:-1]) if "[" in link else -1
        if inode in inodes:
            found.append((int(entry), cmd[:100]))
    return found


def last_step(metrics):
    try:
        with open(metrics) as f:
            steps = re.findall(r'"step": *(\d+)', f.read())
        return int(steps[-1]) if steps else 0
    except OSError:
        return 0


def main(argv):
    if len(argv) < 2 or argv[1] not in ("probe", "run", "cut", "launch"):
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    mode = argv[1]
    if mode == "probe":
        if os.geteuid() != 0 or not shutil.which("ip") or \
                not shutil.which("unshare"):
            return 1
        try:
            with TwoHosts():
                return 0
        except (subprocess.CalledProcessError, OSError):
            return 1
    rest = argv[2:]
    after_step = 3
    if rest[:1] == ["--after-step"]:
        after_step, rest = int(rest[1]), rest[2:]
    if rest[:1] != ["--"] or len(rest) < 2:
        print("two_hosts.py: give -- DSRUN ARGS...", file=sys.stderr)
        return 2
    dsrun_args = rest[1:]
    dsrun_args[0] = shutil.which(dsrun_args[0]) or dsrun_args[0]
    with TwoHosts() as hosts:
        out_path = os.path.join(hosts.dir, "out.log")
        with open(out_path, "w") as out:
            if mode == "launch":
                args = [hosts.hostfile if a == "{hostfile}" else a for a in dsrun_args]
                proc = subprocess.Popen(hosts.on_host_a(args), stdout=out,
                                        stderr=subprocess.STDOUT,
                                        env=dict(os.environ, **hosts.mca_environment()))
            else:
                proc = subprocess.Popen(hosts.command(dsrun_args), stdout=out,
                                        stderr=subprocess.STDOUT)
            cut_at = None
            if mode == "cut":
                timeout = float(os.environ["DSC_COMM_TIMEOUT"])
                metrics = dsrun_args[dsrun_args.index("--metrics") + 1]
                deadline = time.monotonic() + 120
                while last_step(metrics) < after_step and proc.poll() is None \
                        and time.monotonic() < deadline:
                    time.sleep(0.05)
                if proc.poll() is None:
                    hosts.cut()
                    cut_at = time.monotonic()
                    print(f"cut host b's link after step {last_step(metrics)}")
            try:
                proc.wait(timeout=300 if cut_at is None else timeout + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                print("two_hosts.py: the job did not end; killed it")
            took = time.monotonic() - cut_at if cut_at is not None else 0
        time.sleep(1)  # what outlives the job, not what is exiting with it
        left = job_pids(hosts.ns)
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        with open(out_path) as f:
            output = f.read()
    print(f"exit {proc.returncode}")
    sys.stdout.write("".join(l for l in output.splitlines(True)
                             if not l.startswith("step ")))
    status = 0
    if mode == "cut" and cut_at is None:
        print("two_hosts.py: the job ended before the cut")
        status = 1
    if cut_at is not None:
        limit = timeout + GRACE_S
        verdict = "within" if took <= limit else "LATER THAN"
        print(f"ended {took:.1f} s after the cut: {verdict} the limit "
              f"({timeout:g} s timeout + {GRACE_S} s)")
        status |= took > limit
    if left:
        for pid, cmd in left:
            print(f"left running: {pid} {cmd}")
        status = 1
    else:
        print("nothing left running")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
