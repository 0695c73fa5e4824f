#include <tapegrad/data/idx.h>

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <utility>

#include <tapegrad/autograd/error.h>
#include <tapegrad/data/uniform.h>
#include <tapegrad/io/file_util.h>

namespace tg::data {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw IoError(name + ": " + what);
}

// A decompressed file may not pass this: far more than any IDX set (Fashion-MNIST's training
// images are 47 MB), and a bound on what a small corrupt or hostile stream can make us allocate.
constexpr std::size_t kMaxInflated = std::size_t{1} << 31;

// One gzip member, whole: a corrupt or truncated stream, or bytes after it, is an error.
std::string gunzip(std::string_view gz, const std::string& name) {
  z_stream z{};
  if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) fail(name, "cannot start zlib");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  z.avail_in = static_cast<uInt>(gz.size());  // IDX files are far below 4 GB compressed
  if (gz.size() != z.avail_in) fail(name, "a gzip file of 4 GB or more");
  std::string out;
  char chunk[1 << 16];
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    z.next_out = reinterpret_cast<Bytef*>(chunk);
    z.avail_out = sizeof chunk;
    rc = inflate(&z, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) {
      if (rc == Z_BUF_ERROR) fail(name, "the gzip stream is truncated");
      fail(name, std::string("the gzip stream is corrupt (") + (z.msg ? z.msg : "zlib error") + ")");
    }
    out.append(chunk, sizeof chunk - z.avail_out);
    if (out.size() > kMaxInflated) fail(name, "decompresses to more than 2 GiB");
  }
  if (z.avail_in != 0)
    fail(name, std::to_string(z.avail_in) + " bytes after the end of the gzip stream");
  return out;
}

uint32_t big_endian(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + (dims.size() == 1 ? ",)" : ")");
}

// DIR/stem or DIR/stem.gz, whichever exists (not both).
std::string find_file(const std::string& dir, const std::string& stem) {
  const fs::path raw = fs::path(dir) / stem, gz = fs::path(dir) / (stem + ".gz");
  std::error_code ec;
  const bool has_raw = fs::is_regular_file(raw, ec), has_gz = fs::is_regular_file(gz, ec);
  if (has_raw && has_gz)
    fail(raw.string(), "both it and " + gz.filename().string() + " exist; keep one");
  if (!has_raw && !has_gz)
    fail(gz.string(), "no such file (nor " + raw.filename().string() + "); an IDX folder holds "
                      "train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte "
                      "and t10k-labels-idx1-ubyte, each with or without .gz");
  return (has_raw ? raw : gz).string();
}

struct RawSet {
  IdxArray images, labels;
  std::string images_file, labels_file;
};

RawSet read_set(const std::string& dir, const std::string& prefix, int64_t classes) {
  RawSet s;
  s.images_file = find_file(dir, prefix + "-images-idx3-ubyte");
  s.labels_file = find_file(dir, prefix + "-labels-idx1-ubyte");
  s.images = read_idx(s.images_file);
  s.labels = read_idx(s.labels_file);
  if (s.images.dims.size() != 3)
    fail(s.images_file, "images must be (N, H, W), got " + dims_str(s.images.dims));
  if (s.labels.dims.size() != 1)
    fail(s.labels_file, "labels must be (N,), got " + dims_str(s.labels.dims));
  if (s.labels.dims[0] != s.images.dims[0])
    fail(s.labels_file, std::to_string(s.labels.dims[0]) + " labels for " +
                            std::to_string(s.images.dims[0]) + " images in " +
                            fs::path(s.images_file).filename().string());
  for (std::size_t i = 0; i < s.labels.values.size(); ++i)
    if (s.labels.values[i] >= classes)
      fail(s.labels_file, "label " + std::to_string(s.labels.values[i]) + " at index " +
                              std::to_string(i) + " is outside the " + std::to_string(classes) +
                              " classes [0, " + std::to_string(classes) + ")");
  return s;
}

ImageSet normalised(const RawSet& s, double mean, double std, Dtype dtype) {
  const int64_t N = s.images.dims[0], H = s.images.dims[1], W = s.images.dims[2];
  ImageSet out{Tensor({N, 1, H, W}, dtype), Tensor({N}, Dtype::i64)};
  dispatch(dtype, [&]<class T>() {
    T* x = out.images.data<T>();
    for (std::size_t i = 0; i < s.images.values.size(); ++i)
      x[i] = static_cast<T>((s.images.values[i] / 255.0 - mean) / std);
  });
  int64_t* y = out.labels.data<int64_t>();
  for (int64_t i = 0; i < N; ++i) y[i] = s.labels.values[i];
  return out;
}

}  // namespace

IdxArray read_idx_bytes(std::string_view bytes, const std::string& name) {
  std::string inflated;
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
      static_cast<unsigned char>(bytes[1]) == 0x8b) {
    inflated = gunzip(bytes, name);
    bytes = inflated;
  }
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 4) fail(name, "too short for an IDX header (" + std::to_string(bytes.size()) + " bytes)");
  if (p[0] != 0 || p[1] != 0)
    fail(name, "not an IDX file (its first two bytes must be 0; is it an image of another format?)");
  if (p[2] != 0x08)
    fail(name, "IDX element type " + std::to_string(p[2]) + "; only unsigned bytes (8) are read");
  const int ndims = p[3];
  if (ndims < 1 || ndims > 4) fail(name, "IDX arrays of " + std::to_string(ndims) + " dims; 1 to 4 are read");
  const std::size_t header = 4 + 4 * static_cast<std::size_t>(ndims);
  if (bytes.size() < header)
    fail(name, "truncated header: " + std::to_string(ndims) + " dims need " + std::to_string(header) +
                   " bytes, the file has " + std::to_string(bytes.size()));
  IdxArray a;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t n = big_endian(p + 4 + 4 * d);
    if (n == 0) fail(name, "dim " + std::to_string(d) + " is 0");
    a.dims.push_back(n);
  }
  const uint64_t have = bytes.size() - header;
  uint64_t count = 1;
  bool past = false;  // the dims need more than the file holds (their product may not fit)
  for (int64_t n : a.dims)
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(n), &count) || count > have) {
      past = true;
      break;
    }
  if (past)
    fail(name, "truncated: dims " + dims_str(a.dims) + " need more data than the " +
                   std::to_string(have) + " bytes after the header");
  if (count < have)
    fail(name, std::to_string(have - count) + " bytes past the data of dims " + dims_str(a.dims));
  a.values.assign(p + header, p + bytes.size());
  return a;
}

IdxArray read_idx(const std::string& path) { return read_idx_bytes(detail::read_file(path), path); }

ImageFolder read_image_folder(const std::string& dir, Dtype dtype, int64_t classes) {
  if (!is_floating(dtype))
    throw ValueError(std::string("read_image_folder: images are float32 or float64, not ") + dtype_name(dtype));
  if (classes < 1 || classes > 256)
    throw ValueError("read_image_folder: classes must be 1 to 256 (labels are bytes), got " +
                     std::to_string(classes));
  const RawSet train = read_set(dir, "train", classes), test = read_set(dir, "t10k", classes);
  if (test.images.dims[1] != train.images.dims[1] || test.images.dims[2] != train.images.dims[2])
    fail(test.images_file, "images of " + std::to_string(test.images.dims[1]) + " x " +
                               std::to_string(test.images.dims[2]) + ", the training images are " +
                               std::to_string(train.images.dims[1]) + " x " +
                               std::to_string(train.images.dims[2]));
  // Mean and population standard deviation of x / 255 over every training pixel, in float64.
  double sum = 0, sum_sq = 0;
  for (uint8_t v : train.images.values) sum += v / 255.0;
  const double n = static_cast<double>(train.images.values.size());
  const double mean = sum / n;
  for (uint8_t v : train.images.values) sum_sq += (v / 255.0 - mean) * (v / 255.0 - mean);
  const double std = std::sqrt(sum_sq / n);
  const auto [lo, hi] = std::minmax_element(train.images.values.begin(), train.images.values.end());
  if (*lo == *hi) fail(train.images_file, "every training pixel has the same value");
  ImageFolder f;
  f.mean = mean;
  f.std = std;
  f.classes = classes;
  f.train = normalised(train, mean, std, dtype);
  f.test = normalised(test, mean, std, dtype);
  return f;
}

std::vector<int64_t> epoch_order(int64_t n, Rng& rng, bool shuffle) {
  if (n < 0) throw ValueError("epoch_order: n = " + std::to_string(n) + " is negative");
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  if (shuffle)
    for (int64_t i = n - 1; i > 0; --i)
      std::swap(order[i], order[uniform_below(rng, static_cast<uint64_t>(i) + 1)]);
  return order;
}

Batch image_batch(const ImageSet& set, const std::vector<int64_t>& order, int64_t start,
                  int64_t count) {
  const int64_t N = set.images.size(0);
  if (start < 0 || count < 1 || start > static_cast<int64_t>(order.size()) ||
      count > static_cast<int64_t>(order.size()) - start)
    throw ValueError("image_batch: examples [" + std::to_string(start) + ", " +
                     std::to_string(start) + " + " + std::to_string(count) + ") leave the order of " +
                     std::to_string(order.size()));
  const Shape& s = set.images.shape();
  Batch b{Tensor({count, s[1], s[2], s[3]}, set.images.dtype()), Tensor({count}, Dtype::i64)};
  const int64_t pixels = s[1] * s[2] * s[3];
  const std::size_t row = static_cast<std::size_t>(pixels) * dtype_size(set.images.dtype());
  const auto* from = static_cast<const char*>(set.images.impl().storage->data());
  auto* to = static_cast<char*>(b.x.impl().storage->data());
  b.x.impl().storage->bump_version();
  const int64_t* labels = set.labels.data<int64_t>();
  int64_t* y = b.y.data<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = order[start + i];
    if (k < 0 || k >= N)
      throw ValueError("image_batch: order entry " + std::to_string(k) + " outside the " +
                       std::to_string(N) + " examples");
    std::memcpy(to + i * row, from + k * row, row);
    y[i] = labels[k];
  }
  return b;
}

}  // namespace tg::data
