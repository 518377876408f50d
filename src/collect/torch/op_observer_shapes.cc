// The sampled shape signature of an operator's inputs (op_observer_state.h,
// build_signature), for the shape callback in op_observer.cc: a short text
// built into the thread's own reserved strings, no allocation in steady
// state.
#include "collect/torch/op_observer_state.h"  // first: ATen under NDEBUG

#include <charconv>
#include <cstdint>
#include <string>

namespace torchneck::op_observer_detail {

namespace {

void append_int(std::string& s, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

void append_dtype(std::string& s, c10::ScalarType type) {
  if (!s.empty()) s += ',';
  for (const char* p = c10::toString(type); *p != '\0'; ++p) {
    const char c = *p;
    s += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
}

void append_tensor(ThreadState* st, const at::Tensor& t) {
  std::string& s = st->shape_text;
  if (!t.defined()) {
    s += "None";
    return;
  }
  s += '[';
  const auto sizes = t.sizes();
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (d != 0) s += ", ";
    append_int(s, sizes[d]);
  }
  s += ']';
  append_dtype(st->dtype_text, t.scalar_type());
}

// Tensors as their shape ("[32, 3]"), tensor lists as nested shapes, other
// values as their type ("int", "float", "None", "int[2]"): values are left
// out so that e.g. different scalar operands do not split a signature.
void append_value(ThreadState* st, const c10::IValue& v) {
  std::string& s = st->shape_text;
  if (v.isTensor()) {
    append_tensor(st, v.toTensor());
  } else if (v.isNone()) {
    s += "None";
  } else if (v.isInt() || v.isSymInt()) {
    s += "int";
  } else if (v.isDouble()) {
    s += "float";
  } else if (v.isBool()) {
    s += "bool";
  } else if (v.isComplexDouble()) {
    s += "complex";
  } else if (v.isString()) {
    s += "str";
  } else if (v.isDevice()) {
    s += "device";
  } else if (v.isTensorList()) {
    const auto list = v.toListRef();
    s += '[';
    for (size_t i = 0; i < list.size(); ++i) {
      if (i != 0) s += ", ";
      if (i == kMaxListElements) {
        s += "...x";
        append_int(s, static_cast<int64_t>(list.size()));
        break;
      }
      append_tensor(st, list[i].toTensor());
    }
    s += ']';
  } else if (v.isList()) {
    const size_t n = v.toListRef().size();
    s += v.isIntList() ? "int" : v.isDoubleList() ? "float"
         : v.isBoolList() ? "bool" : "list";
    s += '[';
    append_int(s, static_cast<int64_t>(n));
    s += ']';
  } else {
    s += '?';
  }
}

}  // namespace

void build_signature(ThreadState* st, const at::RecordFunction& fn) {
  std::string& s = st->shape_text;
  s.clear();
  st->dtype_text.clear();
  const auto inputs = fn.inputs();
  s += '[';
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i != 0) s += ", ";
    if (i == kMaxSignatureInputs || s.size() > kMaxSignatureChars) {
      s += "...";
      break;
    }
    append_value(st, inputs[i]);
  }
  s += ']';
  if (!st->dtype_text.empty()) {
    s += ' ';
    s += st->dtype_text;
  }
}

}  // namespace torchneck::op_observer_detail
