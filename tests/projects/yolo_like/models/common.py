"""Building blocks a YOLO-style config names, plus extra modules a user added: each fp16 hazard
once, and a safe twin of each."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def autopad(k, p=None):
    return k // 2 if p is None else p


class Conv(nn.Module):
    default_act = nn.SiLU()

    def __init__(self, c1, c2, k=1, s=1, p=None, act=True):
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), bias=False)
        self.bn = nn.BatchNorm2d(c2)
        self.act = self.default_act if act is True else act if isinstance(act, nn.Module) else nn.Identity()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Concat(nn.Module):
    def __init__(self, dimension=1):
        super().__init__()
        self.d = dimension

    def forward(self, x):
        return torch.cat(x, self.d)


class PixelAttention(nn.Module):
    """The user's extra module: self-attention over the pixels of a feature map, scores scaled
    after the product (hazard: TNL308)."""

    def __init__(self, c1, c2, heads=4):
        super().__init__()
        self.heads = heads
        self.scale = (c1 // heads) ** -0.5
        self.qkv = nn.Conv2d(c1, c1 * 3, 1)
        self.proj = Conv(c1, c2)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        attn = (q.transpose(-2, -1) @ k) * self.scale
        attn = attn.softmax(dim=-1)
        out = (v @ attn.transpose(-2, -1)).reshape(b, c, h, w)
        return self.proj(out)


class ScaledFirstAttention(PixelAttention):
    """Twin: q scaled before the product."""

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        q = q * self.scale
        attn = (q.transpose(-2, -1) @ k).softmax(dim=-1)
        return self.proj((v @ attn.transpose(-2, -1)).reshape(b, c, h, w))


class FusedAttention(PixelAttention):
    """Twin: scaled_dot_product_attention scales first."""

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).reshape(b, 3, self.heads, c // self.heads, h * w).transpose(-2, -1).unbind(1)
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(-2, -1).reshape(b, c, h, w))


class EnergyGate(nn.Module):
    """Extra module: gates features by their energy, the square of a conv output in float16
    (hazard: TNL301)."""

    def __init__(self, c1, c2):
        super().__init__()
        self.cv = Conv(c1, c2, 1)

    def forward(self, x):
        y = self.cv(x)
        energy = y * y
        return x * torch.sigmoid(energy.mean(1, keepdim=True))


class IslandGate(EnergyGate):
    """Twin: the square in a float32 island."""

    def forward(self, x):
        y = self.cv(x)
        with torch.autocast("cuda", enabled=False):
            energy = y.float() * y.float()
        return x * torch.sigmoid(energy.mean(1, keepdim=True)).to(x.dtype)


class ChannelNorm(nn.Module):
    """Extra module: normalises channels by their spread with an eps that is 0 in float16
    (hazard: TNL301)."""

    def __init__(self, c1, c2):
        super().__init__()
        self.cv = Conv(c1, c2, 1)

    def forward(self, x):
        y = self.cv(x)
        spread = (y - y.mean(1, keepdim=True)).abs().amax(1, keepdim=True)
        return y / (spread + 1e-8)


class WideEpsNorm(ChannelNorm):
    """Twin: an eps float16 can hold."""

    def forward(self, x):
        y = self.cv(x)
        spread = (y - y.mean(1, keepdim=True)).abs().amax(1, keepdim=True)
        return y / (spread + 1e-3)


class LayerScale(nn.Module):
    def __init__(self, c1, c2):
        super().__init__()
        self.gamma = nn.Parameter(torch.full((c2, 1, 1), 1e-2))
        self.cv = Conv(c1, c2, 3)

    def forward(self, x):
        return x + self.gamma * self.cv(x) / math.sqrt(2.0)
