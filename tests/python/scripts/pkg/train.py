"""A -m target with a relative import and its own options."""

import json
import sys

from .helper import scale

if __name__ == "__main__":
    print(json.dumps({"name": __name__, "argv": sys.argv[1:], "scaled": scale(21),
                      "package": __package__}))
