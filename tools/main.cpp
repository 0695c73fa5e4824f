#include <iostream>

#include "tapegrad.h"

int main() {
  using namespace tg;
  Rng rng(0);
  Tensor X = randn({8, 4}, rng), W = randn({4, 4}, rng, Dtype::f64, 0.1);
  W.set_requires_grad();
  Tensor S = matmul(matmul(X, W), X, false, true);
  Tensor A = softmax(add_mask(S, causal_mask(8)));
  Tensor L = scale(sum_of_squares(matmul(A, X)), 0.5);
  L.backward();
  std::cout << A.str() << "\n" << W.grad().str() << "\n";
  auto r = gradcheck([](const std::vector<Tensor>& in) {
    Tensor S = matmul(matmul(in[0], in[1]), in[0], false, true);
    Tensor A = softmax(add_mask(S, causal_mask(8)));
    return scale(sum_of_squares(matmul(A, in[0])), 0.5);
  }, {X, W});
  std::cout << r.message << "\n";
  auto r2 = gradgradcheck([](const std::vector<Tensor>& in) {
    Tensor S = matmul(matmul(in[0], in[1]), in[0], false, true);
    Tensor A = softmax(add_mask(S, causal_mask(8)));
    return scale(sum_of_squares(matmul(A, in[0])), 0.5);
  }, {X, W});
  std::cout << r2.message << "\n";
}
