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

DEFAULT_JOB = "DeepSpeedJobName"


def events(record, samples):
    """(tag, value, x) for one --metrics record."""
    out = []
    for key, tag in (("loss", "train_loss"), ("lr", "lr"), ("loss_scale", "loss_scale"),
                     ("grad_norm", "grad_norm"), ("tokens_per_s", "tokens_per_s"),
                     ("val_loss", "val_loss")):
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


class Monitors:
    """Every monitor the config enables; write(record) after each step."""

    def __init__(self, config, seq_len=None):
        self.config = config
        self.monitors = []
        if config.get("tensorboard", {}).get("enabled"):
            self.monitors.append(TensorBoard(config["tensorboard"]))
        if config.get("csv_monitor", {}).get("enabled"):
            self.monitors.append(Csv(config["csv_monitor"]))
        if config.get("wandb", {}).get("enabled"):
            self.monitors.append(Wandb(config["wandb"], config))
        self.seq_len = seq_len

    def write(self, record):
        if not self.monitors:
            return
        # Samples seen: tokens over the sequence length when known, else
        # the step (DeepSpeed's x axis is samples).
        samples = record["tokens"] // self.seq_len if self.seq_len else record["step"]
        evs = events(record, samples)
        for m in self.monitors:
            m.write(evs)

    def close(self):
        for m in self.monitors:
            m.close()
        self.monitors = []
