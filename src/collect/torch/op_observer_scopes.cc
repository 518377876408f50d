// open_user_scope / close_user_scope (op_observer.h): the launcher's own
// scopes (torchneck::backward, torchneck::graph_watch), a RecordFunction for
// other observers (torch.profiler) and a frame of ours beside it.
#include "collect/torch/op_observer.h"

#include "collect/torch/op_observer_state.h"  // first: ATen under NDEBUG

#include <cstdint>

namespace torchneck {
namespace {

struct UserScope {
  UserScope() : fn(at::RecordScope::USER_SCOPE) {}
  at::RecordFunction fn;
  uint64_t key = 0;
};

}  // namespace

void* open_user_scope(const char* name) {
  auto* scope = new UserScope();
  skip_user_scope_callbacks(true);
  if (scope->fn.isActive()) scope->fn.before(name);
  skip_user_scope_callbacks(false);
  scope->key = begin_user_scope(name);
  return scope;
}

void close_user_scope(void* scope) {
  auto* s = static_cast<UserScope*>(scope);
  end_user_scope(s->key);
  skip_user_scope_callbacks(true);
  delete s;  // the RecordFunction's destructor ends it for other observers
  skip_user_scope_callbacks(false);
}

}  // namespace torchneck
