// linear: Y = X W^T + b, rows of X (..., in) against W (out, in), b (out) broadcast over rows;
//   dX = dY W,  dW = dY^T X (over every row of X),  db = sum_to(dY, (out)) (the rows' sum);
//   tY = tX W^T + X tW^T + tb
// The kernels: one product whose sums start from b (detail::gemm_bias); backward the two
// products straight into fresh buffers and db by the column sums of dY.

#include <tapegrad/ops/linear.h>

#include <algorithm>
#include <string>

#include <tapegrad/autograd/node.h>
#include <tapegrad/ops/accumulate.h>
#include <tapegrad/ops/gemm.h>
#include <tapegrad/ops/matmul.h>
#include <tapegrad/ops/op_util.h>
#include <tapegrad/ops/reshape.h>
#include <tapegrad/ops/sum_to.h>
#include <tapegrad/ops/tangent.h>
#include <tapegrad/ops/threads.h>

namespace tg {

namespace {

using detail::view;

void check_linear(const Tensor& X, const Tensor& W, const Tensor& b) {
  detail::check_floating("linear", X);
  detail::check_defined("linear", W, "weight");
  detail::check_same_dtype("linear", X, W);
  if (b.defined()) detail::check_same_dtype("linear", X, b);
  const auto refuse = [&](const char* what) {  // the message built only when thrown
    throw ShapeError(std::string("linear: ") + what + ": input " + X.shape().str() + ", weight " +
                     W.shape().str() + (b.defined() ? ", bias " + b.shape().str() : std::string()));
  };
  if (W.rank() != 2) refuse("weight must be (out, in)");
  if (X.rank() < 1 || X.size(-1) != W.size(1))
    refuse("input must be (..., in) with in = weight's columns");
  if (b.defined() && (b.rank() != 1 || b.size(0) != W.size(0)))
    refuse("bias must be (out) with out = weight's rows");
}

// The rows of X (..., in): the product of its leading sizes (X may be empty with rows, in = 0).
int64_t rows_of(const Tensor& X) {
  int64_t rows = 1;
  for (int i = 0; i < X.rank() - 1; ++i) rows *= X.size(i);
  return rows;
}

// Y (rows, out) = X W^T + b, for checked inputs of rank >= 2.
template <class T>
void forward_kernel(const Tensor& X, const Tensor& W, const Tensor& b, Tensor& Y) {
  const int64_t in = W.size(1), out = W.size(0), rows = rows_of(X);
  T* y = Y.data<T>();
  if (Y.numel() == 0) return;
  const auto x_view = view(X.data<T>(), rows, in);
  const auto wt_view = view(W.data<T>(), out, in).t();
  if (b.defined())
    detail::gemm_bias<T>(x_view, wt_view, view(y, rows, out), b.data<T>());
  else if (in == 0)
    std::fill(y, y + Y.numel(), T(0));
  else
    detail::gemm<T>(x_view, wt_view, view(y, rows, out));
}

// The formula's gradients without recording: two products and dY's column sums.
Grads backward_kernel(const Tensor& X, const Tensor& W, const Tensor& b, const Tensor& dY) {
  const int64_t in = W.size(1), out = W.size(0), rows = rows_of(X);
  Tensor dX, dW, db;
  if (X.requires_grad()) dX = Tensor(X.shape(), X.dtype());
  if (W.requires_grad()) dW = Tensor(W.shape(), W.dtype());
  if (b.defined() && b.requires_grad()) db = Tensor(b.shape(), b.dtype());
  dispatch(X.dtype(), [&]<class T>() {
    const T* dy = dY.data<T>();
    if (dX.defined() && dX.numel() > 0) {
      if (out == 0)
        std::fill(dX.data<T>(), dX.data<T>() + dX.numel(), T(0));
      else
        detail::gemm<T>(view(dy, rows, out), view(W.data<T>(), out, in),
                        view(dX.data<T>(), rows, in));
    }
    if (dW.defined() && dW.numel() > 0) {
      if (rows == 0)
        std::fill(dW.data<T>(), dW.data<T>() + dW.numel(), T(0));
      else
        detail::gemm<T>(view(dy, rows, out).t(), view(X.data<T>(), rows, in),
                        view(dW.data<T>(), out, in));
    }
    if (db.defined() && out > 0) {
      // dY's column sums, blocks of columns shared by the team: each column is summed in row
      // order on whichever thread, so db has the same bits on any thread count.
      constexpr int64_t kColumns = 64;
      T* pdb = db.data<T>();
      const int64_t blocks = (out + kColumns - 1) / kColumns;
      detail::for_parts(
          blocks,
          [&](int64_t begin, int64_t end) {
            const int64_t c0 = begin * kColumns, c1 = std::min(out, end * kColumns);
            detail::sum_rows_ld<T>(dy + c0, rows, c1 - c0, out, pdb + c0);
          },
          detail::pass_serial_below(rows * kColumns));
    }
  });
  return {dX, dW, db};
}

Tensor linear_checked(const Tensor& X, const Tensor& W, const Tensor& b,
                      const std::source_location& where) {
  int64_t dims[kMaxRank];
  for (int i = 0; i < X.rank() - 1; ++i) dims[i] = X.shape()[i];
  dims[X.rank() - 1] = W.size(0);
  Tensor Y(Shape(dims, X.rank()), X.dtype());  // (..., out)
  dispatch(X.dtype(), [&]<class T>() { forward_kernel<T>(X, W, b, Y); });
  const Tensor inputs[] = {X, W, b};
  return record("linear", std::move(Y), std::span<const Tensor>(inputs, b.defined() ? 3 : 2), where)
      .saves(X, W)
      .formula([X, W, b, where](const Tensor& dY) -> Grads {
        Tensor dX, dW, db;
        if (X.requires_grad()) dX = matmul(dY, W, false, false, where);  // (..., in)
        if (W.requires_grad()) {  // over every row (sizes given: a -1 cannot stand beside a 0)
          const int64_t rows = rows_of(X);
          const Tensor dY2 = reshape(dY, {rows, W.size(0)}, where);
          dW = matmul(dY2, reshape(X, {rows, W.size(1)}, where), true, false, where);
        }
        if (b.defined() && b.requires_grad()) db = sum_to(dY, b.shape(), where);
        return {dX, dW, db};
      })
      .kernel([X, W, b](const Tensor& dY) -> Grads { return backward_kernel(X, W, b, dY); })
      .jvp([&](const Tangents& t, const Tensor& Y) {
        const Tensor tX_W = detail::tangent_term(t[0], [&](const Tensor& tX) {
          return matmul(tX, W, false, true, where);
        });
        const Tensor X_tW = detail::tangent_term(t[1], [&](const Tensor& tW) {
          return matmul(X, tW, false, true, where);
        });
        return detail::tangent_sum(detail::tangent_sum(tX_W, X_tW, Y.shape()), t[2], Y.shape());
      });
}

}  // namespace

Tensor linear(const Tensor& X, const Tensor& W, const Tensor& b,
              const std::source_location& where) {
  check_linear(X, W, b);
  if (X.rank() >= 2) return linear_checked(X, W, b, where);
  // (in) -> (out), as PyTorch: through one row.
  const Tensor Y = linear_checked(reshape(X, {1, X.size(0)}, where), W, b, where);
  return reshape(Y, {W.size(0)}, where);
}

}  // namespace tg
