#include "BackendHarness.h"

#include <cmath>
#include <cstring>

#include <executorch/runtime/platform/runtime.h>
#include <gtest/gtest.h>

namespace onednn_test {

using executorch::runtime::FreeableBuffer;

Result<const executorch::runtime::TensorLayout> InMemoryDataMap::get_tensor_layout(
    std::string_view) const {
  return Error::NotImplemented;
}

Result<FreeableBuffer> InMemoryDataMap::get_data(std::string_view key) const {
  auto found = entries_.find(key);
  if (found == entries_.end()) {
    return Error::NotFound;
  }
  ++buffers_out;
  auto on_free = [](void* context, void*, size_t) {
    ++*static_cast<int*>(context);
  };
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
  size_t count = 1;
  for (int32_t s : sizes_) {
    count *= static_cast<size_t>(s);
  }
  data_.resize(count);
  dim_order_.resize(sizes_.size());
  strides_.resize(sizes_.size());
  for (size_t d = 0; d < sizes_.size(); ++d) {
    dim_order_[d] = static_cast<uint8_t>(d);
  }
  for (size_t d = sizes_.size(); d-- > 0;) {
    strides_[d] = d + 1 == sizes_.size() ? 1 : strides_[d + 1] * sizes_[d + 1];
  }
  impl_ = std::make_unique<executorch::aten::TensorImpl>(
      dtype,
      static_cast<ssize_t>(sizes_.size()),
      sizes_.data(),
      data_.data(),
      dim_order_.data(),
      strides_.data(),
      dynamism);
  value_ = executorch::runtime::EValue(executorch::aten::Tensor(impl_.get()));
}

std::vector<int32_t> HostTensor::sizes() const {
  const auto sizes = impl_->sizes();
  return std::vector<int32_t>(sizes.begin(), sizes.end());
}

uint32_t Model::input(std::vector<int64_t> dims) {
  const uint32_t id = payload.value(dims);
  payload.input(id);
  input_dims.push_back(std::move(dims));
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
}

Harness::Harness() : pool_(1 << 16) {
  executorch::runtime::runtime_init();
  backend_ = executorch::runtime::get_backend_class("OneDnnBackend");
  allocator_ = std::make_unique<executorch::runtime::MemoryAllocator>(
      static_cast<uint32_t>(pool_.size()), pool_.data());
}

Result<DelegateHandle*> Harness::init(
    const std::vector<uint8_t>& payload,
    const executorch::runtime::NamedDataMap* data) {
  auto on_free = [](void* context, void*, size_t) {
    ++*static_cast<int*>(context);
  };
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

std::vector<std::vector<float>> run_model(
    Model& model,
    const std::vector<std::vector<float>>& inputs) {
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
    tensors.push_back(std::make_unique<HostTensor>(to_sizes(model.input_dims[i]), inputs.at(i)));
    args.push_back(tensors.back().get());
  }
  for (const auto& dims : model.output_dims) {
    tensors.push_back(std::make_unique<HostTensor>(to_sizes(dims)));
    args.push_back(tensors.back().get());
  }
  const Error error = harness.execute(handle.get(), args);
  EXPECT_EQ(error, Error::Ok) << "execute failed";
  std::vector<std::vector<float>> outputs;
  for (size_t j = 0; j < model.output_dims.size(); ++j) {
    outputs.push_back(tensors[model.input_dims.size() + j]->data());
  }
  harness.destroy(handle.get());
  EXPECT_EQ(model.data.buffers_out, model.data.buffers_freed) << "constants not released";
  EXPECT_EQ(harness.payload_frees, 1) << "payload not released";
  return outputs;
}

void expect_close(
    const std::vector<float>& actual,
    const std::vector<float>& expected,
    const std::string& what) {
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
      << what << ": element " << worst << " is " << actual[worst] << ", expected "
      << expected[worst] << " (max |expected| " << scale << ")";
}

} // namespace onednn_test
