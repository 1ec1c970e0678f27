// Copyright (c) 2026 The executorch-onednn authors.
// SPDX-License-Identifier: BSD-3-Clause
#include "Payload.h"

#include <array>
#include <cstring>

#include "DynamicShapes.h"
#include "InitError.h"

namespace executorch::backends::onednn {
namespace {

using runtime::Error;

// Little-endian reader that checks every read against the end of the blob.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t offset() const {
    return offset_;
  }
  size_t remaining() const {
    return size_ - offset_;
  }

  uint8_t u8(const char* what) {
    return static_cast<uint8_t>(read_le(1, what));
  }
  uint16_t u16(const char* what) {
    return static_cast<uint16_t>(read_le(2, what));
  }
  uint32_t u32(const char* what) {
    return static_cast<uint32_t>(read_le(4, what));
  }
  uint64_t u64(const char* what) {
    return read_le(8, what);
  }
  int64_t i64(const char* what) {
    return static_cast<int64_t>(read_le(8, what));
  }
  double f64(const char* what) {
    const uint64_t bits = read_le(8, what);
    double value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
  std::string str(const char* what) {
    const uint32_t length = u32(what);
    ODNN_CHECK(length <= kMaxStringLength, "%s: string length %u exceeds %u", what, length, kMaxStringLength);
    require(length, what);
    std::string result(reinterpret_cast<const char*>(data_ + offset_), length);
    // Keys and names are printable ASCII; anything else is corruption, and quoting it in a log
    // line would hand undecodable bytes to whoever prints the log (Python aborts on them).
    for (size_t i = 0; i < result.size(); ++i) {
      const unsigned char byte = static_cast<unsigned char>(result[i]);
      ODNN_CHECK(
          byte >= 0x20 && byte < 0x7f,
          "%s: byte %zu of the string at offset %zu is not printable ASCII (0x%02x)",
          what,
          i,
          offset_,
          byte);
    }
    offset_ += length;
    return result;
  }
  // Reads `count` elements of `element_size` bytes each; checks the whole run up front.
  void require_elements(uint64_t count, size_t element_size, const char* what) {
    ODNN_CHECK(
        count <= remaining() / element_size,
        "payload truncated: %s needs %llu bytes at offset %zu, %zu left",
        what,
        static_cast<unsigned long long>(count * element_size),
        offset_,
        remaining());
  }

 private:
  void require(size_t bytes, const char* what) {
    ODNN_CHECK(
        bytes <= remaining(),
        "payload truncated: %s needs %zu bytes at offset %zu, %zu left",
        what,
        bytes,
        offset_,
        remaining());
  }
  uint64_t read_le(size_t bytes, const char* what) {
    require(bytes, what);
    uint64_t value = 0;
    for (size_t i = 0; i < bytes; ++i) {
      value |= static_cast<uint64_t>(data_[offset_ + i]) << (8 * i);
    }
    offset_ += bytes;
    return value;
  }

  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

std::vector<uint32_t> read_value_ids(
    ByteReader& reader, uint32_t count, uint32_t num_values, bool allow_no_value, const char* what) {
  reader.require_elements(count, 4, what);
  std::vector<uint32_t> ids(count);
  for (uint32_t i = 0; i < count; ++i) {
    ids[i] = reader.u32(what);
    ODNN_CHECK(
        ids[i] < num_values || (allow_no_value && ids[i] == kNoValue),
        "%s[%u]: value id %u out of range (%u values)",
        what,
        i,
        ids[i],
        num_values);
  }
  return ids;
}

ValueRecord read_value(ByteReader& reader, uint32_t id, bool weight_checksums) {
  ValueRecord value;
  value.dtype = reader.u8("value dtype");
  ODNN_CHECK(value.dtype < kNumDTypes, "value %u: unknown dtype code %u", id, value.dtype);
  const uint8_t is_constant = reader.u8("value is_constant");
  ODNN_CHECK(is_constant <= 1, "value %u: is_constant must be 0 or 1, got %u", id, is_constant);
  value.is_constant = is_constant == 1;
  const uint8_t layout = reader.u8("value layout");
  ODNN_CHECK(layout < kNumLayouts, "value %u: unknown layout code %u", id, layout);
  value.layout = static_cast<Layout>(layout);
  reader.u8("value reserved");
  const uint32_t rank = reader.u32("value rank");
  ODNN_CHECK(rank <= kMaxRank, "value %u: rank %u exceeds %u", id, rank, kMaxRank);
  value.dims.resize(rank);
  for (uint32_t d = 0; d < rank; ++d) {
    value.dims[d] = reader.i64("value dims");
    ODNN_CHECK(
        value.dims[d] >= 1, "value %u: dim %u is %lld, must be >= 1", id, d, static_cast<long long>(value.dims[d]));
  }
  element_count(value.dims);
  if (value.is_constant) {
    value.key = reader.str("value key");
    if (weight_checksums) {
      value.checksum = reader.u32("value checksum");
    }
  }
  return value;
}

AttributeRecord read_attribute(ByteReader& reader) {
  AttributeRecord attribute;
  attribute.name = reader.str("attribute name");
  const uint8_t type = reader.u8("attribute type");
  ODNN_CHECK(type < kNumAttributeTypes, "attribute '%s': unknown type %u", attribute.name.c_str(), type);
  attribute.type = static_cast<AttributeType>(type);
  const uint32_t count = reader.u32("attribute count");
  ODNN_CHECK(
      count <= kMaxAttributeCount,
      "attribute '%s': count %u exceeds %u",
      attribute.name.c_str(),
      count,
      kMaxAttributeCount);
  reader.require_elements(count, 8, "attribute data");
  for (uint32_t i = 0; i < count; ++i) {
    if (attribute.type == AttributeType::I64List) {
      attribute.ints.push_back(reader.i64("attribute data"));
    } else {
      attribute.floats.push_back(reader.f64("attribute data"));
    }
  }
  return attribute;
}

StepRecord read_step(ByteReader& reader, uint32_t index, uint32_t num_values) {
  StepRecord step;
  const uint32_t kind = reader.u32("step kind");
  ODNN_CHECK(is_known_step_kind(kind), "step %u: unknown kind %u", index, kind);
  step.kind = static_cast<StepKind>(kind);
  const uint32_t num_inputs = reader.u32("step num_inputs");
  step.inputs = read_value_ids(reader, num_inputs, num_values, true, "step inputs");
  const uint32_t num_outputs = reader.u32("step num_outputs");
  step.outputs = read_value_ids(reader, num_outputs, num_values, false, "step outputs");
  const uint32_t num_attrs = reader.u32("step num_attrs");
  // Each attribute takes at least 9 bytes: bounds the loop before allocating anything.
  reader.require_elements(num_attrs, 9, "step attributes");
  for (uint32_t i = 0; i < num_attrs; ++i) {
    step.attributes.push_back(read_attribute(reader));
  }
  return step;
}

void validate_signature(const StepRecord& step, uint32_t index) {
  const StepSignature& signature = step_signature(step.kind);
  const size_t num_inputs = step.inputs.size();
  ODNN_CHECK(
      step.outputs.size() == signature.outputs,
      "step %u (%s): expects %u output(s), got %zu",
      index,
      signature.name,
      signature.outputs,
      step.outputs.size());
  const size_t extra = signature.has_post_ops ? binary_post_op_count(step) : 0;
  bool count_ok;
  if (signature.variadic) {
    count_ok = num_inputs >= signature.required_inputs;
  } else if (extra > 0) {
    count_ok = num_inputs == signature.fixed_inputs + extra;
  } else {
    count_ok = num_inputs >= signature.required_inputs && num_inputs <= signature.fixed_inputs;
  }
  ODNN_CHECK(
      count_ok,
      "step %u (%s): %zu inputs, expected %u..%u fixed slots plus %zu binary post-op operands",
      index,
      signature.name,
      num_inputs,
      signature.required_inputs,
      signature.fixed_inputs,
      extra);
  for (size_t slot = 0; slot < num_inputs; ++slot) {
    const bool optional = !signature.variadic && slot >= signature.required_inputs && slot < signature.fixed_inputs;
    ODNN_CHECK(
        step.inputs[slot] != kNoValue || optional,
        "step %u (%s): input %zu is NO_VALUE but is not optional",
        index,
        signature.name,
        slot);
  }
}

// count u32, then that many i64 ShapeOp entries.
std::vector<int64_t> read_shape_code(ByteReader& reader, const char* what, uint32_t index) {
  const uint32_t count = reader.u32("shape code length");
  ODNN_CHECK(
      count >= 1 && count <= kMaxShapeCode, "%s %u: code of %u entries (1 to %u)", what, index, count, kMaxShapeCode);
  std::vector<int64_t> code(count);
  for (int64_t& entry : code) {
    entry = reader.i64("shape code");
  }
  return code;
}

// FORMAT.md's "Dynamic shapes" section; validate_dynamic_shapes() checks what it says.
void read_dynamic_shapes(ByteReader& reader, Payload& payload) {
  const uint32_t num_symbols = reader.u32("num_symbols");
  ODNN_CHECK(
      num_symbols >= 1 && num_symbols <= kMaxSymbols,
      "%u dynamic sizes (a payload has 1 to %u)",
      num_symbols,
      kMaxSymbols);
  for (uint32_t s = 0; s < num_symbols; ++s) {
    SymbolBounds bounds;
    bounds.min = reader.i64("symbol min");
    bounds.max = reader.i64("symbol max");
    payload.symbols.push_back(bounds);
  }
  const uint32_t num_dims = reader.u32("num_symbolic_dims");
  reader.require_elements(num_dims, 12, "symbolic dims"); // value, dim, count
  for (uint32_t i = 0; i < num_dims; ++i) {
    SymbolicDim entry;
    entry.value = reader.u32("symbolic dim value");
    entry.dim = reader.u32("symbolic dim index");
    entry.code = read_shape_code(reader, "symbolic dim", i);
    payload.symbolic_dims.push_back(std::move(entry));
  }
  const uint32_t num_size_args = reader.u32("num_size_args");
  reader.require_elements(num_size_args, 4, "size arguments");
  for (uint32_t i = 0; i < num_size_args; ++i) {
    const uint32_t position = reader.u32("size argument");
    ODNN_CHECK(
        position < payload.inputs.size() + num_size_args &&
            (payload.size_args.empty() || position > payload.size_args.back()),
        "size argument %u: position %u is out of order or beyond the call's inputs",
        i,
        position);
    payload.size_args.push_back(position);
  }
  const uint32_t num_attributes = reader.u32("num_symbolic_attributes");
  reader.require_elements(num_attributes, 16, "symbolic attributes"); // step, name, index, count
  for (uint32_t i = 0; i < num_attributes; ++i) {
    SymbolicAttribute entry;
    entry.step = reader.u32("symbolic attribute step");
    entry.name = reader.str("symbolic attribute name");
    entry.index = reader.u32("symbolic attribute entry");
    entry.code = read_shape_code(reader, "symbolic attribute", i);
    payload.symbolic_attributes.push_back(std::move(entry));
  }
}

// The rules of FORMAT.md: every value is a graph input, a constant or produced by exactly one step;
// steps only read values available before them; graph outputs are produced by steps.
void validate_graph(const Payload& payload) {
  enum class Source : uint8_t { None, GraphInput, Constant, Step };
  std::vector<Source> source(payload.values.size(), Source::None);
  for (uint32_t id = 0; id < payload.values.size(); ++id) {
    const ValueRecord& value = payload.values[id];
    const auto dtype = static_cast<DType>(value.dtype);
    const bool executed = dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::S8 || dtype == DType::U8 ||
                          dtype == DType::S64 || dtype == DType::Bool || dtype == DType::S4;
    if (!executed) {
      fail(Error::NotSupported, "value %u: dtype %s not supported by this runtime", id, dtype_name(value.dtype));
    }
    ODNN_CHECK(dtype != DType::S4 || value.is_constant, "value %u: S4 values are constants only", id);
    if (value.is_constant) {
      source[id] = Source::Constant;
    }
  }
  for (uint32_t id : payload.inputs) {
    ODNN_CHECK(source[id] == Source::None, "graph input value %u is a constant or listed twice", id);
    source[id] = Source::GraphInput;
  }
  // int8 values live inside the graph only: its inputs and outputs are F32, BF16, S64 or BOOL tensors.
  for (const auto* list : {&payload.inputs, &payload.outputs}) {
    for (uint32_t id : *list) {
      const auto dtype = static_cast<DType>(payload.values[id].dtype);
      ODNN_CHECK(
          dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::S64 || dtype == DType::Bool,
          "graph input or output value %u has dtype %s; only F32, BF16, S64 and BOOL cross the border",
          id,
          dtype_name(payload.values[id].dtype));
    }
  }
  for (uint32_t index = 0; index < payload.steps.size(); ++index) {
    const StepRecord& step = payload.steps[index];
    validate_signature(step, index);
    for (const auto* ids : {&step.inputs, &step.outputs}) {
      for (uint32_t id : *ids) {
        const auto dtype = id == kNoValue ? DType::F32 : static_cast<DType>(payload.values[id].dtype);
        ODNN_CHECK(
            is_host_index_step(step.kind) || (dtype != DType::S64 && dtype != DType::Bool),
            "step %u (%s): value %u has dtype %s, which only the host index steps take",
            index,
            step_kind_name(step.kind),
            id,
            dtype_name(payload.values[id].dtype));
      }
    }
    for (uint32_t id : step.inputs) {
      ODNN_CHECK(
          id == kNoValue || source[id] != Source::None,
          "step %u (%s): input value %u is not a graph input, a constant or produced earlier",
          index,
          step_kind_name(step.kind),
          id);
    }
    for (uint32_t id : step.outputs) {
      ODNN_CHECK(
          source[id] == Source::None,
          "step %u (%s): output value %u is already a graph input, a constant or produced",
          index,
          step_kind_name(step.kind),
          id);
      source[id] = Source::Step;
    }
  }
  std::vector<bool> is_output(payload.values.size(), false);
  for (uint32_t id : payload.outputs) {
    ODNN_CHECK(source[id] == Source::Step, "graph output value %u is not produced by a step", id);
    ODNN_CHECK(!is_output[id], "graph output value %u is listed twice", id);
    is_output[id] = true;
  }
  for (uint32_t id = 0; id < payload.values.size(); ++id) {
    ODNN_CHECK(source[id] != Source::None, "value %u is neither a graph input, a constant nor produced by a step", id);
  }
}

} // namespace

int64_t element_count(const std::vector<int64_t>& dims) {
  constexpr int64_t kLimit = int64_t{1} << 40;
  int64_t count = 1;
  for (int64_t dim : dims) {
    ODNN_CHECK(dim >= 1 && dim <= kLimit / count, "tensor has too many elements");
    count *= dim;
  }
  return count;
}

size_t binary_post_op_count(const StepRecord& step) {
  const AttributeRecord* post_ops = step.find("post_ops");
  if (post_ops == nullptr || post_ops->type != AttributeType::I64List) {
    return 0;
  }
  size_t count = 0;
  for (size_t i = 0; i < post_ops->ints.size(); i += 2) {
    count += post_ops->ints[i] == static_cast<int64_t>(PostOpKind::Binary) ? 1 : 0;
  }
  return count;
}

const AttributeRecord* StepRecord::find(std::string_view name) const {
  for (const AttributeRecord& attribute : attributes) {
    if (attribute.name == name) {
      return &attribute;
    }
  }
  return nullptr;
}

std::vector<int64_t> StepRecord::ints(std::string_view name) const {
  const AttributeRecord* attribute = find(name);
  ODNN_CHECK(attribute != nullptr, "missing attribute '%.*s'", int(name.size()), name.data());
  ODNN_CHECK(
      attribute->type == AttributeType::I64List, "attribute '%.*s' must be an i64 list", int(name.size()), name.data());
  return attribute->ints;
}

std::vector<int64_t> StepRecord::ints(std::string_view name, size_t count) const {
  std::vector<int64_t> values = ints(name);
  ODNN_CHECK(
      values.size() == count,
      "attribute '%.*s' must have %zu entries, got %zu",
      int(name.size()),
      name.data(),
      count,
      values.size());
  return values;
}

int64_t StepRecord::int_scalar(std::string_view name) const {
  return ints(name, 1)[0];
}

std::vector<double> StepRecord::floats(std::string_view name, size_t count) const {
  const AttributeRecord* attribute = find(name);
  ODNN_CHECK(attribute != nullptr, "missing attribute '%.*s'", int(name.size()), name.data());
  ODNN_CHECK(
      attribute->type == AttributeType::F64List && attribute->floats.size() == count,
      "attribute '%.*s' must be an f64 list of %zu entries",
      int(name.size()),
      name.data(),
      count);
  return attribute->floats;
}

double StepRecord::float_scalar(std::string_view name) const {
  return floats(name, 1)[0];
}

// Eight bytes per step through eight tables (slicing-by-8): weight checksums read every weight at
// init, and a byte at a time ran at a few hundred MB/s.
uint32_t crc32(const uint8_t* data, size_t size) noexcept {
  static const auto tables = [] {
    std::array<std::array<uint32_t, 256>, 8> entries{};
    for (uint32_t byte = 0; byte < 256; ++byte) {
      uint32_t remainder = byte;
      for (int bit = 0; bit < 8; ++bit) {
        remainder = (remainder & 1u) != 0 ? 0xEDB88320u ^ (remainder >> 1) : remainder >> 1;
      }
      entries[0][byte] = remainder;
    }
    for (size_t slice = 1; slice < 8; ++slice) {
      for (uint32_t byte = 0; byte < 256; ++byte) {
        const uint32_t previous = entries[slice - 1][byte];
        entries[slice][byte] = entries[0][previous & 0xFFu] ^ (previous >> 8);
      }
    }
    return entries;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (; size >= 8; data += 8, size -= 8) {
    uint32_t low;
    uint32_t high;
    std::memcpy(&low, data, 4); // little-endian, as every x86 CPU
    std::memcpy(&high, data + 4, 4);
    low ^= crc;
    crc = tables[7][low & 0xFFu] ^ tables[6][(low >> 8) & 0xFFu] ^ tables[5][(low >> 16) & 0xFFu] ^
          tables[4][low >> 24] ^ tables[3][high & 0xFFu] ^ tables[2][(high >> 8) & 0xFFu] ^
          tables[1][(high >> 16) & 0xFFu] ^ tables[0][high >> 24];
  }
  for (; size > 0; ++data, --size) {
    crc = tables[0][(crc ^ *data) & 0xFFu] ^ (crc >> 8);
  }
  return crc ^ 0xFFFFFFFFu;
}

Payload parse_payload(const uint8_t* data, size_t size) {
  ODNN_CHECK(data != nullptr, "payload is null");
  ByteReader reader(data, size);
  ODNN_CHECK(size >= kHeaderSize, "payload of %zu bytes is shorter than the header", size);
  ODNN_CHECK(std::memcmp(data, kMagic, sizeof(kMagic)) == 0, "bad magic (expected \"ODNN\")");
  reader.u32("magic");
  const uint32_t version = reader.u32("version");
  ODNN_CHECK(
      version == kVersion,
      "unsupported payload version %u (this runtime reads version %u: export the program again)",
      version,
      kVersion);
  const uint64_t total_size = reader.u64("total_size");
  ODNN_CHECK(
      total_size == size,
      "total_size %llu does not match the blob size %zu",
      static_cast<unsigned long long>(total_size),
      size);
  const uint32_t checksum = reader.u32("checksum");
  ODNN_CHECK(
      crc32(data + kChecksummedFrom, size - kChecksummedFrom) == checksum, "checksum mismatch: the payload is damaged");
  const uint32_t flags = reader.u32("flags");
  ODNN_CHECK((flags & ~(kFlagDynamic | kFlagWeightChecksums)) == 0, "unknown header flags 0x%x", flags);
  const uint32_t num_values = reader.u32("num_values");
  const uint32_t num_steps = reader.u32("num_steps");
  const uint32_t num_inputs = reader.u32("num_inputs");
  const uint32_t num_outputs = reader.u32("num_outputs");

  Payload payload;
  payload.inputs = read_value_ids(reader, num_inputs, num_values, false, "graph inputs");
  payload.outputs = read_value_ids(reader, num_outputs, num_values, false, "graph outputs");
  reader.require_elements(num_values, 8, "values"); // a value record is at least 8 bytes
  for (uint32_t id = 0; id < num_values; ++id) {
    payload.values.push_back(read_value(reader, id, (flags & kFlagWeightChecksums) != 0));
  }
  reader.require_elements(num_steps, 16, "steps"); // a step record is at least 16 bytes
  for (uint32_t index = 0; index < num_steps; ++index) {
    payload.steps.push_back(read_step(reader, index, num_values));
  }
  if ((flags & kFlagDynamic) != 0) {
    read_dynamic_shapes(reader, payload);
  }
  ODNN_CHECK(reader.remaining() == 0, "%zu trailing bytes after the payload", reader.remaining());
  validate_graph(payload);
  validate_dynamic_shapes(payload);
  return payload;
}

} // namespace executorch::backends::onednn
