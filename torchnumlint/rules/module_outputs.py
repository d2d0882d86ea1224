"""What calling a module gives: a tensor, and under CUDA's fp16 autocast, which dtype.

One vocabulary for both readers of module calls, importable without libcst: the `ast` project
index (TNL301 judges what `self.proj(x)` is in a recorded forward, `forward_hazards.py`) and the
LibCST rules (`rules/amp.py`, `submodule_output`). A call of a submodule (`self.conv(x)`), of a
project module instance or of a torch layer returns a tensor; its dtype under CUDA autocast
follows the op the layer runs (torch's "CUDA Ops that can autocast to float16 / float32" lists,
as `runtime_check/cuda_policy.py` applies them):

- "fp16": layers whose op CUDA runs in float16 (linear, the convolutions, the recurrent cells,
  `prelu`, multi-head attention's projections): their output is float16 whatever their input;
- "fp32": layers whose op CUDA runs in float32 (the layer/group/RMS norms, softmax, softplus, the
  losses) or that read float32 weights without a cast (`Embedding`);
- "keep": layers whose op autocast leaves alone (activations, dropout, pooling, batch norm,
  reshapes): their output has their input's dtype.

A qualified name the vocabulary does not hold gives None (unknown).
"""

from __future__ import annotations

from typing import Optional

_NN = "torch.nn."

FP16_LAYERS = frozenset(
    _NN + name
    for name in (
        "Linear",
        "LazyLinear",
        "Bilinear",
        "Conv1d",
        "Conv2d",
        "Conv3d",
        "ConvTranspose1d",
        "ConvTranspose2d",
        "ConvTranspose3d",
        "LazyConv1d",
        "LazyConv2d",
        "LazyConv3d",
        "RNN",
        "LSTM",
        "GRU",
        "RNNCell",
        "LSTMCell",
        "GRUCell",
        "PReLU",
        "MultiheadAttention",
        "TransformerEncoderLayer",
        "TransformerDecoderLayer",
        "TransformerEncoder",
        "TransformerDecoder",
        "Transformer",
    )
)
FP32_LAYERS = frozenset(
    _NN + name
    for name in (
        "LayerNorm",
        "GroupNorm",
        "RMSNorm",
        "Softmax",
        "LogSoftmax",
        "Softmin",
        "Softplus",
        "CosineSimilarity",
        "PairwiseDistance",
        "Embedding",
        "EmbeddingBag",
        "MSELoss",
        "L1Loss",
        "SmoothL1Loss",
        "HuberLoss",
        "CrossEntropyLoss",
        "NLLLoss",
        "KLDivLoss",
        "BCEWithLogitsLoss",
    )
)
KEEP_LAYERS = frozenset(
    _NN + name
    for name in (
        "ReLU",
        "ReLU6",
        "LeakyReLU",
        "SiLU",
        "GELU",
        "ELU",
        "SELU",
        "CELU",
        "Mish",
        "Hardswish",
        "Hardsigmoid",
        "Sigmoid",
        "Tanh",
        "Identity",
        "Dropout",
        "Dropout1d",
        "Dropout2d",
        "Dropout3d",
        "AlphaDropout",
        "BatchNorm1d",
        "BatchNorm2d",
        "BatchNorm3d",
        "SyncBatchNorm",
        "MaxPool1d",
        "MaxPool2d",
        "MaxPool3d",
        "AvgPool1d",
        "AvgPool2d",
        "AvgPool3d",
        "AdaptiveAvgPool1d",
        "AdaptiveAvgPool2d",
        "AdaptiveAvgPool3d",
        "AdaptiveMaxPool1d",
        "AdaptiveMaxPool2d",
        "AdaptiveMaxPool3d",
        "Upsample",
        "UpsamplingNearest2d",
        "UpsamplingBilinear2d",
        "Flatten",
        "Unflatten",
        "PixelShuffle",
        "PixelUnshuffle",
        "ZeroPad2d",
        "ConstantPad2d",
        "ReflectionPad2d",
        "ReplicationPad2d",
    )
)
# Containers: what they return is what their last layer returns.
CONTAINERS = frozenset({_NN + "Sequential", _NN + "ModuleList", _NN + "ModuleDict"})


def layer_output(qual: Optional[str]) -> Optional[str]:
    """ "fp16", "fp32" or "keep" for a torch layer's qualified name (`torch.nn.Linear`, also as
    `torch.nn.modules.linear.Linear`), None for anything else."""
    if qual is None or not qual.startswith(_NN):
        return None
    short = _NN + qual.rsplit(".", 1)[-1]
    for kind, layers in (("fp16", FP16_LAYERS), ("fp32", FP32_LAYERS), ("keep", KEEP_LAYERS)):
        if short in layers:
            return kind
    return None
