"""Edits a plan for a test: a FlatBuffers round trip through flatc
(test/mutation/plan_json.py) with Python statements applied in between.

  edit_plan.py SOURCE_DIR IN.dsplan OUT.dsplan 'STATEMENT' ...

Each statement runs with `plan` (the plan as a dict, every scalar field
present) and `first(program, kernel)` (the index of that program's first
instruction calling `kernel`) in scope, e.g.
  'plan["schema_version"] = 2'
  'i = first("micro_step", "ds.matmul"); ...'
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "mutation"))
import plan_json  # noqa: E402


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    source_dir, src, dst, statements = argv[0], argv[1], argv[2], argv[3:]
    schema = os.path.join(source_dir, "runtime", "schema", "plan.fbs")
    with tempfile.TemporaryDirectory() as work:
        plan = plan_json.load(schema, src, work)

        def program(name):
            return next(p for p in plan["programs"] if p["name"] == name)

        def first(name, kernel):
            instrs = program(name)["instrs"]
            return next(i for i, ins in enumerate(instrs) if ins["kernel"] == kernel)

        scope = {"plan": plan, "program": program, "first": first}
        for s in statements:
            exec(s, scope)
        plan_json.save(schema, plan, dst, work)


if __name__ == "__main__":
    main(sys.argv[1:])
