"""Reads its standard input (input() and then sys.stdin) and echoes what it
got, as JSON."""

import json
import sys

first = input()
rest = sys.stdin.read()
print(json.dumps({"first": first, "rest": rest.splitlines(), "isatty": sys.stdin.isatty()}))
