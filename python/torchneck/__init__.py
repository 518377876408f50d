"""torchneck: find the bottleneck of a PyTorch training script in one run.

The profiler itself is native (the `_torchneck` extension); this package is
the launcher: command line, running the user's script, and the facts only
Python can see (versions, DataLoaders).
"""

__version__ = "0.1.0"
