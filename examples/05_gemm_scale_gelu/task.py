"""Fused linear layer + scale + tanh-approximate GELU:
out = gelu_tanh((x @ W.T + b) * scale), with W, b from nn.Linear."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = self.linear(x) * self.scale
        return F.gelu(y, approximate="tanh")


batch_size = 2048
in_features = 2048
out_features = 4096
scale = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]
