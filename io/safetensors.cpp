#include <tapegrad/io/safetensors.h>

// The rules are the reference implementation's (huggingface/safetensors, tensor.rs): a header of
// at most 100 MB; entries with exactly dtype, shape and data_offsets; sorted by their offsets the
// entries tile the data exactly, from 0 to its last byte. The reader checks all of it against the
// header alone before it copies a single byte of tensor data.

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

#include <tapegrad/io/file_util.h>

namespace tg {

static_assert(std::endian::native == std::endian::little,
              "io/safetensors.cpp copies little-endian tensor data as raw bytes: it needs a "
              "little-endian host");

namespace {

// ordered_json keeps the file's key order, so zero-byte tensors that share an offset come back
// in the order the file lists them.
using Json = nlohmann::ordered_json;
using Metadata = std::map<std::string, std::string>;
using detail::printable;

constexpr uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr int kMaxDepth = 3;  // the header object, an entry, its shape: nothing legal is deeper
constexpr const char* kMetadataKey = "__metadata__";

struct DtypeCode {
  const char* code;
  Dtype dtype;
};
constexpr DtypeCode kDtypes[] = {
    {"F32", Dtype::f32}, {"F64", Dtype::f64}, {"I64", Dtype::i64}, {"BOOL", Dtype::b8}};

const char* dtype_code(Dtype d) {
  for (const DtypeCode& c : kDtypes)
    if (c.dtype == d) return c.code;
  return "?";
}

// One tensor as the header describes it, checked except against the data's size.
struct Entry {
  std::string name;
  Dtype dtype = Dtype::f64;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

[[noreturn]] void fail(const std::string& name, const std::string& problem) {
  throw IoError(name + ": " + problem);
}

// Appending, not "'" + std::string: GCC 12 warns falsely (-Wrestrict) on that form.
std::string in_quotes(std::string_view s) {
  std::string out(1, '\'');
  out += printable(s);
  out += '\'';
  return out;
}

// A JSON value as a message shows it: compact, cut short.
std::string shown(const Json& v) { return printable(v.dump(), 40); }

std::string tensor_label(const std::string& key) { return "tensor " + in_quotes(key); }

std::string offsets_text(const Entry& e) {
  std::string out(1, '[');
  out += std::to_string(e.begin) + ", " + std::to_string(e.end);
  out += ']';
  return out;
}

// nlohmann keeps the last of two equal keys; a name must name one tensor, so the callback rejects
// a repeated key in any object. It also bounds the nesting, before any deep value is built.
Json parse_json(std::string_view text, const std::string& name) {
  std::vector<std::set<std::string>> keys(kMaxDepth + 2);  // [d]: keys of the object open at d-1
  const auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (depth > kMaxDepth)
      fail(name, "malformed header: JSON nested deeper than a safetensors header can be");
    if (event == Json::parse_event_t::object_start) {
      keys[depth + 1].clear();
    } else if (event == Json::parse_event_t::key) {
      const auto& key = parsed.get_ref<const std::string&>();
      if (!keys[depth].insert(key).second)
        fail(name, depth == 1 && key != kMetadataKey
                       ? "duplicate tensor name " + in_quotes(key)
                       : "duplicate key " + in_quotes(key) + " in the header");
    }
    return true;
  };
  try {
    return Json::parse(text.data(), text.data() + text.size(), callback);
  } catch (const Json::exception& e) {
    std::string_view what = e.what();  // "[json.exception.parse_error.101] parse error at ..."
    if (const auto cut = what.find("] "); cut != std::string_view::npos)
      what.remove_prefix(cut + 2);
    fail(name, "malformed JSON header: " + printable(what, 160));
  }
}

Dtype parse_dtype(const Json& v, const std::string& tensor, const std::string& name) {
  if (v.is_string())
    for (const DtypeCode& c : kDtypes)
      if (v.get_ref<const std::string&>() == c.code) return c.dtype;
  fail(name, tensor + " has unsupported dtype " + shown(v) + " (only F32, F64, I64 and BOOL are)");
}

Shape parse_shape(const Json& v, const std::string& tensor, const std::string& name) {
  if (!v.is_array()) fail(name, tensor + " has shape " + shown(v) + ", not a list");
  if (v.size() > static_cast<std::size_t>(kMaxRank))
    fail(name, tensor + " has shape " + shown(v) + " of rank " + std::to_string(v.size()) +
                   "; at most " + std::to_string(kMaxRank) + " is supported");
  std::vector<int64_t> dims;
  for (const Json& d : v) {
    if (!d.is_number_integer())
      fail(name, tensor + " has shape " + shown(v) + " with a non-integer dimension " + shown(d));
    if (!d.is_number_unsigned())
      fail(name, tensor + " has shape " + shown(v) + " with a negative dimension " + shown(d));
    if (d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      fail(name, tensor + " has shape " + shown(v) + " with a dimension beyond 64 bits");
    dims.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  try {
    return Shape(dims);
  } catch (const ShapeError&) {
    fail(name, tensor + " has shape " + shown(v) + ": its element count overflows 64 bits");
  }
}

Entry parse_entry(const std::string& key, const Json& v, const std::string& name) {
  if (key.empty()) fail(name, "a tensor has an empty name");
  const std::string tensor = tensor_label(key);
  if (!v.is_object()) fail(name, tensor + " is " + shown(v) + ", not an object");
  for (const auto& [k, unused] : v.items())
    if (k != "dtype" && k != "shape" && k != "data_offsets")
      fail(name, tensor + " has an unexpected key " + in_quotes(k) +
                     " (only dtype, shape and data_offsets belong there)");
  for (const char* k : {"dtype", "shape", "data_offsets"})
    if (!v.contains(k)) fail(name, tensor + " has no '" + k + "'");

  Entry e;
  e.name = key;
  e.dtype = parse_dtype(v.at("dtype"), tensor, name);
  e.shape = parse_shape(v.at("shape"), tensor, name);
  const Json& offsets = v.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    fail(name, tensor + " has data_offsets " + shown(offsets) +
                   ", not [begin, end] with non-negative integers");
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.begin > e.end)
    fail(name, tensor + " has data_offsets " + offsets_text(e) + " that end before they begin");

  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(e.shape.numel()), dtype_size(e.dtype), &bytes))
    fail(name, tensor + " has shape " + e.shape.str() + " " + dtype_code(e.dtype) +
                   ": its size in bytes overflows 64 bits");
  if (e.end - e.begin != bytes)
    fail(name, tensor + " has shape " + e.shape.str() + " " + dtype_code(e.dtype) + " (" +
                   std::to_string(bytes) + " bytes) but data_offsets " + offsets_text(e) + " (" +
                   std::to_string(e.end - e.begin) + " bytes)");
  return e;
}

Metadata parse_metadata(const Json& v, const std::string& name) {
  if (!v.is_object()) fail(name, "'__metadata__' is " + shown(v) + ", not an object");
  Metadata metadata;
  for (const auto& [key, value] : v.items()) {
    if (!value.is_string())
      fail(name, "metadata " + in_quotes(key) + " is " + shown(value) + ", not a string");
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// Sorted by offsets, the entries must cover [0, data_bytes) exactly once.
void check_layout(std::vector<Entry>& entries, uint64_t data_bytes, const std::string& name) {
  for (const Entry& e : entries)
    if (e.end > data_bytes)
      fail(name, tensor_label(e.name) + " has data_offsets " + offsets_text(e) +
                     " past the end of the data (" + std::to_string(data_bytes) +
                     " bytes): the file is truncated or the header is wrong");
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    const uint64_t expected = previous ? previous->end : 0;
    if (e.begin < expected)
      fail(name, tensor_label(e.name) + " has data_offsets " + offsets_text(e) +
                     " that overlap those of " + tensor_label(previous->name) + " " +
                     offsets_text(*previous));
    if (e.begin > expected && !previous)
      fail(name, "the data does not start at offset 0: the first tensor, " + tensor_label(e.name) +
                     ", has data_offsets " + offsets_text(e));
    if (e.begin > expected)
      fail(name, "a gap of " + std::to_string(e.begin - expected) + " bytes in the data between " +
                     tensor_label(previous->name) + " " + offsets_text(*previous) + " and " +
                     tensor_label(e.name) + " " + offsets_text(e));
    previous = &e;
  }
  const uint64_t used = previous ? previous->end : 0;
  if (used != data_bytes)
    fail(name, std::to_string(data_bytes - used) +
                   (data_bytes - used == 1 ? " trailing byte" : " trailing bytes") +
                   " after the tensors' data");
}

// The 8-byte length and the JSON header, padded with spaces to a multiple of 8 bytes (as the
// reference writes it, so the data that follows stays 8-byte aligned).
std::string header_bytes(const NamedTensors& tensors, const Metadata& metadata,
                         const std::string& name) {
  std::set<std::string_view> seen;
  Json header = Json::object();
  uint64_t offset = 0;
  for (const auto& [key, t] : tensors) {
    if (key.empty()) throw ValueError(name + ": a tensor has an empty name");
    if (key == kMetadataKey)
      throw ValueError(name + ": '__metadata__' is reserved for the metadata, not a tensor name");
    if (!seen.insert(key).second)
      throw ValueError(name + ": duplicate tensor name " + in_quotes(key));
    if (!t.defined()) throw ValueError(name + ": " + tensor_label(key) + " is undefined");
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype());
    Json entry = Json::object();
    entry["dtype"] = dtype_code(t.dtype());
    entry["shape"] = t.shape().vec();
    entry["data_offsets"] = Json::array({offset, offset + bytes});
    header[key] = std::move(entry);
    offset += bytes;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;

  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception&) {
    throw ValueError(name + ": a tensor name or metadata text is not valid UTF-8");
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  return out + text;
}

}  // namespace

SafeTensors parse_safetensors(std::string_view bytes, const std::string& name) {
  if (bytes.empty()) fail(name, "the file is empty, not a .safetensors file");
  if (bytes.size() < 8)
    fail(name, "the file has " + std::to_string(bytes.size()) +
                   " bytes, too few for the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<unsigned char>(bytes[i]);
  if (header_len > bytes.size() - 8)
    fail(name, "header length " + std::to_string(header_len) + " goes past the end of the file (" +
                   std::to_string(bytes.size()) + " bytes)");
  if (header_len > kMaxHeaderBytes)
    fail(name, "header length " + std::to_string(header_len) + " is over the limit of " +
                   std::to_string(kMaxHeaderBytes) + " bytes");

  const Json header = parse_json(bytes.substr(8, header_len), name);
  if (!header.is_object()) fail(name, "the header is " + shown(header) + ", not a JSON object");
  SafeTensors out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey)
      out.metadata = parse_metadata(value, name);
    else
      entries.push_back(parse_entry(key, value, name));
  }
  const std::string_view data = bytes.substr(8 + header_len);
  check_layout(entries, data.size(), name);

  for (Entry& e : entries) {
    if (e.dtype == Dtype::b8)  // a bool is the byte 0 or 1; any other byte is no bool
      for (uint64_t i = e.begin; i < e.end; ++i)
        if (static_cast<unsigned char>(data[i]) > 1)
          fail(name, "tensor '" + printable(e.name) + "' is BOOL but its byte " +
                         std::to_string(i - e.begin) + " is " +
                         std::to_string(static_cast<unsigned char>(data[i])) + ", not 0 or 1");
    Tensor t(e.shape, e.dtype);
    if (e.end > e.begin)
      std::memcpy(t.impl().storage->data(), data.data() + e.begin, e.end - e.begin);
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

SafeTensors read_safetensors(const std::string& path) {
  return parse_safetensors(detail::read_file(path), path);
}

std::string serialize_safetensors(const NamedTensors& tensors, const Metadata& metadata,
                                  const std::string& name) {
  std::string out = header_bytes(tensors, metadata, name);
  for (const auto& [key, t] : tensors)
    out.append(static_cast<const char*>(t.impl().storage->data()),
               static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const Metadata& metadata) {
  const std::string header = header_bytes(tensors, metadata, path);
  detail::TempFile file(path);
  file.write(header.data(), header.size());
  for (const auto& [key, t] : tensors)
    file.write(t.impl().storage->data(),
               static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  file.commit();
}

}  // namespace tg
