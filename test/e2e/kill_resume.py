#!/usr/bin/env python3
"""kill_resume.py DSRUN PLAN DATA STEPS OUT [ARGS...]: trains PLAN for STEPS steps
with --save-every 3, SIGKILLing dsrun at random moments (seeded, so a run
is repeatable) and resuming each time, until it finishes; then trains it
once without interruption and checks that every step's loss, as each
attempt reported it, and the final weights are bitwise the uninterrupted
run's. Some kills land during a save (the .partial directory is left
behind): the next attempt must ignore it and resume from the previous
commit. ARGS go to every dsrun (--np 3: the launcher is what is killed,
and its mpirun and ranks must die with it before the next attempt). Prints
the kills and `ok`; exit 1 on a difference."""
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time


def losses(path):
    """step -> [losses] of one attempt's metrics. A SIGKILL can land in the
    middle of writing a line: a torn last line is no step."""
    out = {}
    if not os.path.exists(path):
        return out  # killed before it opened its metrics
    with open(path) as f:
        lines = [l for l in f if l.strip()]
    for i, line in enumerate(lines):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise
        out.setdefault(r["step"], []).append(r["loss"])
    return out


def main(argv):
    if len(argv) < 6:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    dsrun, plan, data, steps, out = argv[1], argv[2], argv[3], int(argv[4]), argv[5]
    extra = argv[6:]
    os.makedirs(out, exist_ok=True)
    ckpt = os.path.join(out, "ck")
    rng = random.Random(7)
    base = [dsrun, plan, "--data", data, "--steps", str(steps)] + extra
    # The uninterrupted run, timed to choose kill moments within it.
    t0 = time.monotonic()
    subprocess.run(base + ["--metrics", f"{out}/ref.jsonl", "--export-weights",
                           f"{out}/ref.safetensors"], check=True,
                   stdout=subprocess.DEVNULL)
    span = time.monotonic() - t0
    kills, attempt, partials = 0, 0, 0
    while True:
        attempt += 1
        cmd = base + ["--save-dir", ckpt, "--save-every", "3", "--resume",
                      "--metrics", f"{out}/a{attempt}.jsonl", "--export-weights",
                      f"{out}/final.safetensors"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        # Killed once it has committed 1-3 more checkpoints, a random moment
        # later: mid-step, or mid-save.
        target, seen, lines = rng.randint(1, 3), threading.Event(), []

        def read():
            saves = 0
            for line in p.stdout:
                lines.append(line)
                saves += line.startswith("dsrun: saved ")
                if saves >= target:
                    seen.set()
            seen.set()
        reader = threading.Thread(target=read)
        reader.start()
        if attempt <= 6:
            seen.wait()
            time.sleep(rng.uniform(0, 0.2) * span / steps * 3)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                kills += 1
        p.wait()
        reader.join()
        text = "".join(lines)
        if p.returncode == -signal.SIGKILL and extra:
            time.sleep(1.0)  # the ranks notice their mpirun is gone
        partials += any(n.endswith(".partial") for n in os.listdir(ckpt)) \
            if os.path.isdir(ckpt) else 0
        if p.returncode == 0:
            break
        if p.returncode != -signal.SIGKILL:
            print(f"kill_resume: attempt {attempt} exited {p.returncode}:\n{text}")
            return 1
        if attempt > 50:
            print("kill_resume: no attempt finished")
            return 1
    print(f"{kills} kills, {attempt} attempts")
    ref = losses(f"{out}/ref.jsonl")
    seen = {}
    for a in range(1, attempt + 1):
        for step, ls in losses(f"{out}/a{a}.jsonl").items():
            seen.setdefault(step, []).extend(ls)
    bad = [s for s in range(1, steps + 1)
           if s not in seen or any(l != ref[s][0] for l in seen[s])]
    if bad:
        print(f"kill_resume: steps {bad[:10]} differ from (or are missing in) "
              f"the uninterrupted run")
        return 1
    with open(f"{out}/ref.safetensors", "rb") as f, \
            open(f"{out}/final.safetensors", "rb") as g:
        if f.read() != g.read():
            print("kill_resume: the final weights differ")
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
