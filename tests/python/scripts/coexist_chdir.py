"""Changes directory, writes a file by a relative name there, runs a few
torch operators, and prints what it sees, as JSON.
Usage: coexist_chdir.py DIR"""

import json
import os
import sys

import torch

start = os.getcwd()
os.chdir(sys.argv[1])
with open("result.txt", "w") as f:
    f.write(str(float((torch.ones(3, 3) @ torch.ones(3, 3)).sum())))
with open("result.txt") as f:
    written = f.read()
print(json.dumps({"moved": os.getcwd() != start, "cwd_is_dir": os.path.samefile(os.getcwd(), sys.argv[1]),
                  "written": written}))
