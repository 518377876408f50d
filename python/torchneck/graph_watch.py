"""What keeps every step's autograd graph alive: a fact only Python can see.

The classic leak is `total_loss += loss`: a tensor with a grad_fn,
accumulated across steps, holds each step's whole graph (and the activations
it saved) for as long as it lives. A few times during the run, at
geometrically spaced optimizer steps (2, 4, 8, ...: a handful of looks
however long the run, nothing on the other steps but a counter), this looks
at the globals of __main__ and the locals of the main thread's frames that
run the user's script, for tensors with a grad_fn, and counts the autograd
nodes reachable from it (a bounded walk through next_functions). A variable
whose graph grows from look to look is reported as a model GrowingGraph
fact (facts.growing_graph): kept, when its graph holds the graph an earlier
look saw (marks in the nodes' metadata, see MARK), with the line of its
function that accumulates into it (`name += ...`, `name = name + ...`,
found with ast); else rebuilt each step, larger every time."""

import ast
import functools
import os
import sys

from torchneck import facts

# Nodes walked per tensor at most: a look costs at most ~this many Python
# steps per candidate (~10 ms for 20000), and a graph this big has already
# shown its growth.
MAX_NODES = 20000
# Looks needed before a variable counts as growing (three: two growths in a
# row, so one larger batch or a changed branch is not taken for a leak)...
MIN_LOOKS = 3
# ... and its graph at the last look at least this many times the first.
MIN_GROWTH = 2.0
# Candidates kept per look (the largest graphs), so that a script with many
# tensors in scope costs a bounded time per look.
MAX_CANDIDATES = 16


# Each look marks the root node of every candidate's graph, in the node's
# own metadata dict (freed with the node, so it keeps nothing alive), with
# the look's number under the variable's key. A later look whose walk from
# the same variable reaches an earlier mark has found the earlier step's
# graph inside this one: kept alive (`total += loss`). A graph that grows
# but never reaches a mark is rebuilt every step, larger each time: the
# step's work grows (a loop over a list that grows), not its memory.
MARK = "torchneck.graph_watch"
# The user scope around each look (src/analyze/timeline_view.cc).
SCOPE = "torchneck::graph_watch"


def graph_nodes(grad_fn, limit=MAX_NODES, key=None, marked_types=()):
    """(autograd nodes reachable from grad_fn, at most `limit`; whether one
    of them bears an earlier look's mark for `key`). Only nodes of the
    marked roots' types are asked for their metadata (asking creates it)."""
    seen = {id(grad_fn)}
    keep = [grad_fn]  # held during the walk, so ids stay unique
    todo = [grad_fn]
    reached = False
    while todo and len(seen) < limit:
        node = todo.pop()
        try:
            nexts = node.next_functions
        except (AttributeError, RuntimeError):
            continue
        for nxt, _ in nexts:
            if nxt is not None and id(nxt) not in seen:
                seen.add(id(nxt))
                keep.append(nxt)
                todo.append(nxt)
                if not reached and type(nxt).__name__ in marked_types:
                    reached = key in _marks(nxt)
    del keep, todo
    return min(len(seen), limit), reached


def _marks(node):
    try:
        return node.metadata.get(MARK, ())
    except (AttributeError, RuntimeError):
        return ()


def _mark(node, key, look):
    try:
        node.metadata.setdefault(MARK, {})[key] = look
    except (AttributeError, RuntimeError):
        pass


def _is_def(node):
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))


def _statements(body):
    """The nodes of a scope's body, not those of functions or classes inside it."""
    todo = list(body)
    while todo:
        node = todo.pop(0)
        yield node
        todo.extend(c for c in ast.iter_child_nodes(node) if not _is_def(c))


def _accumulates(node, name):
    """`name += x` or `name = name + x` / `x + name`."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
        return isinstance(node.target, ast.Name) and node.target.id == name
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.Add):
        targets = [t for t in node.targets if isinstance(t, ast.Name) and t.id == name]
        sides = (node.value.left, node.value.right)
        return bool(targets) and any(isinstance(s, ast.Name) and s.id == name for s in sides)
    return False


# Calls whose result holds no autograd graph.
_DETACHING = {"item", "detach", "tolist", "numpy", "float", "int"}


def _detached(expr):
    """Whether the summed expression is a number or a detached tensor."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in _DETACHING:
                return True
    return False


class _Sources:
    """Parsed script files, once each."""

    def __init__(self):
        self._trees = {}

    def tree(self, path):
        if path not in self._trees:
            try:
                with open(path, "rb") as f:
                    source = f.read().decode("utf-8", "replace")
                self._trees[path] = (ast.parse(source), source)
            except (OSError, SyntaxError, ValueError):
                self._trees[path] = None
        return self._trees[path]

    def accumulating_line(self, path, firstlineno, name):
        """(line, code) of the statement that accumulates into `name` in the
        function starting at firstlineno (0: the module's own code)."""
        parsed = self.tree(path)
        if parsed is None:
            return 0, ""
        tree, source = parsed
        body = tree.body
        if firstlineno > 0:
            body = None
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    starts = [node.lineno] + [d.lineno for d in node.decorator_list]
                    if firstlineno in starts:
                        body = node.body
                        break
            if body is None:
                return 0, ""
        found = [node for node in _statements(body) if _accumulates(node, name)]
        # A branch that sums a number (`loss.item()`) next to the one that
        # sums the tensor: the tensor's is the one that keeps the graph.
        tensors = [node for node in found if not _detached(node.value)]
        for node in tensors or found:
            code = ast.get_source_segment(source, node) or ""
            return node.lineno, " ".join(code.split())
        return 0, ""


class GraphWatch:
    """Counts optimizer steps; looks at steps 2, 4, 8, ...; at the end,
    growing_graphs() lists what grew."""

    def __init__(self, script_path, scope=None):
        self.script = os.path.abspath(script_path) if script_path else ""
        # (open, close) of a native user scope (_torchneck.open_user_scope)
        # put around each look, where the operator observer runs: a look is
        # the launcher's own work inside the script's step (0.5-2.5 ms on
        # growing_history's graphs), which the analysis keeps out of its
        # estimate of the steps between detail windows (steps.h, tool_ns).
        self._scope = scope
        self.steps = 0
        self._next_look = 2
        self._history = {}  # (scope, firstlineno, name) -> [(step, nodes, reached an earlier mark)]
        self._marked_types = {}  # (scope, firstlineno, name) -> {type names of its marked roots}
        self._looks = 0
        self._sources = _Sources()
        self._wrapped = []  # (class, original step)
        self._handle = None
        self.failed = None  # why a look failed, once
        # Called at every optimizer step's end, before the look (the GPU
        # window, gpu_window.py): one set of step hooks for the launcher.
        self.step_listeners = []

    def install(self):
        try:
            from torch.optim import optimizer as optim_mod
        except ImportError:
            return
        register = getattr(optim_mod, "register_optimizer_step_post_hook", None)
        if register is not None:  # torch >= 2.0: one global hook
            self._handle = register(lambda opt, args, kwargs: self.on_step())

    def watch(self, opt):
        """A new optimizer (env.EnvCollector's on_optimizer): on a torch
        without global step hooks, its class's step is wrapped once."""
        if self._handle is not None:
            return
        cls = type(opt)
        if any(c is cls for c, _ in self._wrapped):
            return
        original = cls.__dict__.get("step")
        if original is None:
            return
        watch = self

        def step(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            watch.on_step()
            return result

        # Its attributes too: torch 1.13 marks its own profiling wrapper
        # `hooked`, and wraps step again for each new optimizer of a class
        # whose step lacks the mark (two Optimizer.step scopes per call).
        functools.update_wrapper(step, original)
        cls.step = step
        self._wrapped.append((cls, original))

    def uninstall(self):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        for cls, original in reversed(self._wrapped):
            cls.step = original
        self._wrapped.clear()

    def on_step(self):
        self.steps += 1
        for listener in self.step_listeners:
            listener(self.steps)
        if self.steps < self._next_look:
            return
        self._next_look *= 2
        scope = self._scope[0](SCOPE) if self._scope is not None else None
        try:
            self._look(sys._getframe(1))
        except Exception as e:  # noqa: BLE001 - a look must never break the script
            self.failed = self.failed or f"{type(e).__name__}: {e}"
        finally:
            if scope is not None:
                self._scope[1](scope)

    def _candidates(self, frame):
        """(key, tensor) pairs in scope: the script's frames, __main__'s globals."""
        import torch

        scopes = []
        f = frame
        while f is not None:
            if os.path.abspath(f.f_code.co_filename) == self.script and f.f_code.co_name != "<module>":
                scopes.append((f.f_code.co_name, f.f_code.co_firstlineno, f.f_locals))
            f = f.f_back
        main = sys.modules.get("__main__")
        if main is not None:
            scopes.append(("<module>", 0, vars(main)))
        for scope, first, names in scopes:
            for name, value in list(names.items()):
                if isinstance(value, torch.Tensor) and value.grad_fn is not None:
                    yield (scope, first, name), value

    def _look(self, frame):
        found = list(self._candidates(frame))
        del frame
        self._looks += 1
        sized = []
        for key, tensor in found:
            mark = "%s:%d:%s" % key
            nodes, reached = graph_nodes(tensor.grad_fn, key=mark, marked_types=self._marked_types.get(key, ()))
            sized.append((nodes, reached, key, mark, tensor.grad_fn))
        del found
        sized.sort(key=lambda x: -x[0])
        for nodes, reached, key, mark, root in sized[:MAX_CANDIDATES]:
            self._history.setdefault(key, []).append((self.steps, nodes, reached))
            _mark(root, mark, self._looks)
            self._marked_types.setdefault(key, set()).add(type(root).__name__)
        del sized

    def growing_graphs(self):
        """facts.growing_graph(...) for every variable whose graph grew."""
        out = []
        for (scope, first, name), looks in self._history.items():
            if len(looks) < MIN_LOOKS:
                continue
            last3 = [n for _, n, _ in looks[-MIN_LOOKS:]]
            grew = all(b > a or b >= MAX_NODES for a, b in zip(last3, last3[1:]))
            if not grew or looks[-1][1] < MIN_GROWTH * looks[0][1]:
                continue
            kept = looks[-1][2]  # the last graph holds an earlier look's
            line, code = self._sources.accumulating_line(self.script, first, name) if kept else (0, "")
            out.append(facts.growing_graph(
                variable=name, scope=scope, file=self.script if line else "", line=line, code=code,
                nodes_first=looks[0][1], nodes_last=looks[-1][1], nodes_cap=MAX_NODES,
                step_first=looks[0][0], step_last=looks[-1][0], kept=kept))
        out.sort(key=lambda g: (not g.kept, -g.nodes_last))
        return out
