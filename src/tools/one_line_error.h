// The native tools' last line of defence: any exception becomes one line,
// "torchneck: what" on stderr (newlines folded, a path's or a name's control
// characters shown as printable_text escapes them), and exit status 2, as the
// Python launcher's cli.main does for its commands.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

#include "report/printable.h"

namespace torchneck::tools {

template <typename Run>
int run_with_one_line_errors(Run&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "torchneck: %s\n", printable_text(msg).c_str());
    return 2;
  }
}

}  // namespace torchneck::tools
