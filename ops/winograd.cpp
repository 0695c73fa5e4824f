// Winograd's F(2 x 2, 3 x 3) (the maps of Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2015), for conv2d's kernels. For a 4 x 4 input patch d, a 3 x 3 kernel g and
// the 2 x 2 output tile y:
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1]
//   V = B^T d B,  U = G g G^T,  M = U ⊙ V summed over the input channels,  y = A^T M A.
// Summing over the input channels is, for each of the 16 entries xi of the transformed domain, a
// matrix product: M[xi] (C_out, tiles) = U[xi] (C_out, C_in) V[xi] (C_in, tiles).
// The backward applies the adjoints (transposes) of the same maps, for dY's tiles e:
//   dM = A e A^T,  dU[xi] = sum over tiles dM[xi] V[xi]^T,  dg = G^T dU G,
//   dV[xi] = U[xi]^T dM[xi],  dd = B dV B^T, added onto the patch (patches overlap by 2).
// Every map is one 1-D map applied down the columns then along the rows (X^T Z X).

#include <tapegrad/ops/winograd.h>

#include <omp.h>

#include <algorithm>
#include <vector>

#include <tapegrad/autograd/tensor.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/panel_kernel.h>
#include <tapegrad/ops/threads.h>

namespace tg::detail {

// Fewer input channels per group make the 16 products too thin to pay for the transforms: at
// pytorch/examples' conv1 (1 -> 32) im2col's one product is faster.
constexpr int64_t kMinChannels = 8;

bool winograd_fits(const ConvGeometry& g, int64_t channels_per_group) {
  return channels_per_group >= kMinChannels && g.kernel_h == 3 && g.kernel_w == 3 && g.stride_h == 1 && g.stride_w == 1 &&
         g.dilation_h == 1 && g.dilation_w == 1;
}

namespace {

constexpr int64_t kTilesPerChunk = 1024;  // about: whole images are taken, at least one
constexpr int kXi = 16;                   // entries of the transformed domain (4 x 4)

// The distance between the 16 matrices of a transformed buffer of n entries each: n rounded up to
// 4 KiB and one cache line more. A tile's 16 entries go to the 16 matrices, and at a distance of
// a multiple of 4 KiB they would all fall into one set of the L1 cache (conv2 of the MNIST Net
// took 1.3-1.6x as long forward and backward here).
template <class T>
int64_t spaced(int64_t n) {
  const int64_t page = 4096 / sizeof(T), line = 64 / sizeof(T);
  return (n + page - 1) / page * page + line;
}

// The kernel's maps (3 x 3 kernels, once per call), from `in` (entries at in[0], in[s], ...) to
// `out` (at out[0], out[s], ...).
struct Gk {  // G: 3 -> 4 (kernel into the transformed domain)
  template <class T>
  static void map(const T* in, int s, T* out) {
    const T a = in[0], b = in[s], c = in[2 * s];
    out[0] = a, out[s] = T(0.5) * (a + b + c), out[2 * s] = T(0.5) * (a - b + c), out[3 * s] = c;
  }
};
struct Gt {  // G^T: 4 -> 3 (its adjoint)
  template <class T>
  static void map(const T* in, int s, T* out) {
    const T a = in[0], b = in[s], c = in[2 * s], d = in[3 * s];
    out[0] = a + T(0.5) * (b + c), out[s] = T(0.5) * (b - c), out[2 * s] = T(0.5) * (b + c) + d;
  }
};

// out (m x m) = X^T in (n x n) X for the 1-D map X^T (n -> m): down the columns, then along the
// rows. in and out are row-major, n and m wide.
template <class Map, int n, int m, class T>
void two_sided(const T* in, T* out) {
  T mid[m * n];  // m rows of n
  for (int k = 0; k < n; ++k) Map::map(in + k, n, mid + k);
  for (int r = 0; r < m; ++r) Map::map(mid + r * n, 1, out + r * m);
}

// The sizes of the plan: output tiles per image, images per chunk.
struct Plan {
  int64_t Cg, Cout_g, Ho, Wo, th, tw;
  int64_t tiles;   // per image
  int64_t images;  // per chunk (the last chunk may have fewer)
  int64_t chunks;

  // For entries of `bytes` bytes.
  Plan(const ConvSizes& s, int64_t bytes)
      : Cg(s.C / s.G), Cout_g(s.C_out / s.G), Ho(s.g.H_out()), Wo(s.g.W_out()),
        th((Ho + 1) / 2), tw((Wo + 1) / 2), tiles(th * tw), images(images_a_chunk(s, bytes)),
        chunks((s.N + images - 1) / images) {}
  int64_t first(int64_t chunk) const { return chunk * images; }
  // Whether an input plane is the padded plane the patches cover, (2 th + 2, 2 tw + 2): no
  // padding and an even output. The transforms then read (and fold into) the plane itself.
  bool plane_is_padded(const ConvSizes& s) const {
    return s.g.pad_h == 0 && s.g.pad_w == 0 && s.g.H == 2 * th + 2 && s.g.W == 2 * tw + 2;
  }
  int64_t count(int64_t chunk, int64_t N) const { return std::min(images, N - first(chunk)); }

 private:
  // About kTilesPerChunk tiles, but one image fewer where that would make the rows of V and M (a
  // chunk's tiles) a multiple of 4 KiB long: the panel kernel reads those rows in place, and rows
  // 4 KiB apart share one set of the L1 cache (such a kernel ran at half speed, ops/recurrence.h).
  // 32 x 32 outputs (256 tiles an image) would make 1024-tile chunks.
  int64_t images_a_chunk(const ConvSizes& s, int64_t bytes) const {
    int64_t n = std::clamp<int64_t>(kTilesPerChunk / tiles, 1, s.N);
    if (n > 1 && n * tiles * bytes % 4096 == 0) --n;
    return n;
  }
};

// The threads for the chunks: one when the work does not pay for a team.
int team_for_chunks(const ConvSizes& s, const Plan& p) {
  const double work = double(s.N) * s.C_out * p.Ho * p.Wo * p.Cg * 9;
  if (p.chunks == 1 || work < double(1 << 18)) return 1;
  return static_cast<int>(std::min<int64_t>(team_size(), p.chunks));
}

// Runs body(chunk, slot) for every chunk on `team` threads; slot < team names the thread's scratch.
template <class F>
void for_each_chunk(const Plan& p, int team, F&& body) {
  if (team == 1) {
    for (int64_t c = 0; c < p.chunks; ++c) body(c, 0);
    return;
  }
#pragma omp parallel for schedule(static) num_threads(team)
  for (int64_t c = 0; c < p.chunks; ++c) body(c, omp_get_thread_num());
}

// One chunk's images and the thread's rooms for its transformed buffers: V (16, C / G, Tc), its
// matrices vs apart, M (16, C_out / G, Tc), ms apart, and, when asked for, Vt (Tc, C / G).
template <class T>
struct ChunkRoom {
  int64_t chunk, n0, images, Tc, vs, ms;
  T *V, *M, *Vt;
};

// Runs body(room) for every chunk, over threads when the work pays for a team, each thread in
// its own rooms (with room for Vt when `with_vt`).
template <class T, class F>
void for_each_chunk_room(const ConvSizes& s, const Plan& p, bool with_vt, F&& body) {
  const int64_t cap = p.images * p.tiles, vt = with_vt ? cap * p.Cg : 0;
  const int64_t room = kXi * (spaced<T>(p.Cg * cap) + spaced<T>(p.Cout_g * cap)) + vt;  // each
  const int team = team_for_chunks(s, p);
  Tensor scratch({team, room}, dtype_of<T>());
  T* rooms = scratch.data<T>();  // taken once: data() bumps a version
  for_each_chunk(p, team, [&](int64_t chunk, int slot) {
    ChunkRoom<T> r{chunk, p.first(chunk), p.count(chunk, s.N), 0, 0, 0, nullptr, nullptr, nullptr};
    r.Tc = r.images * p.tiles;
    r.vs = spaced<T>(p.Cg * r.Tc), r.ms = spaced<T>(p.Cout_g * r.Tc);
    r.V = rooms + slot * room;
    r.M = r.V + kXi * r.vs;
    if (with_vt) r.Vt = rooms + (slot + 1) * room - vt;
    body(r);
  });
}

// U (G, 16, C_out / G, C / G) = G w G^T of every kernel.
template <class T>
Tensor transform_kernels(const ConvSizes& s, const Plan& p, const T* w) {
  Tensor U({s.G, kXi, p.Cout_g, p.Cg}, dtype_of<T>());
  T* u = U.data<T>();
  for (int64_t gi = 0; gi < s.G; ++gi)
    for (int64_t co = 0; co < p.Cout_g; ++co)
      for (int64_t c = 0; c < p.Cg; ++c) {
        T out[kXi];
        two_sided<Gk, 3, 4>(w + ((gi * p.Cout_g + co) * p.Cg + c) * 9, out);
        for (int xi = 0; xi < kXi; ++xi) u[((gi * kXi + xi) * p.Cout_g + co) * p.Cg + c] = out[xi];
      }
  return U;
}

// The transforms take one plane (an image's channel) at a time, its tiles t = i tw + j in row
// order. Their inner loops are the functions below, each over contiguous entries (or every other
// one) of buffers that do not overlap (__restrict), so that they vectorize.

// B^T down the columns of the 4 rows a .. a + 3 width apart, into the rows o .. o + 3 `apart`.
template <class T>
void bt_down(const T* __restrict a, int64_t width, T* __restrict o, int64_t apart) {
  const T *b = a + width, *c = b + width, *d = c + width;
  T *o1 = o + apart, *o2 = o1 + apart, *o3 = o2 + apart;
#pragma omp simd
  for (int64_t k = 0; k < width; ++k)
    o[k] = a[k] - c[k], o1[k] = b[k] + c[k], o2[k] = c[k] - b[k], o3[k] = b[k] - d[k];
}

// B^T along a row r for tw tiles (tile j reads r[2 j .. 2 j + 3]), into v, v + vs, ... (4).
template <class T>
void bt_along(const T* __restrict r, int64_t tw, T* __restrict v, int64_t vs) {
  T *v1 = v + vs, *v2 = v1 + vs, *v3 = v2 + vs;
#pragma omp simd
  for (int64_t j = 0; j < tw; ++j) {
    const T a = r[2 * j], b = r[2 * j + 1], c = r[2 * j + 2], d = r[2 * j + 3];
    v[j] = a - c, v1[j] = b + c, v2[j] = c - b, v3[j] = b - d;
  }
}

// out (2, 2, n) = A^T m A (+ bias) for n tiles of m (16, n) with its matrices ms apart.
template <class T>
void at_tiles(const T* __restrict m, int64_t ms, int64_t n, T bias, T* __restrict out) {
  const T *m0 = m, *m4 = m + 4 * ms, *m8 = m + 8 * ms, *m12 = m + 12 * ms;
#pragma omp simd
  for (int64_t t = 0; t < n; ++t) {
    // m A along each row q: (a_q, b_q) = (m0 + m1 + m2, m1 - m2 - m3)
    const T a0 = m0[t] + m0[ms + t] + m0[2 * ms + t], b0 = m0[ms + t] - m0[2 * ms + t] - m0[3 * ms + t];
    const T a1 = m4[t] + m4[ms + t] + m4[2 * ms + t], b1 = m4[ms + t] - m4[2 * ms + t] - m4[3 * ms + t];
    const T a2 = m8[t] + m8[ms + t] + m8[2 * ms + t], b2 = m8[ms + t] - m8[2 * ms + t] - m8[3 * ms + t];
    const T a3 = m12[t] + m12[ms + t] + m12[2 * ms + t],
            b3 = m12[ms + t] - m12[2 * ms + t] - m12[3 * ms + t];
    // then A^T down the columns
    out[t] = a0 + a1 + a2 + bias, out[n + t] = b0 + b1 + b2 + bias;
    out[2 * n + t] = a1 - a2 - a3 + bias, out[3 * n + t] = b1 - b2 - b3 + bias;
  }
}

// m (16, n), matrices ms apart, = A e A^T for n tiles of e (2, 2, n).
template <class T>
void a_tiles(const T* __restrict e, int64_t n, T* __restrict m, int64_t ms) {
#pragma omp simd
  for (int64_t t = 0; t < n; ++t) {
    const T e00 = e[t], e01 = e[n + t], e10 = e[2 * n + t], e11 = e[3 * n + t];
    // A down the columns: rows (e0., e0. + e1., e0. - e1., -e1.); then A along each row (a, b):
    // (a, a + b, a - b, -b)
    const T a[4] = {e00, e00 + e10, e00 - e10, -e10}, b[4] = {e01, e01 + e11, e01 - e11, -e11};
    for (int q = 0; q < 4; ++q) {
      m[(4 * q) * ms + t] = a[q], m[(4 * q + 1) * ms + t] = a[q] + b[q];
      m[(4 * q + 2) * ms + t] = a[q] - b[q], m[(4 * q + 3) * ms + t] = -b[q];
    }
  }
}

// d (4, 4, n) = B v B^T for n tiles of v (16, n) with its matrices vs apart.
template <class T>
void b_tiles(const T* __restrict v, int64_t vs, int64_t n, T* __restrict d) {
#pragma omp simd
  for (int64_t t = 0; t < n; ++t) {
    T row[16];  // v B^T along the rows
    for (int q = 0; q < 4; ++q) {
      const T a = v[(4 * q) * vs + t], b = v[(4 * q + 1) * vs + t], c = v[(4 * q + 2) * vs + t],
              e = v[(4 * q + 3) * vs + t];
      row[4 * q] = a, row[4 * q + 1] = b - c + e, row[4 * q + 2] = b + c - a, row[4 * q + 3] = -e;
    }
    for (int k = 0; k < 4; ++k) {  // then B down the columns
      const T a = row[k], b = row[4 + k], c = row[8 + k], e = row[12 + k];
      d[k * n + t] = a, d[(4 + k) * n + t] = b - c + e;
      d[(8 + k) * n + t] = b + c - a, d[(12 + k) * n + t] = -e;
    }
  }
}

// dst (a row of 2 tw + 2 entries: tile j covers 2 j .. 2 j + 3) += the tw tiles' four columns
// d, d + apart, d + 2 apart, d + 3 apart (where two tiles overlap, both).
template <class T>
void fold_row(const T* __restrict d, int64_t apart, int64_t tw, T* __restrict dst) {
  const T *d1 = d + apart, *d2 = d1 + apart, *d3 = d2 + apart;
  dst[0] += d[0], dst[1] += d1[0];
  for (int64_t j = 1; j < tw; ++j) dst[2 * j] += d[j] + d2[j - 1], dst[2 * j + 1] += d1[j] + d3[j - 1];
  dst[2 * tw] += d2[tw - 1], dst[2 * tw + 1] += d3[tw - 1];
}

// dst[2 j] = a[j], dst[2 j + 1] = b[j] for j < n.
template <class T>
void interleave(const T* __restrict a, const T* __restrict b, int64_t n, T* __restrict dst) {
  for (int64_t j = 0; j < n; ++j) dst[2 * j] = a[j], dst[2 * j + 1] = b[j];
}

// a[j] = src[2 j], b[j] = src[2 j + 1] for j < n.
template <class T>
void deinterleave(const T* __restrict src, int64_t n, T* __restrict a, T* __restrict b) {
  for (int64_t j = 0; j < n; ++j) a[j] = src[2 * j], b[j] = src[2 * j + 1];
}

// pad (Hp, Wp) = the plane (H, W) at row ph, column pw, zeros around it.
template <class T>
void pad_plane(const T* plane, int64_t H, int64_t W, int64_t ph, int64_t pw, int64_t Hp,
               int64_t Wp, T* pad) {
  std::fill(pad, pad + Hp * Wp, T(0));
  const int64_t w = std::min(W, Wp - pw);
  for (int64_t ih = 0; ih < H && ih + ph < Hp; ++ih)
    std::copy(plane + ih * W, plane + ih * W + w, pad + (ih + ph) * Wp + pw);
}

// V (16, C / G, tiles) = B^T d B for the patches d of `images` images of one group (x at the
// first image's first channel of the group; images C channels apart).
template <class T>
void transform_input(const ConvSizes& s, const Plan& p, const T* x, int64_t images, T* V) {
  const int64_t H = s.g.H, W = s.g.W, Tc = images * p.tiles, vs = spaced<T>(p.Cg * Tc);
  const int64_t th = p.th, tw = p.tw, Hp = 2 * th + 2, Wp = 2 * tw + 2;
  std::vector<T> buf(Hp * Wp + 4 * th * Wp);
  T* pad = buf.data();      // the patches' padded plane
  T* cols = pad + Hp * Wp;  // (4, th, Wp): B^T down the columns of each row of patches
  const bool is_padded = p.plane_is_padded(s);
  for (int64_t li = 0; li < images; ++li)
    for (int64_t c = 0; c < p.Cg; ++c) {
      const T* plane = x + (li * s.C + c) * H * W;
      if (!is_padded) {
        pad_plane(plane, H, W, s.g.pad_h, s.g.pad_w, Hp, Wp, pad);
        plane = pad;
      }
      for (int64_t i = 0; i < th; ++i) bt_down(plane + 2 * i * Wp, Wp, cols + i * Wp, th * Wp);
      T* v = V + c * Tc + li * p.tiles;
      for (int q = 0; q < 4; ++q)
        for (int64_t i = 0; i < th; ++i)
          bt_along(cols + (q * th + i) * Wp, tw, v + 4 * q * vs + i * tw, vs);
    }
}

// y = A^T M A (+ b) for the tiles of `images` images of one group (y at the first image's first
// output channel of the group; images C_out channels apart).
template <class T>
void transform_output(const ConvSizes& s, const Plan& p, const T* M, int64_t images,
                      const T* b, T* y) {
  const int64_t Tc = images * p.tiles, ms = spaced<T>(p.Cout_g * Tc), Ho = p.Ho, Wo = p.Wo;
  const int64_t tiles = p.tiles, tw = p.tw;
  std::vector<T> buf(4 * tiles + 2 * tw);
  T* out = buf.data();       // (2, 2, tiles): each tile's 2 x 2 outputs
  T* row = out + 4 * tiles;  // one output row of 2 tw, for an odd W_out
  for (int64_t li = 0; li < images; ++li)
    for (int64_t co = 0; co < p.Cout_g; ++co) {
      at_tiles(M + co * Tc + li * tiles, ms, tiles, b ? b[co] : T(0), out);
      T* plane = y + (li * s.C_out + co) * Ho * Wo;
      for (int64_t i = 0; i < p.th; ++i)
        for (int64_t r = 0; r < 2 && 2 * i + r < Ho; ++r) {
          const T* y0 = out + 2 * r * tiles + i * tw;
          if (Wo == 2 * tw) {
            interleave(y0, y0 + tiles, tw, plane + (2 * i + r) * Wo);
          } else {
            interleave(y0, y0 + tiles, tw, row);
            std::copy(row, row + Wo, plane + (2 * i + r) * Wo);
          }
        }
    }
}

// dM (16, C_out / G, tiles) = A e A^T for dY's tiles e (zero past the output's edge).
template <class T>
void transform_output_grad(const ConvSizes& s, const Plan& p, const T* dy, int64_t images,
                           T* dM) {
  const int64_t Tc = images * p.tiles, ms = spaced<T>(p.Cout_g * Tc), Ho = p.Ho, Wo = p.Wo;
  const int64_t tiles = p.tiles, th = p.th, tw = p.tw;
  std::vector<T> buf(4 * tiles + 4 * th * tw);
  T* e = buf.data();       // (2, 2, tiles): each tile's 2 x 2 entries of dY
  T* pad = e + 4 * tiles;  // dY in (2 th, 2 tw), for an odd H_out or W_out
  for (int64_t li = 0; li < images; ++li)
    for (int64_t co = 0; co < p.Cout_g; ++co) {
      const T* plane = dy + (li * s.C_out + co) * Ho * Wo;
      if (Ho != 2 * th || Wo != 2 * tw) {
        pad_plane(plane, Ho, Wo, 0, 0, 2 * th, 2 * tw, pad);
        plane = pad;
      }
      for (int64_t i = 0; i < th; ++i)
        for (int64_t r = 0; r < 2; ++r) {
          T* e0 = e + 2 * r * tiles + i * tw;
          deinterleave(plane + (2 * i + r) * 2 * tw, tw, e0, e0 + tiles);
        }
      a_tiles(e, tiles, dM + co * Tc + li * tiles, ms);
    }
}

// dx = the sum of B dV B^T over the patches that cover each entry, for `images` images of one
// group (dx at the first image's first channel of the group; every entry is written).
template <class T>
void transform_input_grad(const ConvSizes& s, const Plan& p, const T* dV, int64_t images,
                          T* dx) {
  const int64_t H = s.g.H, W = s.g.W, Tc = images * p.tiles, vs = spaced<T>(p.Cg * Tc);
  const int64_t tiles = p.tiles, th = p.th, tw = p.tw, Hp = 2 * th + 2, Wp = 2 * tw + 2;
  const int64_t ph = s.g.pad_h, pw = s.g.pad_w, w = std::min(W, Wp - pw);
  std::vector<T> buf(16 * tiles + Hp * Wp);
  T* d = buf.data();        // (4, 4, tiles): each tile's B dV B^T
  T* pad = d + 16 * tiles;  // the padded plane the patches cover
  const bool is_padded = p.plane_is_padded(s);
  for (int64_t li = 0; li < images; ++li)
    for (int64_t c = 0; c < p.Cg; ++c) {
      b_tiles(dV + c * Tc + li * tiles, vs, tiles, d);
      T* plane = dx + (li * s.C + c) * H * W;
      T* sums = is_padded ? plane : pad;  // folded in place when the plane is the padded one
      std::fill(sums, sums + Hp * Wp, T(0));
      for (int64_t i = 0; i < th; ++i)
        for (int64_t r = 0; r < 4; ++r)
          fold_row(d + 4 * r * tiles + i * tw, tiles, tw, sums + (2 * i + r) * Wp);
      if (is_padded) continue;
      for (int64_t ih = 0; ih < H && ih + ph < Hp; ++ih)
        std::copy(pad + (ih + ph) * Wp + pw, pad + (ih + ph) * Wp + pw + w, plane + ih * W);
    }
}

}  // namespace

template <class T>
void winograd_forward(const ConvSizes& s, const T* x, const T* w, const T* b, T* y) {
  const Plan p(s, sizeof(T));
  const Tensor U = transform_kernels<T>(s, p, w);
  for_each_chunk_room<T>(s, p, false, [&](const ChunkRoom<T>& r) {
    T *V = r.V, *M = r.M;  // V, then M in the second room
    for (int64_t gi = 0; gi < s.G; ++gi) {
      transform_input(s, p, x + (r.n0 * s.C + gi * p.Cg) * s.g.H * s.g.W, r.images, V);
      const T* u = U.data<T>() + gi * kXi * p.Cout_g * p.Cg;
      for (int xi = 0; xi < kXi; ++xi)  // M[xi] = U[xi] V[xi]
        PanelKernel<T>::product(u + xi * p.Cout_g * p.Cg, p.Cg, p.Cout_g, p.Cg, V + xi * r.vs,
                                r.Tc, r.Tc, M + xi * r.ms, r.Tc);
      transform_output(s, p, M, r.images, b ? b + gi * p.Cout_g : nullptr,
                       y + (r.n0 * s.C_out + gi * p.Cout_g) * p.Ho * p.Wo);
    }
  });
}

template <class T>
void winograd_backward(const ConvSizes& s, const T* x, const T* w, const T* dy, T* dx, T* dw) {
  if (!dx && !dw) return;
  const Plan p(s, sizeof(T));
  const Tensor U = transform_kernels<T>(s, p, w);
  // Every pointer below is taken before the chunks' threads start: data() of a writable tensor
  // bumps its version, which threads must not do at once.
  Tensor Ut;  // (G, 16, C / G, C_out / G): each U[xi] transposed, for dV = U^T dM
  T* ut_all = nullptr;
  if (dx) {
    Ut = Tensor({s.G, kXi, p.Cg, p.Cout_g}, dtype_of<T>());
    const T* u = U.data<T>();
    ut_all = Ut.data<T>();
    for (int64_t m = 0; m < s.G * kXi; ++m)
      for (int64_t co = 0; co < p.Cout_g; ++co)
        for (int64_t c = 0; c < p.Cg; ++c)
          ut_all[(m * p.Cg + c) * p.Cout_g + co] = u[(m * p.Cout_g + co) * p.Cg + c];
  }
  const int64_t per_chunk_dU = s.G * kXi * p.Cout_g * p.Cg;
  Tensor dU;  // per chunk: its dU, summed in chunk order at the end
  T* du_all = nullptr;
  if (dw) {
    dU = Tensor({p.chunks, per_chunk_dU}, dtype_of<T>());
    du_all = dU.data<T>();
  }
  // dU = dM V^T runs the panel kernel over V^T when C / G holds a whole panel; gemm otherwise.
  const bool dU_by_panels = dw && PanelKernel<T>::kUseful && p.Cg >= PanelKernel<T>::kPanel;
  for_each_chunk_room<T>(s, p, dU_by_panels, [&](const ChunkRoom<T>& r) {
    T *V = r.V, *dM = r.M;  // V (then dV), dM in the second room
    for (int64_t gi = 0; gi < s.G; ++gi) {
      transform_output_grad(s, p, dy + (r.n0 * s.C_out + gi * p.Cout_g) * p.Ho * p.Wo, r.images, dM);
      T* dx_g = dx ? dx + (r.n0 * s.C + gi * p.Cg) * s.g.H * s.g.W : nullptr;
      if (dw) {  // dU[xi] = dM[xi] V[xi]^T
        transform_input(s, p, x + (r.n0 * s.C + gi * p.Cg) * s.g.H * s.g.W, r.images, V);
        T* du = du_all + r.chunk * per_chunk_dU + gi * kXi * p.Cout_g * p.Cg;
        for (int xi = 0; xi < kXi; ++xi) {
          if (!dU_by_panels) {
            gemm<T>(view(dM + xi * r.ms, p.Cout_g, r.Tc), view(V + xi * r.vs, p.Cg, r.Tc).t(),
                    view(du + xi * p.Cout_g * p.Cg, p.Cout_g, p.Cg));
            continue;
          }
          using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
          Eigen::Map<RowMajor>(r.Vt, r.Tc, p.Cg) =  // V[xi]^T (tiles, C / G)
              Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>(V + xi * r.vs, p.Cg, r.Tc,
                                                                  Eigen::OuterStride<>(r.Tc))
                  .transpose();
          PanelKernel<T>::product(dM + xi * r.ms, r.Tc, p.Cout_g, r.Tc, r.Vt, p.Cg, p.Cg,
                                  du + xi * p.Cout_g * p.Cg, p.Cg);
        }
      }
      if (dx) {  // dV[xi] = U[xi]^T dM[xi], into V's room
        const T* ut = ut_all + gi * kXi * p.Cg * p.Cout_g;
        for (int xi = 0; xi < kXi; ++xi)
          PanelKernel<T>::product(ut + xi * p.Cg * p.Cout_g, p.Cout_g, p.Cg, p.Cout_g,
                                  dM + xi * r.ms, r.Tc, r.Tc, V + xi * r.vs, r.Tc);
        transform_input_grad(s, p, V, r.images, dx_g);
      }
    }
  });
  if (!dw) return;
  T* total = du_all;  // chunk 0's, plus the others in order
  for (int64_t chunk = 1; chunk < p.chunks; ++chunk)
    MapArr<T>(total, per_chunk_dU) += CMapArr<T>(du_all + chunk * per_chunk_dU, per_chunk_dU);
  for (int64_t gi = 0; gi < s.G; ++gi)
    for (int64_t co = 0; co < p.Cout_g; ++co)
      for (int64_t c = 0; c < p.Cg; ++c) {
        T in[kXi];
        for (int xi = 0; xi < kXi; ++xi) in[xi] = total[((gi * kXi + xi) * p.Cout_g + co) * p.Cg + c];
        two_sided<Gt, 4, 3>(in, dw + ((gi * p.Cout_g + co) * p.Cg + c) * 9);
      }
}

template void winograd_forward<float>(const ConvSizes&, const float*, const float*,
                                      const float*, float*);
template void winograd_forward<double>(const ConvSizes&, const double*, const double*,
                                       const double*, double*);
template void winograd_backward<float>(const ConvSizes&, const float*, const float*,
                                       const float*, float*, float*);
template void winograd_backward<double>(const ConvSizes&, const double*, const double*,
                                        const double*, double*, double*);

}  // namespace tg::detail
