// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The process's pool of activation arenas (runtime/ArenaPool.h): a lease is at least as large as asked,
// one thread leasing again gets the block it released last (so a graph's memory objects stay bound),
// overlapping leases get distinct blocks, and a graph's membership keeps a large enough block free,
// replacing a smaller one rather than adding to it. Other tests' graphs may hold members of the pool
// too, so each check holds whatever else the free list contains.
#include <cstring>
#include <thread>

#include <gtest/gtest.h>

#include "../../runtime/ArenaPool.h"

namespace executorch::backends::onednn {
namespace {

TEST(ArenaPool, ALeaseIsLargeEnoughAndWritable) {
  const ArenaMembership member(1 << 20);
  const ArenaLease lease(1 << 20);
  ASSERT_NE(lease.data(), nullptr);
  std::memset(lease.data(), 0x5a, 1 << 20); // the whole size is ours (ASan/valgrind would object)
  EXPECT_EQ(lease.data()[(1 << 20) - 1], 0x5a);
}

TEST(ArenaPool, OneThreadGetsTheBlockItReleasedLast) {
  const ArenaMembership member(64 << 10);
  uint8_t* first = nullptr;
  {
    const ArenaLease lease(64 << 10);
    first = lease.data();
  }
  for (size_t bytes : {size_t{64 << 10}, size_t{1000}, size_t{1}}) {
    const ArenaLease again(bytes);
    EXPECT_EQ(again.data(), first) << bytes << " bytes: a smaller lease takes the block released last";
  }
}

TEST(ArenaPool, OverlappingLeasesGetDistinctBlocks) {
  const ArenaMembership member(4096);
  const ArenaLease outer(4096);
  uint8_t* inner_data = nullptr;
  std::thread other([&] {
    const ArenaLease inner(4096);
    inner_data = inner.data();
    ASSERT_NE(inner_data, nullptr);
    std::memset(inner_data, 1, 4096);
  });
  other.join();
  ASSERT_NE(outer.data(), nullptr);
  EXPECT_NE(outer.data(), inner_data);
}

TEST(ArenaPool, ALargerMemberReplacesTheSmallerBlockRatherThanAddingOne) {
  const size_t before = arena_pool_free_bytes();
  const ArenaMembership small(3 << 20);
  const ArenaMembership large(5 << 20); // the 3 MiB block gives way to a 5 MiB one
  EXPECT_LE(arena_pool_free_bytes() - before, size_t{5 << 20}) << "the pool kept both blocks";
  uint8_t* large_block = nullptr;
  {
    const ArenaLease lease(5 << 20);
    ASSERT_NE(lease.data(), nullptr);
    large_block = lease.data();
  }
  const ArenaLease small_lease(3 << 20);
  EXPECT_EQ(small_lease.data(), large_block) << "both graphs' leases share one block";
}

TEST(ArenaPool, AZeroByteLeaseHasNoBlock) {
  const ArenaLease lease(0);
  EXPECT_EQ(lease.data(), nullptr);
}

TEST(ArenaPool, LeasesWorkAgainAfterTheLastMemberLeft) {
  {
    const ArenaMembership member(8192);
  }
  const ArenaMembership member(8192);
  const ArenaLease lease(8192);
  ASSERT_NE(lease.data(), nullptr);
  std::memset(lease.data(), 2, 8192);
}

} // namespace
} // namespace executorch::backends::onednn
