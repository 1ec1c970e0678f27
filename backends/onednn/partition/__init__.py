from .onednn_partitioner import OneDnnPartitioner

__all__ = ["OneDnnPartitioner"]
