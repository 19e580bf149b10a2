"""The GPU path: FULL-graph capture runner (CUDA-only parts import torch.cuda lazily)."""
