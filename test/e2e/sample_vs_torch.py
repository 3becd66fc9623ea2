#!/usr/bin/env python3
"""sample_vs_torch.py MODEL WEIGHTS.safetensors PROMPT N DSRUN_OUT: dsrun's
greedy sample (`--sample N --prompt PROMPT --temperature 0`, its stdout in
DSRUN_OUT) equals PyTorch's greedy decoding of the same weights
(torch_models, float64): each step takes the context's last block_size
tokens, and the next token is the argmax of the logits at the last
position (the lowest token on a tie), as nanoGPT's generate with top_k 1.
Prints both continuations; exit 0 when equal, 1 otherwise, 2 on bad
arguments."""
import sys

import torch

import safetensors_io as st
import torch_models


def main(argv):
    if len(argv) != 6:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    spec, weights, prompt, n, out = argv[1], argv[2], argv[3], int(argv[4]), argv[5]
    model = torch_models.build(spec)
    state = {k: torch.tensor(v.values, dtype=torch.float32).view(v.shape)
             for k, v in st.read(weights).items()}
    model.load_state_dict(state, strict=True)
    model = model.double().eval()
    block = int(torch_models.options(spec)["block_size"])
    context = list(prompt.encode())
    generated = []
    with torch.no_grad():
        for _ in range(n):
            window = context[-block:]
            idx = torch.tensor([window])
            probe = {}
            model(idx, torch.zeros_like(idx), probe)
            logits = probe["logits"][-1][0, len(window) - 1]
            nxt = int(torch.argmax(logits))
            context.append(nxt)
            generated.append(nxt)
    want = bytes(generated).decode("latin-1")
    text = open(out, "rb").read().decode("latin-1")
    lines = [l for l in text.split("\n") if l.startswith(prompt)]
    got = lines[-1][len(prompt):] if lines else ""
    print(f"dsrun: {got!r}")
    print(f"torch: {want!r}")
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
