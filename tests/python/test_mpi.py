"""KMeans.fit(X_local, comm=MPI.COMM_WORLD) under mpirun -np 2 and 3 (mpi_ranks.py on every rank):
the single process's result bit for bit for every initialisation, omp and seq, both precisions,
rows split unevenly; and every error raised on every rank, none left waiting (each run has a
timeout, after which its processes are killed and the test fails). Skipped, with the reason,
without mpi4py or mpirun, or where mpirun cannot start two processes."""
import os
import shutil
import signal
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")


def mpirun(ranks, *args, timeout=120):
    """(exit status, output) of mpirun -np ranks python3 args...; None for the status on a timeout."""
    cmd = ["mpirun", "-np", str(ranks), "--oversubscribe", sys.executable, *args]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # mpirun and every rank it started
        out, _ = p.communicate()
        return None, out


@pytest.fixture(scope="module")
def mpi():
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (Debian: python3-mpi4py)")
    if shutil.which("mpirun") is None:
        pytest.skip("no mpirun (Debian: openmpi-bin)")
    status, out = mpirun(2, "-c", "from mpi4py import MPI; assert MPI.COMM_WORLD.Get_size() == 2", timeout=60)
    if status != 0:
        pytest.skip(f"mpirun cannot start two processes with mpi4py here: {out.strip()[-300:]}")


def check(ranks, mode, tmp_path, cases):
    """mpi_ranks.py `mode` on `ranks` ranks: each must get through every one of `cases` and end."""
    status, out = mpirun(ranks, os.path.join(HERE, "mpi_ranks.py"), mode, str(tmp_path))
    logs = {}
    for r in range(ranks):
        path = tmp_path / f"{r}.txt"
        logs[r] = path.read_text().splitlines() if path.exists() else []
    everything = "\n".join(f"rank {r}: {line}" for r, lines in logs.items() for line in lines) + "\n" + out
    assert status is not None, f"mpirun -np {ranks} {mode}: still running after the timeout (a hang?):\n{everything}"
    failed = [line for lines in logs.values() for line in lines if line.startswith("FAIL")]
    assert not failed, "\n".join(failed)
    assert status == 0, everything
    for r, lines in logs.items():
        assert lines[-1:] == ["DONE"], f"rank {r} did not finish:\n{everything}"
        assert sum(line.startswith("ok") for line in lines) == cases, f"rank {r}:\n{everything}"


@pytest.mark.parametrize("ranks", [2, 3])
def test_fit_over_ranks_is_the_single_process_fit(mpi, ranks, tmp_path):
    check(ranks, "fits", tmp_path, cases=26)


@pytest.mark.parametrize("ranks", [2, 3])
def test_errors_raise_on_every_rank(mpi, ranks, tmp_path):
    check(ranks, "errors", tmp_path, cases=14)
