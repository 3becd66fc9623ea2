"""Reads an executed notebook (nbconvert --execute) and prints what its
cells showed: errors, the loss line, whether a plot was drawn. Exit 1 if a
cell failed, no plot was drawn or the loss did not fall by 1 nat."""
import re
import sys

import nbformat

nb = nbformat.read(sys.argv[1], as_version=4)
texts, images, errors = [], 0, []
for cell in nb.cells:
    for out in cell.get("outputs", []):
        if out.output_type == "error":
            errors.append(f"{out.ename}: {out.evalue}")
        if out.output_type == "stream":
            texts.append(out.text)
        data = out.get("data", {})
        if "image/png" in data:
            images += 1
        if "text/plain" in data:
            texts.append(data["text/plain"])
text = "\n".join(texts)
m = re.search(r"loss ([0-9.]+) -> ([0-9.]+) in (\d+) steps", text)
print(f"notebook: {len(nb.cells)} cells, {len(errors)} errors, {images} plot(s)")
problems = list(errors)
if not m:
    problems.append("no loss line")
else:
    print(m.group(0))
    if float(m.group(2)) > float(m.group(1)) - 1:
        problems.append("the loss did not fall by 1 nat")
if images != 1:
    problems.append(f"{images} plots, expected 1")
for p in problems:
    print(f"check_notebook: {p}")
sys.exit(1 if problems else 0)
