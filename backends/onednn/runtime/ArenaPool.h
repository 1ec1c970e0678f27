// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The activation arenas of every compiled graph in the process. A graph needs its arena only while it
// executes, and the delegates of a method run one after another, so a graph leases an arena from this
// pool for each execute() instead of owning one: a program split into many delegate calls (an LLM
// exported with ExecuTorch's custom attention makes N + 1 a token) holds one arena, the largest, not
// one per delegate. Executions that overlap on several threads lease one each. A lease takes the
// block released last, so one thread running its delegates gets the same block every time and the
// graphs' memory objects keep pointing into it (CompiledGraph rebinds them when the block changes).
#pragma once

#include <cstddef>
#include <cstdint>

#include "HostMemory.h"

namespace executorch::backends::onednn {

// Counts a live graph whose arena is `bytes` for as long as it lives, and makes sure a free block
// of at least that size is in the pool (allocated at init, so that execute() on one thread never
// allocates). The last graph to go frees the blocks. The constructor throws std::bad_alloc.
class ArenaMembership {
 public:
  explicit ArenaMembership(size_t bytes);
  ~ArenaMembership();
  ArenaMembership(const ArenaMembership&) = delete;
  ArenaMembership& operator=(const ArenaMembership&) = delete;
};

// A block of at least `bytes` for one execute(), back into the pool when the lease ends. data() is
// null when the pool had no free block large enough and allocating one failed.
class ArenaLease {
 public:
  explicit ArenaLease(size_t bytes) noexcept;
  ~ArenaLease();
  ArenaLease(const ArenaLease&) = delete;
  ArenaLease& operator=(const ArenaLease&) = delete;

  uint8_t* data() const noexcept {
    return block_.get();
  }

 private:
  HostBlock block_;
  size_t bytes_ = 0;
};

// The bytes of the blocks now free in the pool (tests and diagnostics).
size_t arena_pool_free_bytes();

} // namespace executorch::backends::onednn
