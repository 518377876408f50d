"""Marks where a model is put into evaluation mode and back:
`torchneck::eval_mode` and `torchneck::train_mode`.

Outside detail windows (docs/overhead.md) the operator observer sees user
scopes only, so an evaluation pass that reads no DataLoader (nanoGPT's
estimate_loss: model.eval(), forward passes under no_grad, model.train())
would leave no trace there. nn.Module.train (which eval() calls) is wrapped
for the length of the session: its outermost call on a thread leaves a
zero-length user scope (~2 us), made natively as backward_scope.py's is;
a model's children, which train() visits, leave none. The analysis takes
the time from an eval mark to the next train mark, with no backward pass
in it, as an evaluation pass (src/analyze/steps.cc, light_evaluation)."""

import functools
import threading

EVAL_MARK = "torchneck::eval_mode"
TRAIN_MARK = "torchneck::train_mode"


class ModeMarks:
    def __init__(self):
        self._class = None
        self._original = None

    def install(self, native):
        import torch.nn

        original = torch.nn.Module.train
        open_scope, close_scope = native.open_user_scope, native.close_user_scope
        inside = threading.local()

        @functools.wraps(original)
        def train(self, mode=True):
            if getattr(inside, "depth", 0):
                return original(self, mode)
            inside.depth = 1
            try:
                close_scope(open_scope(TRAIN_MARK if mode else EVAL_MARK))
                return original(self, mode)
            finally:
                inside.depth = 0

        torch.nn.Module.train = train
        self._class, self._original = torch.nn.Module, original
        return self

    def uninstall(self):
        if self._class is not None:
            self._class.train = self._original
            self._class = self._original = None
