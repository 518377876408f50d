"""`python -m torchneck COMMAND ...`, the same as `torchneck COMMAND ...`
(cli.py), and `python -m torchneck SCRIPT [ARGS...]`, a drop-in for
`python -m torch.utils.bottleneck SCRIPT [ARGS...]`."""

import sys

from torchneck.cli import main


def console():
    """The `torchneck` command that `pip install` makes (pyproject.toml)."""
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(console())
