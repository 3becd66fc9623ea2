#!/usr/bin/env python3
"""plan_listing.py PLAN.json: a compiled plan (as `flatc --json --strict-json
--raw-binary runtime/schema/plan.fbs -- PLAN.dsplan` writes it) as one line
per arena, variable and instruction, for FileCheck: what the compiler
emitted, kernel by kernel, with every buffer as arena@offset dtype[shape].

flatc leaves out fields at their schema defaults (offset 0, dtype f32,
arena 0, stream compute, ...); this fills them back in."""
import json
import sys

CATEGORIES = ["params", "grads", "optimizer_state", "activations",
              "comm_buffers", "workspace", "inputs", "constants"]


def main():
    plan = json.load(open(sys.argv[1]))
    arenas = plan.get("arenas", [])
    # A host arena (offload) is named host:CATEGORY.
    names = [("host:" if a.get("space") == "host" else "") +
             a.get("category", "params") for a in arenas]
    print(f"plan {plan.get('model')} world {plan.get('world_size', 0)} "
          f"micro_batch {plan.get('micro_batch', 0)} seq {plan.get('seq_len', 0)} "
          f"accumulation {plan.get('accumulation_steps', 0)}")
    for i, a in enumerate(arenas):
        print(f"arena {i} {names[i]} {a.get('space', 'device')} {a.get('bytes', 0)}")
    buffers = plan.get("buffers", [])

    def buf(i):
        b = buffers[i]
        shape = ",".join(str(d) for d in b.get("shape", []))
        return (f"{names[b.get('arena', 0)]}@{b.get('offset', 0)} "
                f"{b.get('dtype', 'f32')}[{shape}]")

    for v in plan.get("variables", []):
        extra = f" std {v.get('std', 0):g}" if v.get("init") == "normal" else ""
        decay = " decay" if v.get("weight_decay") else ""
        of = f" of {v['of']}" if v.get("of") else ""
        print(f"variable {v.get('kind', 'param')} {v['name']}{of} = {buf(v.get('buffer', 0))} "
              f"init {v.get('init', 'zeros')}{extra}{decay}")
    for p in plan.get("programs", []):
        ins = ", ".join(buf(i) for i in p.get("inputs", []))
        outs = ", ".join(buf(i) for i in p.get("outputs", []))
        # Its own peak in each transient arena it uses (Program.arena_peaks).
        peaks = " ".join(f"{names[i]}={v}" for i, v in
                         enumerate(p.get("arena_peaks", [])) if v)
        print(f"program {p['name']} ({ins}) -> ({outs}) events {p.get('num_events', 0)}"
              + (f" peaks {peaks}" if peaks else ""))
        for n, ins_ in enumerate(p.get("instrs", [])):
            i = ", ".join(buf(x) for x in ins_.get("inputs", []))
            o = ", ".join(buf(x) for x in ins_.get("outputs", []))
            attrs = ""
            if ins_.get("int_attrs"):
                attrs += f" i{ins_['int_attrs']}"
            if ins_.get("float_attrs"):
                attrs += " f[" + ", ".join(f"{x:g}" for x in ins_["float_attrs"]) + "]"
            events = ""
            if ins_.get("wait"):
                events += f" wait{ins_['wait']}"
            if ins_.get("record"):
                events += f" record{ins_['record']}"
            where = " on host" if ins_.get("space") == "host" else ""
            print(f"  {n} {ins_.get('stream', 'compute')}{where} {ins_['kernel']} ({i}) -> ({o})"
                  f"{attrs}{events}  # {ins_.get('loc', '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
