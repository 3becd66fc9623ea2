"""dsc from Python: PyTorch modules in, training steps compiled and run.

    import dsc
    plan = dsc.compile(model, "ds_config.json", block_size=256)
    print(plan)                                   # dsc --report
    result = dsc.train(plan, "input.txt", steps=200, callback=print)
    model.load_state_dict(result.state_dict())

dsc.export gives the ds MLIR and initial weights alone (`python -m dsc
export` from a shell); docs/python.md and docs/torch-frontend.md.
"""
from .api import Plan, TrainResult, compile, train
from .engine import Engine, initialize
from .export import ExportError, Exported, export
from .native import InputError, TrainingError
from .versions import warn_if_untested

warn_if_untested()

__all__ = ["compile", "train", "initialize", "export", "Plan", "TrainResult",
           "Engine", "Exported", "ExportError", "InputError", "TrainingError"]
