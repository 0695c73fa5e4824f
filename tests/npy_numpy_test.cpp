// .npy interchange with real numpy: we read the files numpy writes and numpy reads ours (and
// np.save writes the very same bytes). Without python3 and numpy the suite skips, or fails when
// the environment variable CI is set.

#include <tapegrad/io/npy.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "npy_util.h"
#include "test_util.h"

namespace tg {
namespace {

using test::iota;
using test::slurp;
using test::spit;
using test::TempDir;

// Runs a python script with the directory as argv[1]; false (and the output in *log) on failure.
bool run_python(const TempDir& dir, const std::string& script, std::string* log) {
  spit(dir.file("script.py"), script);
  const std::string cmd = test::kPython + " '" + dir.file("script.py") + "' '" +
                          dir.path().string() + "' >'" + dir.file("python.log") + "' 2>&1";
  const bool ok = std::system(cmd.c_str()) == 0;
  *log = slurp(dir.file("python.log"));
  return ok;
}

TEST(NpyNumpy, ReadsFilesNumpyWrote) {
  TG_REQUIRE_PYTHON("numpy");
  TempDir dir;
  const std::string script = R"(
import os, sys
import numpy as np
d = sys.argv[1]
def save(name, a, version=None):
    with open(os.path.join(d, name), 'wb') as f:
        np.lib.format.write_array(f, a, version=version, allow_pickle=False)
save('c64.npy', np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.25 - 1.5)
save('c32.npy', (np.arange(12) / 7).astype('<f4').reshape(3, 4))
save('r4.npy', np.arange(120, dtype=np.float64).reshape(2, 3, 4, 5) / 3)
save('r6.npy', (np.arange(72) / 9).astype('<f4').reshape(2, 1, 3, 2, 3, 2))
save('r0.npy', np.array(2.5))
save('r1.npy', np.arange(5, dtype=np.float32))
save('empty.npy', np.zeros((0, 3)))
save('v2.npy', np.arange(6, dtype=np.float64).reshape(2, 3), version=(2, 0))
save('v3.npy', np.arange(6, dtype=np.float32).reshape(3, 2), version=(3, 0))
save('fortran.npy', np.asfortranarray(np.arange(6.0).reshape(2, 3)))
save('int64.npy', np.arange(6, dtype='<i8'))
save('int32.npy', (np.arange(6, dtype='<i4') - 3).reshape(2, 3))
save('int16.npy', np.arange(6, dtype='<i2'))
save('big.npy', np.arange(3, dtype='>f8'))
save('f16.npy', np.arange(3, dtype='<f2'))
)";
  std::string log;
  ASSERT_TRUE(run_python(dir, script, &log)) << log;

  struct Good {
    const char* file;
    Shape shape;
    Dtype dtype;
    std::vector<double> values;
  };
  std::vector<double> c32, r4, r6;
  for (int i = 0; i < 12; ++i) c32.push_back(static_cast<float>(i / 7.0));
  for (int i = 0; i < 72; ++i) r6.push_back(static_cast<float>(i / 9.0));
  for (int i = 0; i < 120; ++i) r4.push_back(i / 3.0);
  std::vector<double> c64 = iota(24, 0.25);
  for (double& x : c64) x -= 1.5;
  const std::vector<Good> good = {
      {"c64.npy", {2, 3, 4}, Dtype::f64, c64},  {"c32.npy", {3, 4}, Dtype::f32, c32},
      {"r4.npy", {2, 3, 4, 5}, Dtype::f64, r4}, {"r0.npy", {}, Dtype::f64, {2.5}},
      {"r1.npy", {5}, Dtype::f32, iota(5)},     {"empty.npy", {0, 3}, Dtype::f64, {}},
      {"v2.npy", {2, 3}, Dtype::f64, iota(6)},  {"v3.npy", {3, 2}, Dtype::f32, iota(6)},
      {"r6.npy", {2, 1, 3, 2, 3, 2}, Dtype::f32, r6},
  };
  for (const Good& g : good) {
    SCOPED_TRACE(g.file);
    try {
      const Tensor t = read_npy(dir.file(g.file));
      EXPECT_EQ(t.shape(), g.shape);
      EXPECT_EQ(t.dtype(), g.dtype);
      EXPECT_EQ(t.to_vector(), g.values);
    } catch (const IoError& e) {
      ADD_FAILURE() << e.what();
    }
  }

  const std::vector<std::pair<const char*, const char*>> bad = {
      {"fortran.npy", "Fortran-order arrays are not supported"},
      {"int64.npy", "unsupported dtype '<i8'"},
      {"big.npy", "unsupported dtype '>f8' (big-endian)"},
      {"f16.npy", "unsupported dtype '<f2'"},
  };
  for (const auto& [file, fragment] : bad) {
    SCOPED_TRACE(file);
    test::expect_throws<IoError>([&] { read_npy(dir.file(file)); }, {fragment});
  }

  const Tensor i64 = read_npy(dir.file("int64.npy"), NpyAccept::floats_and_ints);
  EXPECT_EQ(i64.dtype(), Dtype::i64);
  EXPECT_EQ(i64.to_vector(), iota(6));
  const Tensor i32 = read_npy(dir.file("int32.npy"), NpyAccept::floats_and_ints);
  EXPECT_EQ(i32.dtype(), Dtype::i64);
  EXPECT_EQ(i32.shape(), Shape({2, 3}));
  EXPECT_EQ(i32.to_vector(), (std::vector<double>{-3, -2, -1, 0, 1, 2}));
  EXPECT_THROW(read_npy(dir.file("int16.npy"), NpyAccept::floats_and_ints), IoError);
}

TEST(NpyNumpy, NumpyReadsFilesWeWrote) {
  TG_REQUIRE_PYTHON("numpy");
  TempDir dir;
  Rng rng(11);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"a", randn({2, 3, 4}, rng)},
      {"b", randn({5}, rng, Dtype::f32)},
      {"c", scalar(-0.75)},
      {"d", zeros({0, 3}, Dtype::f32)},
      {"e", randn({1, 2, 3, 2}, rng, Dtype::f32)},
      {"f", randn({3, 1}, rng)},
      {"g", from_indices({-5, 0, 7, int64_t{1} << 40}, {2, 2})},
      {"h", randn({2, 1, 3, 1, 2, 2}, rng)},
  };
  for (const auto& [name, t] : tensors) write_npy(dir.file(name + ".npy"), t);

  // One line per file: name, dtype, shape, format version, whether np.save writes the very same
  // bytes, then every value in hex (exact).
  const std::string script = R"(
import io, os, sys
import numpy as np
d = sys.argv[1]
with open(os.path.join(d, 'seen.txt'), 'w') as out:
    for name in 'abcdefgh':
        path = os.path.join(d, name + '.npy')
        with open(path, 'rb') as f:
            version = np.lib.format.read_magic(f)
        a = np.load(path, allow_pickle=False)
        assert a.flags.c_contiguous
        mine = open(path, 'rb').read()
        theirs = io.BytesIO()
        np.save(theirs, a)
        same = 'same' if mine == theirs.getvalue() else 'differs'
        values = ' '.join(float(x).hex() for x in a.ravel().tolist())
        print(name, a.dtype.str, str(a.shape).replace(' ', ''), '%d.%d' % version, same, values,
              file=out)
)";
  std::string log;
  ASSERT_TRUE(run_python(dir, script, &log)) << log;

  std::istringstream seen(slurp(dir.file("seen.txt")));
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    std::string line, file, descr, shape, version, same, word;
    ASSERT_TRUE(std::getline(seen, line));
    std::istringstream in(line);
    in >> file >> descr >> shape >> version >> same;
    EXPECT_EQ(file, name);
    EXPECT_EQ(descr, t.dtype() == Dtype::f32 ? "<f4" : t.dtype() == Dtype::f64 ? "<f8" : "<i8");
    std::string expected_shape = t.shape().str();
    std::erase(expected_shape, ' ');
    EXPECT_EQ(shape, expected_shape);
    EXPECT_EQ(version, "1.0");
    EXPECT_EQ(same, "same");
    std::vector<double> values;
    while (in >> word) values.push_back(std::strtod(word.c_str(), nullptr));
    EXPECT_EQ(values, t.to_vector());
  }
}

}  // namespace
}  // namespace tg
