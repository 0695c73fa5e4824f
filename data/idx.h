#pragma once
// Image data in the IDX format (MNIST's, and Fashion-MNIST's as Debian's dataset-fashion-mnist
// installs it in /usr/share/datasets/fashion-mnist): a big-endian header
//   0x00 0x00 0x08 ndims | ndims x uint32 dims | prod(dims) unsigned bytes
// read strictly, gzip-compressed or not (zlib). A folder holds train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each with or
// without `.gz`. Images become (N, 1, H, W) in the run's dtype, x / 255 normalised as
// (x - mean) / std with the mean and the population standard deviation of every training pixel
// (float64); labels become int64.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <tapegrad/data/batch.h>

namespace tg::data {

/// One IDX array of unsigned bytes: its dims and its values, row-major.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> values;
};

/// Parses an IDX file's bytes (gzip-compressed when they start with gzip's magic). Throws IoError
/// naming `name`: a corrupt or truncated gzip stream, bytes after it, a bad magic or element
/// type, more than 4 dims, a zero dim, data shorter or longer than the dims say.
IdxArray read_idx_bytes(std::string_view bytes, const std::string& name);
/// Reads and parses an IDX file; IoError naming the file when it cannot be read or is malformed.
IdxArray read_idx(const std::string& path);

/// Images (N, 1, H, W) in a floating dtype, normalised, and their labels (N) int64.
struct ImageSet {
  Tensor images;
  Tensor labels;
};

/// A folder's training and test sets, normalised with the training pixels' statistics.
struct ImageFolder {
  ImageSet train, test;
  double mean = 0, std = 1;  // of x / 255 over every training pixel
  int64_t classes = 10;
};

/// Reads DIR's four IDX files (each `.gz` or not; a folder with both forms of one file is
/// ambiguous and refused). Throws IoError naming the file: a missing file, images that are not
/// (N, H, W), labels that are not (N), a label count that does not match the images', a label
/// outside [0, classes), test images of another size than the training images', training
/// pixels that are all the same value. ValueError for an integer dtype or classes < 1.
ImageFolder read_image_folder(const std::string& dir, Dtype dtype, int64_t classes = 10);

/// The order an epoch visits n examples: a Fisher-Yates shuffle drawn with uniform_below (the
/// same on every platform), or 0 .. n-1 when shuffle is false.
std::vector<int64_t> epoch_order(int64_t n, Rng& rng, bool shuffle = true);

/// The batch of the examples order[start], ..., order[start + count - 1] of `set`: x (count,
/// 1, H, W), y (count). Throws ValueError when the range leaves `order` or an entry leaves the
/// set.
Batch image_batch(const ImageSet& set, const std::vector<int64_t>& order, int64_t start,
                  int64_t count);

}  // namespace tg::data
