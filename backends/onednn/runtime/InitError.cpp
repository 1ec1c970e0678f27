// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "InitError.h"

#include <cstdarg>
#include <cstdio>
#include <new>

#include <executorch/runtime/platform/log.h>
#include <oneapi/dnnl/dnnl.hpp>

namespace executorch::backends::onednn {

void fail(runtime::Error code, const char* format, ...) {
  char message[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof(message), format, args);
  va_end(args);
  throw InitError(code, message);
}

runtime::Error run_catching(const char* what, runtime::FunctionRef<void()> body) noexcept {
  using runtime::Error;
  try {
    body();
    return Error::Ok;
  } catch (const InitError& error) {
    ET_LOG(Error, "OneDnnBackend: %s: %s", what, error.what());
    return error.code();
  } catch (const dnnl::error& error) {
    ET_LOG(Error, "OneDnnBackend: %s in oneDNN: %s (status %d)", what, error.what(), static_cast<int>(error.status));
    return error.status == dnnl_unimplemented ? Error::NotSupported : Error::Internal;
  } catch (const std::bad_alloc&) {
    ET_LOG(Error, "OneDnnBackend: %s: out of memory", what);
    return Error::MemoryAllocationFailed;
  } catch (const std::exception& error) {
    ET_LOG(Error, "OneDnnBackend: %s: %s", what, error.what());
    return Error::Internal;
  } catch (...) {
    ET_LOG(Error, "OneDnnBackend: %s: unknown exception", what);
    return Error::Internal;
  }
}

} // namespace executorch::backends::onednn
