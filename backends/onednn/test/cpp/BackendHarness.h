// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// Test scaffolding: an in-memory NamedDataMap, host tensors wrapped in EValues, a model builder
// (payload + constants), and a harness that calls the registered backend's init/execute/destroy.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/core/evalue.h>
#include <executorch/runtime/core/named_data_map.h>
#include <executorch/runtime/core/portable_type/tensor_impl.h>

#include "PayloadBuilder.h"

namespace onednn_test {

using executorch::runtime::DelegateHandle;
using executorch::runtime::Error;
using executorch::runtime::Result;

class InMemoryDataMap final : public executorch::runtime::NamedDataMap {
 public:
  void add(const std::string& key, std::vector<uint8_t> bytes) {
    entries_[key] = std::move(bytes);
  }
  Result<const executorch::runtime::TensorLayout> get_tensor_layout(std::string_view key) const override;
  Result<executorch::runtime::FreeableBuffer> get_data(std::string_view key) const override;
  Error load_data_into(std::string_view key, void* buffer, size_t size) const override;
  Result<uint32_t> get_num_keys() const override;
  Result<const char*> get_key(uint32_t index) const override;

  // FreeableBuffers handed out and freed so far (must match once init returns).
  mutable int buffers_out = 0;
  mutable int buffers_freed = 0;

 private:
  std::map<std::string, std::vector<uint8_t>, std::less<>> entries_;
};

// A tensor over a local array, in the default dim order: float data, or the raw bytes of any dtype.
class HostTensor {
 public:
  HostTensor(
      std::vector<int32_t> sizes,
      std::vector<float> data = {},
      executorch::aten::ScalarType dtype = executorch::aten::ScalarType::Float,
      executorch::runtime::TensorShapeDynamism dynamism = executorch::runtime::TensorShapeDynamism::STATIC);
  // `bytes` is resized to hold every element of `dtype`.
  HostTensor(std::vector<int32_t> sizes, executorch::aten::ScalarType dtype, std::vector<uint8_t> bytes);
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  executorch::runtime::EValue* evalue() {
    return &value_;
  }
  std::vector<float>& data() {
    return data_;
  }
  std::vector<uint8_t>& bytes() {
    return bytes_;
  }
  std::vector<int32_t> sizes() const;

 private:
  size_t element_count() const;
  void bind(void* data, executorch::aten::ScalarType dtype, executorch::runtime::TensorShapeDynamism dynamism);

  std::vector<int32_t> sizes_;
  std::vector<uint8_t> dim_order_;
  std::vector<int32_t> strides_;
  std::vector<float> data_;    // the float constructor's storage
  std::vector<uint8_t> bytes_; // the raw constructor's storage
  std::unique_ptr<executorch::aten::TensorImpl> impl_;
  executorch::runtime::EValue value_;
};

// A payload under construction plus the constants it names.
struct Model {
  PayloadBuilder payload;
  InMemoryDataMap data;
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<std::vector<int64_t>> output_dims;
  std::vector<uint8_t> input_dtypes, output_dtypes;
  int constants = 0;

  uint32_t input(std::vector<int64_t> dims, uint8_t dtype = 0);
  uint32_t value(std::vector<int64_t> dims, uint8_t dtype = 0) {
    return payload.value(std::move(dims), "", dtype);
  }
  uint32_t constant(std::vector<int64_t> dims, const std::vector<float>& values);
  void output(uint32_t id, std::vector<int64_t> dims);
};

class Harness {
 public:
  Harness();
  executorch::runtime::BackendInterface* backend() const {
    return backend_;
  }
  Result<DelegateHandle*> init(const std::vector<uint8_t>& payload, const executorch::runtime::NamedDataMap* data);
  Error execute(DelegateHandle* handle, const std::vector<HostTensor*>& args);
  void destroy(DelegateHandle* handle) {
    backend_->destroy(handle);
  }

  int payload_frees = 0; // how often init() released the payload

 private:
  executorch::runtime::BackendInterface* backend_;
  std::vector<uint8_t> pool_;
  std::unique_ptr<executorch::runtime::MemoryAllocator> allocator_;
};

// A model compiled into one handle, which is destroyed with it.
struct LoadedModel {
  Model model;
  Harness harness;
  DelegateHandle* handle = nullptr;

  LoadedModel() = default;
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;
  ~LoadedModel() {
    if (handle != nullptr) {
      harness.destroy(handle);
    }
  }
  // Compiles `model` into `handle` (null when init fails); returns init's error.
  Error init() {
    Result<DelegateHandle*> result = harness.init(model.payload.build(), &model.data);
    handle = result.ok() ? result.get() : nullptr;
    return result.error();
  }
};

// Runs init on `payload`; destroys the handle when init succeeds. Returns init's error.
Error init_error(const std::vector<uint8_t>& payload, const executorch::runtime::NamedDataMap* data);

// Compiles `model`, runs it once on `inputs` and returns its outputs; fails the test on errors.
std::vector<std::vector<float>> run_model(Model& model, const std::vector<std::vector<float>>& inputs);

// The same for tensors of any dtype the backend takes at its border, as raw bytes. `expected` is
// what execute() must return (outputs are returned whatever it is).
std::vector<std::vector<uint8_t>> run_model_bytes(
    Model& model, const std::vector<std::vector<uint8_t>>& inputs, Error expected = Error::Ok);

// The ExecuTorch type of a payload dtype code that crosses the graph border (F32, BF16, S64, BOOL).
executorch::aten::ScalarType scalar_type(uint8_t dtype);

// Elements to raw bytes and back.
template <typename T>
std::vector<uint8_t> to_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}
template <typename T>
std::vector<T> from_bytes(const std::vector<uint8_t>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// This process's resident memory (VmRSS) in kB, 0 when unknown. Under AddressSanitizer, whose
// quarantine of freed blocks grows resident memory by design, the kB its allocator holds live.
size_t resident_kilobytes();

// Deterministic values in [-1, 1).
std::vector<float> random_values(size_t count, uint32_t seed);

size_t element_count(const std::vector<int64_t>& dims);

// Fails with the worst element when max|actual - expected| > 1e-4 * max|expected|.
void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what);

} // namespace onednn_test
