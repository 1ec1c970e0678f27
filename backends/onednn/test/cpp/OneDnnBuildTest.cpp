// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// What our build of oneDNN must do beyond the upstream release (backends/onednn/cmake/OneDnnLibrary.cmake
// patches it): a threadpool stream runs primitives with oneDNN's verbose log on. The test links its own
// copy of the same cached library, built from the same patched source.
#include <cstdlib>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_threadpool.hpp>

#include "../../runtime/WorkerPool.h"

namespace executorch::backends::onednn {
namespace {

// Upstream 3.13.1 leaves a threadpool stream's verbose-profiler flag uninitialized; read as true, an
// execute() with the verbose log on runs the primitive, then returns dnnl_unimplemented. Whether it
// reads true depends on what the heap held before (in 2 of 10 fresh test workers it did): here the
// stream is made from a block glibc hands back as it was written, so that an unpatched build fails
// every time (measured: status 3 in 3 of 3 runs on the unpatched library, 2026-12-03).
TEST(OneDnnBuild, AThreadpoolStreamRunsPrimitivesWithTheVerboseLogOn) {
  const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  WorkerPool pool(2);
  const dnnl::memory::desc desc({4, 8}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::ab);
  std::vector<float> from(32, 1.5f), to(32, 0.0f);
  dnnl::memory source(desc, engine, from.data()), destination(desc, engine, to.data());
  const dnnl::reorder copy(source, destination);
  // glibc clears the word a reused block's flag would sit in only for blocks from its per-thread
  // cache (7 per size): freed beyond that, written blocks of the stream's size come back as they were.
  constexpr size_t kStreamBytes = 24;
  std::vector<void*> blocks;
  for (int i = 0; i < 32; ++i) {
    blocks.push_back(std::malloc(kStreamBytes));
    std::memset(blocks.back(), 0xA5, kStreamBytes);
  }
  for (void* block : blocks) {
    std::free(block);
  }
  blocks.clear();
  for (int i = 0; i < 7; ++i) {
    blocks.push_back(std::malloc(kStreamBytes)); // the per-thread cache's, taken
  }
  dnnl::stream stream = dnnl::threadpool_interop::make_stream(engine, &pool);
  for (void* block : blocks) {
    std::free(block);
  }
  ASSERT_EQ(dnnl_set_verbose(1), dnnl_success);
  const dnnl_exec_arg_t args[] = {{DNNL_ARG_FROM, source.get()}, {DNNL_ARG_TO, destination.get()}};
  const dnnl_status_t status = dnnl_primitive_execute(copy.get(), stream.get(), 2, args);
  stream.wait();
  dnnl_set_verbose(0);
  EXPECT_EQ(status, dnnl_success) << "an execute() that ran reported failure with the verbose log on";
  EXPECT_EQ(to, from);
}

} // namespace
} // namespace executorch::backends::onednn
