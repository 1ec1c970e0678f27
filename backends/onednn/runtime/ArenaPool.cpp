// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "ArenaPool.h"

#include <algorithm>
#include <mutex>
#include <new>
#include <vector>

namespace executorch::backends::onednn {
namespace {

struct Block {
  HostBlock bytes;
  size_t size = 0;
};

struct Pool {
  std::mutex mutex;
  std::vector<Block> free; // the block released last at the back
  size_t members = 0;
};

// Never destroyed: a graph of a program that outlives static destruction still finds its pool.
Pool& pool() {
  static Pool* instance = new Pool();
  return *instance;
}

} // namespace

ArenaMembership::ArenaMembership(size_t bytes) {
  Pool& state = pool();
  std::lock_guard<std::mutex> lock(state.mutex);
  const bool fits = std::any_of(state.free.begin(), state.free.end(), [&](const Block& b) { return b.size >= bytes; });
  if (!fits) {
    // The largest free block gives way to one large enough for every graph so far.
    Block grown{allocate_host_block(bytes), bytes};
    const auto largest = std::max_element(
        state.free.begin(), state.free.end(), [](const Block& a, const Block& b) { return a.size < b.size; });
    if (largest != state.free.end()) {
      state.free.erase(largest);
    }
    state.free.push_back(std::move(grown));
  }
  ++state.members;
}

ArenaMembership::~ArenaMembership() {
  Pool& state = pool();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (--state.members == 0) {
    state.free.clear();
  }
}

ArenaLease::ArenaLease(size_t bytes) noexcept : bytes_(bytes) {
  if (bytes == 0) {
    return;
  }
  Pool& state = pool();
  {
    std::lock_guard<std::mutex> lock(state.mutex);
    for (auto it = state.free.rbegin(); it != state.free.rend(); ++it) {
      if (it->size >= bytes) {
        block_ = std::move(it->bytes);
        bytes_ = it->size;
        state.free.erase(std::next(it).base());
        return;
      }
    }
  }
  // Every block large enough is leased by an execution on another thread.
  try {
    block_ = allocate_host_block(bytes);
  } catch (const std::bad_alloc&) {
    bytes_ = 0;
  }
}

ArenaLease::~ArenaLease() {
  if (!block_) {
    return;
  }
  Pool& state = pool();
  std::lock_guard<std::mutex> lock(state.mutex);
  try {
    state.free.push_back({std::move(block_), bytes_});
  } catch (const std::bad_alloc&) {
    // The block is freed instead of kept: a later lease allocates again.
  }
}

size_t arena_pool_free_bytes() {
  Pool& state = pool();
  std::lock_guard<std::mutex> lock(state.mutex);
  size_t bytes = 0;
  for (const Block& block : state.free) {
    bytes += block.size;
  }
  return bytes;
}

} // namespace executorch::backends::onednn
