"""`python -m torchneck SCRIPT [ARGS...]`, a drop-in for
`python -m torch.utils.bottleneck SCRIPT [ARGS...]`; also `run`, as
`./torchneck run [options] SCRIPT [ARGS...]`."""

import sys

from torchneck.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
