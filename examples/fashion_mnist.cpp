// Train pytorch/examples' MNIST Net (a CNN) on Fashion-MNIST, in C++: read the IDX files,
// normalise with the training pixels' mean and standard deviation, visit the training images in a
// seeded shuffled order in batches of 64, AdamW; print each epoch's mean training loss and, at
// the end, the accuracy on the test images.
//
//   fashion_mnist DIR [EPOCHS] [TRAIN_LIMIT]    (TRAIN_LIMIT: the first N training images; 0: all)

#include <exception>
#include <iostream>
#include <tapegrad/tapegrad.h>

#include "args.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::cerr << "usage: fashion_mnist DIR [EPOCHS] [TRAIN_LIMIT]\n";
    return 2;
  }
  try {
    const int64_t epochs = argc > 2 ? count_arg(argv[2], "EPOCHS", 1) : 1;
    const int64_t train_limit = argc > 3 ? count_arg(argv[3], "TRAIN_LIMIT", 0) : 0;

    // Images (N, 1, 28, 28) float32, (x / 255 - mean) / std; labels (N) int64.
    tg::data::ImageBatches data(tg::data::read_image_folder(argv[1], tg::Dtype::f32),
                                /*batch=*/64, /*shuffle=*/true, train_limit, /*seed=*/0);
    tg::Rng rng(0);
    tg::nn::MnistNet model({}, rng);  // conv1, conv2, max_pool2d, dropout, fc1, fc2
    tg::optim::AdamW opt(model.named_parameters(), {.lr = 1e-3});

    for (int64_t epoch = 0; epoch < epochs; ++epoch) {
      model.train();  // dropout on
      double sum = 0;
      for (int64_t i = 0; i < data.steps_per_epoch(); ++i) {
        const tg::data::Batch batch = data.train_batch(epoch * data.steps_per_epoch() + i, rng);
        const tg::Tensor loss = tg::cross_entropy(model(batch.x), batch.y);  // logits (B, 10)
        loss.backward();
        opt.step();
        opt.zero_grad();
        sum += loss.item();
      }
      std::cout << "epoch " << epoch + 1 << " train loss " << sum / data.steps_per_epoch() << "\n";
    }

    tg::NoGradGuard no_grad;
    model.eval();  // dropout off
    double correct = 0, seen = 0;
    for (int64_t i = 0; i < data.eval_batches(); ++i) {
      const tg::data::Batch batch = data.eval_batch(i, rng);
      const double rows = static_cast<double>(batch.y.size(0));
      correct += tg::data::scored_accuracy(model(batch.x), batch) * rows;
      seen += rows;
    }
    std::cout << "test accuracy " << correct / seen << " (" << seen << " images)\n";
  } catch (const std::exception& e) {  // tg's errors (tg::Error) and the standard library's
    std::cerr << "fashion_mnist: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
