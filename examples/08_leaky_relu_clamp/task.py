"""LeakyReLU followed by a clamp on a 4-D activation tensor:
out = clamp(leaky_relu(x, negative_slope), clamp_min, clamp_max)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, negative_slope, clamp_min, clamp_max):
        super().__init__()
        self.negative_slope = negative_slope
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def forward(self, x):
        y = F.leaky_relu(x, negative_slope=self.negative_slope)
        return torch.clamp(y, min=self.clamp_min, max=self.clamp_max)


batch_size = 128
channels = 64
height = 64
width = 64
negative_slope = 0.2
clamp_min = -0.25
clamp_max = 0.75


def get_inputs():
    return [torch.rand(batch_size, channels, height, width)]


def get_init_inputs():
    return [negative_slope, clamp_min, clamp_max]
