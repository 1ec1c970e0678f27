"""Example models and scripts for the oneDNN ExecuTorch delegate."""
