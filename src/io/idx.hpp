// IDX files (the MNIST / Fashion-MNIST format), plain or gzip-compressed: a big-endian
// header (magic 0x00000801 for labels, 0x00000803 for images, then the dimensions) and
// unsigned bytes. Every defect (missing file, wrong magic, truncated data, sizes that do not
// fit, labels out of range) is an InputError naming the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace km {

struct IdxImages {
  std::size_t count = 0, rows = 0, cols = 0;
  std::vector<std::uint8_t> pixels;  // count * rows * cols, image after image
};

IdxImages read_idx_images(const std::string& path);
// Labels must be below `classes`.
std::vector<std::uint8_t> read_idx_labels(const std::string& path, int classes);

// A labelled set: images and labels of equal count (InputError otherwise).
struct IdxSet {
  IdxImages images;
  std::vector<std::uint8_t> labels;
};
// "<dir>/<prefix>-images-idx3-ubyte" and "...-labels-idx1-ubyte", each with or without ".gz"
// (prefix "train" or "t10k").
IdxSet read_idx_set(const std::string& dir, const std::string& prefix, int classes);

}  // namespace km
