"""`python -m pretrain` is the `pretrain` command (also what torchrun launches)."""

from pretrain.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
