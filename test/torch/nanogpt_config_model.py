"""nanoGPT's own constructor, GPT(config) with its GPTConfig beside it: the
model of nanogpt_model.py behind a config-only __init__, as nanoGPT's
model.py has it (dsc-train --model-config builds it)."""
import nanogpt_model
from nanogpt_model import GPTConfig  # noqa: F401 (found beside GPT)


class GPT(nanogpt_model.GPT):
    def __init__(self, config):
        super().__init__(config)
