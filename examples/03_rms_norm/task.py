"""RMS normalisation over the last dim with a learned per-feature weight:
out = x / sqrt(mean(x**2, dim=-1, keepdim=True) + eps) * weight."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x):
        ms = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * self.weight


batch_size = 16384
dim = 2048
eps = 1e-6


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return [dim, eps]
