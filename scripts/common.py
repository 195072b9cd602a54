"""What the benchmark, analysis and plot scripts share: the run stamp, running a program for
its JSON report, the registries (from `kmeans --list` / `gemm --list`), medians over
iterations, the memory floor, the OpenBLAS core choice, and writing rows as CSV."""
import csv
import datetime
import json
import os
import statistics
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
PHASE_KEYS = ("total", "h2d", "kernel", "cpu", "d2h")


def stamp():
    """GPU, driver, date and commit of this run (KM_COMMIT overrides the commit)."""
    gpu, driver = "none", "none"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[0]
        gpu, driver = [s.strip() for s in out.split(",")]
    except (OSError, subprocess.CalledProcessError, IndexError):
        pass
    commit = os.environ.get("KM_COMMIT", "")
    if not commit:
        try:
            commit = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown"
    return dict(gpu=gpu, driver=driver, date=datetime.date.today().isoformat(), commit=commit)


def registry(binary):
    """The program's registry, in ladder order: [{name, description, where, order, ...}]."""
    p = subprocess.run([binary, "--list"], capture_output=True, text=True)
    if p.returncode == 0:
        return json.loads(p.stdout)
    # A binary from before --list existed: its --help lists "  name  description [GPU]".
    text = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    lines = text.split("Implementations (--impl):\n", 1)[-1].splitlines()
    names = [(l.split()[0], l.rstrip().endswith("[GPU]")) for l in lines if l.startswith("  ")]
    return [dict(name=n, where="gpu" if gpu else "cpu", order=i, description="") for i, (n, gpu) in enumerate(names)]


def run_json(cmd):
    """Runs cmd; (parsed JSON report, None) or (None, the error line)."""
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout), None


def medians(report, keys=PHASE_KEYS):
    """Median over the report's iterations of each phase."""
    its = report["per_iteration"]
    return {k: statistics.median(it[k] for it in its) for k in keys}


def memory_floor(objects, coords, elem_bytes, bandwidth):
    """Seconds to read the objects once and write the labels (int32) at `bandwidth` bytes/s."""
    return (objects * coords * elem_bytes + objects * 4) / bandwidth


def set_openblas_core():
    """OpenBLAS picks an old core in some VMs; name the right one unless the caller did."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return
    try:
        flags = open("/proc/cpuinfo").read()
    except OSError:
        return
    if " avx512f" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif " avx2" in flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


def order_of(rows, key):
    """The distinct values of rows[key] in the order they first appear (the scripts write rows
    in registry order, so this is the ladder order)."""
    return list(dict.fromkeys(r[key] for r in rows if r.get(key)))


def torch_lloyd(x, k, loops):
    """A plain PyTorch Lloyd on the GPU, the peer every benchmark times: distances by matrix
    product (TF32 off), argmin, index_add_, bincount; first-K init. x: a CUDA tensor [n][d].
    Returns (seconds of each iteration, final centroids)."""
    import time

    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    c = x[:k].clone()
    x2 = (x * x).sum(1, keepdim=True)
    times = []
    for _ in range(loops):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        d2 = x2 - 2.0 * (x @ c.T) + (c * c).sum(1)[None, :]
        labels = d2.argmin(1)
        sums = torch.zeros_like(c).index_add_(0, labels, x)
        counts = torch.bincount(labels, minlength=k).to(x.dtype)
        c = torch.where(counts[:, None] > 0, sums / counts.clamp(min=1)[:, None], c)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times, c


def write_csv(path, rows, fields=None):
    """Rows (dicts) as CSV; the columns are `fields`, or every key in the order first seen."""
    if fields is None:
        fields = []
        for r in rows:
            fields += [k for k in r if k not in fields]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)
