"""nan_watch inside training frameworks, as their own callbacks.

- `torchnumlint.runtime_check.integrations.lightning.NanWatchCallback`: a PyTorch Lightning
  `Callback` (extra `torchnumlint[lightning]`).
- `torchnumlint.runtime_check.integrations.hf.NanWatchCallback`: a Hugging Face
  `transformers.TrainerCallback` (extra `torchnumlint[hf]`).

Each module imports its framework at module level; nothing else in torchnumlint imports them, so
the runtime side keeps needing torch only. This package's `__init__` imports neither.
"""
