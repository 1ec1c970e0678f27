// Writes OneDnnBackend payloads (serialization/FORMAT.md) from C++ so tests can describe graphs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../../runtime/Schema.h"

namespace onednn_test {

// The tests speak the runtime's own codes, so a renumbering cannot leave them behind.
using Kind = executorch::backends::onednn::StepKind;
using executorch::backends::onednn::kNoValue;

struct Attr {
  std::string name;
  bool is_float = false;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};
Attr ints(std::string name, std::vector<int64_t> values);
Attr floats(std::string name, std::vector<double> values);

class PayloadBuilder {
 public:
  // An activation value (or a constant when `key` is non-empty).
  uint32_t value(std::vector<int64_t> dims, std::string key = "", uint8_t dtype = 0);
  // The value's layout code (FORMAT.md); any code, valid or not.
  void set_layout(uint32_t id, uint8_t layout) {
    values_.at(id).layout = layout;
  }
  void input(uint32_t id) {
    inputs_.push_back(id);
  }
  void output(uint32_t id) {
    outputs_.push_back(id);
  }
  void step(
      Kind kind,
      std::vector<uint32_t> inputs,
      std::vector<uint32_t> outputs,
      std::vector<Attr> attrs = {});

  std::vector<uint8_t> build() const;

  uint32_t version = 1;

 private:
  struct Value {
    uint8_t dtype;
    std::vector<int64_t> dims;
    std::string key;
    uint8_t layout = 0;
  };
  struct Step {
    Kind kind;
    std::vector<uint32_t> inputs, outputs;
    std::vector<Attr> attrs;
  };
  std::vector<uint32_t> inputs_, outputs_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
};

} // namespace onednn_test
