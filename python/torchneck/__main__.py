"""`python -m torchneck SCRIPT [ARGS...]`, a drop-in for
`python -m torch.utils.bottleneck SCRIPT [ARGS...]`; also `run`, as
`./torchneck run [options] SCRIPT [ARGS...]`."""

import sys

from torchneck.cli import main

if __name__ == "__main__":
    if sys.argv[1:2] == ["report"]:
        from torchneck import report_cmd

        sys.exit(report_cmd.main(sys.argv[2:]))
    sys.exit(main(sys.argv[1:]))
