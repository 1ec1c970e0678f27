// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer entry point over the payload parser and OneDnnBackend's init()/execute()/destroy().
//
// The input is a payload (serialization/FORMAT.md), handed to the registered backend's init() through
// ExecuTorch's backend registry, as a program load does. Almost every mutation of a real payload
// would die at the header's CRC-32, so the harness first repairs the header, steered by one byte:
// the top byte of total_size (offset 15), which a repaired header overwrites anyway and which is 0 in
// every real payload:
//   bit 6 clear: total_size := the input's size
//   bit 6 set:   total_size is left as it is (its top byte is this one, so the size check refuses it)
//   bit 7 clear: checksum := CRC-32 over bytes [20, end)   (bits 6 and 7 clear: "sealed", the usual case)
//   bit 7 set:   the checksum is left as it is, so the check itself is fuzzed
//   bits 0-1:    how constants are served: 0 every constant the payload names, with the bytes its
//                dims and dtype call for (and its weight checksum, when the payload carries one);
//                1 no named data map at all; 2 each constant one byte short; 3 an empty map
// Constants are made up by the harness (parse_payload() is run once up front to learn what they are),
// so seeds need no weights. When init() succeeds the program is run once on inputs of the sizes it
// was compiled for (a dynamic one also at every size's minimum), then destroyed; every constant
// buffer the backend took must be released by then, and init() must refuse what parse_payload() refuses
// (both are checked with abort()).
//
// Resource limits of the harness (not of the runtime): payloads whose values hold more than
// kMaxValueBytes (64 MiB) are skipped before init() (a hostile payload may ask for any allocation up to 2^40
// elements; the runtime turns a failed allocation into MemoryAllocationFailed, but the fuzzer would
// report it as an out-of-memory), and execute() runs only up to kMaxExecuteBytes (16 MiB).
//
// Built twice: with clang and -fsanitize=fuzzer,address,undefined as onednn_payload_fuzzer
// (EXECUTORCH_ONEDNN_FUZZ), and with the project's compiler as onednn_fuzz_replay (replay_main.cpp,
// EXECUTORCH_BUILD_TESTS), which runs the seeds and regressions/ in ctest. Set ONEDNN_FUZZ_LOG=1 to
// see the backend's log lines (silenced by default: every refused input logs one).
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

#include "../../runtime/DynamicShapes.h"
#include "../../runtime/InitError.h"
#include "../../runtime/Payload.h"
#include "../../runtime/Schema.h"

extern "C" int onednn_backend_set_num_threads(int threads); // runtime/OneDnnBackend.cpp

namespace {

namespace odnn = executorch::backends::onednn;
using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::FreeableBuffer;
using executorch::runtime::Result;

constexpr size_t kTotalSizeOffset = 8;
constexpr size_t kControlOffset = 15; // top byte of total_size
constexpr size_t kChecksumOffset = odnn::kChecksummedFrom - 4;
constexpr uint8_t kKeepChecksum = 0x80;
constexpr uint8_t kKeepTotalSize = 0x40;
enum ConstantMode : uint8_t { kExact = 0, kNoMap = 1, kShort = 2, kEmptyMap = 3 };

constexpr uint64_t kMaxValueBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxExecuteBytes = uint64_t{16} << 20;

// CRC-32 (zlib's), written apart from the runtime's (runtime/Payload.cpp), so that sealing does not
// take the checked code's word for it.
std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    table[byte] = crc;
  }
  return table;
}
const std::array<uint32_t, 256> kCrcTable = make_crc_table();

// The CRC register after `size` bytes, from `crc` (not inverted at either end).
uint32_t crc_register(uint32_t crc, const uint8_t* data, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    crc = kCrcTable[(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
  }
  return crc;
}

uint32_t crc32(const uint8_t* data, size_t size) {
  return ~crc_register(0xFFFFFFFFu, data, size);
}

// Rewrites the last 4 bytes of `bytes` (at least 4) so that their CRC-32 is `target`: the register
// walked backwards from the target through those 4 bytes.
void forge_crc32(std::vector<uint8_t>& bytes, uint32_t target) {
  static const std::array<uint8_t, 256> by_top_byte = [] {
    std::array<uint8_t, 256> index{};
    for (uint32_t i = 0; i < 256; ++i) {
      index[kCrcTable[i] >> 24] = static_cast<uint8_t>(i);
    }
    return index;
  }();
  const size_t prefix = bytes.size() - 4;
  const uint32_t before = crc_register(0xFFFFFFFFu, bytes.data(), prefix);
  uint32_t reg = ~target;
  for (int step = 0; step < 4; ++step) {
    const uint8_t i = by_top_byte[reg >> 24];
    reg = ((reg ^ kCrcTable[i]) << 8) | i;
  }
  const uint32_t tail = reg ^ before;
  for (int i = 0; i < 4; ++i) {
    bytes[prefix + i] = static_cast<uint8_t>(tail >> (8 * i));
  }
  if (crc32(bytes.data(), bytes.size()) != target) {
    std::fprintf(stderr, "fuzz_payload: forging a CRC-32 failed (harness bug)\n");
    std::abort();
  }
}

size_t dtype_size(uint8_t dtype) {
  switch (static_cast<odnn::DType>(dtype)) {
    case odnn::DType::F32:
    case odnn::DType::S32:
      return 4;
    case odnn::DType::BF16:
    case odnn::DType::F16:
      return 2;
    case odnn::DType::S64:
      return 8;
    default:
      return 1;
  }
}

uint64_t value_bytes(const odnn::ValueRecord& value) {
  uint64_t count = 1;
  for (int64_t dim : value.dims) {
    count *= static_cast<uint64_t>(dim); // parse_payload bounds the product by 2^40
  }
  return count * dtype_size(value.dtype);
}

// Deterministic small contents: floats in [-1, 1), bf16 the same, integers 0 (valid indices), bools
// alternating.
void fill(uint8_t dtype, uint8_t* data, size_t bytes, uint32_t seed) {
  uint32_t state = seed * 2654435761u + 12345u;
  switch (static_cast<odnn::DType>(dtype)) {
    case odnn::DType::F32:
      for (size_t i = 0; i + 4 <= bytes; i += 4) {
        state = state * 1664525u + 1013904223u;
        const float v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
        std::memcpy(data + i, &v, 4);
      }
      break;
    case odnn::DType::BF16:
      for (size_t i = 0; i + 2 <= bytes; i += 2) {
        state = state * 1664525u + 1013904223u;
        const float v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        const uint16_t high = static_cast<uint16_t>(bits >> 16);
        std::memcpy(data + i, &high, 2);
      }
      break;
    case odnn::DType::Bool:
      for (size_t i = 0; i < bytes; ++i) {
        data[i] = static_cast<uint8_t>(i & 1u);
      }
      break;
    case odnn::DType::S8:
    case odnn::DType::U8:
      for (size_t i = 0; i < bytes; ++i) {
        state = state * 1664525u + 1013904223u;
        data[i] = static_cast<uint8_t>(state >> 24);
      }
      break;
    default:
      std::memset(data, 0, bytes);
  }
}

// The constants a payload names, made up; counts the buffers it hands out and gets back.
class ConstantMap final : public executorch::runtime::NamedDataMap {
 public:
  void add(std::string key, std::vector<uint8_t> bytes) {
    entries_[std::move(key)] = std::move(bytes);
  }
  Result<const executorch::runtime::TensorLayout> get_tensor_layout(std::string_view) const override {
    return Error::NotImplemented;
  }
  Result<FreeableBuffer> get_data(std::string_view key) const override {
    const auto found = entries_.find(key);
    if (found == entries_.end()) {
      return Error::NotFound;
    }
    ++out_;
    auto on_free = [](void* context, void*, size_t) { ++*static_cast<int*>(context); };
    return FreeableBuffer(found->second.data(), found->second.size(), on_free, &freed_);
  }
  Error load_data_into(std::string_view key, void* buffer, size_t size) const override {
    const auto found = entries_.find(key);
    if (found == entries_.end() || found->second.size() != size) {
      return Error::NotFound;
    }
    std::memcpy(buffer, found->second.data(), size);
    return Error::Ok;
  }
  Result<uint32_t> get_num_keys() const override {
    return static_cast<uint32_t>(entries_.size());
  }
  Result<const char*> get_key(uint32_t index) const override {
    if (index >= entries_.size()) {
      return Error::InvalidArgument;
    }
    auto it = entries_.begin();
    std::advance(it, index);
    return it->first.c_str();
  }
  int outstanding() const {
    return out_ - freed_;
  }

 private:
  std::map<std::string, std::vector<uint8_t>, std::less<>> entries_;
  mutable int out_ = 0;
  mutable int freed_ = 0;
};

// A contiguous tensor over its own storage.
class Tensor {
 public:
  Tensor(const std::vector<int64_t>& dims, uint8_t dtype, uint32_t seed)
      : sizes_(dims.begin(), dims.end()), dim_order_(dims.size()), strides_(dims.size()) {
    size_t count = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      dim_order_[d] = static_cast<uint8_t>(d);
      strides_[d] = static_cast<int32_t>(count);
      count *= static_cast<size_t>(dims[d]);
    }
    data_.resize(count * dtype_size(dtype) + 1); // + 1: never a null data pointer
    fill(dtype, data_.data(), data_.size() - 1, seed);
    impl_ = std::make_unique<executorch::aten::TensorImpl>(
        scalar_type(dtype),
        static_cast<ssize_t>(sizes_.size()),
        sizes_.data(),
        data_.data(),
        dim_order_.data(),
        strides_.data(),
        executorch::runtime::TensorShapeDynamism::STATIC);
    value_ = EValue(executorch::aten::Tensor(impl_.get()));
  }
  EValue* evalue() {
    return &value_;
  }

 private:
  static executorch::aten::ScalarType scalar_type(uint8_t dtype) {
    using executorch::aten::ScalarType;
    switch (static_cast<odnn::DType>(dtype)) {
      case odnn::DType::BF16:
        return ScalarType::BFloat16;
      case odnn::DType::S64:
        return ScalarType::Long;
      case odnn::DType::Bool:
        return ScalarType::Bool;
      default:
        return ScalarType::Float;
    }
  }

  std::vector<int32_t> sizes_;
  std::vector<uint8_t> dim_order_;
  std::vector<int32_t> strides_;
  std::vector<uint8_t> data_;
  std::unique_ptr<executorch::aten::TensorImpl> impl_;
  EValue value_;
};

bool log_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("ONEDNN_FUZZ_LOG");
    return value != nullptr && value[0] != '\0' && value[0] != '0';
  }();
  return enabled;
}

void emit_log(
    et_timestamp_t, et_pal_log_level_t level, const char*, const char*, size_t, const char* message, size_t length) {
  if (log_enabled()) {
    std::fprintf(stderr, "[%c] %.*s\n", static_cast<char>(level), static_cast<int>(length), message);
  }
}

executorch::runtime::BackendInterface* backend() {
  static executorch::runtime::BackendInterface* instance = [] {
    executorch::runtime::register_pal(executorch::runtime::PalImpl::create(emit_log, __FILE__));
    executorch::runtime::runtime_init();
    // One thread: the machine is shared, and runs are reproducible.
    onednn_backend_set_num_threads(1);
    auto* found = executorch::runtime::get_backend_class("OneDnnBackend");
    if (found == nullptr) {
      std::fprintf(stderr, "fuzz_payload: OneDnnBackend is not registered\n");
      std::abort();
    }
    return found;
  }();
  return instance;
}

bool fits_int32(const std::vector<int64_t>& dims) {
  for (int64_t dim : dims) {
    if (dim > INT32_MAX) {
      return false;
    }
  }
  return true;
}

// Runs the program once on inputs of `payload`'s sizes (a specialized payload's, for dynamic ones).
void execute_once(
    executorch::runtime::BackendInterface* backend,
    DelegateHandle* handle,
    const odnn::Payload& generic,
    const odnn::Payload& sizes,
    const std::vector<int64_t>& symbols) {
  std::vector<std::unique_ptr<Tensor>> tensors;
  std::vector<EValue> size_values;
  std::vector<EValue*> args;
  size_values.reserve(generic.size_args.size());
  const size_t call_inputs = generic.inputs.size() + generic.size_args.size();
  size_t next_input = 0;
  size_t next_size = 0;
  for (size_t position = 0; position < call_inputs; ++position) {
    if (next_size < generic.size_args.size() && generic.size_args[next_size] == position) {
      size_values.emplace_back(static_cast<int64_t>(symbols.empty() ? 1 : symbols[next_size % symbols.size()]));
      args.push_back(&size_values.back());
      ++next_size;
      continue;
    }
    if (next_input >= sizes.inputs.size()) {
      return;
    }
    const odnn::ValueRecord& value = sizes.values[sizes.inputs[next_input]];
    if (!fits_int32(value.dims)) {
      return;
    }
    tensors.push_back(std::make_unique<Tensor>(value.dims, value.dtype, static_cast<uint32_t>(next_input)));
    args.push_back(tensors.back()->evalue());
    ++next_input;
  }
  for (uint32_t id : sizes.outputs) {
    const odnn::ValueRecord& value = sizes.values[id];
    if (!fits_int32(value.dims)) {
      return;
    }
    tensors.push_back(std::make_unique<Tensor>(value.dims, value.dtype, 0));
    args.push_back(tensors.back()->evalue());
  }
  executorch::runtime::BackendExecutionContext context;
  const Error error = backend->execute(context, handle, executorch::runtime::Span<EValue*>(args.data(), args.size()));
  if (log_enabled()) {
    std::fprintf(stderr, "fuzz_payload: execute() returned 0x%x\n", static_cast<unsigned>(error));
  }
}

void execute_all(executorch::runtime::BackendInterface* backend, DelegateHandle* handle, const odnn::Payload& payload) {
  execute_once(backend, handle, payload, payload, {});
  if (payload.symbols.empty()) {
    return;
  }
  std::vector<int64_t> minimum;
  for (const odnn::SymbolBounds& bounds : payload.symbols) {
    minimum.push_back(bounds.min);
  }
  try {
    const odnn::Payload specialized = odnn::specialize(payload, minimum);
    execute_once(backend, handle, payload, specialized, minimum);
  } catch (const std::exception&) {
    // A program whose dims do not hold at the minimum: execute() refuses such sizes too.
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  executorch::runtime::BackendInterface* const backend_interface = backend();
  std::vector<uint8_t> bytes(data, data + size);
  const uint8_t control = size > kControlOffset ? data[kControlOffset] : 0;
  if (size >= odnn::kChecksummedFrom) {
    if ((control & kKeepTotalSize) == 0) {
      const uint64_t total = size;
      for (size_t i = 0; i < 8; ++i) {
        bytes[kTotalSizeOffset + i] = static_cast<uint8_t>(total >> (8 * i));
      }
    }
    if ((control & kKeepChecksum) == 0) {
      const uint32_t checksum = crc32(bytes.data() + odnn::kChecksummedFrom, size - odnn::kChecksummedFrom);
      for (size_t i = 0; i < 4; ++i) {
        bytes[kChecksumOffset + i] = static_cast<uint8_t>(checksum >> (8 * i));
      }
    }
  }

  // What init() will see, to serve its constants and size its inputs.
  odnn::Payload payload;
  bool parsed = false;
  try {
    payload = odnn::parse_payload(bytes.data(), bytes.size());
    parsed = true;
  } catch (const std::exception&) {
  }
  uint64_t total_bytes = 0;
  if (parsed) {
    for (const odnn::ValueRecord& value : payload.values) {
      total_bytes += value_bytes(value);
    }
    if (total_bytes > kMaxValueBytes) {
      return 0;
    }
  }
  const auto mode = static_cast<ConstantMode>(control & 3u);
  ConstantMap constants;
  if (parsed && (mode == kExact || mode == kShort)) {
    for (uint32_t id = 0; id < payload.values.size(); ++id) {
      const odnn::ValueRecord& value = payload.values[id];
      if (!value.is_constant) {
        continue;
      }
      std::vector<uint8_t> contents(value_bytes(value));
      fill(value.dtype, contents.data(), contents.size(), id);
      if (value.checksum && contents.size() >= 4) {
        forge_crc32(contents, *value.checksum); // made-up bytes, with the weight checksum it names
      }
      if (mode == kShort && !contents.empty()) {
        contents.pop_back();
      }
      constants.add(value.key, std::move(contents));
    }
  }

  std::vector<uint8_t> pool(1 << 16);
  executorch::runtime::MemoryAllocator allocator(static_cast<uint32_t>(pool.size()), pool.data());
  const executorch::runtime::NamedDataMap* named_data = mode == kNoMap ? nullptr : &constants;
  executorch::runtime::BackendInitContext context(&allocator, nullptr, "forward", named_data);
  FreeableBuffer processed(bytes.data(), bytes.size(), nullptr);
  Result<DelegateHandle*> handle = backend_interface->init(context, &processed, {});
  if (log_enabled()) {
    std::fprintf(
        stderr,
        "fuzz_payload: control 0x%02x, parsed %d, init() returned 0x%x\n",
        control,
        parsed ? 1 : 0,
        static_cast<unsigned>(handle.error()));
  }
  if (handle.ok()) {
    if (!parsed) {
      std::fprintf(stderr, "fuzz_payload: init() accepted a payload that parse_payload() refuses\n");
      std::abort();
    }
    if (total_bytes <= kMaxExecuteBytes) {
      execute_all(backend_interface, handle.get(), payload);
    }
    backend_interface->destroy(handle.get());
  }
  if (constants.outstanding() != 0) {
    std::fprintf(
        stderr,
        "fuzz_payload: %d constant buffer(s) not released after %s\n",
        constants.outstanding(),
        handle.ok() ? "destroy()" : "a failed init()");
    std::abort();
  }
  return 0;
}
