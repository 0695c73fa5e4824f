// Forward:  Q = X W_Q, K = X W_K, V = X W_V;  per head h: S = Q_h K_h^T / sqrt(d_h) + M,
//           A = softmax(S), O_h = A V_h;  Y = O W_O;  L = 0.5 sum(Y^2)
// Backward: dY = Y;  dW_O = O^T dY;  dO = dY W_O^T;  per head: dA = dO_h V_h^T, dV_h = A^T dO_h,
//           dS = A * (dA - rowsum(dA * A)) / sqrt(d_h), dQ_h = dS K_h, dK_h = dS^T Q_h;
//           dW_Q = X^T dQ, dW_K = X^T dK, dW_V = X^T dV

#include "bench/baseline.h"

#include <Eigen/Core>
#include <cmath>
#include <limits>
#include <random>

namespace tg::bench {

template <class T>
struct AttentionBaseline<T>::Impl {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  int64_t B, Tn, D, H, dh;
  Mat X, Wq, Wk, Wv, Wo;                 // X is (B T, D)
  Mat Q, K, V, O, Y, dO, dQ, dK, dV;     // (B T, D)
  Mat dWq, dWk, dWv, dWo;                // (D, D)
  Mat A, dA, M;                          // (T, T) scratch, M the causal mask

  T run() {
    Q.noalias() = X * Wq;
    K.noalias() = X * Wk;
    V.noalias() = X * Wv;
    const T sc = T(1) / std::sqrt(T(dh));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        auto Qh = Q.block(b * Tn, h * dh, Tn, dh), Kh = K.block(b * Tn, h * dh, Tn, dh);
        auto Vh = V.block(b * Tn, h * dh, Tn, dh);
        A.noalias() = Qh * Kh.transpose() * sc;
        A += M;
        for (int64_t i = 0; i < Tn; ++i) {
          A.row(i).array() = (A.row(i).array() - A.row(i).maxCoeff()).exp();
          A.row(i) /= A.row(i).sum();
        }
        O.block(b * Tn, h * dh, Tn, dh).noalias() = A * Vh;
      }
    Y.noalias() = O * Wo;
    const T loss = T(0.5) * Y.squaredNorm();
    // backward, dY = Y
    dWo.noalias() = O.transpose() * Y;
    dO.noalias() = Y * Wo.transpose();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        auto Qh = Q.block(b * Tn, h * dh, Tn, dh), Kh = K.block(b * Tn, h * dh, Tn, dh);
        auto Vh = V.block(b * Tn, h * dh, Tn, dh), dOh = dO.block(b * Tn, h * dh, Tn, dh);
        A.noalias() = Qh * Kh.transpose() * sc;  // recompute A (the tape keeps it; so could we)
        A += M;
        for (int64_t i = 0; i < Tn; ++i) {
          A.row(i).array() = (A.row(i).array() - A.row(i).maxCoeff()).exp();
          A.row(i) /= A.row(i).sum();
        }
        dV.block(b * Tn, h * dh, Tn, dh).noalias() = A.transpose() * dOh;
        dA.noalias() = dOh * Vh.transpose();
        const auto rs = (dA.array() * A.array()).rowwise().sum().eval();
        dA = (A.array() * (dA.array().colwise() - rs)) * sc;  // dS
        dQ.block(b * Tn, h * dh, Tn, dh).noalias() = dA * Kh;
        dK.block(b * Tn, h * dh, Tn, dh).noalias() = dA.transpose() * Qh;
      }
    dWq.noalias() = X.transpose() * dQ;
    dWk.noalias() = X.transpose() * dK;
    dWv.noalias() = X.transpose() * dV;
    return loss;
  }
};

template <class T>
AttentionBaseline<T>::AttentionBaseline(int64_t B, int64_t Tn, int64_t D, int64_t H,
                                        uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.B = B;
  m.Tn = Tn;
  m.D = D;
  m.H = H;
  m.dh = D / H;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  auto fill = [&](typename Impl::Mat& x, int64_t r, int64_t c, double sd) {
    x.resize(r, c);
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = static_cast<T>(sd * n(gen));
  };
  fill(m.X, B * Tn, D, 1.0);
  for (auto* w : {&m.Wq, &m.Wk, &m.Wv, &m.Wo}) fill(*w, D, D, 1.0 / std::sqrt(double(D)));
  for (auto* x : {&m.O, &m.dQ, &m.dK, &m.dV}) x->setZero(B * Tn, D);  // written block by block
  m.M = Impl::Mat::Zero(Tn, Tn);
  for (int64_t i = 0; i < Tn; ++i)
    for (int64_t j = i + 1; j < Tn; ++j) m.M(i, j) = -std::numeric_limits<T>::infinity();
  m.run();  // sizes every buffer once
}

template <class T>
AttentionBaseline<T>::~AttentionBaseline() = default;

template <class T>
T AttentionBaseline<T>::run() {
  return impl_->run();
}

template class AttentionBaseline<float>;
template class AttentionBaseline<double>;

}  // namespace tg::bench
