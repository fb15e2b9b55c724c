"""make bench-scale runs each step in a process of its own: its progress passes through as it comes, its stdout (the
step's JSON) is returned, a failure keeps the tail of its stderr, a step past its time limit is killed."""
import signal
import sys

import pytest

from harness.bench.scale import _run_passing_progress, measure

STEP = """
import sys, time
for i in range(3):
    sys.stderr.write(f"\\rcalibration {i}/3 \\u2588"); sys.stderr.flush(); time.sleep(0.05)
sys.stdout.write("x" * 200000 + "\\n{\\"seconds\\": 1}\\n")
sys.exit(int(sys.argv[1]))
"""


def test_progress_passes_through_and_stdout_comes_back(capfd):
    res = _run_passing_progress([sys.executable, "-c", STEP, "0"], timeout_s=60)
    assert res.returncode == 0 and res.stdout.splitlines()[-1] == '{"seconds": 1}'  # past a pipe's 64 KB
    assert "\rcalibration 2/3 \u2588" in capfd.readouterr().err
    assert res.stderr.endswith("calibration 2/3 \u2588")


def test_a_failing_step_keeps_its_stderr_tail_and_a_slow_one_is_killed():
    res = _run_passing_progress([sys.executable, "-c", STEP, "3"], timeout_s=60, tail_chars=20)
    assert res.returncode == 3 and len(res.stderr) == 20 and res.stderr.endswith("2/3 \u2588")
    slow = _run_passing_progress([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert slow.returncode == -signal.SIGKILL


def test_a_step_that_fails_is_named_with_its_exit_and_its_error(tmp_path):
    with pytest.raises(RuntimeError, match=r"step calibrate failed \(exit 1\):\n(.|\n)*no-checkpoint"):
        measure("calibrate", tmp_path / "no-checkpoint", tmp_path / "scratch", timeout_s=120)
