"""nan_watch on a DistributedDataParallel model (item 15): two CPU processes on gloo, a NaN
planted on rank 1 only. Module names are the unwrapped model's, every report has its rank, and in
raise mode both ranks stop with NonFiniteError naming rank 1, instead of rank 0 hanging in the
next all-reduce (the process group's timeout bounds the test if it did)."""

import datetime
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel

from torchnumlint.runtime_check import NonFiniteError, nan_watch
from tests.runtime_check import watch_models as wm

WORLD = 2
STEPS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(rank, mode):
    """STEPS DDP training steps with the NaN planted at rank 1's step 1; what the watch saw."""
    torch.manual_seed(0)
    model = DistributedDataParallel(wm.Net(at=1 if rank == 1 else None))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = wm.batch(seed=rank)
    outcome = {"error": None, "steps": 0}
    with nan_watch(model, mode=mode, lint=False) as watch:
        try:
            for _ in range(STEPS):
                torch.nn.functional.mse_loss(model(x), y).backward()
                opt.step()
                opt.zero_grad()
                outcome["steps"] += 1
        except NonFiniteError as error:
            outcome["error"] = error.report.as_dict()
    outcome["reports"] = [r.as_dict() for r in watch.reports]
    return outcome


def _worker(rank, port, out_dir):
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD, timeout=datetime.timedelta(seconds=30)
    )
    try:
        result = {mode: _run(rank, mode) for mode in ("record", "raise")}
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    # leave without running C++ destructors: gloo's threads torn down at interpreter exit can
    # abort the process ("terminate called without an active exception", seen once in CI) after
    # its results are written; what the test checks is in the file
    os._exit(0)


def test_ddp_names_ranks_and_stops_every_rank(tmp_path):
    for attempt in range(3):  # the free port can be taken between probing it and gloo binding it
        try:
            mp.spawn(_worker, args=(_free_port(), str(tmp_path)), nprocs=WORLD, join=True)
            break
        except mp.ProcessRaisedException as error:
            if "address already in use" not in str(error).lower() or attempt == 2:
                raise
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(WORLD)]

    # record mode: rank 1 names the planted module, without DDP's `module.` prefix
    planted = results[1]["record"]["reports"][0]
    assert (planted["phase"], planted["kind"], planted["module"], planted["step"], planted["rank"]) == ("forward", "nan", "unstable", 1, 1)
    assert all(r["rank"] == rank for rank in range(WORLD) for r in results[rank]["record"]["reports"])
    assert all(not r["module"].startswith("module") for rank in range(WORLD) for r in results[rank]["record"]["reports"])
    assert results[0]["record"]["steps"] == results[1]["record"]["steps"] == STEPS

    # raise mode: both ranks raise at step 1 with rank 1's report, neither takes another step
    for rank in range(WORLD):
        error = results[rank]["raise"]["error"]
        assert error is not None, rank
        assert (error["rank"], error["module"], error["phase"], error["step"]) == (1, "unstable", "forward", 1)
        assert results[rank]["raise"]["steps"] == 1
        assert results[rank]["raise"]["reports"] == [error]
