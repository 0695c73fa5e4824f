#include <tapegrad/autograd/error.h>

#include <cstdarg>
#include <cstdio>

namespace tg {

MemoryError::MemoryError(const char* format, ...) noexcept {
  va_list args;
  va_start(args, format);
  std::vsnprintf(message_, sizeof message_, format, args);
  va_end(args);
}

}  // namespace tg
