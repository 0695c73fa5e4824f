#pragma once
// A user's own nn/linear.h, found first on the include path: tapegrad's headers must not pick
// it up in place of their own (they include <tapegrad/nn/linear.h>).
namespace user {
struct Linear {
  int width = 3;
};
}  // namespace user
