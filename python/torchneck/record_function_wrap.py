"""The Python half of the record_function scopes
(src/collect/python/record_function_scopes.h): record_function's
__enter__ and __exit__ rebuilt from torch's own source with one guard in
front, so that eager Python calls torchneck's native method (which records
the scope and calls torch's original) while TorchScript, which compiles the
class from its methods' source when a scripted function opens a scope,
compiles torch's own body: the guard is `if not torch.jit.is_scripting()`,
a branch TorchScript does not compile. A C method in the class's place
would make TorchScript refuse the class ("Cannot instantiate class
'record_function' in a script function").

Where the source cannot be read or has a shape this does not know, a
plain wrapper is used: TorchScript could not compile the class without its
source anyway.
"""
import ast
import itertools
import linecache
import textwrap

_serial = itertools.count()


def wrap(original, native):
    """A function in original's place that calls native(*its positional
    arguments) in eager Python and runs original's body under TorchScript."""
    try:
        return _from_source(original, native)
    except Exception:  # noqa: BLE001: any surprise in torch's source: the plain wrapper
        return _plain(original, native)


def _from_source(original, native):
    import inspect
    lines, _ = inspect.getsourcelines(original)
    source = textwrap.dedent("".join(lines))
    tree = ast.parse(source)
    fn = tree.body[0]
    args = fn.args
    if (len(tree.body) != 1 or not isinstance(fn, ast.FunctionDef) or fn.decorator_list or args.vararg or
            args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults or not args.args):
        raise ValueError("not a plain method")
    first = fn.body[0]
    if first.lineno == fn.lineno:
        raise ValueError("body on the def line")
    text = source.splitlines(True)
    at = first.lineno - 1
    if getattr(first, "decorator_list", None):
        at = min(d.lineno for d in first.decorator_list) - 1
    indent = text[at][:len(text[at]) - len(text[at].lstrip())]
    names = ", ".join(a.arg for a in args.args)
    guard = (f"{indent}if not torch.jit.is_scripting():\n"
             f"{indent}    return _torchneck_native({names})\n")
    new = "".join(text[:at]) + guard + "".join(text[at:])
    filename = f"<torchneck: {original.__qualname__} #{next(_serial)}>"
    # inspect.getsource (TorchScript's way to the body) finds it here.
    linecache.cache[filename] = (len(new), None, new.splitlines(True), filename)
    namespace = dict(original.__globals__)
    namespace["_torchneck_native"] = native
    if "torch" not in namespace:
        raise ValueError("torch is not a global of its module")
    exec(compile(new, filename, "exec"), namespace)  # noqa: S102: torch's own source, one guard added
    made = namespace[fn.name]
    made.__qualname__ = original.__qualname__
    made.__module__ = original.__module__
    made.__doc__ = original.__doc__
    return made


def _plain(original, native):
    def wrapper(*args):
        return native(*args)
    wrapper.__name__ = original.__name__
    wrapper.__qualname__ = original.__qualname__
    wrapper.__doc__ = original.__doc__
    return wrapper
