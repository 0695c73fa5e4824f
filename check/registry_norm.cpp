// Op cases for batch_norm and group_norm: ranks 2 to 4, with and without weight and bias,
// training (the batch's statistics; fresh running stats each call, so every call computes the
// same) and evaluation (fixed running stats), one sample with several positions, one channel,
// group sizes 1 and C, and large offsets and scales.

#include <tapegrad/check/registry_table.h>
#include <tapegrad/ops/ops.h>

namespace tg::detail {

namespace {

// Running stats of C channels in x's dtype: a mean in [-0.5, 0.5] and a variance in [0.5, 1.5].
std::pair<Tensor, Tensor> running_stats(int64_t C, const Tensor& like) {
  std::vector<double> m(C), v(C);
  for (int64_t c = 0; c < C; ++c) {
    m[c] = C > 1 ? -0.5 + static_cast<double>(c) / static_cast<double>(C - 1) : 0.25;
    v[c] = 0.5 + (C > 1 ? static_cast<double>(c) / static_cast<double>(C - 1) : 0.5);
  }
  return {from_vector(m, {C}, like.dtype()), from_vector(v, {C}, like.dtype())};
}

void batch_norm_cases(Table& t) {
  // Inputs X and, when `affine`, weight and bias (C).
  auto bn = [&t](const std::string& name, Shape x, bool affine, bool training) {
    std::vector<Shape> shapes{x};
    if (affine) shapes.insert(shapes.end(), {{x[1]}, {x[1]}});
    t.add("batch_norm", name, shapes, [training](const std::vector<Tensor>& in) {
      auto [rm, rv] = running_stats(in[0].size(1), in[0]);
      const Tensor w = in.size() > 1 ? in[1] : Tensor(), b = in.size() > 1 ? in[2] : Tensor();
      return std::vector<Tensor>{batch_norm(in[0], rm, rv, w, b, training)};
    });
  };
  bn("train_NC", {4, 3}, true, true);
  bn("train_NCL", {2, 3, 4}, true, true);
  bn("train_NCHW", {2, 2, 3, 3}, true, true);
  bn("train_no_affine", {3, 2, 2}, false, true);
  bn("train_batch_1", {1, 2, 5}, true, true);
  bn("train_one_channel", {5, 1}, true, true);
  bn("eval_NC", {4, 3}, true, false);
  bn("eval_NCHW", {2, 3, 2, 2}, true, false);
  bn("eval_no_affine", {2, 2, 3}, false, false);
  t.add("batch_norm", "train_offset_and_scale_eps_0.1", {{3, 2, 2}, {2}, {2}},
        [](const std::vector<Tensor>& in) {
          const Tensor x = add(scale(in[0], 30.0), 100.0);
          return std::vector<Tensor>{batch_norm(x, Tensor(), Tensor(), in[1], in[2], true, 0.1, 0.1)};
        });
}

void group_norm_cases(Table& t) {
  auto gn = [&t](const std::string& name, Shape x, int64_t groups, bool affine) {
    std::vector<Shape> shapes{x};
    if (affine) shapes.insert(shapes.end(), {{x[1]}, {x[1]}});
    t.add("group_norm", name, shapes, [groups](const std::vector<Tensor>& in) {
      const Tensor w = in.size() > 1 ? in[1] : Tensor(), b = in.size() > 1 ? in[2] : Tensor();
      return std::vector<Tensor>{group_norm(in[0], groups, w, b)};
    });
  };
  gn("NC_2_groups", {3, 4}, 2, true);
  gn("NCL_2_groups", {2, 4, 3}, 2, true);
  gn("NCHW_3_groups", {2, 6, 2, 2}, 3, true);
  gn("one_group", {2, 3, 4}, 1, true);
  gn("group_per_channel", {2, 3, 4}, 3, true);
  gn("no_affine", {2, 4, 2}, 2, false);
  gn("batch_1", {1, 4, 3}, 2, true);
  t.add("group_norm", "offset_and_scale_eps_0.1", {{2, 4, 2}, {4}, {4}},
        [](const std::vector<Tensor>& in) {
          const Tensor x = add(scale(in[0], 30.0), 100.0);
          return std::vector<Tensor>{group_norm(x, 2, in[1], in[2], 0.1)};
        });
}

}  // namespace

void norm_op_cases(Table& t) {
  batch_norm_cases(t);
  group_norm_cases(t);
}

}  // namespace tg::detail
