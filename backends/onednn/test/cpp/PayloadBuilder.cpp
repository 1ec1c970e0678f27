// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "PayloadBuilder.h"

#include <cstring>

namespace onednn_test {
namespace {

class Writer {
 public:
  void u8(uint8_t v) {
    bytes.push_back(v);
  }
  void u16(uint16_t v) {
    le(v, 2);
  }
  void u32(uint32_t v) {
    le(v, 4);
  }
  void u64(uint64_t v) {
    le(v, 8);
  }
  void i64(int64_t v) {
    le(static_cast<uint64_t>(v), 8);
  }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof(bits));
    le(bits, 8);
  }
  void str(const std::string& s) {
    u32(static_cast<uint32_t>(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  std::vector<uint8_t> bytes;

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) {
      bytes.push_back(static_cast<uint8_t>(v >> (8 * i)));
    }
  }
};

} // namespace

Attr ints(std::string name, std::vector<int64_t> values) {
  return Attr{std::move(name), false, std::move(values), {}};
}

Attr floats(std::string name, std::vector<double> values) {
  return Attr{std::move(name), true, {}, std::move(values)};
}

uint32_t PayloadBuilder::value(std::vector<int64_t> dims, std::string key, uint8_t dtype) {
  values_.push_back({dtype, std::move(dims), std::move(key)});
  return static_cast<uint32_t>(values_.size() - 1);
}

void PayloadBuilder::step(
    Kind kind, std::vector<uint32_t> inputs, std::vector<uint32_t> outputs, std::vector<Attr> attrs) {
  steps_.push_back({kind, std::move(inputs), std::move(outputs), std::move(attrs)});
}

std::vector<uint8_t> PayloadBuilder::build() const {
  Writer w;
  w.bytes = {'O', 'D', 'N', 'N'};
  w.u32(version);
  w.u64(0); // total_size, patched below
  w.u32(0); // checksum, computed by seal()
  w.u32(
      (dynamic ? executorch::backends::onednn::kFlagDynamic : 0) |
      (weight_checksums ? executorch::backends::onednn::kFlagWeightChecksums : 0));
  w.u32(static_cast<uint32_t>(values_.size()));
  w.u32(static_cast<uint32_t>(steps_.size()));
  w.u32(static_cast<uint32_t>(inputs_.size()));
  w.u32(static_cast<uint32_t>(outputs_.size()));
  for (uint32_t id : inputs_) {
    w.u32(id);
  }
  for (uint32_t id : outputs_) {
    w.u32(id);
  }
  for (const Value& v : values_) {
    w.u8(v.dtype);
    w.u8(v.key.empty() ? 0 : 1);
    w.u8(v.layout);
    w.u8(0);
    w.u32(static_cast<uint32_t>(v.dims.size()));
    for (int64_t d : v.dims) {
      w.i64(d);
    }
    if (!v.key.empty()) {
      w.str(v.key);
      if (weight_checksums) {
        w.u32(v.checksum);
      }
    }
  }
  for (const Step& s : steps_) {
    w.u32(static_cast<uint32_t>(s.kind));
    w.u32(static_cast<uint32_t>(s.inputs.size()));
    for (uint32_t id : s.inputs) {
      w.u32(id);
    }
    w.u32(static_cast<uint32_t>(s.outputs.size()));
    for (uint32_t id : s.outputs) {
      w.u32(id);
    }
    w.u32(static_cast<uint32_t>(s.attrs.size()));
    for (const Attr& a : s.attrs) {
      w.str(a.name);
      w.u8(static_cast<uint8_t>(a.is_float ? AttributeType::F64List : AttributeType::I64List));
      w.u32(static_cast<uint32_t>(a.is_float ? a.floats.size() : a.ints.size()));
      for (int64_t v : a.ints) {
        w.i64(v);
      }
      for (double v : a.floats) {
        w.f64(v);
      }
    }
  }
  if (dynamic) {
    w.u32(static_cast<uint32_t>(symbols_.size()));
    for (const auto& [min, max] : symbols_) {
      w.i64(min);
      w.i64(max);
    }
    w.u32(static_cast<uint32_t>(symbolic_dims_.size()));
    for (const SymbolicDim& entry : symbolic_dims_) {
      w.u32(entry.value);
      w.u32(entry.dim);
      w.u32(static_cast<uint32_t>(entry.code.size()));
      for (int64_t c : entry.code) {
        w.i64(c);
      }
    }
    w.u32(static_cast<uint32_t>(size_args.size()));
    for (uint32_t position : size_args) {
      w.u32(position);
    }
    w.u32(static_cast<uint32_t>(symbolic_attributes_.size()));
    for (const SymbolicAttribute& entry : symbolic_attributes_) {
      w.u32(entry.step);
      w.str(entry.name);
      w.u32(entry.index);
      w.u32(static_cast<uint32_t>(entry.code.size()));
      for (int64_t c : entry.code) {
        w.i64(c);
      }
    }
  }
  const uint64_t total = w.bytes.size();
  for (int i = 0; i < 8; ++i) {
    w.bytes[8 + i] = static_cast<uint8_t>(total >> (8 * i));
  }
  seal(w.bytes);
  return w.bytes;
}

// Bit by bit: written apart from the runtime's table-driven one, which the library does not export.
uint32_t crc32_bitwise(const uint8_t* data, size_t size) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
  }
  return ~crc;
}

void seal(std::vector<uint8_t>& bytes) {
  using executorch::backends::onednn::kChecksummedFrom;
  const uint32_t checksum = crc32_bitwise(bytes.data() + kChecksummedFrom, bytes.size() - kChecksummedFrom);
  for (int i = 0; i < 4; ++i) {
    bytes[kChecksummedFrom - 4 + i] = static_cast<uint8_t>(checksum >> (8 * i));
  }
}

} // namespace onednn_test
