// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// The block of streamed constants (runtime/HostMemory.h): where it starts, and when the runtime asks
// for huge pages at all.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "../../runtime/HostMemory.h"

using executorch::backends::onednn::allocate_huge_page_block;
using executorch::backends::onednn::huge_pages_granted;

TEST(HostMemory, HugePagesAreAskedForUnlessTheKernelModeIsNever) {
  EXPECT_TRUE(huge_pages_granted("always [madvise] never"));
  EXPECT_TRUE(huge_pages_granted("[always] madvise never"));
  EXPECT_FALSE(huge_pages_granted("always madvise [never]"));
  EXPECT_FALSE(huge_pages_granted("")); // no such file: a kernel without transparent huge pages
}

TEST(HostMemory, TheStreamedBlockStartsOnA2MiBBoundaryAndHoldsEveryByte) {
  for (const size_t bytes : {size_t{64}, size_t{3} << 20, (size_t{4} << 20) + 100}) {
    const auto block = allocate_huge_page_block(bytes);
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.get()) % (size_t{2} << 20), 0u) << bytes;
    std::memset(block.get(), 0x5a, bytes);
    EXPECT_EQ(block.get()[bytes - 1], 0x5a);
  }
}
