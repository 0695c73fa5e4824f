#include <tapegrad/io/npy.h>

// The .npy layout (numpy/lib/format.py):
//   "\x93NUMPY", major, minor, header length (uint16 LE for 1.0; uint32 LE for 2.0 and 3.0),
//   header: a Python dict literal {'descr': '<f8', 'fortran_order': False, 'shape': (8, 4), }
//           padded with spaces and ending in '\n' (latin-1 for 1.0 and 2.0, utf-8 for 3.0),
//   data:   exactly prod(shape) * itemsize bytes, nothing after them.

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>
#include <vector>

#include <tapegrad/io/file_util.h>

namespace tg {

static_assert(
    std::endian::native == std::endian::little,
    "io/npy.cpp copies '<f4' / '<f8' / '<i4' / '<i8' data as raw bytes: it needs a "
    "little-endian host");

namespace {

using detail::printable;
using detail::read_file;
using detail::TempFile;

constexpr std::string_view kMagic("\x93NUMPY", 6);
constexpr std::size_t kDataAlign = 64;  // numpy starts the data at a multiple of 64 bytes
constexpr int kMaxNesting = 8;        // nesting of tuples and lists in the header dict

// ASCII classes; <cctype>'s depend on the C locale.
bool is_digit(int c) { return c >= '0' && c <= '9'; }
bool is_letter(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

[[noreturn]] void npy_fail(const std::string& name, const std::string& problem) {
  throw IoError(name + ": " + problem);
}

// One value of the header, in the subset of Python literal syntax that numpy writes.
struct Literal {
  enum class Kind { kString, kInt, kNumber, kName, kTuple, kList };
  Kind kind = Kind::kName;
  std::string_view source;     // as spelled in the header, for messages
  std::string_view text;       // kString: the contents; kName: True, False or None
  int64_t integer = 0;         // kInt
  bool out_of_range = false;   // kInt that does not fit int64
  std::vector<Literal> items;  // kTuple, kList
};

using Entries = std::vector<std::pair<std::string_view, Literal>>;

// A strict recursive-descent parser of one dict literal; depth is bounded, so no input can
// overflow the stack.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  /// The dict's entries in order; throws IoError when the text is not exactly one dict literal.
  Entries dict() {
    Entries entries;
    skip_space();
    if (peek() != '{') malformed("expected '{'");
    ++pos_;
    skip_space();
    while (peek() != '}') {
      Literal key = value(1);
      if (key.kind != Literal::Kind::kString) malformed("a key is not a string");
      skip_space();
      if (peek() != ':') malformed("expected ':'");
      ++pos_;
      entries.emplace_back(key.text, value(1));
      separator('}');
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) malformed("unexpected text after the dict");
    return entries;
  }

 private:
  int peek() const { return pos_ < text_.size() ? static_cast<unsigned char>(text_[pos_]) : -1; }

  void skip_space() {
    while (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r') ++pos_;
  }

  [[noreturn]] void malformed(const std::string& what) const {
    const std::string where =
        pos_ < text_.size() ? "at header byte " + std::to_string(pos_) : "at the end of the header";
    npy_fail(name_, "malformed header: " + what + " " + where);
  }

  // After an item: ',' (maybe trailing) or the closing bracket. True when a comma was read.
  bool separator(char close) {
    skip_space();
    if (peek() == ',') {
      ++pos_;
      skip_space();
      return true;
    }
    if (peek() != close) malformed(std::string("expected ',' or '") + close + "'");
    return false;
  }

  Literal value(int depth) {
    skip_space();
    const std::size_t start = pos_;
    const int c = peek();
    Literal v;
    if (c == '\'' || c == '"') {
      v = string();
    } else if (c == '(' || c == '[') {
      v = sequence(depth);
    } else if (is_digit(c) || c == '-' || c == '+' || c == '.') {
      v = number();
    } else if (is_letter(c)) {
      v = name();
    } else {
      malformed(c < 0 ? "a value is missing"
                      : "unexpected '" + printable(text_.substr(pos_, 1)) + "'");
    }
    v.source = text_.substr(start, pos_ - start);
    return v;
  }

  Literal string() {
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    for (; peek() != quote; ++pos_) {
      if (peek() < 0 || peek() == '\n') malformed("unterminated string");
      if (peek() == '\\') malformed("escape sequences in strings are not supported");
    }
    Literal v;
    v.kind = Literal::Kind::kString;
    v.text = text_.substr(start, pos_ - start);
    ++pos_;
    return v;
  }

  // (a, b), (a,), () and [a, b]; like Python, (a) is just a.
  Literal sequence(int depth) {
    if (depth > kMaxNesting) malformed("nesting deeper than " + std::to_string(kMaxNesting));
    const char close = peek() == '(' ? ')' : ']';
    Literal v;
    v.kind = close == ')' ? Literal::Kind::kTuple : Literal::Kind::kList;
    ++pos_;
    skip_space();
    bool trailing_comma = false;
    while (peek() != close) {
      v.items.push_back(value(depth + 1));
      trailing_comma = separator(close);
    }
    ++pos_;
    if (v.kind == Literal::Kind::kTuple && v.items.size() == 1 && !trailing_comma)
      return std::move(v.items[0]);
    return v;
  }

  // An integer, or any other number-like token (2.5, 1e3, 0x10), which shapes reject.
  Literal number() {
    const std::size_t start = pos_;
    while (is_letter(peek()) || is_digit(peek()) || peek() == '.' || peek() == '+' || peek() == '-')
      ++pos_;
    const std::string_view token = text_.substr(start, pos_ - start);
    Literal v;
    v.kind = Literal::Kind::kNumber;
    const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v.integer);
    if (end == token.data() + token.size() && ec != std::errc::invalid_argument) {
      v.kind = Literal::Kind::kInt;
      v.out_of_range = ec == std::errc::result_out_of_range;
    }
    return v;
  }

  Literal name() {
    const std::size_t start = pos_;
    while (is_letter(peek()) || is_digit(peek())) ++pos_;
    Literal v;
    v.text = text_.substr(start, pos_ - start);
    if (v.text != "True" && v.text != "False" && v.text != "None") {
      pos_ = start;
      malformed("unknown name '" + printable(v.text) + "'");
    }
    return v;
  }

  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;
};

// An element type as the file stores it; '<i4' widens to the tensor's int64 on reading.
struct FileDtype {
  Dtype dtype = Dtype::f64;  // of the tensor read
  std::size_t itemsize = 8;  // in the file
  const char* name = "float64";
};

struct NpyHeader {
  FileDtype type;
  Shape shape;
};

FileDtype parse_descr(const Literal& descr, NpyAccept accept, const std::string& name) {
  const bool ints = accept == NpyAccept::floats_and_ints;
  const std::string supported =
      ints ? "; only '<f4', '<f8', '<i4' and '<i8' are supported"
           : "; only '<f4' and '<f8' are supported";
  if (descr.kind == Literal::Kind::kList)
    npy_fail(name, "unsupported structured dtype " + printable(descr.source) + supported);
  if (descr.kind != Literal::Kind::kString)
    npy_fail(name, "'descr' is " + printable(descr.source) + ", not a dtype string");
  if (descr.text == "<f4") return {Dtype::f32, 4, "float32"};
  if (descr.text == "<f8") return {Dtype::f64, 8, "float64"};
  if (ints && descr.text == "<i8") return {Dtype::i64, 8, "int64"};
  if (ints && descr.text == "<i4") return {Dtype::i64, 4, "int32"};
  const std::string big_endian = descr.text.starts_with('>') ? " (big-endian)" : "";
  npy_fail(name, "unsupported dtype '" + printable(descr.text) + "'" + big_endian + supported);
}

Shape parse_shape(const Literal& shape, const std::string& name) {
  const std::string shown = printable(shape.source);
  if (shape.kind != Literal::Kind::kTuple) npy_fail(name, "'shape' is " + shown + ", not a tuple");
  if (shape.items.size() > static_cast<std::size_t>(kMaxRank))
    npy_fail(name, "shape " + shown + " has rank " + std::to_string(shape.items.size()) + "; at most " +
                   std::to_string(kMaxRank) + " is supported");
  std::vector<int64_t> dims;
  for (const Literal& d : shape.items) {
    if (d.kind != Literal::Kind::kInt)
      npy_fail(name, "shape " + shown + " has a non-integer dimension " + printable(d.source));
    if (d.out_of_range)
      npy_fail(name, "shape " + shown + " has a dimension beyond 64 bits: " + printable(d.source));
    if (d.integer < 0)
      npy_fail(name, "shape " + shown + " has a negative dimension " + std::to_string(d.integer));
    dims.push_back(d.integer);
  }
  try {
    return Shape(dims);
  } catch (const ShapeError&) {
    npy_fail(name, "shape " + shown + " is too large: its element count overflows 64 bits");
  }
}

NpyHeader parse_header(std::string_view text, NpyAccept accept, const std::string& name) {
  if (text.empty() || text.back() != '\n') npy_fail(name, "the header does not end with a newline");
  const Entries entries = HeaderParser(text, name).dict();
  const Literal* descr = nullptr;
  const Literal* fortran_order = nullptr;
  const Literal* shape = nullptr;
  for (const auto& [key, value] : entries) {
    const Literal** slot = key == "descr"           ? &descr
                           : key == "fortran_order" ? &fortran_order
                           : key == "shape"         ? &shape
                                                    : nullptr;
    if (!slot)
      npy_fail(name, "unexpected key '" + printable(key) +
                     "' in the header (expected 'descr', 'fortran_order' and 'shape')");
    if (*slot) npy_fail(name, "duplicate key '" + std::string(key) + "' in the header");
    *slot = &value;
  }
  for (const auto& [key, slot] :
       {std::pair{"descr", descr}, std::pair{"fortran_order", fortran_order},
        std::pair{"shape", shape}})
    if (!slot) npy_fail(name, std::string("the header has no '") + key + "' key");

  NpyHeader h;
  h.type = parse_descr(*descr, accept, name);
  if (fortran_order->kind != Literal::Kind::kName || fortran_order->text == "None")
    npy_fail(name, "'fortran_order' is " + printable(fortran_order->source) + ", not True or False");
  if (fortran_order->text == "True")
    npy_fail(name,
         "Fortran-order arrays are not supported; save a C-order array "
         "(np.ascontiguousarray)");
  h.shape = parse_shape(*shape, name);
  return h;
}

// numpy's rule: the product of the nonzero dimensions times the item size must fit, even when
// another dimension is 0 and the array holds no data.
int64_t data_bytes(const NpyHeader& h, const std::string& name) {
  auto bytes = static_cast<int64_t>(h.type.itemsize);
  bool empty = false;
  for (int i = 0; i < h.shape.rank(); ++i) {
    if (h.shape[i] == 0) {
      empty = true;
    } else if (__builtin_mul_overflow(bytes, h.shape[i], &bytes)) {
      npy_fail(name, "shape " + h.shape.str() + " " + h.type.name +
                     " is too large: its size in bytes overflows 64 bits");
    }
  }
  return empty ? 0 : bytes;
}

// Magic, version, header length, then the dict padded with spaces and ended by '\n' so that
// the data starts at a multiple of 64 bytes, as numpy does. Version 2.0 only when the header
// would not fit a 16-bit length (it always fits for rank <= 4).
std::string npy_preamble(const Tensor& t) {
  const char* descr = t.dtype() == Dtype::f32   ? "<f4"
                      : t.dtype() == Dtype::f64 ? "<f8"
                      : t.dtype() == Dtype::i64 ? "<i8"
                                                : "|b1";  // numpy's bool
  const std::string dict = std::string("{'descr': '") + descr +
                           "', 'fortran_order': False, 'shape': " + t.shape().str() + ", }";
  const auto padded = [&](std::size_t prefix) {
    return (prefix + dict.size() + 1 + kDataAlign - 1) / kDataAlign * kDataAlign;
  };
  std::size_t length_bytes = 2;
  if (padded(kMagic.size() + 2 + length_bytes) - (kMagic.size() + 2 + length_bytes) > 0xFFFF)
    length_bytes = 4;
  const std::size_t prefix = kMagic.size() + 2 + length_bytes;
  const std::size_t total = padded(prefix);
  const std::size_t header_len = total - prefix;

  std::string out(kMagic);
  out += static_cast<char>(length_bytes == 2 ? 1 : 2);
  out += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i)
    out += static_cast<char>((header_len >> (8 * i)) & 0xFF);
  out += dict;
  out.append(total - out.size() - 1, ' ');
  out += '\n';
  return out;
}

}  // namespace

Tensor read_npy_bytes(const std::string& bytes, const std::string& name, NpyAccept accept) {
  const std::string_view b(bytes);
  if (b.empty()) npy_fail(name, "the file is empty, not a .npy file");
  if (b.substr(0, kMagic.size()) != kMagic)
    npy_fail(name, "not a .npy file (bad magic: it does not start with \\x93NUMPY)");
  if (b.size() < kMagic.size() + 2) npy_fail(name, "the file ends inside the .npy preamble");
  const int major = static_cast<unsigned char>(b[6]);
  const int minor = static_cast<unsigned char>(b[7]);
  if (major < 1 || major > 3 || minor != 0)
    npy_fail(name, "unsupported .npy format version " + std::to_string(major) + "." +
                   std::to_string(minor) + " (1.0, 2.0 and 3.0 are supported)");

  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t header_start = kMagic.size() + 2 + length_bytes;
  if (b.size() < header_start) npy_fail(name, "the file ends inside the .npy preamble");
  std::size_t header_len = 0;
  for (std::size_t i = length_bytes; i-- > 0;)
    header_len = header_len << 8 | static_cast<unsigned char>(b[kMagic.size() + 2 + i]);
  if (header_len > b.size() - header_start)
    npy_fail(name, "header length " + std::to_string(header_len) + " goes past the end of the file (" +
                   std::to_string(b.size()) + " bytes)");

  const NpyHeader h = parse_header(b.substr(header_start, header_len), accept, name);
  const std::string_view data = b.substr(header_start + header_len);
  // Compare with what the file holds before allocating anything: a lying header costs nothing.
  const auto needed = static_cast<std::size_t>(data_bytes(h, name));
  if (data.size() != needed) {
    const std::string what = "data has " + std::to_string(data.size()) + " bytes, shape " +
                             h.shape.str() + " " + h.type.name + " needs " +
                             std::to_string(needed);
    npy_fail(name, data.size() < needed ? what : what + " (trailing bytes after the data)");
  }
  Tensor t(h.shape, h.type.dtype);
  if (h.type.itemsize == dtype_size(h.type.dtype)) {
    if (needed > 0) std::memcpy(t.impl().storage->data(), data.data(), needed);
  } else {  // '<i4' into int64
    auto* out = static_cast<int64_t*>(t.impl().storage->data());
    for (int64_t i = 0; i < t.numel(); ++i) {
      int32_t v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      out[i] = v;
    }
  }
  return t;
}

Tensor read_npy(const std::string& path, NpyAccept accept) {
  return read_npy_bytes(read_file(path), path, accept);
}

void write_npy(const std::string& path, const Tensor& t) {
  const std::string preamble = npy_preamble(t);
  TempFile file(path);
  file.write(preamble.data(), preamble.size());
  file.write(t.impl().storage->data(), static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype()));
  file.commit();
}

}  // namespace tg
