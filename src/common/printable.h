// Printable: bytes from outside (user IDs, item IDs, Redis keys built from them)
// made safe to put in a log line or an error message. A user ID holding CR/LF
// would otherwise forge log lines, and a 1 MB ID would flood the log.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ef {

// A control byte: below 0x20, or DEL (0x7f).
constexpr bool IsControlByte(unsigned char c) { return c < 0x20 || c == 0x7f; }

// Returns `bytes` with every control byte (< 0x20, 0x7f) escaped — \r, \n and
// \t as such, the others as \xNN — and backslash as "\\"; bytes >= 0x80 are
// kept (UTF-8 stays readable). If `bytes` is longer than `max_len`, only its
// first `max_len` bytes are shown, followed by "...(N bytes)" with N the full
// length. The result never contains a control byte. Allocates; not for hot
// paths that log nothing.
std::string Printable(std::string_view bytes, size_t max_len = 256);

}  // namespace ef
