"""one_step.py MODEL_FILE DATA: one training step through the installed
package, as a user's script takes it (scripts/pip-install-check.sh): a small
nanoGPT from MODEL_FILE, dsc.initialize over a DataLoader of DATA's bytes,
one forward, backward and step. Prints where dsc was imported from, the
loss and the engine's counters; exits 1 unless the step was applied and
the loss is finite."""
import importlib
import math
import os
import sys

import torch

import dsc


def main(model_file, data_path):
    # Imported by name, as a user's script imports its model: torch.export
    # looks the module up again while tracing.
    sys.path.insert(0, os.path.dirname(os.path.abspath(model_file)))
    user_model = importlib.import_module(os.path.basename(model_file)[:-3])
    torch.manual_seed(0)
    model = user_model.GPT(n_layer=1, n_head=2, n_embd=32, block_size=16, vocab_size=256)
    data = torch.tensor(list(open(data_path, "rb").read()[:4096]), dtype=torch.long)
    windows = [(data[i:i + 16], data[i + 1:i + 17]) for i in range(0, 4000, 16)]
    config = {"train_micro_batch_size_per_gpu": 4,
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    engine, _, loader, _ = dsc.initialize(model=model, model_parameters=model.parameters(),
                                          config=config, training_data=windows)
    x, y = next(iter(loader))
    loss = engine(x, y)
    engine.backward(loss)
    engine.step()
    print(f"dsc from {dsc.__file__}")
    print(f"loss {float(loss):.4f} after {engine.global_steps} step, "
          f"{engine.global_samples} samples")
    return 0 if engine.was_step_applied() and math.isfinite(float(loss)) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
