// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "BackendHarness.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include <executorch/runtime/core/exec_aten/util/scalar_type_util.h>
#include <executorch/runtime/platform/runtime.h>
#include <gtest/gtest.h>

namespace onednn_test {

using executorch::runtime::FreeableBuffer;

Result<const executorch::runtime::TensorLayout> InMemoryDataMap::get_tensor_layout(std::string_view) const {
  return Error::NotImplemented;
}

Result<FreeableBuffer> InMemoryDataMap::get_data(std::string_view key) const {
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    return Error::NotFound;
  }
  ++buffers_out;
  auto on_free = [](void* context, void*, size_t) { ++*static_cast<int*>(context); };
  return FreeableBuffer(found->second.data(), found->second.size(), on_free, &buffers_freed);
}

Error InMemoryDataMap::load_data_into(std::string_view key, void* buffer, size_t size) const {
  auto found = entries_.find(key);
  if (found == entries_.end() || found->second.size() != size) {
    return Error::NotFound;
  }
  std::memcpy(buffer, found->second.data(), size);
  return Error::Ok;
}

Result<uint32_t> InMemoryDataMap::get_num_keys() const {
  return static_cast<uint32_t>(entries_.size());
}

Result<const char*> InMemoryDataMap::get_key(uint32_t index) const {
  if (index >= entries_.size()) {
    return Error::InvalidArgument;
  }
  auto it = entries_.begin();
  std::advance(it, index);
  return it->first.c_str();
}

HostTensor::HostTensor(
    std::vector<int32_t> sizes,
    std::vector<float> data,
    executorch::aten::ScalarType dtype,
    executorch::runtime::TensorShapeDynamism dynamism)
    : sizes_(std::move(sizes)), data_(std::move(data)), value_(executorch::runtime::EValue()) {
  data_.resize(element_count());
  bind(data_.data(), dtype, dynamism);
}

HostTensor::HostTensor(std::vector<int32_t> sizes, executorch::aten::ScalarType dtype, std::vector<uint8_t> bytes)
    : sizes_(std::move(sizes)), bytes_(std::move(bytes)), value_(executorch::runtime::EValue()) {
  bytes_.resize(element_count() * executorch::runtime::elementSize(dtype));
  bind(bytes_.data(), dtype, executorch::runtime::TensorShapeDynamism::STATIC);
}

size_t HostTensor::element_count() const {
  size_t count = 1;
  for (int32_t s : sizes_) {
    count *= static_cast<size_t>(s);
  }
  return count;
}

void HostTensor::bind(
    void* data, executorch::aten::ScalarType dtype, executorch::runtime::TensorShapeDynamism dynamism) {
  dim_order_.resize(sizes_.size());
  strides_.resize(sizes_.size());
  for (size_t d = 0; d < sizes_.size(); ++d) {
    dim_order_[d] = static_cast<uint8_t>(d);
  }
  for (size_t d = sizes_.size(); d-- > 0;) {
    strides_[d] = d + 1 == sizes_.size() ? 1 : strides_[d + 1] * sizes_[d + 1];
  }
  impl_ = std::make_unique<executorch::aten::TensorImpl>(
      dtype, static_cast<ssize_t>(sizes_.size()), sizes_.data(), data, dim_order_.data(), strides_.data(), dynamism);
  value_ = executorch::runtime::EValue(executorch::aten::Tensor(impl_.get()));
}

std::vector<int32_t> HostTensor::sizes() const {
  const auto sizes = impl_->sizes();
  return std::vector<int32_t>(sizes.begin(), sizes.end());
}

uint32_t Model::input(std::vector<int64_t> dims, uint8_t dtype) {
  const uint32_t id = payload.value(dims, "", dtype);
  payload.input(id);
  input_dims.push_back(std::move(dims));
  input_dtypes.push_back(dtype);
  return id;
}

uint32_t Model::constant(std::vector<int64_t> dims, const std::vector<float>& values) {
  const std::string key = "constant_" + std::to_string(constants++);
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  data.add(key, std::move(bytes));
  return payload.value(std::move(dims), key);
}

void Model::output(uint32_t id, std::vector<int64_t> dims) {
  payload.output(id);
  output_dims.push_back(std::move(dims));
  output_dtypes.push_back(payload.dtype(id));
}

Harness::Harness() : pool_(1 << 16) {
  executorch::runtime::runtime_init();
  backend_ = executorch::runtime::get_backend_class("OneDnnBackend");
  allocator_ =
      std::make_unique<executorch::runtime::MemoryAllocator>(static_cast<uint32_t>(pool_.size()), pool_.data());
}

Result<DelegateHandle*> Harness::init(
    const std::vector<uint8_t>& payload, const executorch::runtime::NamedDataMap* data) {
  auto on_free = [](void* context, void*, size_t) { ++*static_cast<int*>(context); };
  FreeableBuffer processed(payload.data(), payload.size(), on_free, &payload_frees);
  executorch::runtime::BackendInitContext context(allocator_.get(), nullptr, "forward", data);
  allocator_->reset();
  return backend_->init(context, &processed, {});
}

Error Harness::execute(DelegateHandle* handle, const std::vector<HostTensor*>& args) {
  std::vector<executorch::runtime::EValue*> evalues;
  for (HostTensor* tensor : args) {
    evalues.push_back(tensor->evalue());
  }
  executorch::runtime::BackendExecutionContext context;
  return backend_->execute(
      context, handle, executorch::runtime::Span<executorch::runtime::EValue*>(evalues.data(), evalues.size()));
}

size_t element_count(const std::vector<int64_t>& dims) {
  size_t count = 1;
  for (int64_t d : dims) {
    count *= static_cast<size_t>(d);
  }
  return count;
}

#if defined(__SANITIZE_ADDRESS__) // gcc
#define UNDER_ADDRESS_SANITIZER
#elif defined(__has_feature) // clang
#if __has_feature(address_sanitizer)
#define UNDER_ADDRESS_SANITIZER
#endif
#endif

#ifdef UNDER_ADDRESS_SANITIZER
extern "C" size_t __sanitizer_get_current_allocated_bytes(); // sanitizer/allocator_interface.h

size_t resident_kilobytes() {
  return __sanitizer_get_current_allocated_bytes() / 1024;
}
#else
size_t resident_kilobytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      return std::stoul(line.substr(6));
    }
  }
  return 0;
}
#endif

std::vector<float> random_values(size_t count, uint32_t seed) {
  std::vector<float> values(count);
  uint32_t state = seed * 2654435761u + 12345u;
  for (float& v : values) {
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) / static_cast<float>(1u << 24) * 2.0f - 1.0f;
  }
  return values;
}

static std::vector<int32_t> to_sizes(const std::vector<int64_t>& dims) {
  return std::vector<int32_t>(dims.begin(), dims.end());
}

Error init_error(const std::vector<uint8_t>& payload, const executorch::runtime::NamedDataMap* data) {
  Harness harness;
  Result<DelegateHandle*> handle = harness.init(payload, data);
  if (handle.ok()) {
    harness.destroy(handle.get());
    return Error::Ok;
  }
  return handle.error();
}

executorch::aten::ScalarType scalar_type(uint8_t dtype) {
  using executorch::aten::ScalarType;
  using executorch::backends::onednn::DType;
  switch (static_cast<DType>(dtype)) {
    case DType::BF16:
      return ScalarType::BFloat16;
    case DType::S64:
      return ScalarType::Long;
    case DType::Bool:
      return ScalarType::Bool;
    default:
      return ScalarType::Float;
  }
}

std::vector<std::vector<uint8_t>> run_model_bytes(
    Model& model, const std::vector<std::vector<uint8_t>>& inputs, Error expected) {
  Harness harness;
  EXPECT_NE(harness.backend(), nullptr) << "OneDnnBackend is not registered";
  if (harness.backend() == nullptr) {
    return {};
  }
  Result<DelegateHandle*> handle = harness.init(model.payload.build(), &model.data);
  EXPECT_EQ(handle.error(), Error::Ok) << "init failed";
  if (!handle.ok()) {
    return {};
  }
  std::vector<std::unique_ptr<HostTensor>> tensors;
  std::vector<HostTensor*> args;
  for (size_t i = 0; i < model.input_dims.size(); ++i) {
    tensors.push_back(
        std::make_unique<HostTensor>(to_sizes(model.input_dims[i]), scalar_type(model.input_dtypes[i]), inputs.at(i)));
    args.push_back(tensors.back().get());
  }
  for (size_t j = 0; j < model.output_dims.size(); ++j) {
    tensors.push_back(std::make_unique<HostTensor>(
        to_sizes(model.output_dims[j]), scalar_type(model.output_dtypes[j]), std::vector<uint8_t>{}));
    args.push_back(tensors.back().get());
  }
  const Error error = harness.execute(handle.get(), args);
  EXPECT_EQ(error, expected) << "execute returned another error";
  std::vector<std::vector<uint8_t>> outputs;
  for (size_t j = 0; j < model.output_dims.size(); ++j) {
    outputs.push_back(tensors[model.input_dims.size() + j]->bytes());
  }
  harness.destroy(handle.get());
  EXPECT_EQ(model.data.buffers_out, model.data.buffers_freed) << "constants not released";
  EXPECT_EQ(harness.payload_frees, 1) << "payload not released";
  return outputs;
}

std::vector<std::vector<float>> run_model(Model& model, const std::vector<std::vector<float>>& inputs) {
  std::vector<std::vector<uint8_t>> input_bytes;
  for (const auto& input : inputs) {
    input_bytes.push_back(to_bytes(input));
  }
  std::vector<std::vector<float>> outputs;
  for (const auto& output : run_model_bytes(model, input_bytes)) {
    outputs.push_back(from_bytes<float>(output));
  }
  return outputs;
}

void expect_close(const std::vector<float>& actual, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what << ": element count differs";
  float scale = 0.0f;
  for (float e : expected) {
    scale = std::max(scale, std::fabs(e));
  }
  size_t worst = 0;
  float worst_error = 0.0f;
  for (size_t i = 0; i < actual.size(); ++i) {
    const float error = std::fabs(actual[i] - expected[i]);
    if (!(error <= worst_error)) { // also catches NaN
      worst_error = error;
      worst = i;
    }
  }
  EXPECT_LE(worst_error, 1e-4f * std::max(scale, 1e-6f))
      << what << ": element " << worst << " is " << actual[worst] << ", expected " << expected[worst]
      << " (max |expected| " << scale << ")";
}

} // namespace onednn_test
