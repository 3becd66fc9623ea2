"""dsc.initialize: DeepSpeed's deepspeed.initialize over a compiled step.

    engine, optimizer, loader, scheduler = dsc.initialize(
        model=model, model_parameters=model.parameters(),
        config="ds_config.json", training_data=dataset)
    for tokens, targets in loader:
        loss = engine(tokens, targets)
        engine.backward(loss)
        engine.step()

The module is exported and compiled once (its shapes from the config's
micro-batch and the module's block size), and the plan runs in this
process (_dsc_native.Engine over runtime/tooling/StepEngine.h). A call of
the engine is the compiled micro-step: forward and backward together, so
backward(loss) only records that the loss was used and step() applies the
optimizer at the gradient-accumulation boundary, as DeepSpeed's engine
does. The weights live in the plan; `engine.module` brings the module up
to date when it is read.
"""
import json
import os
import sys

from .api import _block_size, _init_args, _plan_args, compile
from .export import _takes_labels
from .files import work_folder
from .native import InputError, TrainingError, native
from .training_data import as_dataset


def _config_of(args, config, config_params):
    """The config as DeepSpeed takes it: config=, config_params= (its old
    name) or args.deepspeed_config."""
    given = [c for c in (config, config_params) if c is not None]
    if len(given) > 1:
        raise InputError("give config= or config_params=, not both (DeepSpeed's rule)")
    if given:
        return given[0]
    path = getattr(args, "deepspeed_config", None)
    if path is None:
        raise InputError("no config: pass config= (a ds_config.json path or dict), "
                         "or args with a deepspeed_config")
    return path


def _weight_decay_of(cfg):
    """The config's weight decay, with dsc's defaults (AdamW 0.01, the
    others 0: docs/optimizers.md)."""
    from .api import _read_config
    section = _read_config(cfg)[0].get("optimizer") or {}
    decay = (section.get("params") or {}).get("weight_decay")
    if isinstance(decay, (int, float)):
        return decay
    return 0.01 if str(section.get("type", "AdamW")).lower() == "adamw" else 0.0


def _no_decay(model, model_parameters, config_decay):
    """The names of the parameters that take no weight decay, as DeepSpeed
    reads model_parameters: plain parameters all decay with the config's
    weight_decay; in groups (dicts), a group's "weight_decay" (default the
    config's) applies to its parameters. Each group's must be 0 or the
    config's, and every parameter of the module in a group (dsc trains them
    all); None when model_parameters is None (dsc's rule: rank >= 2)."""
    if model_parameters is None:
        return None
    names = {id(p): n for n, p in model.named_parameters()}
    seen, no_decay = set(), []
    for group in list(model_parameters):
        if not isinstance(group, dict):
            group = {"params": [group]}
        other = set(group) - {"params", "weight_decay"}
        if other:
            raise InputError("model_parameters: a group's " + ", ".join(sorted(other)) +
                             " is not supported yet (the config's optimizer section sets "
                             "it for every parameter)")
        decay = group.get("weight_decay", config_decay)
        if decay not in (0, 0.0, config_decay):
            raise InputError(f"model_parameters: a group's weight_decay {decay}: dsc takes 0 "
                             f"or the config's ({config_decay}) per parameter")
        params = group["params"]
        params = [params] if hasattr(params, "shape") else list(params)
        for p in params:
            if id(p) not in names:
                raise InputError("model_parameters: a parameter that is not the model's")
            seen.add(id(p))
            if decay == 0 and config_decay != 0:
                no_decay.append(names[id(p)])
    missing = [n for i, n in names.items() if i not in seen]
    if missing:
        raise InputError(f"model_parameters: {len(missing)} of the model's parameters are in "
                         f"no group ({missing[0]}, ...); dsc trains every parameter")
    return no_decay


def _as_batch(value, name):
    """A torch tensor or numpy array of token ids, as int32 for the plan."""
    import numpy as np
    try:
        import torch
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() or value.is_complex():
                raise InputError(f"{name}: a tensor of {value.dtype}; token ids are integers")
            return value.detach().to("cpu", torch.int32).contiguous().numpy()
    except ImportError:
        pass
    array = np.asarray(value)
    if array.dtype.kind not in "iu":
        raise InputError(f"{name}: an array of {array.dtype}; token ids are integers")
    return np.ascontiguousarray(array, dtype=np.int32)


def _native_call(fn, *args):
    """fn(*args), the native module's errors raised as dsc's."""
    try:
        return fn(*args)
    except native().InputError as e:
        raise InputError(str(e)) from None
    except native().TrainingError as e:
        raise TrainingError(str(e)) from None


def _shifted(labels):
    """Hugging Face's causal-LM labels as dsc's targets: position t is
    labels[t + 1], the last -100 (ignored), as the model's own loss shifts
    them."""
    import torch
    labels = labels if isinstance(labels, torch.Tensor) else torch.as_tensor(labels)
    targets = torch.full_like(labels, -100)
    targets[..., :-1] = labels[..., 1:]
    return targets


def _all_ones(mask):
    """An attention_mask that masks nothing: the compiled step has none."""
    import torch
    return mask is None or bool((torch.as_tensor(mask) == 1).all())


def _step_arguments(kwargs, tokens=None, targets=None):
    """(tokens, targets, whether Hugging Face's convention) from the
    engine's arguments: (tokens, targets) or input_ids=, labels= (shifted
    into targets), an all-ones attention_mask allowed."""
    hf = "labels" in kwargs
    if tokens is None:
        tokens = kwargs.pop("input_ids", None)
    if hf:
        if targets is not None:
            raise InputError("engine(): give targets or labels=, not both")
        targets = _shifted(kwargs.pop("labels"))
    elif targets is None:
        targets = kwargs.pop("targets", None)
    if "attention_mask" in kwargs:
        if not _all_ones(kwargs.pop("attention_mask")):
            raise InputError("attention_mask: the compiled step attends causally to every "
                             "position; mark padding with labels=-100 instead")
    if kwargs:
        raise InputError("engine(): the compiled step takes (tokens, targets) or "
                         "(input_ids=, labels=); got " + ", ".join(sorted(kwargs)))
    if tokens is None or targets is None:
        raise InputError("engine(): the compiled step computes the loss of (tokens, "
                         "targets) or (input_ids=, labels=); one is missing")
    return tokens, targets, hf


def _batch_arguments(batch):
    """A DataLoader's batch as the engine's (args, kwargs): a dict (a
    Hugging Face dataset's rows) by name, a pair by position."""
    if isinstance(batch, dict):
        return (), dict(batch)
    batch = tuple(batch)
    if len(batch) != 2:
        raise InputError(f"data_iter: a batch of {len(batch)} items; the engine takes "
                         "(tokens, targets) pairs or dicts of input_ids and labels")
    return batch, {}


class _Output:
    """What a Hugging Face model returns, as far as training reads it."""

    def __init__(self, loss):
        self.loss = loss
        self.logits = None

    def __getitem__(self, i):
        return (self.loss,)[i]


class _Optimizer:
    """What initialize returns as the optimizer: the compiled update, seen
    through DeepSpeed's attributes (param_groups' lr); step() and
    zero_grad() are the engine's."""

    def __init__(self, engine):
        self._engine = engine

    @property
    def param_groups(self):
        return [{"lr": self._engine.get_lr()[0]}]

    def zero_grad(self, set_to_none=True):
        """The plan zeroes its accumulators after each optimizer step."""


class _Scheduler:
    """What initialize returns as the lr scheduler: the config's schedule,
    which the engine steps with each applied optimizer step (DeepSpeed's
    engine does too)."""

    def __init__(self, engine):
        self._engine = engine

    def get_last_lr(self):
        return self._engine.get_lr()

    def get_lr(self):
        return self._engine.get_lr()

    def step(self, *args, **kwargs):
        """The engine steps the schedule; a second step here would skip one."""


class Engine:
    """DeepSpeed's engine over a compiled training step (module docstring)."""

    def __init__(self, native_engine, plan, module):
        self._native = native_engine
        self._plan = plan
        self._module = module
        self._micro_steps = 0       # micro-batches stepped, DeepSpeed's count
        self._phase = "forward"     # what the next call must be
        self._losses = []           # this step's micro-batch losses
        self._last = None           # the last optimizer step's outcome
        self._stale = False         # the module lags the plan's weights
        self.global_samples = 0
        self.training = True

    # DeepSpeed's counters and queries.
    @property
    def global_steps(self):
        return self._native.steps

    @property
    def micro_steps(self):
        return self._micro_steps

    def gradient_accumulation_steps(self):
        return self._native.accumulation_steps

    def train_micro_batch_size_per_gpu(self):
        return self._native.micro_batch

    def train_batch_size(self):
        n = self._native
        return n.micro_batch * n.accumulation_steps * n.data_world_size

    @property
    def dp_world_size(self):
        """DeepSpeed's data-parallel degree: the world over the ranks of a
        tensor-parallel or Ulysses group, which share one batch."""
        return self._native.data_world_size

    def is_gradient_accumulation_boundary(self):
        return (self._micro_steps + 1) % self._native.accumulation_steps == 0

    def get_lr(self):
        """The learning rate of the next optimizer step."""
        return [self._native.next_lr]

    def get_global_grad_norm(self):
        """The last optimizer step's global gradient norm (before clipping)."""
        return None if self._last is None else self._last["grad_norm"]

    def was_step_applied(self):
        """False when the last optimizer step overflowed (fp16) and changed
        nothing."""
        return self._last is not None and not self._last["skipped"]

    @property
    def plan(self):
        return self._plan

    # The training step.
    def __call__(self, tokens=None, targets=None, **kwargs):
        """The compiled micro-step on one micro-batch: forward and backward.
        engine(tokens, targets) (nanoGPT's convention: targets are the next
        tokens) returns the loss, a 0-d float32 tensor; engine(input_ids=,
        labels=) (Hugging Face's: labels are the inputs, shifted inside the
        model, -100 ignored) returns an output whose .loss is that tensor."""
        import torch
        tokens, targets, hf = _step_arguments(kwargs, tokens, targets)
        if not self.training or not torch.is_grad_enabled():
            loss = self._evaluate(tokens, targets)
            return _Output(loss) if hf else loss
        self._refuse_in_pipeline("engine()")
        if self._phase != "forward":
            raise InputError(f"engine(): the previous micro-batch's {self._phase}() has "
                             "not run (the order is engine(batch), backward(loss), step())")
        tokens, targets = _as_batch(tokens, "tokens"), _as_batch(targets, "targets")
        loss = _native_call(self._native.micro_step, tokens, targets)
        self._losses.append(loss)
        self._phase = "backward"
        loss = torch.tensor(loss, dtype=torch.float32)
        return _Output(loss) if hf else loss

    forward = __call__

    def is_pipe_parallel(self):
        """Whether the plan is a pipeline's stage (the config's "pipeline"):
        it trains whole batches of micro-batches, through train_batch."""
        return self._native.pipeline_stages > 1

    def _refuse_in_pipeline(self, what):
        # DeepSpeed's PipelineEngine refuses forward/backward/step the same
        # way: a stage runs the step's micro-batches through its schedule.
        if self.is_pipe_parallel():
            raise InputError(f"{what}: a pipeline's stage trains each step's micro-batches "
                             f"(gradient_accumulation_steps = "
                             f"{self._native.accumulation_steps}) at once: call "
                             "train_batch(data_iter), as DeepSpeed's PipelineEngine")

    def backward(self, loss, **kwargs):
        """The micro-step's backward ran with its forward: this only keeps
        DeepSpeed's order."""
        self._refuse_in_pipeline("backward()")
        if self._phase != "backward":
            raise InputError(f"backward(): expected {self._phase}() next (the order is "
                             "engine(batch), backward(loss), step())")
        self._phase = "step"
        return loss

    def step(self, **kwargs):
        """At the gradient-accumulation boundary, the optimizer step (the
        plan's apply: clipping, the update, the schedule); else nothing."""
        self._refuse_in_pipeline("step()")
        if self._phase != "step":
            raise InputError(f"step(): expected {self._phase}() next (the order is "
                             "engine(batch), backward(loss), step())")
        boundary = self.is_gradient_accumulation_boundary()
        self._micro_steps += 1
        self._phase = "forward"
        if not boundary:
            return
        self._apply(sum(self._losses) / len(self._losses))
        self._losses = []

    def _apply(self, loss):
        self._last = _native_call(self._native.apply)
        self._last["loss"] = loss
        self._stale = True
        self.global_samples += self.train_batch_size()

    # Evaluation: the plan's eval program (dropout off, no gradients).
    def train(self, mode=True):
        self.training = bool(mode)
        return self

    def eval(self):
        """engine(...) then evaluates (as under torch.no_grad()): the plan's
        eval program, on batches of its own rows (plan.report()), leaving
        the gradients and the step alone."""
        return self.train(False)

    def _evaluate(self, tokens, targets):
        import torch
        tokens, targets = _as_batch(tokens, "tokens"), _as_batch(targets, "targets")
        loss = _native_call(self._native.eval_step, tokens, targets)
        return torch.tensor(loss, dtype=torch.float32)

    def eval_batch(self, data_iter):
        """The mean eval loss over the next gradient_accumulation_steps
        batches of `data_iter`: (tokens, targets) pairs, or dicts of
        input_ids and labels (a Hugging Face dataset's rows)."""
        import torch
        losses = []
        for _ in range(self._native.accumulation_steps):
            args, kwargs = _batch_arguments(next(data_iter))
            tokens, targets, _ = _step_arguments(kwargs, *args)
            losses.append(self._evaluate(tokens, targets))
        return torch.stack(losses).mean()

    def train_batch(self, data_iter):
        """One optimizer step over the next gradient_accumulation_steps
        batches of `data_iter` (as eval_batch takes them); returns the mean
        loss. A pipeline's stages (every rank calls it, each with its
        replica's batches) run them through the compiled schedule at once;
        the loss, computed by the last stage, is returned on every rank."""
        import torch
        if self.is_pipe_parallel():
            return self._train_pipeline_batch(data_iter)
        losses = []
        for _ in range(self._native.accumulation_steps):
            args, kwargs = _batch_arguments(next(data_iter))
            loss = self(*args, **kwargs)
            loss = getattr(loss, "loss", loss)
            self.backward(loss)
            self.step()
            losses.append(loss)
        return torch.stack(losses).mean()

    def _train_pipeline_batch(self, data_iter):
        import numpy as np
        import torch
        if self._phase != "forward":
            raise InputError(f"train_batch(): expected {self._phase}() next")
        tokens, targets = [], []
        for _ in range(self._native.accumulation_steps):
            args, kwargs = _batch_arguments(next(data_iter))
            t, y, _ = _step_arguments(kwargs, *args)
            tokens.append(_as_batch(t, "tokens"))
            targets.append(_as_batch(y, "targets"))
        try:
            tokens, targets = np.concatenate(tokens), np.concatenate(targets)
        except ValueError as e:
            raise InputError(f"train_batch(): the step's batches differ in shape ({e})") from None
        loss = _native_call(self._native.step_batch, tokens, targets)
        self._apply(loss)
        self._micro_steps += self._native.accumulation_steps
        return torch.tensor(loss, dtype=torch.float32)

    # The weights.
    def export_weights(self, path):
        """The model's weights as dsrun --export-weights writes them
        (safetensors under the plan's names, nanoGPT's layout)."""
        _native_call(self._native.export_weights, os.fspath(path))

    # Checkpoints: dsrun's (docs/checkpoints.md), one committed directory
    # per step under the save directory.
    def _between_steps(self, what):
        pending = self._native.pending_micro_steps
        if pending:
            raise InputError(f"{what} after {pending} micro-steps of a step: checkpoints "
                             "hold whole optimizer steps (call it after step())")

    def save_checkpoint(self, save_dir, tag=None, client_state=None, save_latest=True,
                        exclude_frozen_parameters=False):
        """The run (weights, optimizer state, counters, loss scale) into
        save_dir/step-NNNNNNNN, committed whole or not at all, with
        `client_state` (a JSON-serializable dict) beside it."""
        if tag is not None:
            raise InputError(f"tag {tag!r}: dsc names each checkpoint by its step "
                             "(save_dir/step-NNNNNNNN, as dsrun --save-dir); pass tag=None")
        self._between_steps("save_checkpoint")
        text = ""
        if client_state:
            try:
                text = json.dumps(client_state)
            except (TypeError, ValueError) as e:
                raise InputError(f"client_state: not JSON ({e})") from None
        _native_call(self._native.save_checkpoint, os.fspath(save_dir), text)
        return True

    def load_checkpoint(self, load_dir, tag=None, load_module_strict=True,
                        load_optimizer_states=True, load_lr_scheduler_states=True,
                        load_module_only=False):
        """Loads load_dir's newest checkpoint (or load_dir/`tag`, a
        step-NNNNNNNN name) into the run, which continues from its step.
        Returns (its path, its client_state), or (None, None) when
        load_dir has none, as DeepSpeed does."""
        if not (load_optimizer_states and load_lr_scheduler_states) or load_module_only:
            raise InputError("load_checkpoint: loading part of a checkpoint is not supported "
                             "yet; dsc loads the weights, the optimizer state and the step")
        self._between_steps("load_checkpoint")
        load_dir = os.fspath(load_dir)
        if tag is None:
            path, notes = _native_call(native().latest_checkpoint, load_dir)
            for note in notes:
                print(f"dsc: note: {note}", file=sys.stderr)
            if not path:
                print(f"dsc: warning: no checkpoint in {load_dir}; nothing loaded",
                      file=sys.stderr)
                return None, None
        else:
            path = os.path.join(load_dir, str(tag))
        notes = _native_call(self._native.load_checkpoint, path)
        for note in notes:
            print(f"dsc: note: {note}", file=sys.stderr)
        state = os.path.join(path, "client_state.json")
        client_state = {}
        if os.path.exists(state):
            with open(state) as f:
                client_state = json.load(f)
        self._stale = True
        self._micro_steps = self._native.steps * self._native.accumulation_steps
        self.global_samples = self._native.steps * self.train_batch_size()
        return path, client_state

    @property
    def module(self):
        """The user's module, its weights those of the last optimizer step.
        With several ranks reading it brings the weights to every rank: a
        collective, so every rank reads it at the same point."""
        if self._stale and self._module is not None and self._plan.exported is not None:
            from safetensors.torch import load_file
            with work_folder() as work:
                # Every rank its own file: a collective, each rank's folder.
                path = os.path.join(work.path, "weights.safetensors")
                _native_call(self._native.export_weights, path, True)
                state = self._plan.exported.state_dict_from(load_file(path))
            self._module.load_state_dict(state, strict=True)
            self._stale = False
        return self._module


def initialize(args=None, model=None, optimizer=None, model_parameters=None,
               training_data=None, lr_scheduler=None, mpu=None,
               dist_init_required=None, collate_fn=None, config=None,
               config_params=None, *, block_size=None, loss="module",
               backend=None, seed=None):
    """deepspeed.initialize for dsc: (engine, optimizer, dataloader,
    lr_scheduler). The optimizer and schedule are the config's, compiled
    into the step; a client optimizer or scheduler object is refused by
    name. `training_data` (a torch Dataset of (tokens, targets), a Hugging
    Face dataset of input_ids, a 1-D token array or a .bin/.npy/text file:
    training_data.py) gets a DataLoader of the config's micro-batch, each
    rank its shard (DistributedSampler, shuffled with `seed`), incomplete
    batches dropped: the step was compiled for one shape. `block_size` and `loss` are
    dsc.compile's (a Hugging Face model, whose forward takes labels=,
    defaults to loss="cross_entropy"); `backend` dsrun's --backend.
    Started by dsc-launch, each process is one rank of the job (the plan
    compiled for its world size)."""
    if model is None:
        raise InputError("initialize: model= is required")
    if optimizer is not None:
        raise InputError("optimizer: dsc compiles the update from the config's optimizer "
                         "section; pass optimizer=None and describe it there")
    if lr_scheduler is not None:
        raise InputError("lr_scheduler: dsc compiles the schedule from the config's "
                         "scheduler section; pass lr_scheduler=None and describe it there")
    if mpu is not None:
        raise InputError("mpu: model parallelism is not supported yet")
    if loss == "module" and _takes_labels(model):
        loss = "cross_entropy"  # a Hugging Face model: its logits' loss
    cfg = _config_of(args, config, config_params)
    no_decay = _no_decay(model, model_parameters, _weight_decay_of(cfg))
    block = block_size or _block_size(model)
    dataset = None  # checked before the compile, which takes a while
    if training_data is not None and block is not None:
        dataset = as_dataset(training_data, block)
    # Under dsc-launch (mpirun), every rank compiles the same plan for the
    # job's world size and joins the others when its engine opens.
    world_size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", "1"))
    plan = compile(model, cfg, block_size=block_size, loss=loss, world_size=world_size,
                   no_decay=no_decay)
    with work_folder() as work:
        flags = _plan_args(plan, work.path) + _init_args(None, plan.exported, work.path)
        # The steps are the caller's: dsrun's --steps bounds nothing here.
        flags += ["--steps", "1"]
        for flag, value in (("--seed", seed), ("--backend", backend)):
            if value is not None:
                flags += [flag, str(value)]
        handle = _native_call(native().Engine, flags)
    engine = Engine(handle, plan, model)
    loader = None
    if dataset is not None:
        loader = _dataloader(dataset, handle, collate_fn, seed)
    return engine, _Optimizer(engine), loader, _Scheduler(engine)


def _dataloader(dataset, handle, collate_fn, seed):
    from torch.utils.data import DataLoader, DistributedSampler
    # The ranks of a tensor-parallel or Ulysses group read the same samples.
    sampler = DistributedSampler(dataset, num_replicas=handle.data_world_size,
                                 rank=handle.data_rank, shuffle=True,
                                 seed=0 if seed is None else int(seed))
    return DataLoader(dataset, batch_size=handle.micro_batch, sampler=sampler,
                      collate_fn=collate_fn, drop_last=True)
