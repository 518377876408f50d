# Writes a marker file when it runs: tests check it never started.
import os
import sys

open(os.environ["MARKER"], "w").close()
