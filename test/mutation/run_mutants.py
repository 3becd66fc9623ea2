#!/usr/bin/env python3
"""run_mutants.py: plan mutants must die.

Compiles each base plan once with the commands the real tests use
(test/e2e/train-vs-torch.test, test/e2e/zero-stage0.test), runs the plan
through a JSON round trip unchanged as a control (its check must pass),
then applies each mutation of mutants.py to a copy, runs the same pipeline
on the mutant and reports it killed when dsrun or the check fails, or
SURVIVED when everything still passes.

  run_mutants.py [--build-dir BUILD] [--source-dir SRC] [--only NAME]...
                 [-j N] [--work-dir DIR] [--run-pending] [--list]

Exit 0 when every mutant run was killed; 1 when one survived, a mutation
found no target, or a control failed. A mutant marked pending (mutants.py)
is applied and its plan loaded by dsrun, but its check is not run unless
--run-pending is given. Python 3 standard library only; the PyTorch checks
run under --torch-python (default /usr/bin/python3, Debian's, which has
torch).
"""
import argparse
import concurrent.futures
import copy
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mutants as M  # noqa: E402
import plan_json as pj  # noqa: E402

DATA = "/usr/share/common-licenses/GPL-3"
TIMEOUT = 300  # seconds for any one command; a hang is an error, not a kill

GPT2 = "gpt2:n_layer=2,n_head=2,n_embd=32,block_size=32,vocab_size=256"
LLAMA = "llama:dim=32,n_layer=2,n_head=2,vocab_size=256,block_size=32"
ZERO_MODEL = "gpt2:n_layer=2,n_head=2,n_embd=32,block_size=16,vocab_size=256,bias=0"
# The configs of test/e2e/zero-stage0.test (written there with echo).
ZERO_N = ('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, '
          '"gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, '
          '"betas": [0.9, 0.95], "weight_decay": 0.1}}, "zero_optimization": '
          '{"stage": 0, "reduce_bucket_size": 3000}}')
ZERO_ONE2 = ('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4, '
             '"gradient_clipping": 1.0, "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, '
             '"betas": [0.9, 0.95], "weight_decay": 0.1}}}')

# Base plans: how each is compiled and checked. "torch": train_vs_torch.py
# against PyTorch (train-vs-torch.test); "ranks": rank 0 runs the plan,
# rank 1 the mutant, against one rank (zero-stage0.test's N = 2 case).
# `test` and `commands`: the real test and the strings of its RUN lines
# these plans and checks copy; a base whose strings are gone from its test
# fails (update it here), so the mutants keep testing what the tests run.
TORCH_TEST = "train-vs-torch.test"
TORCH_RUN = ("dsc --model {model} --config %S/Inputs/torch-train.json",
             "--steps 30 --init-from", "train_vs_torch.py check {model} "
             "%S/Inputs/torch-train.json")
BASES = {
    "gpt2": {"kind": "torch", "model": GPT2, "test": TORCH_TEST, "commands": TORCH_RUN},
    "llama": {"kind": "torch", "model": LLAMA, "test": TORCH_TEST, "commands": TORCH_RUN},
    "gpt2-dropout": {"kind": "torch", "model": GPT2 + ",dropout=0.1", "test": TORCH_TEST,
                     "commands": TORCH_RUN},
    "zero2": {"kind": "ranks", "model": ZERO_MODEL, "world": 2, "steps": 20,
              "tol": "1e-5", "test": "zero-stage0.test",
              "commands": ("echo '" + ZERO_N + "' > %t/n.json",
                           "echo '" + ZERO_ONE2 + "' > %t/one2.json",
                           "dsc --model {model} --config %t/n.json --world-size 2",
                           "dsc --model {model} --config %t/one2.json",
                           "--steps 20 --metrics %t/n2.jsonl",
                           "env OPENBLAS_NUM_THREADS=1 dsrun %t/one2.dsplan",
                           "one2.safetensors 1e-5")},
}

print_lock = threading.Lock()


def say(line):
    with print_lock:
        print(line, flush=True)


class Failure(Exception):
    """A command of the pipeline failed: `who` (which step), its exit code
    and the line of its output that says why."""

    def __init__(self, who, code, line, detail=None, verifier=False):
        super().__init__(f"{who}: {line}")
        self.who, self.code, self.line, self.detail = who, code, line, detail
        self.verifier = verifier


def run(cmd, log, env=None, who=None):
    """Runs cmd, output to log; returns (exit code, stdout, stderr). A run
    past TIMEOUT is killed with its process group and raised as an error."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, env=full_env, start_new_session=True)
    try:
        out, err = p.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise RuntimeError(f"{who or cmd[0]} ran past {TIMEOUT} s (killed); see {log}")
    with open(log, "a") as f:
        f.write(out + err + f"\n[exit {p.returncode}]\n")
    return p.returncode, out, err


def first_line(text, prefix=None):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    if prefix:
        tagged = [l for l in lines if l.startswith(prefix)]
        if tagged:
            return tagged[0]
    return lines[0] if lines else "(no output)"


def last_line(text):
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[-1] if lines else "(no output)"


class Runner:
    def __init__(self, args):
        self.args = args
        self.dsc = os.path.join(args.tools_dir, "dsc")
        self.dsrun = os.path.join(args.tools_dir, "dsrun")
        self.schema = os.path.join(args.source_dir, "runtime", "schema", "plan.fbs")
        self.e2e = os.path.join(args.source_dir, "test", "e2e")
        self.config = os.path.join(self.e2e, "Inputs", "torch-train.json")
        self.work = args.work_dir
        self.bases = {}  # name -> {"plan": dict, "dir": ..., ...} or Exception

    # -- commands --------------------------------------------------------

    def must(self, cmd, log, who, env=None):
        code, out, err = run(cmd, log, env, who)
        if code != 0:
            why = last_line(err) if "Traceback" in err else first_line(err or out)
            raise RuntimeError(f"{who} failed (exit {code}): {why}; see {log}")
        return out

    def dsrun_train(self, plan, d, tag, extra):
        """dsrun on plan; raises Failure when it exits non-zero."""
        code, out, err = run([self.dsrun, plan] + extra, os.path.join(d, tag + ".dsrun.log"),
                             who="dsrun")
        if code != 0:
            who = "the verifier (dsrun exit 2)" if code == 2 else f"dsrun (exit {code})"
            raise Failure(who, code, first_line(err or out, "dsrun:"), verifier=code == 2)

    # -- the "torch" pipeline (train-vs-torch.test) ------------------------

    def torch_pipeline(self, base, plan, d, tag):
        b = self.bases[base]
        model = BASES[base]["model"]
        f = lambda ext: os.path.join(d, f"{tag}.{ext}")
        self.dsrun_train(plan, d, tag, [
            "--data", DATA, "--steps", "30", "--init-from", b["init"],
            "--dump-batch", f("batches"), "--metrics", f("jsonl"),
            "--export-weights", f("final")])
        code, out, err = run([self.args.torch_python, os.path.join(self.e2e, "train_vs_torch.py"),
                              "check", model, self.config, b["init"], f("batches"),
                              f("jsonl"), f("final")], f("check.log"), who="train_vs_torch")
        if code != 0:
            problems = [l for l in out.splitlines() if l.startswith("train_vs_torch:")]
            line = problems[0] if problems else last_line(err or out)
            n = f", {len(problems)} problems" if problems else ""
            summary = [l for l in out.splitlines() if " steps vs PyTorch: " in l]
            raise Failure(f"train_vs_torch check (exit {code}{n})", code, line,
                          summary[0] if summary else None)
        return last_line(out)

    def prepare_torch(self, base, d, check):
        model = BASES[base]["model"]
        plan = os.path.join(d, "base.dsplan")
        self.must([self.dsc, "--model", model, "--config", self.config, "-o", plan],
                  os.path.join(d, "dsc.log"), "dsc")
        if not check:
            return {"plan_file": plan}
        init = os.path.join(d, "init.safetensors")
        self.must([self.args.torch_python, os.path.join(self.e2e, "train_vs_torch.py"),
                   "init", model, init], os.path.join(d, "init.log"), "train_vs_torch init")
        return {"plan_file": plan, "init": init}

    # -- the "ranks" pipeline (zero-stage0.test) ---------------------------

    def ranks_args(self, d, tag):
        return ["--data", DATA, "--steps", str(BASES["zero2"]["steps"]),
                "--metrics", os.path.join(d, tag + ".jsonl"),
                "--export-weights", os.path.join(d, tag + ".safetensors")]

    def ranks_pipeline(self, base, plan, d, tag):
        """Rank 0 runs the unmutated plan, rank 1 `plan`; the pair must
        train exactly as one rank with the same global batch."""
        b = self.bases[base]
        spec = BASES[base]
        mpirun = shutil.which("mpirun")
        if not mpirun:
            raise RuntimeError("mpirun is not on PATH")
        extra = self.ranks_args(d, tag)
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none",
               "-np", "1", self.dsrun, b["plan_file"]] + extra + \
              [":", "-np", "1", self.dsrun, plan] + extra
        assert spec["world"] == 2
        code, out, err = run(cmd, os.path.join(d, tag + ".mpirun.log"), who="mpirun")
        if code != 0:
            who = ("the verifier (dsrun exit 2)" if code == 2
                   else f"mpirun of 2 ranks (exit {code})")
            raise Failure(who, code, first_line(err or out, "dsrun:"), verifier=code == 2)
        code, out, err = run([sys.executable, os.path.join(self.e2e, "compare_runs.py"),
                              os.path.join(d, tag + ".jsonl"), os.path.join(d, tag + ".safetensors"),
                              b["one_jsonl"], b["one_weights"], spec["tol"]],
                             os.path.join(d, tag + ".compare.log"), who="compare_runs")
        if code != 0:
            problems = [l for l in out.splitlines() if l.startswith("compare_runs:")]
            line = problems[0] if problems else (first_line(out) if out.strip()
                                                 else last_line(err))
            summary = [l for l in out.splitlines() if " steps: max loss rel diff" in l]
            raise Failure(f"compare_runs vs one rank (exit {code})", code, line,
                          summary[0] if summary else None)
        return last_line(out)

    def prepare_ranks(self, base, d, check):
        spec = BASES[base]
        n_json, one_json = os.path.join(d, "n.json"), os.path.join(d, "one2.json")
        for path, text in ((n_json, ZERO_N), (one_json, ZERO_ONE2)):
            with open(path, "w") as f:
                f.write(text + "\n")
        plan = os.path.join(d, "base.dsplan")
        one = os.path.join(d, "one2.dsplan")
        self.must([self.dsc, "--model", spec["model"], "--config", n_json, "--world-size",
                   str(spec["world"]), "-o", plan], os.path.join(d, "dsc.log"), "dsc")
        if not check:
            return {"plan_file": plan}
        self.must([self.dsc, "--model", spec["model"], "--config", one_json, "-o", one],
                  os.path.join(d, "dsc-one.log"), "dsc (one rank)")
        self.must([self.dsrun, one] + self.ranks_args(d, "one2"), os.path.join(d, "one2.log"),
                  "dsrun (one rank)", env={"OPENBLAS_NUM_THREADS": "1"})
        return {"plan_file": plan, "one_jsonl": os.path.join(d, "one2.jsonl"),
                "one_weights": os.path.join(d, "one2.safetensors")}

    # -- bases, controls and mutants -------------------------------------

    def pipeline(self, base, plan, d, tag):
        kind = BASES[base]["kind"]
        return (self.torch_pipeline if kind == "torch" else self.ranks_pipeline)(
            base, plan, d, tag)

    def prepare(self, base, check):
        """Compiles base, loads it as JSON and, when `check`, runs the
        control: the plan through the JSON round trip, unchanged, must pass."""
        d = os.path.join(self.work, "base-" + base)
        os.makedirs(d, exist_ok=True)
        t0 = time.time()
        try:
            spec = BASES[base]
            test = os.path.join(self.e2e, spec["test"])
            with open(test) as f:
                text = f.read()
            for c in spec["commands"]:
                c = c.replace("{model}", spec["model"])
                if c not in text:
                    raise RuntimeError(f"{test} no longer runs `{c}`: update BASES in "
                                       f"{os.path.basename(__file__)} to what it runs")
            prep = self.prepare_torch if BASES[base]["kind"] == "torch" else self.prepare_ranks
            info = prep(base, d, check)
            info["plan"] = pj.load(self.schema, info["plan_file"], os.path.join(d, "json"))
            self.bases[base] = info
            if check:
                control = os.path.join(d, "control.dsplan")
                pj.save(self.schema, copy.deepcopy(info["plan"]), control,
                        os.path.join(d, "json-control"))
                line = self.pipeline(base, control, d, "control")
                say(f"control {base}: passes ({time.time() - t0:.1f} s): {line}")
            else:
                say(f"base {base}: compiled ({time.time() - t0:.1f} s)")
        except Exception as e:  # noqa: BLE001 - reported, then fatal for its mutants
            self.bases[base] = e
            say(f"control {base}: FAILED: {e}")

    def mutate(self, m):
        """(status, by, seconds); status is killed (a check failed), rejected
        (dsrun's verifier refused the plan), SURVIVED, ERROR (the mutation
        found no target, a tool failed to run, a timeout) or pending."""
        t0 = time.time()
        d = os.path.join(self.work, "mutant-" + m.name)
        os.makedirs(d, exist_ok=True)
        base = self.bases.get(m.base)
        if isinstance(base, Exception) or base is None:
            return "ERROR", f"base {m.base} unusable: {base}", time.time() - t0
        plan = copy.deepcopy(base["plan"])
        try:
            changes = m.apply(plan)
        except M.MutationError as e:
            return "ERROR", f"mutation did not apply: {e}", time.time() - t0
        with open(os.path.join(d, "changes.txt"), "w") as f:
            f.write("\n".join(changes) + "\n")
        path = os.path.join(d, "mutant.dsplan")
        try:
            pj.save(self.schema, plan, path, os.path.join(d, "json"))
            if m.pending and not self.args.run_pending:
                # Apply it and let dsrun load and verify it; nothing checks it.
                try:
                    self.dsrun_train(path, d, "load", ["--data", DATA, "--steps", "1"])
                except Failure as f:
                    return "ERROR", f"pending mutant does not run: {f}", time.time() - t0
                return ("pending", f"{m.pending}: {len(changes)} changes applied, "
                        "plan loads; not checked", time.time() - t0)
            line = self.pipeline(m.base, path, d, "mutant")
        except Failure as f:
            if f.detail and f.detail != f.line:  # margins, for the log
                say(f"{m.name}: the check's summary: {f.detail}")
            # Rejected by the verifier: dead, but it tests the verifier, not
            # the numerics; reported apart.
            status = "rejected" if f.verifier else "killed"
            return status, f"{f.who}: {f.line}", time.time() - t0
        except Exception as e:  # noqa: BLE001
            return "ERROR", str(e), time.time() - t0
        return "SURVIVED", f"all checks pass: {line}", time.time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", help="dsc's build directory (default: from `which dsc`)")
    ap.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)),
                    help="the source tree (default: this script's)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="run only this mutant (repeatable)")
    ap.add_argument("-j", type=int, default=1, help="runs at a time (default 1)")
    ap.add_argument("--work-dir", help="where plans and logs go (default: a temporary "
                    "directory, removed unless something fails)")
    ap.add_argument("--torch-python", default="/usr/bin/python3")
    ap.add_argument("--run-pending", action="store_true",
                    help="also check the mutants marked pending")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = ap.parse_args()

    if args.list:
        for m in M.MUTANTS:
            extra = f" [pending: {m.pending}]" if m.pending else ""
            print(f"{m.name:28} {m.base:13} {m.doc}{extra}")
        return 0
    unknown = [n for n in args.only if n not in [m.name for m in M.MUTANTS]]
    if unknown:
        ap.error(f"unknown mutant {', '.join(unknown)} (see --list)")
    chosen = [m for m in M.MUTANTS if not args.only or m.name in args.only]

    if args.build_dir:
        args.tools_dir = os.path.join(args.build_dir, "tools")
    else:
        dsc = shutil.which("dsc")
        if not dsc:
            ap.error("dsc is not on PATH; give --build-dir")
        args.tools_dir = os.path.dirname(os.path.realpath(dsc))
    for tool in ("dsc", "dsrun"):
        if not os.access(os.path.join(args.tools_dir, tool), os.X_OK):
            ap.error(f"no {tool} in {args.tools_dir}")
    temporary = not args.work_dir
    args.work_dir = os.path.abspath(args.work_dir or tempfile.mkdtemp(prefix="mutants."))
    os.makedirs(args.work_dir, exist_ok=True)

    t0 = time.time()
    runner = Runner(args)
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j))
    # A base whose mutants are all pending is compiled but not controlled.
    bases = {}
    for m in chosen:
        checked = not m.pending or args.run_pending
        bases[m.base] = bases.get(m.base, False) or checked
    list(pool.map(lambda b: runner.prepare(b, bases[b]), bases))

    results = {}

    def one(m):
        results[m.name] = runner.mutate(m)
        status, by, secs = results[m.name]
        say(f"{m.name}: {status} by {by} ({secs:.1f} s)" if status in ("killed", "rejected")
            else f"{m.name}: {status}: {by} ({secs:.1f} s)")

    list(pool.map(one, chosen))
    pool.shutdown()

    total = time.time() - t0
    print("\nmutant                      base          result    time  by")
    for m in chosen:
        status, by, secs = results[m.name]
        print(f"{m.name:27} {m.base:13} {status:8} {secs:5.1f}s  {by}")
    count = lambda s: sum(1 for r in results.values() if r[0] == s)
    bad = count("SURVIVED") + count("ERROR") + sum(
        1 for b in bases if isinstance(runner.bases.get(b), Exception))
    rejected = f" ({count('rejected')} rejected by the verifier)" if count("rejected") else ""
    print(f"\n{count('killed') + count('rejected')} killed{rejected}, "
          f"{count('SURVIVED')} survived, {count('ERROR')} errors, "
          f"{count('pending')} pending; {total:.0f} s")
    if bad:
        print(f"plans and logs: {args.work_dir}")
    elif temporary:
        shutil.rmtree(args.work_dir, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
