"""engine_loop.py MODEL CONFIG.json DIR STEPS groups|plain: DeepSpeed's
tutorial loop, unchanged but for the import, over dsc.initialize's engine
and DataLoader; model_parameters are nanoGPT's two groups (decay for rank
>= 2) or the plain parameters (all decay, as DeepSpeed takes them).

The module is module_vs_torch.py's MODEL with its weights; the dataset is
the GPL's bytes in windows of the block size (tokens, next tokens). The
loop writes what dsrun would for module_vs_torch.py check: DIR/batches
(every micro-batch fed, tokens then targets, int32), DIR/metrics.jsonl (per
optimizer step: the mean micro-batch loss, the lr, the gradient norm) and
DIR/final.safetensors (engine.export_weights). It also checks the
engine's counters and that engine.module holds the final weights.
"""
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from module_vs_torch import block_size, build, exported  # noqa: E402

import dsc as deepspeed  # the only change a DeepSpeed script needs  # noqa: E402


class Windows(torch.utils.data.Dataset):
    def __init__(self, path, t):
        self.data = torch.tensor(list(open(path, "rb").read()), dtype=torch.long)
        self.t = t

    def __len__(self):
        return (len(self.data) - 1) // self.t

    def __getitem__(self, i):
        s = i * self.t
        return self.data[s:s + self.t], self.data[s + 1:s + self.t + 1]


def main(model_spec, config_path, out, steps, grouping):
    config = json.load(open(config_path))
    module, ex = exported(model_spec, config["train_micro_batch_size_per_gpu"])
    if grouping == "groups":  # nanoGPT's configure_optimizers
        decay = config["optimizer"]["params"]["weight_decay"]
        params = [{"params": [p for p in module.parameters() if p.dim() >= 2],
                   "weight_decay": decay},
                  {"params": [p for p in module.parameters() if p.dim() < 2],
                   "weight_decay": 0.0}]
    else:  # every parameter decays, as in DeepSpeed
        params = module.parameters()
    dataset = Windows("/usr/share/common-licenses/GPL-3", block_size(model_spec))
    _, loss_kind, _ = build(model_spec)  # Hugging Face models: cross_entropy
    model_engine, optimizer, trainloader, _ = deepspeed.initialize(
        model=module, model_parameters=params, config=config_path,
        training_data=dataset, loss=loss_kind)
    groups = model_engine.plan.report()["weight_decay"]
    print(f"weight decay on {len(groups['decay'])} parameters, none on "
          f"{len(groups['no_decay'])}")
    batches = open(os.path.join(out, "batches"), "wb")
    metrics = open(os.path.join(out, "metrics.jsonl"), "w")
    gas = model_engine.gradient_accumulation_steps()
    losses, lr = [], model_engine.get_lr()[0]
    data = iter(trainloader)
    for _ in range(steps * gas):
        inputs, labels = next(data)
        batches.write(inputs.int().numpy().tobytes() + labels.int().numpy().tobytes())
        loss = model_engine(inputs, labels)
        model_engine.backward(loss)
        boundary = model_engine.is_gradient_accumulation_boundary()
        model_engine.step()
        losses.append(loss.item())
        if boundary:
            metrics.write(json.dumps({"step": model_engine.global_steps,
                                      "loss": sum(losses) / len(losses), "lr": lr,
                                      "grad_norm": model_engine.get_global_grad_norm()}) + "\n")
            losses, lr = [], model_engine.get_lr()[0]
    batches.close()
    metrics.close()
    model_engine.export_weights(os.path.join(out, "final.safetensors"))
    # engine.module is the caller's module, brought up to date.
    from safetensors.torch import load_file
    want = ex.state_dict_from(load_file(os.path.join(out, "final.safetensors")))
    got = model_engine.module.state_dict()
    same = model_engine.module is module and all(torch.equal(got[k], want[k]) for k in want)
    print(f"global_steps {model_engine.global_steps}, global_samples "
          f"{model_engine.global_samples}, micro_steps {model_engine.micro_steps}; "
          f"engine.module is the module with the final weights: {same}; "
          f"optimizer lr {optimizer.param_groups[0]['lr']:g}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
