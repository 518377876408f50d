"""A -m target (python -m coexist_pkg.main) whose spawned pool workers must
import its package again through a relative import."""

import json
import multiprocessing as mp
import sys

from .work import cube

if __name__ == "__main__":
    with mp.get_context("spawn").Pool(2) as pool:
        cubes = pool.map(cube, range(6))
    print(json.dumps({"name": __name__, "package": __package__, "argv": sys.argv[1:], "cubes": cubes}))
