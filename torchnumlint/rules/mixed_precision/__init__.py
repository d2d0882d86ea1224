"""TNL3xx, mixed precision: what float16 autocast does to code written for float32.

- TNL301 fp16-autocast-custom-op (`fp16_autocast_custom_op.py`): a custom `autograd.Function`,
  or a project `nn.Module` an fp16 region reaches, whose forward overflows or underflows in the
  float16 that CUDA autocast leaves it.
- TNL302 fp16-without-grad-scaler (`fp16_without_grad_scaler.py`): a backward of fp16 values
  with no loss scaling anywhere in the project.
- TNL308 attention-scaled-after-matmul (`attention_scaled_after_matmul.py`, with `scores.py`):
  attention scores scaled after a float16 matmul, before their softmax.
- TNL307 clip-scaled-gradients (`clip_scaled_gradients.py`): a clip between a scaled backward
  and the scaler's step, with no `unscale_` first.
- TNL303 eps-below-fp16 (`eps_below_fp16.py`): an eps float16 cannot hold guarding a float16
  value (a division, a root, a log).
- TNL305 fp16-overflow-constant (`fp16_overflow_constant.py`): a fill constant beyond 65504 on a
  float16 tensor.
- TNL306 deprecated-cuda-amp (`deprecated_cuda_amp.py`): the `torch.cuda.amp` spellings.

TNL301 and TNL302 read the project index (`torchnumlint/index.py`, facts from every file); what an
autocast, a GradScaler or a custom_fwd is, both the index and these rules read from one vocabulary,
`rules/autocast.py`; the LibCST side of it (call shapes, fp16 regions, classes) is `rules/amp.py`.
The index records what each forward computes (`torchnumlint/forward_facts.py`); which of it
overflows in float16 under the CUDA autocast policy is decided here, in `forward_hazards.py`.
Where code runs in float16 for a LibCST rule is `rules/fp16_code.py`.
Importing this package registers the rules.
"""

from torchnumlint.rules.mixed_precision import deprecated_cuda_amp  # noqa: F401
from torchnumlint.rules.mixed_precision import fp16_autocast_custom_op  # noqa: F401
from torchnumlint.rules.mixed_precision import fp16_without_grad_scaler  # noqa: F401
from torchnumlint.rules.mixed_precision import attention_scaled_after_matmul  # noqa: F401
from torchnumlint.rules.mixed_precision import clip_scaled_gradients  # noqa: F401
from torchnumlint.rules.mixed_precision import fp16_overflow_constant  # noqa: F401
from torchnumlint.rules.mixed_precision import eps_below_fp16  # noqa: F401
