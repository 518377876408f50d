"""Oracle: runs a script as __main__ under cProfile on the main thread AND on
every thread it starts (cProfile alone profiles only its own thread), then
dumps the merged stats. Usage: cprofile_all_threads.py OUT.pstats SCRIPT"""

import cProfile
import pstats
import runpy
import sys
import threading

out, target = sys.argv[1], sys.argv[2]
profiles = []
original_run = threading.Thread.run


def profiled_run(self):
    p = cProfile.Profile()
    profiles.append(p)
    p.runcall(original_run, self)


threading.Thread.run = profiled_run
sys.argv = sys.argv[2:]
main_profile = cProfile.Profile()
main_profile.enable()
try:
    runpy.run_path(target, run_name="__main__")
finally:
    main_profile.disable()
    threading.Thread.run = original_run
stats = pstats.Stats(main_profile)
for p in profiles:
    stats.add(p)
stats.dump_stats(out)
