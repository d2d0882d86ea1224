"""Training under the repository's default AMP (`--amp` defaults on)."""

import argparse

import torch

from models.yolo import Model


def train(opt, loader, device):
    amp = opt.amp
    if opt.weights:
        ckpt = torch.load(opt.weights, map_location="cpu")
        model = Model(ckpt["model"].yaml, ch=3, nc=opt.nc).to(device)
        model.load_state_dict(ckpt["model"].state_dict())
    else:
        model = Model(opt.cfg, ch=3, nc=opt.nc).to(device)
    if torch.cuda.device_count() > 1:
        model = torch.nn.DataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.937)
    scaler = torch.cuda.amp.GradScaler(enabled=amp)
    for imgs, targets in loader:
        imgs = imgs.to(device, non_blocking=True).float() / 255
        with torch.cuda.amp.autocast(amp):
            pred = model(imgs)
            loss = sum(p.float().pow(2).mean() for p in pred)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--cfg", default="models/extra.yaml")
    parser.add_argument("--weights", default="")
    parser.add_argument("--nc", type=int, default=4)
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction, default=True)
    train(parser.parse_args(), [], "cuda")
