"""The model, built from a YAML config by name (`eval` over the star-imported blocks); `nn` comes
through the star import, as in YOLO."""

from copy import deepcopy

from models.common import *


class Detect(nn.Module):
    def __init__(self, nc, ch):
        super().__init__()
        self.m = nn.ModuleList(nn.Conv2d(c, nc + 4, 1) for c in ch)

    def forward(self, x):
        return [m(xi) for m, xi in zip(self.m, x)]


class BaseModel(nn.Module):
    def forward(self, x):
        return self._forward_once(x)

    def _forward_once(self, x):
        y = []
        for m in self.model:
            if m.f != -1:
                x = y[m.f] if isinstance(m.f, int) else [x if j == -1 else y[j] for j in m.f]
            x = m(x)
            y.append(x if m.i in self.save else None)
        return x


class DetectionModel(BaseModel):
    def __init__(self, cfg, ch=3, nc=None):
        super().__init__()
        self.yaml = cfg if isinstance(cfg, dict) else load_yaml(cfg)
        if nc:
            self.yaml["nc"] = nc
        self.model, self.save = parse_model(deepcopy(self.yaml), ch=[ch])


Model = DetectionModel


def load_yaml(path):
    import yaml

    with open(path) as f:
        return yaml.safe_load(f)


def parse_model(d, ch):
    layers, save, c2 = [], [], ch[-1]
    for i, (f, n, m, args) in enumerate(d["backbone"] + d["head"]):
        m = eval(m) if isinstance(m, str) else m
        if m is Concat:
            c2 = sum(ch[x] for x in f)
        elif m is Detect:
            args.append([ch[x] for x in f])
        else:
            c1, c2 = ch[f], args[0]
            args = [c1, c2, *args[1:]]
        m_ = nn.Sequential(*(m(*args) for _ in range(n))) if n > 1 else m(*args)
        m_.i, m_.f = i, f
        save.extend(x % i for x in ([f] if isinstance(f, int) else f) if x != -1)
        layers.append(m_)
        ch = ch + [c2] if i else [c2]
    return nn.Sequential(*layers), sorted(save)
