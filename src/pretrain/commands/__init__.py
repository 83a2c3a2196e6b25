"""Subcommands of the `pretrain` CLI: argument parsing and calls into the library, no logic."""
