#!/usr/bin/env python3
"""The PyTorch reference of `mlp`: the same network, initial weights, batch order, input
normalisation, loss and SGD (momentum), trained on the GPU; time per epoch and accuracy.

The weights, the order of every epoch and the normalisation come from `mlp --dump-init`,
so both start from the same point and see the same batches. TF32 is off. Two ways of
feeding: `host` (each batch gathered on the host into pinned memory and copied in, as `mlp`
does) and `resident` (the whole training set on the GPU, batches indexed there).

    python3 scripts/mlp_torch.py --mlp build/mlp --precision float --epochs 10 --out plots/mlp_torch.csv
"""
import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from common import write_csv


def idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(folder, prefix):
    def pick(stem):
        p = os.path.join(folder, stem)
        return p if os.path.exists(p) else p + ".gz"
    return idx(pick(f"{prefix}-images-idx3-ubyte")), idx(pick(f"{prefix}-labels-idx1-ubyte"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mlp", default="build/mlp")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--precision", default="float", help="float, double or float,double")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--hidden", default="512,256")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--feed", default="host,resident")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = []
    for precision in a.precision.split(","):
        rows += train(a, precision)
    if a.out:
        write_csv(a.out, rows)


def train(a, precision):
    dtype = torch.float32 if precision == "float" else torch.float64
    dev = torch.device("cuda")
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([a.mlp, "--quiet", f"--data={a.data}", f"--hidden={a.hidden}", f"--batch={a.batch}",
                        f"--epochs={a.epochs}", f"--seed={a.seed}", f"--dump-init={d}"], check=True)
        sizes = [784] + [int(h) for h in a.hidden.split(",")] + [10]
        weights = [np.load(os.path.join(d, f"w{l}.npy")) for l in range(len(sizes) - 1)]
        order = np.load(os.path.join(d, "order.npy"))
        mean, std = np.load(os.path.join(d, "norm.npy"))

    xi, yi = load(a.data, "train")
    ti, ty = load(a.data, "t10k")
    np_dtype = np.float32 if precision == "float" else np.float64
    x = ((xi.reshape(len(xi), -1) / 255.0 - mean) / std).astype(np_dtype)
    xt = ((ti.reshape(len(ti), -1) / 255.0 - mean) / std).astype(np_dtype)
    rows = []
    for feed in a.feed.split(","):
        layers = []
        for l, w in enumerate(weights):
            lin = torch.nn.Linear(sizes[l], sizes[l + 1], dtype=dtype, device=dev)
            with torch.no_grad():
                lin.weight.copy_(torch.from_numpy(w.T.copy()).to(dtype))
                lin.bias.zero_()
            layers += [lin] + ([torch.nn.ReLU()] if l + 2 < len(sizes) else [])
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
        loss_fn = torch.nn.CrossEntropyLoss()
        x_host = torch.from_numpy(x).pin_memory()
        y_host = torch.from_numpy(yi.astype(np.int64)).pin_memory()
        x_dev, y_dev = (x_host.to(dev), y_host.to(dev)) if feed == "resident" else (None, None)
        stage_x = [torch.empty((a.batch, 784), dtype=dtype).pin_memory() for _ in range(2)]
        stage_y = [torch.empty(a.batch, dtype=torch.int64).pin_memory() for _ in range(2)]
        copied = [None, None]
        xt_dev, yt_dev = torch.from_numpy(xt).to(dev), torch.from_numpy(ty.astype(np.int64)).to(dev)
        for e in range(a.epochs):
            perm = torch.from_numpy(order[e].astype(np.int64))
            perm_dev = perm.to(dev)
            loss_sum = torch.zeros((), dtype=torch.float64, device=dev)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for step, start in enumerate(range(0, len(x), a.batch)):
                idx_rows = perm[start:start + a.batch]
                n = len(idx_rows)
                if feed == "resident":
                    sel = perm_dev[start:start + a.batch]
                    xb, yb = x_dev.index_select(0, sel), y_dev.index_select(0, sel)
                else:
                    s = step % 2
                    if copied[s] is not None:
                        copied[s].synchronize()
                    torch.index_select(x_host, 0, idx_rows, out=stage_x[s][:n])
                    torch.index_select(y_host, 0, idx_rows, out=stage_y[s][:n])
                    xb = stage_x[s][:n].to(dev, non_blocking=True)
                    yb = stage_y[s][:n].to(dev, non_blocking=True)
                    copied[s] = torch.cuda.Event()
                    copied[s].record()
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(model(xb), yb)
                loss.backward()
                opt.step()
                loss_sum += loss.detach().double() * n
            train_loss = loss_sum.item() / len(x)
            seconds = time.perf_counter() - t
            with torch.no_grad():
                acc = (model(xt_dev).argmax(1) == yt_dev).double().mean().item()
            row = dict(impl="pytorch", feed=feed, precision=precision, batch=a.batch, epoch=e + 1, seconds=seconds,
                       train_loss=train_loss, test_accuracy=acc, device=torch.cuda.get_device_name())
            rows.append(row)
            print(row, flush=True)
    return rows


if __name__ == "__main__":
    sys.exit(main())
