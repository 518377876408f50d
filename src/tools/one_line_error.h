// The native tools' last line of defence: any exception becomes one line,
// "torchneck: what" on stderr (newlines folded), and exit status 2, as the
// Python launcher's cli.main does for its commands.
#pragma once

#include <cstdio>
#include <exception>
#include <string>

namespace torchneck::tools {

template <typename Run>
int run_with_one_line_errors(Run&& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "torchneck: %s\n", msg.c_str());
    return 2;
  }
}

}  // namespace torchneck::tools
