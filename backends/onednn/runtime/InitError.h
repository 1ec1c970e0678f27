// Errors raised while building a compiled graph in init(). They never leave the backend: init()
// catches them and turns them into an executorch Error plus one log line.
#pragma once

#include <exception>
#include <string>

#include <executorch/runtime/core/error.h>

namespace executorch::backends::onednn {

class InitError : public std::exception {
 public:
  InitError(runtime::Error code, std::string message)
      : code_(code), message_(std::move(message)) {}

  runtime::Error code() const {
    return code_;
  }
  const char* what() const noexcept override {
    return message_.c_str();
  }

 private:
  runtime::Error code_;
  std::string message_;
};

// Throws InitError(code, printf-style message).
[[noreturn]] void fail(runtime::Error code, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

// Shorthand for the common case: the payload is malformed or describes something invalid.
#define ODNN_CHECK(condition, ...)                                        \
  do {                                                                    \
    if (!(condition)) {                                                   \
      ::executorch::backends::onednn::fail(                               \
          ::executorch::runtime::Error::InvalidProgram, __VA_ARGS__);     \
    }                                                                     \
  } while (0)

} // namespace executorch::backends::onednn
