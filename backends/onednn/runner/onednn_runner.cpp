// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
// onednn_runner: loads a .pte (with its .ptd when one lies beside it), runs a method on inputs of the
// shapes it declares (deterministic values), and prints each output's shape and first values and the
// latency. Links the oneDNN delegate and ExecuTorch's optimized kernels, as an application would.
// --save-outputs writes the float outputs' values, in order, as raw little-endian float32 (to check a
// program on a machine without Python packages against values computed elsewhere).
//
//   onednn_runner model.pte [--method forward] [--runs 10] [--warmup 2] [--threads N] [--save-outputs F]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>

#include <executorch/extension/module/module.h>
#include <executorch/extension/tensor/tensor.h>
#include <executorch/runtime/backend/interface.h>
#include <executorch/runtime/backend/options.h>

// ExecuTorch's threadpool (XNNPACK's and the optimized kernels' threads): the wheel ships its library but
// not threadpool.h, so the two members the runner calls are declared here as that library defines them.
namespace executorch::extension::threadpool {
class ThreadPool {
 public:
  size_t get_thread_count() const;
  bool _unsafe_reset_threadpool(uint32_t num_threads);
};
ThreadPool* get_threadpool();
} // namespace executorch::extension::threadpool

namespace {

using executorch::aten::ScalarType;
using executorch::extension::Module;
using executorch::runtime::Error;
using executorch::runtime::EValue;

struct Options {
  std::string pte;
  std::string method = "forward";
  int runs = 10;
  int warmup = 2;
  int threads = 0;
  std::string save_outputs;
};

bool parse(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--method" && has_value) {
      options.method = argv[++i];
    } else if (arg == "--runs" && has_value) {
      options.runs = std::atoi(argv[++i]);
    } else if (arg == "--warmup" && has_value) {
      options.warmup = std::atoi(argv[++i]);
    } else if (arg == "--threads" && has_value) {
      options.threads = std::atoi(argv[++i]);
    } else if (arg == "--save-outputs" && has_value) {
      options.save_outputs = argv[++i];
    } else if (!arg.empty() && arg[0] != '-' && options.pte.empty()) {
      options.pte = arg;
    } else {
      return false;
    }
  }
  return !options.pte.empty() && options.runs >= 1 && options.warmup >= 0 && options.threads >= 0;
}

// One input of the declared shape and dtype: a deterministic ramp for floats, zeros otherwise.
executorch::extension::TensorPtr make_input(const executorch::runtime::TensorInfo& info) {
  std::vector<executorch::aten::SizesType> sizes(info.sizes().begin(), info.sizes().end());
  size_t count = 1;
  for (auto size : sizes) {
    count *= static_cast<size_t>(size);
  }
  if (info.scalar_type() == ScalarType::Float) {
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) {
      values[i] = static_cast<float>(static_cast<int>(i % 17) - 8) / 8.0f;
    }
    return executorch::extension::make_tensor_ptr(std::move(sizes), std::move(values));
  }
  return executorch::extension::zeros(std::move(sizes), info.scalar_type());
}

// The delegate library's own description of itself, looked up by name: an older build lacks some of
// these functions, and the runner still runs with it.
const char* describe(const char* function) {
  using Describe = const char* (*)();
  const auto found = reinterpret_cast<Describe>(dlsym(RTLD_DEFAULT, function));
  return found != nullptr ? found() : "unknown";
}

bool save_float_outputs(const std::vector<EValue>& outputs, const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return false;
  }
  bool written = true;
  for (const EValue& value : outputs) {
    if (value.isTensor() && value.toTensor().scalar_type() == ScalarType::Float) {
      const auto& tensor = value.toTensor();
      const size_t count = static_cast<size_t>(tensor.numel());
      written = written && std::fwrite(tensor.const_data_ptr<float>(), sizeof(float), count, file) == count;
    }
  }
  return std::fclose(file) == 0 && written;
}

} // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse(argc, argv, options)) {
    std::fprintf(
        stderr,
        "usage: %s model.pte [--method NAME] [--runs N] [--warmup N] [--threads N] [--save-outputs F]\n",
        argv[0]);
    return 2;
  }
  if (options.threads > 0) {
    executorch::runtime::BackendOptions<1> threads;
    threads.set_option("num_threads", options.threads);
    if (executorch::runtime::set_option("OneDnnBackend", threads.view()) != Error::Ok) {
      std::fprintf(stderr, "OneDnnBackend is not registered, or refused %d threads\n", options.threads);
      return 1;
    }
    auto* pool = executorch::extension::threadpool::get_threadpool();
    if (pool != nullptr && pool->get_thread_count() != static_cast<size_t>(options.threads) &&
        !pool->_unsafe_reset_threadpool(static_cast<uint32_t>(options.threads))) {
      std::fprintf(stderr, "ExecuTorch's threadpool refused %d threads\n", options.threads);
      return 1;
    }
  }
  const std::string data = options.pte.substr(0, options.pte.rfind('.')) + ".ptd";
  std::FILE* data_file = std::fopen(data.c_str(), "rb");
  if (data_file != nullptr) {
    std::fclose(data_file);
  }
  Module module = data_file != nullptr ? Module(options.pte, data) : Module(options.pte);
  const auto meta = module.method_meta(options.method);
  if (!meta.ok()) {
    std::fprintf(
        stderr,
        "cannot load %s (method %s): error 0x%x\n",
        options.pte.c_str(),
        options.method.c_str(),
        static_cast<unsigned>(meta.error()));
    return 1;
  }
  std::vector<executorch::extension::TensorPtr> tensors;
  std::vector<EValue> inputs;
  for (size_t i = 0; i < meta->num_inputs(); ++i) {
    const auto info = meta->input_tensor_meta(i);
    if (!info.ok()) {
      std::fprintf(stderr, "input %zu is not a tensor\n", i);
      return 1;
    }
    tensors.push_back(make_input(info.get()));
    inputs.emplace_back(tensors.back());
  }
  std::vector<double> times;
  std::vector<EValue> outputs;
  for (int run = 0; run < options.warmup + options.runs; ++run) {
    const auto start = std::chrono::steady_clock::now();
    auto result = module.execute(options.method, inputs);
    const auto end = std::chrono::steady_clock::now();
    if (!result.ok()) {
      std::fprintf(stderr, "execute failed: error 0x%x\n", static_cast<unsigned>(result.error()));
      return 1;
    }
    outputs = std::move(result.get());
    if (run >= options.warmup) {
      times.push_back(std::chrono::duration<double, std::milli>(end - start).count());
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const EValue& value = outputs[i];
    if (!value.isTensor()) {
      std::printf("output %zu: not a tensor\n", i);
      continue;
    }
    const auto& tensor = value.toTensor();
    std::printf("output %zu: [", i);
    for (size_t d = 0; d < static_cast<size_t>(tensor.dim()); ++d) {
      std::printf("%s%d", d == 0 ? "" : ", ", static_cast<int>(tensor.size(d)));
    }
    std::printf("]");
    if (tensor.scalar_type() == ScalarType::Float) {
      const float* values = tensor.const_data_ptr<float>();
      for (size_t k = 0; k < std::min<size_t>(4, tensor.numel()); ++k) {
        std::printf(" %g", values[k]);
      }
    }
    std::printf("\n");
  }
  if (!options.save_outputs.empty() && !save_float_outputs(outputs, options.save_outputs)) {
    std::fprintf(stderr, "cannot write %s\n", options.save_outputs.c_str());
    return 1;
  }
  std::printf("oneDNN %s, %s\n", describe("onednn_backend_onednn_version"), describe("onednn_backend_effective_isa"));
  std::sort(times.begin(), times.end());
  std::printf("%d runs: median %.3f ms, min %.3f ms\n", options.runs, times[times.size() / 2], times.front());
  return 0;
}
