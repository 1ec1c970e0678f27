// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "CpuIsa.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

#include <executorch/runtime/platform/log.h>
#include <oneapi/dnnl/dnnl.h>

namespace executorch::backends::onednn {
namespace {

struct NamedIsa {
  const char* name;
  dnnl_cpu_isa_t isa;
};

// Oldest to newest: effective_isa_name() reports the newest entry the effective set includes.
constexpr NamedIsa kIsas[] = {
    {"sse41", dnnl_cpu_isa_sse41},
    {"avx", dnnl_cpu_isa_avx},
    {"avx2", dnnl_cpu_isa_avx2},
    {"avx2_vnni", dnnl_cpu_isa_avx2_vnni},
    {"avx2_vnni_2", dnnl_cpu_isa_avx2_vnni_2},
    {"avx512_core", dnnl_cpu_isa_avx512_core},
    {"avx512_core_vnni", dnnl_cpu_isa_avx512_core_vnni},
    {"avx512_core_bf16", dnnl_cpu_isa_avx512_core_bf16},
    {"avx512_core_fp16", dnnl_cpu_isa_avx512_core_fp16},
    {"avx512_core_amx", dnnl_cpu_isa_avx512_core_amx},
    {"default", dnnl_cpu_isa_default},
};

} // namespace

runtime::Error set_max_isa(const char* name) noexcept {
  for (const NamedIsa& entry : kIsas) {
    if (std::strcmp(entry.name, name) != 0) {
      continue;
    }
    const dnnl_status_t status = dnnl_set_max_cpu_isa(entry.isa);
    if (status != dnnl_success) {
      ET_LOG(
          Error,
          "OneDnnBackend: %s=%s refused by oneDNN (status %d): the cap must be set before the "
          "first program using the delegate is loaded",
          kMaxIsaOption,
          name,
          static_cast<int>(status));
      return runtime::Error::InvalidArgument;
    }
    return runtime::Error::Ok;
  }
  ET_LOG(Error, "OneDnnBackend: %s: unknown instruction set \"%s\"", kMaxIsaOption, name);
  return runtime::Error::InvalidArgument;
}

const char* effective_isa_name() noexcept {
  const auto effective = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  const char* newest = "none";
  for (const NamedIsa& entry : kIsas) {
    const auto bits = static_cast<unsigned>(entry.isa);
    if (bits != 0 && (bits & effective) == bits) {
      newest = entry.name;
    }
  }
  return newest;
}

namespace {

bool effective_isa_includes_any(std::initializer_list<dnnl_cpu_isa_t> isas) noexcept {
  const auto effective = static_cast<unsigned>(dnnl_get_effective_cpu_isa());
  return std::any_of(isas.begin(), isas.end(), [&](dnnl_cpu_isa_t isa) {
    const auto bits = static_cast<unsigned>(isa);
    return (bits & effective) == bits;
  });
}

} // namespace

bool int8_products_exact() noexcept {
  return effective_isa_includes_any({dnnl_cpu_isa_avx2_vnni, dnnl_cpu_isa_avx512_core_vnni});
}

bool has_bf16_instructions() noexcept {
  return effective_isa_includes_any({dnnl_cpu_isa_avx2_vnni_2, dnnl_cpu_isa_avx512_core_bf16});
}

bool has_amx() noexcept {
  return effective_isa_includes_any({dnnl_cpu_isa_avx512_core_amx});
}

} // namespace executorch::backends::onednn
