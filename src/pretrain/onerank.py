"""Who says a refusal under torchrun: the first local rank, once, instead of every rank.

Every rank of `torchrun --nproc_per_node N -m pretrain ...` reads the same command line and the same
files, so a config error or a refused resume is raised by all N ranks together and was printed N times
(8 identical lines on a node). The first local rank (LOCAL_RANK=0: one per node, so each node's log
says why it stopped) prints it; the others wait for the launcher, which stops the other workers of a
job as soon as one fails, and so end non-zero without a word. Only under torchrun (its agent sets
TORCHELASTIC_RUN_ID): under another launcher each rank says its line at once, naming its rank.

An error only one rank hits (its own checkpoint state file, a shard only it reads) must not be lost:
a rank still alive after WAIT_S prints the line itself, naming its rank, and exits. WAIT_S stays
well under parallel.timeout_s (300 s by default): rank 0, blocked in a collective that rank will
never join, fails after that long and the launcher would then stop the rank before it spoke.

Restarts (`torchrun --max-restarts N`): torchelastic's agent restarts a failed worker group whatever
its exit code (agent/server/api.py, `_invoke_run`: UNHEALTHY or FAILED with restarts left -> restart),
so a config error, which no restart cures, came back N+1 times. `said_in_this_job` keeps a marker per
(agent, line) in the temporary folder: each attempt after the first that hits the same line says
nothing, and the first says once why the error repeats (`restart_hint`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time

WAIT_S = 60.0


def local_rank() -> int:
    """This process's rank on its node under a launcher (torchrun sets LOCAL_RANK); 0 otherwise."""
    try:
        return int(os.environ.get("LOCAL_RANK", "0"))
    except ValueError:
        return 0


def global_rank() -> int:
    try:
        return int(os.environ.get("RANK", "0"))
    except ValueError:
        return 0


def error_line(line: str) -> str | None:
    """The line to print for an error every rank may be raising, or None when this rank says nothing.
    On a rank other than the first local one this waits up to WAIT_S for the launcher to end it."""
    if local_rank() == 0:
        return line
    if "TORCHELASTIC_RUN_ID" not in os.environ:  # another launcher: it may not stop the others
        return f"rank {global_rank()}: {line}"
    time.sleep(WAIT_S)  # the common case ends here: rank 0 said the same line, torchrun stops us
    return f"rank {global_rank()}: {line}"


def _restarts() -> tuple[int, int]:
    """(this attempt's restart count, --max-restarts) under torchrun; (0, 0) elsewhere."""
    try:
        return (int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
                int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0")))
    except ValueError:
        return 0, 0


def said_in_this_job(line: str) -> bool:
    """True when an earlier attempt of this torchrun job (same agent process) said `line` already;
    marks it said otherwise. Always False without --max-restarts. The last attempt removes the
    marker, so nothing is left in the temporary folder once the job is over."""
    count, most = _restarts()
    if "TORCHELASTIC_RUN_ID" not in os.environ or most <= 0:
        return False
    key = hashlib.sha256(f"{os.environ['TORCHELASTIC_RUN_ID']}\0{line}".encode()).hexdigest()[:16]
    marker = os.path.join(tempfile.gettempdir(), f"pretrain-said-{os.getuid()}-{os.getppid()}-{key}")
    if count >= most:  # the last attempt: torchrun gives up after it
        existed = os.path.lexists(marker)
        if existed:
            os.unlink(marker)
        return existed
    try:  # O_EXCL | O_NOFOLLOW: a shared /tmp; a link planted under this name is not followed
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        return True
    except OSError:  # no writable temporary folder: say it every time, as before
        return False
    return False


def restart_hint() -> str | None:
    """For the first attempt of a job started with --max-restarts N: why the error will not be said
    again although the job goes on for N more attempts."""
    count, most = _restarts()
    if "TORCHELASTIC_RUN_ID" not in os.environ or most <= 0 or count > 0:
        return None
    return (f"torchrun restarts a failed job whatever its exit code (--max-restarts {most}): this error "
            f"comes back on each of the {most} restart{'s' * (most != 1)} and is not said again; fix it, or "
            "drop --max-restarts to fail at once (it is for crashes and lost nodes)")
