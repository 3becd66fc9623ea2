"""The exporter's op table (dsc/ds_ops.py, generated from DsOps.td) against
what the exporter writes: every ds op named in the frontend's sources is in
the table (or is one of the dialect's attributes), and Emitter.op refuses an op the dialect lacks or a wrong number
of results."""
import pathlib
import re

import dsc
from dsc.ds_ops import DIALECT_ATTRIBUTES, OPS
from dsc.emitter import Emitter

source_dir = pathlib.Path(dsc.__file__).parent
named = set()
for path in sorted(source_dir.glob("*.py")):
    if path.name == "ds_ops.py":
        continue
    named.update(re.findall(r"\bds\.[a-z_]+(?=[ \"'])", path.read_text()))
unknown = sorted(n for n in named if n not in OPS and n not in DIALECT_ATTRIBUTES)
print(f"{len(named)} ds ops named in the frontend; not in the table: {unknown}")
print(f"ds.matmul: {OPS['ds.matmul']}")
print(f"ds.layer_norm operands: {OPS['ds.layer_norm'].operands}")
print(f"ds.split results: {OPS['ds.split'].results}")

em = Emitter()
for text, results in (("ds.swirl %0 : tensor<f32>", 1),
                      ("ds.matmul %0, %1 : tensor<2x2xf32>, tensor<2x2xf32> -> tensor<2x2xf32>", 2)):
    try:
        em.op(text, (2, 2), "f32", results=results)
        print("accepted:", text)
    except AssertionError as e:
        print(e)
em.op("ds.split %0 axis 0 sizes [1, 1, 1] : tensor<3xf32> -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>",
      [(1,), (1,), (1,)], "f32", results=3)
print(f"{len(em.lines)} line written")
