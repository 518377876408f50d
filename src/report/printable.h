// Text safe to print to a terminal or to write to a .txt file that a user
// will `cat`: a name from the user's script (a function, a module class, a
// path, an argument) cannot clear the screen, retitle the terminal or
// reorder the line around it.
#pragma once

#include <string>
#include <string_view>

namespace torchneck {

// `text` with printable UTF-8, ' ' and '\n' kept as they are and everything
// else shown as a visible escape: C0 controls (but '\n'), DEL and bytes that
// are not valid UTF-8 (truncated, overlong, a surrogate, above U+10FFFF) as
// `\x1b`, `\xff`; C1 controls (U+0080-U+009F) and the bidirectional controls
// (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069) as `\u202e`. The
// escapes are for the eye: a backslash already in the text is kept as it is.
std::string printable_text(std::string_view text);

}  // namespace torchneck
