// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Large, long-lived host blocks (the packed weights, the activation arena), aligned for oneDNN's
// vector loads. Plain pages on purpose: asking for transparent huge pages (madvise) made ResNet-18's
// init 3x slower here (28 -> 77-105 ms: the kernel zeroes and compacts 2 MiB pages at first touch).
// The exception is the block of streamed constants (allocate_huge_page_block()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

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

// The backend option "huge_pages" (int, read when a program is loaded): whether the constants that
// steps read whole on every call where the program holds them are first copied into one block of
// 2 MiB pages (GraphBuilder::move_streamed_constants()). A one-row matmul streams its weights from
// memory, and in 4 KiB pages its loads wait on the TLB: on the model-167 Xeon (a KVM guest) a decode
// step of the 1.1B 8da4w LLM took 20.1-21.1 ms from 2 MiB pages against 24.3-24.6 ms where the
// program maps them (23.8-24.7 ms from a copy in 4 KiB pages). The price is paid at load: the kernel
// clears every 2 MiB page, and there the host backs each afresh: 0.35 -> 2.9-3.6 s for that LLM's
// 583 MB. `large` (the default) moves them for a graph streaming kLargeStreamedBytes or more, which
// keeps small models' load time.
inline constexpr char kHugePagesOption[] = "huge_pages";
enum class HugePages : int { never = 0, large = 1, always = 2 };
inline constexpr size_t kLargeStreamedBytes = size_t{16} << 20;
void set_huge_pages(HugePages use) noexcept;
HugePages huge_pages() noexcept;

// Whether the kernel's transparent huge page mode (the text of /sys/kernel/mm/transparent_hugepage/enabled,
// e.g. "always [madvise] never") grants them to a region that asks with madvise: not under "[never]",
// nor where the file is missing (a kernel without them, or not Linux). Where not, the copy into a
// block of plain pages would cost load time for no speed.
bool huge_pages_granted(const std::string& mode);
bool huge_pages_granted(); // this machine's, read once

// `bytes` in one 64-byte-aligned block that starts on a 2 MiB boundary, in transparent huge pages
// where the kernel grants them (plain pages otherwise: madvise is a hint). Throws std::bad_alloc.
std::shared_ptr<uint8_t> allocate_huge_page_block(size_t bytes);

} // namespace executorch::backends::onednn
