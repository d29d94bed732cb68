"""Row softmax: out = softmax(x, dim=1) for a 2-D input (each row normalised independently)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=1)


batch_size = 32768
dim = 2048


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
