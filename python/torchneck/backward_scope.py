"""A user scope around each backward pass: `torchneck::backward`.

Outside detail windows (docs/overhead.md) the operator observer sees user
scopes only, so a step's backward pass would be invisible there and its
time estimated. torch.autograd.backward (which Tensor.backward calls) is
wrapped for the length of the session in a RecordFunction user scope made
natively (_torchneck.open_user_scope: Python's record_function would make a
tensor per call in torch 1.13, three operators in the profile): one user
scope per backward call (~2 us), which the observer records in every
step (without a callback: begin_user_scope, src/collect/torch/op_observer.h),
so the backward phase is measured, not estimated, in the steps outside the
windows too. The analysis counts the scope as a backward pass
(src/analyze/timeline_view.cc)."""

import functools

SCOPE = "torchneck::backward"


class BackwardScope:
    def __init__(self):
        self._module = None
        self._original = None

    def install(self, native):
        import torch.autograd

        original = torch.autograd.backward
        open_scope, close_scope = native.open_user_scope, native.close_user_scope

        @functools.wraps(original)
        def backward(*args, **kwargs):
            scope = open_scope(SCOPE)
            try:
                return original(*args, **kwargs)
            finally:
                close_scope(scope)

        torch.autograd.backward = backward
        self._module, self._original = torch.autograd, original
        return self

    def uninstall(self):
        if self._module is not None:
            self._module.backward = self._original
            self._module = self._original = None
