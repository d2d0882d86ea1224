"""Reach through builders (issue 17 items 1 and 5): a module class that a project builder can name
is reached from the fp16 region whose model that builder builds, and the finding cites the region
and the builder. The YOLO-shaped project under `tests/projects/yolo_like` (a YAML config, a
`parse_model` that `eval`s class names over `from models.common import *`, `train.py` under
`torch.cuda.amp.autocast(amp)`) holds each fp16 hazard once in extra modules, and a safe twin of
each; registries and `getattr(module, name)` are small projects here."""

import textwrap
from pathlib import Path

from torchnumlint.config import Config
from torchnumlint.engine import lint_text
from torchnumlint.index import build_index
from torchnumlint.rules.registry import registry
from torchnumlint.runner import Options, run

YOLO = Path(__file__).resolve().parent / "projects" / "yolo_like"
FP16 = ("TNL301", "TNL308")


def lint_project(root, monkeypatch):
    """Lint `root` as a user does, from inside it (`torchnumlint .`)."""
    monkeypatch.chdir(root)
    rules = [registry()[code] for code in FP16]
    result = run(["."], Config(root=root), rules, Options(cache=False))
    assert not result.errors
    return result.findings


def test_yolo_like_project_every_hazard_on_its_line_no_twin(monkeypatch):
    found = lint_project(YOLO, monkeypatch)
    assert sorted((f.code, Path(f.path).as_posix(), f.line) for f in found) == [
        ("TNL301", "models/common.py", 88),  # EnergyGate: the square of a conv output
        ("TNL301", "models/common.py", 113),  # ChannelNorm: eps 1e-8 is 0 in float16
        ("TNL308", "models/common.py", 51),  # PixelAttention: scaled after the product
    ]
    for finding in found:
        assert "train.py:24" in finding.message
        assert "through the builder `parse_model` (models/yolo.py:51)" in finding.message


def files(**texts):
    return {path.replace("__", "/") + ".py": textwrap.dedent(text) for path, text in texts.items()}


def findings_in(project, path):
    index = build_index(list(project.items()))
    rules = [registry()[code] for code in FP16]
    return [(f.code, f.line, f.message) for f in lint_text(path, project[path], rules, index=index)]


SQUARE_BLOCK = """\
    import torch.nn as nn
    from registry import MODELS


    @MODELS.register_module()
    class SquareHead(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.fc(x)
            return h * h


    class Unregistered(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.fc(x)
            return h * h
    """


def test_registry_builder_reaches_registered_classes_only():
    project = files(
        registry="""\
            class Registry:
                def __init__(self, name):
                    self.name = name
                    self.classes = {}

                def register_module(self):
                    def add(cls):
                        self.classes[cls.__name__] = cls
                        return cls
                    return add

                def build(self, cfg):
                    return self.classes[cfg["type"]](**cfg["args"])


            MODELS = Registry("models")
            """,
        models__heads=SQUARE_BLOCK,
        train="""\
            import torch
            from registry import MODELS


            def build_model(cfg):
                return MODELS.build(cfg)


            def fit(cfg, batches):
                model = build_model(cfg)
                for x in batches:
                    with torch.autocast("cuda"):
                        loss = model(x).mean()
                    loss.backward()
            """,
    )
    found = findings_in(project, "models/heads.py")
    assert [(code, line) for code, line, _ in found] == [("TNL301", 13)]
    assert "train.py:12" in found[0][2] and "registry `MODELS` built in `build_model` (train.py:5)" in found[0][2]


def test_getattr_builder_reaches_the_module_it_reads():
    project = files(
        blocks="""\
            import torch.nn as nn


            class Energy(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.fc = nn.Linear(dim, dim)

                def forward(self, x):
                    h = self.fc(x)
                    return h * h
            """,
        others="""\
            import torch.nn as nn


            class Elsewhere(nn.Module):
                def __init__(self, dim):
                    super().__init__()
                    self.fc = nn.Linear(dim, dim)

                def forward(self, x):
                    h = self.fc(x)
                    return h * h
            """,
        train="""\
            import torch

            import blocks


            def make(name, dim):
                return getattr(blocks, name)(dim)


            def fit(name, dim, batches):
                model = make(name, dim)
                for x in batches:
                    with torch.autocast("cuda"):
                        model(x).mean().backward()
            """,
    )
    assert [(c, line) for c, line, _ in findings_in(project, "blocks.py")] == [("TNL301", 11)]
    assert findings_in(project, "others.py") == []


def test_a_literal_eval_names_nothing():
    """`eval("1 + 1")` and `getattr(obj, "weight")` name no class: nothing is reached through them."""
    project = files(
        blocks=SQUARE_BLOCK.replace("from registry import MODELS\n", "").replace("@MODELS.register_module()\n    ", ""),
        train="""\
            import torch

            from blocks import *


            def fit(model, batches):
                scale = eval("1 + 1")
                for x in batches:
                    with torch.autocast("cuda"):
                        (model(x) * scale).mean().backward()
            """,
    )
    assert findings_in(project, "blocks.py") == []


def test_star_import_gives_nn_its_usual_meaning():
    """A file that star-imports and never imports `torch.nn` itself (YOLO's models/yolo.py) still
    defines `nn.Module`s; a file that binds `nn` to something else does not."""
    conventional = "from models.common import *\n\n\nclass Head(nn.Module):\n    def forward(self, x):\n        return x\n"
    rebound = "from models.common import *\nnn = object\n\n\nclass Head(nn.Module):\n    def forward(self, x):\n        return x\n"
    for text, kind in ((conventional, "module"), (rebound, "")):
        index = build_index([("models/heads.py", text)])
        assert index.lookup("Head", None, "models/heads.py").kind == kind


TIMM_MODELS = """\
    import torch.nn as nn
    from timm.models import register_model


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.fc(x)
            return h * h


    class Net(nn.Module):
        def __init__(self, block=Block, dim=64):
            super().__init__()
            self.body = nn.Sequential(*[block(dim) for _ in range(2)])

        def forward(self, x):
            return self.body(x)


    class Tower(nn.Module):
        def __init__(self, dim=64):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.fc(x)
            return h * h


    def _create(variant, model_cls, **kwargs):
        return build_model_with_cfg(model_cls, variant, **kwargs)


    @register_model
    def net_small(pretrained=False, **kwargs):
        return _create("net_small", Net, block=Block, **kwargs)


    def tower(**kwargs):
        return Tower(**kwargs)
    """


def timm_project(name):
    return files(
        models__nets=TIMM_MODELS,
        train=f"""\
            import timm
            import torch


            def main(args, loader):
                model = timm.create_model({name}, pretrained=False)
                for x in loader:
                    with torch.autocast("cuda"):
                        loss = model(x).mean()
                    loss.backward()
            """,
    )


def test_timm_create_model_reaches_registered_model_functions_and_the_classes_they_hand_on():
    found = findings_in(timm_project("args.model"), "models/nets.py")
    # Block's square, reached through `net_small`, which hands `Net` and `block=Block` to its factory;
    # Tower is built only by an unregistered function no builder can name
    assert [(code, line) for code, line, _ in found] == [("TNL301", 12)]
    assert "train.py:8" in found[0][2]
    assert "through the model factory `create_model` (train.py:6), which can name every `@register_model` function" in found[0][2]


def test_timm_create_model_with_a_literal_names_that_function_only():
    assert [(c, l) for c, l, _ in findings_in(timm_project('"net_small"'), "models/nets.py")] == [("TNL301", 12)]
    assert findings_in(timm_project('"resnet50"'), "models/nets.py") == []


def test_detectron2_registry_get_reaches_registered_classes_only():
    project = files(
        models__heads=SQUARE_BLOCK.replace("MODELS", "META_ARCH_REGISTRY").replace("register_module()", "register()"),
        registry="""\
            from fvcore.common.registry import Registry

            META_ARCH_REGISTRY = Registry("META_ARCH")
            """,
        train="""\
            import torch
            from registry import META_ARCH_REGISTRY


            def build_model(cfg):
                return META_ARCH_REGISTRY.get(cfg.MODEL.META_ARCHITECTURE)(cfg)


            def fit(cfg, batches):
                model = build_model(cfg)
                for x in batches:
                    with torch.autocast("cuda"):
                        loss = model(x).mean()
                    loss.backward()
            """,
    )
    found = findings_in(project, "models/heads.py")
    assert [(code, line) for code, line, _ in found] == [("TNL301", 13)]
    assert "registry `META_ARCH_REGISTRY` built in `build_model` (train.py:5)" in found[0][2]


def test_a_class_only_checked_by_isinstance_is_not_reached():
    project = files(
        models__heads=SQUARE_BLOCK,
        train="""\
            import torch
            from models.heads import SquareHead, Unregistered


            def fit(model, batches):
                for x in batches:
                    with torch.autocast("cuda"):
                        if isinstance(model, (SquareHead, Unregistered)):
                            print(type(model))
                        loss = model(x).mean()
                    loss.backward()
            """,
    )
    assert findings_in(project, "models/heads.py") == []


HYDRA_HEADS = """\
    import torch.nn as nn


    class SquareHead(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.fc(x)
            return h * h


    class Unnamed(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.fc = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.fc(x)
            return h * h
    """

HYDRA_TRAIN = """\
    import hydra
    import torch
    from hydra.utils import instantiate


    @hydra.main(config_path="configs", config_name="train")
    def main(cfg):
        model = instantiate(cfg.model).cuda()
        for x in cfg.batches:
            with torch.autocast("cuda"):
                loss = model(x).mean()
            loss.backward()
    """


def hydra_project(config):
    project = files(models__heads=HYDRA_HEADS, train=HYDRA_TRAIN)
    project["configs/model/head.yaml"] = textwrap.dedent(config)
    return project


def test_hydra_instantiate_reaches_the_classes_its_configs_name_as_target():
    found = findings_in(hydra_project("_target_: models.heads.SquareHead\ndim: 64\n"), "models/heads.py")
    # SquareHead's square, named by the config; Unnamed is in no config
    assert [(code, line) for code, line, _ in found] == [("TNL301", 11)]
    assert "train.py:10" in found[0][2] and "through Hydra's `instantiate` (train.py:8)" in found[0][2]


def test_hydra_target_quoted_or_nested_and_a_name_no_class_has():
    nested = 'encoder:\n  _target_: "models.heads.SquareHead"  # the head\n  dim: 8\n'
    assert [(c, l) for c, l, _ in findings_in(hydra_project(nested), "models/heads.py")] == [("TNL301", 11)]
    # another module's class of the same name, an interpolation, a comment: nothing named here
    other = "_target_: other.heads.SquareHead\nnote: ${model}\n# _target_: models.heads.Unnamed\n"
    assert findings_in(hydra_project(other), "models/heads.py") == []


def test_a_run_reads_the_projects_yaml_configs_and_never_lints_them(tmp_path, monkeypatch):
    for path, text in hydra_project("_target_: models.heads.SquareHead\n").items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    (tmp_path / "pyproject.toml").write_text("")
    monkeypatch.chdir(tmp_path)
    rules = [registry()[code] for code in FP16]
    result = run(["."], Config(root=tmp_path), rules, Options(cache=False))
    assert not result.errors and result.files == 2
    assert [(Path(f.path).as_posix(), f.line) for f in result.findings] == [("models/heads.py", 11)]
