"""engine-data.test: dsc.initialize's training_data from where users keep
tokens (training_data.py). Every source holds the same token stream (DIR's
tokens in four containers), so the engine's DataLoader, shuffled with one
seed, feeds the same windows and the losses of STEPS steps must be equal
bitwise to those of a hand-written torch Dataset of the windows (nanoGPT's GPT). A Hugging Face
dataset of those windows as input_ids (labels the same) must equal the
hand-written rows fed as engine(input_ids=, labels=) (Hugging Face's Llama). Then each bad source
prints its one line.

    engine_data.py DIR STEPS
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nanogpt_model import GPT  # noqa: E402

import dsc  # noqa: E402

T = 16
CONFIG = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


class Windows(torch.utils.data.Dataset):
    """What a user writes: (tokens, next tokens) windows of a tensor."""

    def __init__(self, tokens):
        self.tokens = torch.as_tensor(tokens, dtype=torch.long)

    def __len__(self):
        return (len(self.tokens) - 1) // T

    def __getitem__(self, i):
        return self.tokens[i * T:(i + 1) * T], self.tokens[i * T + 1:(i + 1) * T + 1]


class Rows(torch.utils.data.Dataset):
    """The Hugging Face rows by hand: dicts of input_ids and labels."""

    def __init__(self, tokens):
        self.tokens = torch.as_tensor(tokens, dtype=torch.long)

    def __len__(self):
        return (len(self.tokens) - 1) // T

    def __getitem__(self, i):
        row = self.tokens[i * T:(i + 1) * T]
        return {"input_ids": row, "labels": row}


def model_of(kind):
    torch.manual_seed(0)
    if kind == "llama":  # Hugging Face's rows go with Hugging Face's models
        import transformers
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(
            vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=T))
    return GPT(n_layer=1, n_head=2, n_embd=32, block_size=T, vocab_size=256)


def losses(data, steps, kind="nanogpt"):
    model = model_of(kind)
    engine, _, loader, _ = dsc.initialize(model=model, config=CONFIG, training_data=data)
    batches = iter(loader)
    return [float(engine.train_batch(batches)) for _ in range(steps)]


def expect_error(what, data):
    try:
        losses(data, 1)
    except dsc.InputError as e:
        print(f"{what}: {e}")
        return
    print(f"{what}: no error")


def main(folder, steps):
    import datasets
    steps = int(steps)
    tokens = np.frombuffer(open("/usr/share/common-licenses/GPL-3", "rb").read()[:8192],
                           dtype=np.uint8).astype(np.uint16)
    bin_path = os.path.join(folder, "train.bin")
    tokens.tofile(bin_path)
    npy_path = os.path.join(folder, "train.npy")
    np.save(npy_path, tokens.astype(np.int64))
    reference = losses(Windows(tokens), steps)
    print(f"reference: {steps} steps, loss {reference[0]:.4f} -> {reference[-1]:.4f}")
    sources = {
        "nanoGPT .bin path": bin_path,
        ".npy path (int64)": npy_path,
        "np.memmap of the .bin": np.memmap(bin_path, dtype=np.uint16, mode="r"),
        "np.load(.npy, mmap_mode='r')": np.load(npy_path, mmap_mode="r"),
        "torch tensor": torch.as_tensor(tokens.astype(np.int64)),
    }
    for name, data in sources.items():
        print(f"{name}: same losses as the Dataset: {losses(data, steps) == reference}")

    rows = [tokens[i * T:(i + 1) * T].tolist() for i in range((len(tokens) - 1) // T)]
    hf = datasets.Dataset.from_dict({"input_ids": rows, "labels": rows,
                                     "text": ["x"] * len(rows)})
    by_hand = losses(Rows(tokens), steps, "llama")
    print(f"datasets.Dataset (Llama): same losses as the rows by hand: "
          f"{losses(hf, steps, 'llama') == by_hand}")

    expect_error("rows of another length", datasets.Dataset.from_dict(
        {"input_ids": [r[:T - 1] for r in rows]}))
    expect_error("no input_ids", datasets.Dataset.from_dict({"text": ["a", "b"]}))
    expect_error("streaming", datasets.Dataset.from_dict(
        {"input_ids": rows}).to_iterable_dataset())
    np.save(os.path.join(folder, "floats.npy"), np.zeros(100, np.float32))
    expect_error("float .npy", os.path.join(folder, "floats.npy"))
    expect_error("missing file", os.path.join(folder, "none.bin"))
    expect_error("2-D array", np.zeros((4, 16), np.int64))
    expect_error("too short", np.zeros(T, np.int64))
    expect_error("a generator", (x for x in range(3)))
    expect_error("bytes", b"abc" * 100)


if __name__ == "__main__":
    main(*sys.argv[1:])
