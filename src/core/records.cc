#include "torchneck/records.h"

namespace torchneck {

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::kOperator: return "operator";
    case OpKind::kBackward: return "backward";
    case OpKind::kUserScope: return "user_scope";
    case OpKind::kTorchScript: return "torchscript";
  }
  return "unknown";
}

}  // namespace torchneck
