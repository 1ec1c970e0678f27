from .fp32_islands import ComputeBf16FallbacksInFp32
from .onednn_partitioner import OneDnnPartitioner

__all__ = ["ComputeBf16FallbacksInFp32", "OneDnnPartitioner"]
