"""The launcher (flambeau/distributed/run.py) and failure handling (_runtime.py) on 2 ranks.

A rank that dies, raises, hangs or stops makes every other rank exit with an error naming it,
well within the group's timeout; SIGINT reaches every rank; after every run no process of it is
alive and no shared-memory segment is left (checked by conftest.launch).
"""

from __future__ import annotations

import re
import signal

import pytest
from conftest import _assert_clean, launch, mpich_segments, python, start, wait_for_output

pytestmark = pytest.mark.usefixtures("mpi_available")


def test_a_normal_run_sets_torchrun_variables_and_exits_0():
    run = launch("rank_fail.py", "ok", "--extra")
    assert run.returncode == 0, run
    assert "'RANK': '0'" in run.stdout and "'WORLD_SIZE': '2'" in run.stdout and "'LOCAL_WORLD_SIZE': '2'" in run.stdout
    assert "'OMP_NUM_THREADS': '1'" in run.stdout and "argv ['ok', '--extra']" in run.stdout
    assert "rank 0 done" in run.stdout and "rank 1 done" in run.stdout


def test_a_rank_killed_mid_step_stops_the_others_naming_it():
    run = launch("rank_fail.py", "kill")
    assert run.returncode == 128 + signal.SIGKILL, run
    assert "rank 1 (pid" in run.stderr and "killed by SIGKILL" in run.stderr, run
    assert "stopped the other ranks [0]" in run.stderr, run
    assert run.seconds < 30, run  # the group's timeout is 60 s: the launcher does not wait for it


def test_an_exception_in_a_rank_is_reported_with_its_traceback():
    run = launch("rank_fail.py", "raise")
    assert run.returncode == 1, run
    assert "RuntimeError: boom from rank 1" in run.stderr and "rank 1 (pid" in run.stderr, run
    assert "exited with code 1" in run.stderr, run


def test_a_collective_a_rank_never_joins_times_out_naming_that_rank():
    run = launch("rank_fail.py", "hang")
    assert run.returncode == 1, run
    assert "timed out after 3." in run.stderr and "on rank 0: rank 1 has not called it" in run.stderr, run
    assert "rank 0 (pid" in run.stderr, run  # rank 0 failed; the launcher stopped rank 1
    assert run.seconds < 40, run


def test_a_stopped_rank_is_named_as_not_answering():
    run = launch("rank_fail.py", "stop")
    assert run.returncode == 1, run
    assert "rank 1 did not answer" in run.stderr, run


def test_a_rank_that_ends_its_program_early_fails_the_others_quickly():
    run = launch("rank_fail.py", "exit")
    assert run.returncode == 1, run
    # rank 1 learns it from rank 0's goodbye, or (when its collective started first) from the
    # timeout's inquiry: either way the error names rank 0 and what happened to it
    assert re.search(r"rank 0 (has already ended|has ended) its program", run.stderr), run
    assert run.seconds < 40, run


def test_sigint_reaches_every_rank():
    before = mpich_segments()
    proc, marker = start("rank_fail.py", "loop")
    try:
        ready = wait_for_output(proc, "ready 0", "ready 1")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a failed wait or communicate: leave nothing running
            proc.kill()
            proc.communicate()
    _assert_clean(marker, before)
    err = err.decode(errors="replace")
    assert "ready 0" in ready and "ready 1" in ready, (ready, out, err)
    assert proc.returncode == 128 + signal.SIGINT, (ready, out, err)
    assert "got SIGINT; forwarding it to the ranks" in err and "KeyboardInterrupt" in err, err


def test_launcher_options_are_checked():
    run = launch("rank_fail.py", "ok", launcher_args=("--nnodes", "2"))
    assert run.returncode == 2 and "start multi-node jobs with the cluster's mpiexec or srun" in run.stderr, run


def test_init_errors_in_a_world_of_one():
    run = python("rank_single.py")
    assert run.returncode == 0, run
    assert "all checks passed" in run.stdout, run
