"""Scaled residual add: out = alpha * x + residual (elementwise, two inputs)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = alpha

    def forward(self, x, residual):
        return self.alpha * x + residual


batch_size = 4096
dim = 8192
alpha = 0.5


def get_inputs():
    return [torch.rand(batch_size, dim), torch.rand(batch_size, dim)]


def get_init_inputs():
    return [alpha]
