// conv2d's forward computed directly for a kernel of few taps (ops/conv_direct.h):
//   y[co, oy, ox] = b[co] + sum over c, i, j of w[co, c, i, j] xp[c, oy + i, ox + j]
// with xp the input zero-padded by (pH, pW), c over co's group: from the bias, in im2col's order
// of taps, k = (c kH + i) kW + j.

#include <tapegrad/ops/conv_direct.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include <Eigen/Core>

namespace tg::detail {

namespace {

// (packet_traits<T>::type is an attributed vector type: GCC warns that a template argument drops
// the attribute, harmlessly, as Eigen's own headers do.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wignored-attributes"
template <class T>
using Packet = typename Eigen::internal::packet_traits<T>::type;
template <class T>
constexpr int kWidth = Eigen::internal::unpacket_traits<Packet<T>>::size;
// SIMD packets of output columns a block: two, or one of 64 bytes (AVX-512). A block is then at
// most 64 bytes of a row (16 floats, 8 doubles), which direct_fits's rows always hold.
template <class T>
constexpr int kPackets = kWidth<T> * int(sizeof(T)) >= 64 ? 1 : 2;
// Output channels and output rows a block: 8 x 2 (16 accumulators of one packet) with the 32
// vector registers of AVX-512, 4 x 1 (8 accumulators of two packets) with the 16 of AVX2 and
// below: enough independent sums to keep both FMA units busy. (AVX-512 with 4 x 1, 4 accumulators,
// ran pytorch/examples' conv1 at 33 GFLOP/s, 0.76 ms for N 64; 8 x 2 takes 0.22 ms.)
template <class T>
constexpr bool kWide = kWidth<T> * int(sizeof(T)) >= 64;
template <class T>
constexpr int kChannels = kWide<T> ? 8 : 4;
template <class T>
constexpr int kRows = kWide<T> ? 2 : 1;

// Where an output's K taps read the padded planes, relative to the entry under its first tap:
// offsets[k] = c plane + i Wp + j for k = (c kH + i) kW + j.
struct Taps {
  std::vector<int64_t> offsets;
  int64_t Wp, W_out, L;  // a padded row, an output row, an output plane
};

// Channels [0, R) of w (rows of K taps) and b at kPackets kWidth output entries of y (channel
// stride L) in each of `Rows` output rows, reading from `in` (the entry under the first one's
// first tap): R x Rows x kPackets accumulators in registers.
template <class T, int R, int Rows>
void block(const T* in, const Taps& taps, const T* w, const T* b, T* y) {
  using namespace Eigen::internal;
  using P = Packet<T>;
  constexpr int n = kWidth<T>, V = kPackets<T>;
  const int64_t K = static_cast<int64_t>(taps.offsets.size());
  P acc[R][Rows][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const P bias = pset1<P>(b ? b[r] : T(0));
#pragma GCC unroll 8
    for (int o = 0; o < Rows; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) acc[r][o][v] = bias;
  }
  for (int64_t k = 0; k < K; ++k) {
    const T* x = in + taps.offsets[k];
    P xs[Rows][V];
#pragma GCC unroll 8
    for (int o = 0; o < Rows; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) xs[o][v] = ploadu<P>(x + o * taps.Wp + v * n);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const P wv = pset1<P>(w[r * K + k]);
#pragma GCC unroll 8
      for (int o = 0; o < Rows; ++o)
#pragma GCC unroll 8
        for (int v = 0; v < V; ++v) acc[r][o][v] = pmadd(wv, xs[o][v], acc[r][o][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int o = 0; o < Rows; ++o)
#pragma GCC unroll 8
      for (int v = 0; v < V; ++v) pstoreu(y + r * taps.L + o * taps.W_out + v * n, acc[r][o][v]);
}
#pragma GCC diagnostic pop

// Output rows [oy, oy + Rows) of channels [0, R) (y at the first one's plane): blocks of
// columns, the last one ending at the row's end (overlapping the one before: the same values
// again). direct_fits's rows hold at least one block.
template <class T, int R, int Rows>
void rows(const T* xp, const Taps& taps, int64_t oy, const T* w, const T* b, T* y) {
  constexpr int64_t cols = kPackets<T> * kWidth<T>;
  const int64_t W_out = taps.W_out;
  const T* in = xp + oy * taps.Wp;
  T* out = y + oy * W_out;
  for (int64_t ox = 0; ox < W_out; ox += cols) {
    const int64_t at = std::min(ox, W_out - cols);
    block<T, R, Rows>(in + at, taps, w, b, out + at);
  }
}

// Every output row and column of channels [0, R): kRows rows a block, then any left over.
template <class T, int R>
void channels(const T* xp, const Taps& taps, int64_t H_out, const T* w, const T* b, T* y) {
  int64_t oy = 0;
  for (; oy + kRows<T> <= H_out; oy += kRows<T>) rows<T, R, kRows<T>>(xp, taps, oy, w, b, y);
  for (; oy < H_out; ++oy) rows<T, R, 1>(xp, taps, oy, w, b, y);
}

}  // namespace

bool direct_fits(const ConvGeometry& g, int64_t taps_per_output) {
  return g.stride_h == 1 && g.stride_w == 1 && g.dilation_h == 1 && g.dilation_w == 1 &&
         g.taps() > 1 && taps_per_output <= 27 && g.W_out() >= 16;
}

int64_t direct_scratch(const ConvSizes& s) {
  if (s.g.pad_h == 0 && s.g.pad_w == 0) return 0;
  return s.C * (s.g.H + 2 * s.g.pad_h) * (s.g.W + 2 * s.g.pad_w);
}

template <class T>
void direct_image(const ConvSizes& s, const T* x, const T* w, const T* b, T* y, T* scratch) {
  const ConvGeometry& g = s.g;
  const int64_t Hp = g.H + 2 * g.pad_h, Wp = g.W + 2 * g.pad_w, plane = Hp * Wp;
  const T* xp = x;
  if (scratch) {  // the planes zero-padded
    std::fill(scratch, scratch + s.C * plane, T(0));
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t h = 0; h < g.H; ++h)
        std::memcpy(scratch + c * plane + (h + g.pad_h) * Wp + g.pad_w, x + (c * g.H + h) * g.W,
                    g.W * sizeof(T));
    xp = scratch;
  }
  const int64_t Cg = s.C / s.G, Cout_g = s.C_out / s.G, K = Cg * g.taps(), L = g.positions();
  Taps taps{std::vector<int64_t>(K), Wp, g.W_out(), L};
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t i = 0; i < g.kernel_h; ++i)
      for (int64_t j = 0; j < g.kernel_w; ++j)
        taps.offsets[(c * g.kernel_h + i) * g.kernel_w + j] = c * plane + i * Wp + j;
  const int64_t H_out = g.H_out();
  for (int64_t gi = 0; gi < s.G; ++gi) {
    const T* xg = xp + gi * Cg * plane;
    int64_t co = gi * Cout_g;
    const int64_t end = co + Cout_g;
    for (; co + kChannels<T> <= end; co += kChannels<T>)
      channels<T, kChannels<T>>(xg, taps, H_out, w + co * K, b ? b + co : nullptr, y + co * L);
    for (; co + 2 <= end; co += 2)
      channels<T, 2>(xg, taps, H_out, w + co * K, b ? b + co : nullptr, y + co * L);
    for (; co < end; ++co)
      channels<T, 1>(xg, taps, H_out, w + co * K, b ? b + co : nullptr, y + co * L);
  }
}

template void direct_image<float>(const ConvSizes&, const float*, const float*, const float*,
                                  float*, float*);
template void direct_image<double>(const ConvSizes&, const double*, const double*, const double*,
                                   double*, double*);

}  // namespace tg::detail
