"""dsc's Python side: PyTorch modules in (`export`), ds MLIR + safetensors out.

    import dsc
    exported = dsc.export(model, batch_size=8, block_size=256)
    exported.save("model.mlir", "init.safetensors")

then `dsc model.mlir --config ds_config.json -o model.dsplan` and
`dsrun model.dsplan --init-from init.safetensors ...`; docs/torch-frontend.md.
"""
from .export import ExportError, Exported, export

__all__ = ["export", "Exported", "ExportError"]
