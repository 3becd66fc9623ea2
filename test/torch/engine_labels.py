"""engine_labels.py: Hugging Face's conventions through dsc.initialize on
LlamaForCausalLM (its loss chosen by initialize: cross-entropy of the
logits): engine(input_ids=, labels=) (or engine.forward) returns an output
whose .loss (also its [0], as a tuple output) equals the model's own
model(input_ids=, labels=).loss, with labels padded by
-100 too; targets padded with -100 give F.cross_entropy(ignore_index=-100);
a micro-batch whose labels are all -100 has loss 0 and zero gradients
(PyTorch's mean is NaN there: 0 / 0). Each comparison is printed with its
relative difference."""
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import dsc

CONFIG = {"train_micro_batch_size_per_gpu": 4,
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


def rel(a, b):
    return abs(a - b) / abs(b)


def step(engine, out):
    engine.backward(out)
    engine.step()


def main():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
        attn_implementation="sdpa"))
    engine, _, _, _ = dsc.initialize(model=model, config=CONFIG)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 256, (4, 32), generator=g)
    padded = x.clone()
    padded[1, 20:] = -100
    targets = torch.randint(0, 256, (4, 32), generator=g)
    targets[0, 10:] = -100
    targets[3, :] = -100
    # Each reference is the module's loss at the engine's current weights
    # (engine.module, brought up to date after each step).
    with torch.no_grad():
        want = model(input_ids=x, labels=x).loss.item()
    out = engine(input_ids=x, labels=x, attention_mask=torch.ones_like(x))
    print(f"labels=: .loss {out.loss.item():.6f}, the model's {want:.6f}, "
          f"rel {rel(out.loss.item(), want):.1e}")
    step(engine, out.loss)
    with torch.no_grad():
        want_padded = engine.module(input_ids=x, labels=padded).loss.item()
    out = engine.forward(input_ids=x, labels=padded)  # forward is the call, as in DeepSpeed
    print(f"padded labels=: .loss {out.loss.item():.6f}, the model's {want_padded:.6f}, "
          f"rel {rel(out.loss.item(), want_padded):.1e}; out[0] is .loss: {out[0] is out.loss}")
    step(engine, out.loss)
    with torch.no_grad():
        logits = engine.module(x).logits
    want_ce = torch.nn.functional.cross_entropy(logits.reshape(-1, 256),
                                                targets.reshape(-1)).item()
    loss = engine(x, targets)
    print(f"targets with -100: loss {loss.item():.6f}, F.cross_entropy "
          f"{want_ce:.6f}, rel {rel(loss.item(), want_ce):.1e}")
    step(engine, loss)
    loss = engine(x, torch.full_like(x, -100))
    step(engine, loss)
    print(f"all -100: loss {loss.item()}, gradient norm {engine.get_global_grad_norm()}")
    try:
        engine(input_ids=x, labels=x, attention_mask=(x > 10).long())
    except dsc.InputError as e:
        print(f"attention_mask with zeros: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
