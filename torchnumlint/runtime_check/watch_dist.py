"""nan_watch under torch.distributed: module names as the user wrote them, the rank of every
report, and one decision for all ranks in raise mode.

A rank that raised alone would leave the others waiting in their next collective (DDP's gradient
all-reduce) until the timeout. So under torch.distributed an incident is held until the end of
the checked backward, where every rank all-reduces one incident flag (a collective every rank
reaches, after DDP's own); when any rank has one, the ranks gather the reports and each raises
NonFiniteError with the report of the lowest faulting rank.
"""

from __future__ import annotations

from typing import List, Optional

import torch
from torch import nn

# Wrappers whose child holds the user's model: DDP's `module`, FSDP's and activation
# checkpointing's wrapped modules, torch.compile's original module.
_WRAPPED = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod")


def initialised() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def rank() -> Optional[int]:
    return torch.distributed.get_rank() if initialised() else None


def user_name(name: str, root: nn.Module) -> str:
    """`name` (from `root.named_modules()`) without the wrappers' components: `module.` of a
    DistributedDataParallel root, FSDP's and checkpointing's wrapped modules, `_orig_mod`."""
    parts = name.split(".") if name else []
    if isinstance(root, nn.parallel.DistributedDataParallel) and parts[:1] == ["module"]:
        parts = parts[1:]
    return ".".join(p for p in parts if p not in _WRAPPED)


def agree(report_dict: Optional[dict]) -> Optional[dict]:
    """Collective: every rank passes its held incident (a report dict) or None; every rank gets
    the report of the lowest faulting rank, or None when no rank has one."""
    flag = torch.tensor([0 if report_dict is None else 1], dtype=torch.int32)
    if torch.distributed.get_backend() == "nccl":
        flag = flag.cuda()
    torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
    if not int(flag.item()):
        return None
    gathered: List[Optional[dict]] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, report_dict)
    return next(r for r in gathered if r is not None)
