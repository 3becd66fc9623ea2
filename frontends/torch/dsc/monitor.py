"""DeepSpeed's monitors (the tensorboard, csv_monitor and wandb sections of
ds_config.json) fed from dsrun's per-step records.

As DeepSpeed's engine does, each monitor writes to
`output_path/job_name` (job_name defaults to "DeepSpeedJobName"), tags
training scalars "Train/Samples/<name>" and puts the samples seen so far
on the x axis (steps x global batch). dsc adds what it measures:
grad_norm, tokens_per_s, val_loss when evaluated, and the bytes each
memory category and space holds ("Memory/<space>/<category>_bytes") and
the process's peak resident set."""
import csv
import os

from .files import check_distinct, check_output_folder
from .native import InputError, one_line

DEFAULT_JOB = "DeepSpeedJobName"


# A record's training scalars: (its key, the tag's last part).
# wall_clock_breakdown's times take DeepSpeed's tags (comm is dsc's own:
# its collectives overlap the backward rather than end it).
_SCALARS = (("loss", "train_loss"), ("lr", "lr"), ("loss_scale", "loss_scale"),
            ("grad_norm", "grad_norm"), ("tokens_per_s", "tokens_per_s"),
            ("val_loss", "val_loss"),
            ("forward_ms", "elapsed_time_ms_forward"),
            ("backward_ms", "elapsed_time_ms_backward"),
            ("optimizer_ms", "elapsed_time_ms_step"),
            ("comm_ms", "elapsed_time_ms_comm"))


def events(record, samples):
    """(tag, value, x) for one --metrics record."""
    out = []
    for key, tag in _SCALARS:
        if key in record and record[key] is not None:
            out.append((f"Train/Samples/{tag}", float(record[key]), samples))
    # Each space by category with offload; the device's alone otherwise.
    by_space = record.get("plan_written_bytes_by_space") or {
        "device": record.get("plan_written_bytes", {})}
    for space, categories in sorted(by_space.items()):
        for category, written in sorted(categories.items()):
            out.append((f"Memory/{space}/{category}_bytes", float(written), samples))
    if "rss_peak_bytes" in record:
        out.append(("Memory/process_peak_bytes", float(record["rss_peak_bytes"]), samples))
    return out


def _log_dir(section):
    return os.path.join(section.get("output_path", ""), section.get("job_name", DEFAULT_JOB))


class TensorBoard:
    def __init__(self, section):
        from torch.utils.tensorboard import SummaryWriter
        self.log_dir = _log_dir(section)
        os.makedirs(self.log_dir, exist_ok=True)
        self.writer = SummaryWriter(log_dir=self.log_dir)

    def write(self, evs):
        for tag, value, x in evs:
            self.writer.add_scalar(tag, value, x)
        self.writer.flush()

    def close(self):
        self.writer.close()


class Csv:
    """A file per tag (tag with '/' as '_'), rows "step,<last part of the
    tag>", appended as DeepSpeed's csv_monitor appends them (a header when
    the file is new)."""

    def __init__(self, section):
        self.log_dir = _log_dir(section)
        os.makedirs(self.log_dir, exist_ok=True)

    def write(self, evs):
        for tag, value, x in evs:
            name = tag.replace("/", "_").replace(" ", "_")
            path = os.path.join(self.log_dir, name + ".csv")
            new = not os.path.exists(path) or os.path.getsize(path) == 0
            with open(path, "a", newline="") as f:
                w = csv.writer(f)
                if new:
                    w.writerow(["step", tag.split("/")[-1]])
                w.writerow([x, value])

    def close(self):
        pass


class Wandb:
    def __init__(self, section, config):
        import wandb
        self.wandb = wandb
        self.run = wandb.init(project=section.get("project", "deepspeed"),
                              group=section.get("group"), entity=section.get("team"),
                              config=config, reinit=True)

    def write(self, evs):
        x = evs[0][2] if evs else None
        self.run.log({tag: value for tag, value, _ in evs}, step=x)

    def close(self):
        self.run.finish()


def _csv_files(log_dir):
    """The files the csv monitor may write in `log_dir` (Csv names them
    after the tags) that a check can name before training: every training
    scalar's, and the memory files already there (which ones are written
    depends on the compiled plan)."""
    files = [os.path.join(log_dir, f"Train_Samples_{tag}.csv") for _, tag in _SCALARS]
    try:
        names = sorted(os.listdir(log_dir))
    except OSError:
        names = []
    return files + [os.path.join(log_dir, n) for n in names
                    if n.startswith("Memory_") and n.endswith(".csv")]


def _earlier_run_file(key, log_dir):
    """A file an earlier run's monitor left in `log_dir`, or None: the csv
    monitor's (it appends) or tensorboard's event files (TensorBoard draws
    every events file of a folder as one run)."""
    if key == "csv_monitor":
        return next((p for p in _csv_files(log_dir) if os.path.exists(p)), None)
    try:
        names = sorted(os.listdir(log_dir))
    except OSError:
        return None
    return next((os.path.join(log_dir, n) for n in names
                 if n.startswith("events.out.tfevents")), None)


def _check_wandb(what):
    """Before anything is compiled or trained: W&B can log (an API key
    found, or offline), else one line saying how to make it."""
    try:
        import wandb
    except ImportError:
        raise InputError(f"{what}: enabled, but the wandb package is not installed "
                         "(pip install wandb)") from None
    if os.environ.get("WANDB_MODE", "").lower() in ("offline", "disabled", "dryrun"):
        return
    if os.environ.get("WANDB_API_KEY"):
        return
    try:
        settings = wandb.setup().settings
        if getattr(settings, "_offline", False) or getattr(settings, "_noop", False):
            return  # `wandb offline`, a settings file
        logged_in = wandb.login(prompt=False, verify=False)
    except TypeError:
        return  # an older wandb, without login(prompt=): its own init says
    except Exception as e:  # wandb's own failures (a malformed key, ...)
        raise InputError(f"{what}: {type(e).__name__}: {one_line(str(e))}") from None
    if not logged_in:
        raise InputError(f"{what}: enabled, but W&B has no API key here: run `wandb login` "
                         "(or set WANDB_API_KEY), or set WANDB_MODE=offline to log locally")


def check_monitors(config, inputs=(), config_name="ds_config.json", resume=False):
    """InputError, before anything is compiled or trained, if a monitor the
    config enables could not write: its folder cannot be made or take
    files, a CSV file it writes is one of `inputs` ([(what, path)]), its
    package is missing or W&B has no credentials; or, unless the run
    resumes an earlier one, if its folder holds an earlier run's files,
    which this run's values would be mixed into."""
    for key in ("tensorboard", "csv_monitor"):
        section = config.get(key) or {}
        if not section.get("enabled"):
            continue
        what = f"{config_name}: $.{key}"
        if key == "tensorboard":
            try:
                from torch.utils.tensorboard import SummaryWriter  # noqa: F401
            except ImportError:
                raise InputError(f"{what}: enabled, but torch.utils.tensorboard cannot be "
                                 "imported (pip install tensorboard)") from None
        log_dir = _log_dir(section)
        check_output_folder(log_dir, what + " output_path/job_name", parents=True)
        if key == "csv_monitor":
            check_distinct(inputs, [(what, p) for p in _csv_files(log_dir)])
        earlier = None if resume else _earlier_run_file(key, log_dir)
        if earlier:
            raise InputError(f"{what}: {earlier} holds an earlier run's values, which this "
                             "run's would be mixed into: set another job_name, or move that "
                             "run's files away")
    if (config.get("wandb") or {}).get("enabled"):
        _check_wandb(f"{config_name}: $.wandb")


class Monitors:
    """Every monitor the config enables; write(record) after each step.
    Checked when made (check_monitors), opened at the first record, so a
    run refused before its first step leaves nothing behind."""

    def __init__(self, config, seq_len=None, inputs=(), config_name="ds_config.json",
                 resume=False):
        check_monitors(config, inputs, config_name, resume)
        self.config = config
        self.monitors = None
        self.seq_len = seq_len

    def open(self):
        """Opens every monitor (at the first record otherwise)."""
        if self.monitors is not None:
            return
        config, self.monitors = self.config, []
        if config.get("tensorboard", {}).get("enabled"):
            self.monitors.append(TensorBoard(config["tensorboard"]))
        if config.get("csv_monitor", {}).get("enabled"):
            self.monitors.append(Csv(config["csv_monitor"]))
        if config.get("wandb", {}).get("enabled"):
            self.monitors.append(Wandb(config["wandb"], config))

    def write(self, record):
        self.open()
        if not self.monitors:
            return
        # Samples seen: tokens over the sequence length when known, else
        # the step (DeepSpeed's x axis is samples).
        samples = record["tokens"] // self.seq_len if self.seq_len else record["step"]
        evs = events(record, samples)
        for m in self.monitors:
            m.write(evs)

    def close(self):
        for m in self.monitors or []:
            m.close()
        self.monitors = []
