// Large, long-lived host blocks (the packed weights, the activation arena), aligned for oneDNN and,
// from 2 MiB up, backed by transparent huge pages where the kernel allows it: packing a model's
// weights into 4 KiB pages spent most of init() in page faults, and the arena is walked every run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace executorch::backends::onednn {

struct FreeDeleter {
  void operator()(uint8_t* bytes) const {
    std::free(bytes);
  }
};
using HostBlock = std::unique_ptr<uint8_t, FreeDeleter>;

inline HostBlock allocate_host_block(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t alignment = bytes >= kHugePage ? kHugePage : 64;
  const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  void* block = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (block == nullptr) {
    throw std::bad_alloc();
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (alignment == kHugePage) {
    madvise(block, rounded, MADV_HUGEPAGE); // advice only: failure leaves ordinary pages
  }
#endif
  return HostBlock(static_cast<uint8_t*>(block));
}

} // namespace executorch::backends::onednn
