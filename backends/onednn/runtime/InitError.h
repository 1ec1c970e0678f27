// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Errors raised while building a compiled graph in init(). They never leave the backend: init()
// catches them and turns them into an executorch Error plus one log line.
#pragma once

#include <exception>
#include <string>

#include <executorch/runtime/core/error.h>
#include <executorch/runtime/core/function_ref.h>

namespace executorch::backends::onednn {

class InitError : public std::exception {
 public:
  InitError(runtime::Error code, std::string message) : code_(code), message_(std::move(message)) {}

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
[[noreturn]] void fail(runtime::Error code, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Runs `body` and returns Ok, or what it threw as an Error (InitError: its code; oneDNN's
// "unimplemented": NotSupported; out of memory: MemoryAllocationFailed; anything else: Internal),
// logged in one line that starts with `what` ("init failed").
runtime::Error run_catching(const char* what, runtime::FunctionRef<void()> body) noexcept;

// Shorthand for the common case: the payload is malformed or describes something invalid.
#define ODNN_CHECK(condition, ...)                                                                     \
  do {                                                                                                 \
    if (!(condition)) {                                                                                \
      ::executorch::backends::onednn::fail(::executorch::runtime::Error::InvalidProgram, __VA_ARGS__); \
    }                                                                                                  \
  } while (0)

} // namespace executorch::backends::onednn
