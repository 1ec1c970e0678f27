from .onednn_quantizer import OneDnnQuantizer

__all__ = ["OneDnnQuantizer"]
