// nn.Module scopes from global forward hooks written in C (see the header).
//
// Each hook call costs one vectorcall into this file, a FlatMap64 probe, a
// clock read and one EventBuffer append; it runs with the GIL held, so the
// module table needs no lock. Modules are kept alive (a reference taken on
// first sight) so an address is never reused for another module while the
// session runs; the table is bounded by max_modules.
//
// A forward that raises leaves an unmatched enter: analysis closes such
// scopes when an enclosing scope exits (the events carry the module id).
#include "collect/python/module_scopes.h"

#include <Python.h>

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <vector>

#include "collect/python/py_names.h"
#include "core/clock.h"
#include "core/detail_window.h"
#include "core/event_buffer.h"
#include "core/flat_map.h"
#include "core/threads.h"
#include "core/timeline_window.h"

namespace torchneck {
namespace {

struct ThreadEvents {
  explicit ThreadEvents(size_t capacity) : events(capacity) {}
  EventBuffer<ModuleEvent> events;
};

struct ScopeState {
  ModuleScopeOptions options;
  bool active = false;
  FlatMap64 index{1024};
  std::vector<PyObject*> modules;  // strong references
  std::vector<std::string> holders;  // per module, the name its first caller held it under (holder_name)
  uint64_t untracked_calls = 0;    // calls of modules beyond max_modules
  std::vector<std::unique_ptr<ThreadEvents>> threads;
  std::vector<PyObject*> handles;  // RemovableHandles of the registered hooks
  bool compile_safe = false;       // the hooks are the compile-safe ones
  PyObject* torch_compile = nullptr;  // torch.compile as found (strong), while ours stands in
  PyObject* our_compile = nullptr;    // the stand-in (strong)
  uint64_t session = 0;
};

ScopeState* g_scopes = nullptr;  // GIL-protected
uint64_t g_session = 0;
thread_local ThreadEvents* t_events = nullptr;
thread_local uint64_t t_session = 0;

// A frame of torch.nn's own module code (_call_impl and its wrappers).
bool in_torch_nn(PyFrameObject* frame) {
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  const bool inside = utf8_of(code->co_filename).find("torch/nn/modules/") != std::string::npos;
  Py_DECREF(code);
  return inside;
}

// The key under which `mapping` holds exactly `value`; "" when none.
std::string key_holding(PyObject* mapping, PyObject* value) {
  PyObject* items = PyMapping_Items(mapping);
  std::string key;
  for (Py_ssize_t i = 0; items != nullptr && i < PyList_GET_SIZE(items) && key.empty(); ++i) {
    PyObject* kv = PyList_GET_ITEM(items, i);
    if (PyTuple_Check(kv) && PyTuple_GET_SIZE(kv) == 2 && PyTuple_GET_ITEM(kv, 1) == value &&
        PyUnicode_Check(PyTuple_GET_ITEM(kv, 0)))
      key = utf8_of(PyTuple_GET_ITEM(kv, 0));
  }
  Py_XDECREF(items);
  PyErr_Clear();
  return key;
}

// torch.nn's frames between a forward hook and the code that called the module.
constexpr int kMaxTorchFrames = 6;

// The name the code that calls `module` holds it under: a local of the first
// frame outside torch.nn (`netG(noise)`), or an attribute of that frame's
// `self` (`self.netG(noise)`); "" when neither holds it. Looked up once per
// module, at its first call, so building the frame's locals is affordable.
std::string holder_name(PyObject* module) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  for (int i = 0; frame != nullptr && i < kMaxTorchFrames && in_torch_nn(frame); ++i) {
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or NULL
    Py_DECREF(frame);
    frame = back;
  }
  std::string name;
  if (frame != nullptr && !in_torch_nn(frame)) {
    if (PyObject* locals = PyFrame_GetLocals(frame)) {
      name = key_holding(locals, module);
      PyObject* self = name.empty() ? PyMapping_GetItemString(locals, "self") : nullptr;
      PyObject* attrs = self != nullptr ? PyObject_GetAttrString(self, "__dict__") : nullptr;
      if (attrs != nullptr && PyDict_Check(attrs)) name = key_holding(attrs, module);
      Py_XDECREF(attrs);
      Py_XDECREF(self);
      Py_DECREF(locals);
    }
  }
  Py_XDECREF(frame);
  PyErr_Clear();
  return name;
}

ThreadEvents* thread_events() {
  if (t_session == g_scopes->session) return t_events;
  g_scopes->threads.push_back(std::make_unique<ThreadEvents>(g_scopes->options.events_per_thread));
  t_events = g_scopes->threads.back().get();
  t_session = g_scopes->session;
  return t_events;
}

void record(PyObject* module, uint8_t is_exit) {
  if (g_scopes == nullptr || !g_scopes->active) return;
  // Outside detail windows (core/detail_window.h) module calls are not
  // recorded: their backward half, from the operator observer, is not
  // either, and the layers table is over the detailed steps.
  if (!detail_window().on.load(std::memory_order_relaxed)) return;
  int64_t t = now_ns();
  const auto key = reinterpret_cast<uint64_t>(module);
  uint32_t id = g_scopes->index.find(key);
  if (id == FlatMap64::kMissing) {
    if (g_scopes->modules.size() >= g_scopes->options.max_modules) {
      ++g_scopes->untracked_calls;
      return;
    }
    // Looked up first: it runs Python, where another thread may see a module
    // first (this one too) and take the next index.
    std::string holder = holder_name(module);
    id = g_scopes->index.find(key);
    if (id == FlatMap64::kMissing) {
      if (g_scopes->modules.size() >= g_scopes->options.max_modules) {
        ++g_scopes->untracked_calls;
        return;
      }
      id = static_cast<uint32_t>(g_scopes->modules.size());
      Py_INCREF(module);
      g_scopes->modules.push_back(module);
      g_scopes->holders.push_back(std::move(holder));
      g_scopes->index.insert(key, id);
    }
    if (is_exit == 0) t = now_ns();  // the module's call starts after the lookup
  }
  ModuleEvent e{};
  e.t_ns = t;
  e.module = id;
  e.thread_index = current_thread_index();
  e.is_exit = is_exit;
  if (timeline_window().open()) thread_events()->events.append(e);
  else thread_events()->events.drop();
}

PyObject* pre_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs >= 1) record(args[0], 0);
  Py_RETURN_NONE;
}

PyObject* post_hook(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs >= 1) record(args[0], 1);
  Py_RETURN_NONE;
}

PyMethodDef g_pre_def = {"_torchneck_module_enter", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(pre_hook)),
                         METH_FASTCALL, "torchneck: an nn.Module forward begins"};
PyMethodDef g_post_def = {"_torchneck_module_exit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(post_hook)),
                          METH_FASTCALL, "torchneck: an nn.Module forward returned"};

// torch.compile (torch >= 2): Dynamo traces nn.Module._call_impl, global
// hooks included, and a C function it cannot trace is a graph break, in
// every module of the compiled model (seen: 6 breaks and 6 frames compiled
// instead of 0 and 1). Once the script calls torch.compile, the hook is this Python
// function instead: when Dynamo traces it, is_compiling() is True and the
// call is gone, so a compiled region has no module scopes of its own (the
// module that was compiled is seen from outside, as its OptimizedModule
// wrapper). Where Dynamo meets it as a frame of its own (the compiled
// module's own hooks, called from _call_impl, which Dynamo skips), it would
// compile it as a frame of its own (seen: 3 frames instead of 1): skip_code
// keeps that frame out of Dynamo, and it runs as in eager code. In eager
// code it costs one Python call more than the C hook (see
// switch_to_compile_safe). No torch.compiler
// (torch 1.x): the C function is registered as it is.
constexpr const char* kCompileSafeHookSource =
    "def compile_safe(hook, is_compiling, skip_code):\n"
    "    def torchneck_module_hook(module, *rest):\n"
    "        if not is_compiling():\n"
    "            hook(module)\n"
    "    if skip_code is not None:\n"
    "        skip_code(torchneck_module_hook.__code__)\n"
    "    return torchneck_module_hook\n";

// A new reference to `name` in module `module`, or None (new reference).
PyObject* attr_or_none(const char* module, const char* name) {
  PyObject* mod = PyImport_ImportModule(module);
  PyObject* attr = mod ? PyObject_GetAttrString(mod, name) : nullptr;
  Py_XDECREF(mod);
  if (attr == nullptr) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  return attr;
}

// Returns a new reference to the hook to register: `fn` itself, or `fn`
// wrapped by kCompileSafeHookSource; nullptr with a Python error set.
PyObject* compile_safe_hook(PyObject* fn) {
  PyObject* is_compiling = attr_or_none("torch.compiler", "is_compiling");
  if (is_compiling == Py_None) {
    Py_DECREF(is_compiling);
    Py_INCREF(fn);
    return fn;
  }
  PyObject* skip_code = attr_or_none("torch._C._dynamo.eval_frame", "skip_code");
  PyObject* globals = PyDict_New();
  PyObject* wrapped = nullptr;
  if (globals != nullptr && PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0) {
    PyObject* r = PyRun_String(kCompileSafeHookSource, Py_file_input, globals, globals);
    PyObject* make = r ? PyDict_GetItemString(globals, "compile_safe") : nullptr;  // borrowed
    if (make != nullptr) wrapped = PyObject_CallFunctionObjArgs(make, fn, is_compiling, skip_code, nullptr);
    Py_XDECREF(r);
  }
  Py_XDECREF(globals);
  Py_DECREF(skip_code);
  Py_DECREF(is_compiling);
  return wrapped;
}

bool register_hook(PyObject* module_mod, const char* registrar, PyMethodDef* def, bool compile_safe) {
  PyObject* c_fn = PyCFunction_New(def, nullptr);
  if (c_fn == nullptr) return false;
  PyObject* fn = compile_safe ? compile_safe_hook(c_fn) : c_fn;
  if (compile_safe) Py_DECREF(c_fn);
  if (fn == nullptr) return false;
  PyObject* handle = PyObject_CallMethod(module_mod, registrar, "O", fn);
  Py_DECREF(fn);
  if (handle == nullptr) return false;
  g_scopes->handles.push_back(handle);
  return true;
}

void remove_hooks() {
  for (PyObject* h : g_scopes->handles) {
    PyObject* r = PyObject_CallMethod(h, "remove", nullptr);
    Py_XDECREF(r);
    Py_DECREF(h);
  }
  g_scopes->handles.clear();
  PyErr_Clear();
}

bool register_hooks(bool compile_safe) {
  PyObject* module_mod = PyImport_ImportModule("torch.nn.modules.module");
  const bool ok = module_mod != nullptr &&
                  register_hook(module_mod, "register_module_forward_pre_hook", &g_pre_def, compile_safe) &&
                  register_hook(module_mod, "register_module_forward_hook", &g_post_def, compile_safe);
  Py_XDECREF(module_mod);
  g_scopes->compile_safe = compile_safe;
  return ok;
}

// The C hooks cost one C call per module call; the compile-safe ones a
// Python call more, and a call of is_compiling (seen: a small CNN's forward
// share of the step from 8 % to 16 % on torch 2.6). So the C hooks stay
// until the script calls torch.compile (nn.Module.compile calls it too):
// then, before anything is compiled, the hooks become the compile-safe ones
// for the rest of the run. (torch._dynamo.optimize called directly is not
// seen: its graphs still break at our hooks.)
PyObject* switch_to_compile_safe(PyObject*, PyObject*) {
  if (g_scopes != nullptr && g_scopes->active) detail_window().keep_on.store(true, std::memory_order_relaxed);
  if (g_scopes != nullptr && g_scopes->active && !g_scopes->compile_safe) {
    remove_hooks();
    if (!register_hooks(true)) {  // the C hooks back: layers stay, graphs break
      PyErr_Clear();
      remove_hooks();
      register_hooks(false);
      PyErr_Clear();
    }
  }
  Py_RETURN_NONE;
}

PyMethodDef g_switch_def = {"_torchneck_compile_safe_hooks", switch_to_compile_safe, METH_NOARGS,
                            "torchneck: module hooks that torch.compile can trace"};

constexpr const char* kCompileStandInSource =
    "def stand_in(original, switch):\n"
    "    def compile(*args, **kwargs):\n"
    "        switch()\n"
    "        return original(*args, **kwargs)\n"
    "    for a in ('__name__', '__qualname__', '__doc__', '__module__'):\n"
    "        setattr(compile, a, getattr(original, a, None))\n"
    "    compile.__wrapped__ = original\n"
    "    return compile\n";

// torch.compile replaced by a stand-in that switches the hooks first; no
// torch.compile (torch 1.x): nothing to do. Failures leave torch as it was.
void stand_in_for_torch_compile() {
  PyObject* torch = PyImport_ImportModule("torch");
  PyObject* original = torch ? PyObject_GetAttrString(torch, "compile") : nullptr;
  PyObject* switch_fn = original ? PyCFunction_New(&g_switch_def, nullptr) : nullptr;
  PyObject* globals = switch_fn ? PyDict_New() : nullptr;
  PyObject* ours = nullptr;
  if (globals != nullptr && PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) == 0) {
    PyObject* r = PyRun_String(kCompileStandInSource, Py_file_input, globals, globals);
    PyObject* make = r ? PyDict_GetItemString(globals, "stand_in") : nullptr;  // borrowed
    if (make != nullptr) ours = PyObject_CallFunctionObjArgs(make, original, switch_fn, nullptr);
    Py_XDECREF(r);
  }
  if (ours != nullptr && PyObject_SetAttrString(torch, "compile", ours) == 0) {
    g_scopes->torch_compile = original;
    g_scopes->our_compile = ours;
    original = ours = nullptr;
  }
  Py_XDECREF(ours);
  Py_XDECREF(globals);
  Py_XDECREF(switch_fn);
  Py_XDECREF(original);
  Py_XDECREF(torch);
  PyErr_Clear();
}

// torch.compile back as it was, unless the script replaced it meanwhile.
void restore_torch_compile() {
  if (g_scopes->torch_compile == nullptr) return;
  if (PyObject* torch = PyImport_ImportModule("torch")) {
    PyObject* now = PyObject_GetAttrString(torch, "compile");
    if (now == g_scopes->our_compile) PyObject_SetAttrString(torch, "compile", g_scopes->torch_compile);
    Py_XDECREF(now);
    Py_DECREF(torch);
  }
  PyErr_Clear();
  Py_CLEAR(g_scopes->torch_compile);
  Py_CLEAR(g_scopes->our_compile);
}

struct ParameterCount {
  int64_t all = 0, trainable = 0;  // elements; trainable: requires_grad
};

ParameterCount parameter_count(PyObject* module) {
  ParameterCount n;
  PyObject* params = PyObject_CallMethod(module, "parameters", nullptr);
  if (params == nullptr) {
    PyErr_Clear();
    return n;
  }
  PyObject* it = PyObject_GetIter(params);
  Py_DECREF(params);
  if (it == nullptr) {
    PyErr_Clear();
    return n;
  }
  while (PyObject* p = PyIter_Next(it)) {
    PyObject* numel = PyObject_CallMethod(p, "numel", nullptr);
    if (numel != nullptr) {
      const int64_t k = PyLong_AsLongLong(numel);
      n.all += k;
      PyObject* grad = PyObject_GetAttrString(p, "requires_grad");
      if (grad != nullptr && PyObject_IsTrue(grad) == 1) n.trainable += k;
      Py_XDECREF(grad);
      Py_DECREF(numel);
    }
    Py_DECREF(p);
  }
  Py_DECREF(it);
  PyErr_Clear();
  return n;
}

// What print(model) shows of a module's own settings is at most this long
// in the profile: a Linear's or a Conv2d's fits many times over.
constexpr Py_ssize_t kMaxConfigBytes = 200;

// Its extra_repr() ("in_features=4096, out_features=512, bias=True"); ""
// when that is empty, not a str, or raises.
std::string module_config(PyObject* module) {
  std::string out;
  if (PyObject* r = PyObject_CallMethod(module, "extra_repr", nullptr)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_Check(r) ? PyUnicode_AsUTF8AndSize(r, &n) : nullptr;
    if (s != nullptr) out.assign(s, static_cast<size_t>(std::min(n, kMaxConfigBytes)));
    Py_DECREF(r);
  }
  PyErr_Clear();
  return out;
}

// "Linear", or the last part of "pkg.mod.Name" for static types.
std::string type_name(PyObject* obj) {
  const std::string tp_name = Py_TYPE(obj)->tp_name;
  return tp_name.substr(tp_name.rfind('.') == std::string::npos ? 0 : tp_name.rfind('.') + 1);
}

// How deep a chain of modules that were never called (ModuleDict,
// ModuleList: containers have no forward) is followed between a called
// module and its called descendants; a cycle of them ends there too.
constexpr int kMaxContainerDepth = 8;

// The called modules `holder` holds, directly or through modules never
// called, get `parent` (an index into mods) and their path from it as their
// name segment: "transformer.h.0" for a block in a ModuleList in a ModuleDict.
struct ModuleLinks {
  Run& run;
  size_t base;
  const std::unordered_map<PyObject*, size_t>& index;
  std::vector<std::string>& segment;
};
void link_children(ModuleLinks& l, PyObject* holder, size_t parent, const std::string& prefix, int depth) {
  PyObject* children = PyObject_GetAttrString(holder, "_modules");
  if (children == nullptr || !PyDict_Check(children)) {
    Py_XDECREF(children);
    PyErr_Clear();
    return;
  }
  PyObject *key, *child;
  Py_ssize_t pos = 0;
  while (PyDict_Next(children, &pos, &key, &child)) {
    const std::string path = prefix + utf8_of(key);
    auto it = l.index.find(child);
    if (it == l.index.end()) {
      if (child != Py_None && depth < kMaxContainerDepth) {
        Py_INCREF(child);
        link_children(l, child, parent, path + ".", depth + 1);
        Py_DECREF(child);
      }
      continue;
    }
    if (l.run.modules[l.base + it->second].parent >= 0 || it->second == parent) continue;
    l.run.modules[l.base + it->second].parent = static_cast<int32_t>(l.base + parent);
    l.segment[it->second] = path;
  }
  Py_DECREF(children);
}

// Qualified names from the parents' _modules dicts: the keys under which a
// called module holds a child (through containers never called) are the
// child's name segment in named_modules().
void name_modules(Run& run, size_t base, const std::vector<PyObject*>& mods, const std::vector<std::string>& holders) {
  std::unordered_map<PyObject*, size_t> index;
  for (size_t i = 0; i < mods.size(); ++i) index.emplace(mods[i], i);
  std::vector<std::string> segment(mods.size());
  ModuleLinks links{run, base, index, segment};
  for (size_t i = 0; i < mods.size(); ++i) link_children(links, mods[i], i, "", 0);
  // With one root (the usual model), it is named by its class and its
  // descendants exactly as named_modules() names them. With several roots
  // (a GAN's generator and discriminator), descendants are prefixed by their
  // root's label: the variable or attribute its caller held it under
  // ("netG.0"; holder_name) where that names one root only, else its class,
  // numbered in first-call order when two roots share it ("Sequential#2.0").
  std::vector<bool> has_child(mods.size(), false);
  for (size_t i = 0; i < mods.size(); ++i) {
    const int32_t p = run.modules[base + i].parent;
    if (p >= 0) has_child[static_cast<size_t>(p) - base] = true;
  }
  std::unordered_map<std::string, int> roots_per_type, seen_per_type;
  size_t roots_with_children = 0;
  for (size_t i = 0; i < mods.size(); ++i)
    if (run.modules[base + i].parent < 0 && has_child[i]) {
      ++roots_with_children;
      ++roots_per_type[run.modules[base + i].type];
    }
  std::unordered_map<std::string, int> roots_per_holder;
  const auto holder = [&](size_t i) { return i < holders.size() ? holders[i] : std::string(); };
  for (size_t i = 0; i < mods.size(); ++i)
    if (run.modules[base + i].parent < 0 && has_child[i] && !holder(i).empty()) ++roots_per_holder[holder(i)];
  std::vector<std::string> root_label(mods.size());
  for (size_t i = 0; i < mods.size(); ++i) {  // modules are in first-call order
    if (run.modules[base + i].parent >= 0) continue;
    const std::string& type = run.modules[base + i].type;
    root_label[i] = type;
    if (!has_child[i]) continue;
    if (roots_with_children > 1 && !holder(i).empty() && roots_per_holder[holder(i)] == 1)
      root_label[i] = holder(i);
    else if (roots_per_type[type] > 1)
      root_label[i] += "#" + std::to_string(++seen_per_type[type]);
  }
  for (size_t i = 0; i < mods.size(); ++i) {
    std::vector<size_t> chain;
    size_t j = i;
    while (run.modules[base + j].parent >= 0 && chain.size() < 256) {
      chain.push_back(j);
      j = static_cast<size_t>(run.modules[base + j].parent) - base;
    }
    std::string name = chain.empty() || roots_with_children > 1 ? root_label[j] : "";
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if (!name.empty()) name += '.';
      name += segment[*it];
    }
    run.modules[base + i].name = name;
  }
}

}  // namespace

namespace {

// Whether this thread is inside nn.Module._call_impl: torch 1.x iterates
// the global hook dicts lazily there, and a hook removed or added meanwhile
// would raise "dictionary changed size during iteration" in the script.
bool inside_module_call() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  Py_XINCREF(frame);
  bool inside = false;
  while (frame != nullptr && !inside) {
    PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
    inside = PyUnicode_CompareWithASCIIString(code->co_name, "_call_impl") == 0;
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);  // new reference or NULL
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return inside;
}

int sync_pending(void*) {
  sync_module_scopes_with_detail();
  return 0;
}

// Detail switched at a step boundary, in an operator callback that may run
// without the GIL (torch releases it around an operator called from
// Python): the main thread syncs the hooks the next time it runs Python,
// before the next step's forward. (In torch >= 2 the optimizer's step
// post-hooks, the launcher's other sync, run inside the Optimizer.step
// scope, before its end is the boundary.)
void schedule_sync() { Py_AddPendingCall(&sync_pending, nullptr); }

}  // namespace

bool start_module_scopes(const ModuleScopeOptions& options, std::string* error) {
  if (g_scopes != nullptr && g_scopes->active) {
    *error = "module scopes are already being recorded";
    return false;
  }
  delete g_scopes;
  g_scopes = new ScopeState();
  g_scopes->options = options;
  g_scopes->session = ++g_session;
  if (!register_hooks(false)) {
    PyErr_Clear();
    stop_module_scopes();
    *error = "this torch has no global nn.Module forward hooks; layers are not attributed";
    return false;
  }
  g_scopes->active = true;
  stand_in_for_torch_compile();
  detail_window().on_change.store(&schedule_sync, std::memory_order_release);
  return true;
}

void stop_module_scopes() {
  if (g_scopes == nullptr) return;
  g_scopes->active = false;
  detail_window().on_change.store(nullptr, std::memory_order_release);
  remove_hooks();
  restore_torch_compile();
}

void sync_module_scopes_with_detail() {
  if (g_scopes == nullptr || !g_scopes->active || g_scopes->compile_safe) return;
  const bool on = detail_window().on.load(std::memory_order_relaxed);
  if (on == !g_scopes->handles.empty() || inside_module_call()) return;  // else the next step's sync
  if (!on) {
    remove_hooks();
  } else if (!register_hooks(false)) {
    PyErr_Clear();
    remove_hooks();
  }
}

void snapshot_module_scopes(Run& run) {
  if (g_scopes == nullptr) return;
  const size_t base = run.modules.size();
  // A copy, each module held: the attribute lookups below run Python
  // (nn.Module.__getattr__ for _orig_mod, parameters()), where the GIL may
  // pass to the main thread, whose hooks may see a module first and grow
  // g_scopes->modules under a loop over it (a periodic spill's snapshot
  // died so in memmove, torch 2.6: test_loops' grad_scaler). Calls of
  // modules seen after the copy wait for the next snapshot.
  const std::vector<PyObject*> mods = g_scopes->modules;
  const std::vector<std::string> holders = g_scopes->holders;
  for (PyObject* m : mods) Py_INCREF(m);
  // The modules that torch.compile wrapped: their own calls (inside the
  // wrapper's, from its hooks run outside the compiled frame) are left out,
  // so that the wrapper alone stands for them.
  std::vector<bool> wrapped(mods.size(), false);
  for (PyObject* m : mods) {
    ModuleInfo info;
    info.type = type_name(m);
    // torch.compile(module) returns an OptimizedModule holding the module as
    // _orig_mod: shown as that module, marked compiled.
    if (info.type == "OptimizedModule") {
      if (PyObject* orig = PyObject_GetAttrString(m, "_orig_mod")) {
        info.type = type_name(orig);
        info.config = module_config(orig);
        info.compiled = true;
        const uint32_t id = g_scopes->index.find(reinterpret_cast<uint64_t>(orig));
        if (id != FlatMap64::kMissing && id < wrapped.size()) wrapped[id] = true;
        Py_DECREF(orig);
      }
      PyErr_Clear();
    } else if (PyObject* impl = PyObject_GetAttrString(m, "_compiled_call_impl")) {
      // module.compile() (torch >= 2.2): compiled in place, its own hooks
      // still run outside the compiled frame.
      info.compiled = impl != Py_None;
      Py_DECREF(impl);
    }
    PyErr_Clear();
    if (info.config.empty()) info.config = module_config(m);
    const ParameterCount count = parameter_count(m);
    info.params = count.all;
    info.trainable_params = count.trainable;
    run.modules.push_back(std::move(info));
  }
  PyErr_Clear();
  name_modules(run, base, mods, holders);
  for (auto& t : g_scopes->threads) {
    t->events.for_each([&](const ModuleEvent& e) {
      if (e.module >= wrapped.size() || wrapped[e.module]) return;
      ModuleEvent c = e;
      c.module += static_cast<uint32_t>(base);
      run.module_events.push_back(c);
    });
    run.dropped_module_events += t->events.dropped();
  }
  for (PyObject* m : mods) Py_DECREF(m);
  std::stable_sort(run.module_events.begin(), run.module_events.end(),
                   [](const ModuleEvent& a, const ModuleEvent& b) { return a.t_ns < b.t_ns; });
  if (g_scopes->untracked_calls > 0)
    run.notes.push_back("module calls beyond the first " + std::to_string(g_scopes->options.max_modules) +
                        " distinct modules were not attributed: " + std::to_string(g_scopes->untracked_calls));
}

void collect_module_scopes(Run& run) {
  if (g_scopes == nullptr) return;
  snapshot_module_scopes(run);
  for (PyObject* m : g_scopes->modules) Py_DECREF(m);
  delete g_scopes;
  g_scopes = nullptr;
}

}  // namespace torchneck
