#include "InitError.h"

#include <cstdarg>
#include <cstdio>

namespace executorch::backends::onednn {

void fail(runtime::Error code, const char* format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  throw InitError(code, message);
}

} // namespace executorch::backends::onednn
