// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Large, long-lived host blocks (the packed weights, the activation arena), aligned for oneDNN's
// vector loads. Plain pages on purpose: asking for transparent huge pages (madvise) made ResNet-18's
// init 3x slower here (28 -> 77-105 ms: the kernel zeroes and compacts 2 MiB pages at first touch).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace executorch::backends::onednn {

struct FreeDeleter {
  void operator()(uint8_t* bytes) const {
    std::free(bytes);
  }
};
using HostBlock = std::unique_ptr<uint8_t, FreeDeleter>;

inline HostBlock allocate_host_block(size_t bytes) {
  constexpr size_t kAlignment = 64;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* block = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (block == nullptr) {
    throw std::bad_alloc();
  }
  return HostBlock(static_cast<uint8_t*>(block));
}

} // namespace executorch::backends::onednn
