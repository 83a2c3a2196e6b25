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
"""

from __future__ import annotations

import os
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
