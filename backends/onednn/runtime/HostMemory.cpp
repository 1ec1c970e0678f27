// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "HostMemory.h"

#include <atomic>
#include <fstream>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace executorch::backends::onednn {

namespace {
std::atomic<int> huge_pages_setting{static_cast<int>(HugePages::large)};
} // namespace

void set_huge_pages(HugePages use) noexcept {
  huge_pages_setting.store(static_cast<int>(use));
}

HugePages huge_pages() noexcept {
  return static_cast<HugePages>(huge_pages_setting.load());
}

bool huge_pages_granted(const std::string& mode) {
  return mode.find('[') != std::string::npos && mode.find("[never]") == std::string::npos;
}

bool huge_pages_granted() {
  static const bool granted = [] {
    std::ifstream file("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string mode;
    std::getline(file, mode);
    return huge_pages_granted(mode);
  }();
  return granted;
}

std::shared_ptr<uint8_t> allocate_huge_page_block(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage + kHugePage; // room to align
  void* region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    throw std::bad_alloc();
  }
  const auto first = (reinterpret_cast<uintptr_t>(region) + kHugePage - 1) / kHugePage * kHugePage;
  auto* start = reinterpret_cast<uint8_t*>(first);
  (void)madvise(start, bytes, MADV_HUGEPAGE); // only the 2 MiB ranges wholly inside get huge pages
  return std::shared_ptr<uint8_t>(start, [region, mapped](uint8_t*) { munmap(region, mapped); });
#else
  return std::shared_ptr<uint8_t>(allocate_host_block(bytes));
#endif
}

} // namespace executorch::backends::onednn
