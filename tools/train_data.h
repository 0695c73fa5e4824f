#pragma once
// The data sources of `tapegrad train` behind one face (a data::Source each): char-level text
// (--text), the induction task (--task induction), fixed batches (--batches) and images by
// epochs (--images, data/image_batches.h). Training batches
// come in order from a generator whose state, with the number of batches drawn, is what a
// checkpoint saves. Evaluation draws its batches from a fresh generator each time (the same
// batches at every evaluation, so the validation curve is not noise from changing batches, and
// the training stream is never disturbed by it), and scores any Model on them.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <tapegrad/data/source.h>
#include "tools/arch.h"

namespace tg {

struct EvalResult {
  double val_loss = 0;  // mean loss over every target of the evaluation batches
  std::optional<double> accuracy;  // argmax accuracy on the scored labels (the induction task's
                                   // predictable targets), where the source scores any
};

/// The sums an evaluation is made of, so that ranks can each take a share of the batches and
/// add theirs up (dist: an allreduce of the three numbers) before finish_eval.
struct EvalSums {
  double loss = 0;         // sum of the batches' mean losses
  double correct = 0;      // scored labels the argmax got right
  double predictable = 0;  // scored labels (induction: the predictable targets)
};

/// val_loss and accuracy of n batches from their sums. Never throws.
EvalResult finish_eval(const EvalSums& sums, int64_t n);

class TrainData {
 public:
  enum class Kind { text, induction, batches, images };

  /// --text: the whole file; the vocabulary is the text's, or `vocab` (a resumed model's). Throws
  /// IoError (unreadable file), ValueError (empty text, a character outside `vocab`, a split
  /// shorter than T + 1 tokens: the validation split only when `need_val`).
  static TrainData text(const std::string& path, const std::optional<std::string>& vocab,
                        int64_t B, int64_t T, bool need_val, uint64_t seed);
  /// --task induction with V tokens; throws ValueError when V < ceil((T + 1) / 2).
  static TrainData induction(int64_t B, int64_t T, int64_t V, uint64_t seed);
  /// --batches: B and T come from the file (N, B, T + 1); throws IoError / ValueError (see
  /// FixedBatches) and ValueError when T exceeds block_size.
  static TrainData batches(const std::string& path, int64_t V, int64_t block_size, uint64_t seed);

  /// --images: DIR's IDX files in `dtype`. Throws IoError (see read_image_folder), ValueError
  /// for a train_limit past the training set.
  static TrainData images(const std::string& dir, Dtype dtype, int64_t B, bool shuffle,
                          int64_t train_limit, uint64_t seed);

  Kind kind() const { return kind_; }
  /// Updates per epoch for images; 0 for the sources that have no epochs.
  int64_t steps_per_epoch() const;
  /// The batches an evaluation takes: images: every test image's; else `asked` (--eval-batches).
  int64_t eval_batches(int64_t asked) const;
  /// "text", "induction", "batches" or "images", as the train state records it.
  const char* kind_name() const;
  int64_t batch_size() const { return source_->batch_size(); }
  int64_t block_size() const { return T_; }
  /// The text's vocabulary (text data only).
  const std::optional<std::string>& vocab() const { return vocab_; }

  /// The next training batch; advances position().
  data::Batch next();
  /// Loss (and accuracy where the batches score labels: the induction task) of the model over n
  /// batches, in eval mode, under NoGradGuard; the model is put back in training mode. For
  /// --batches there is no held-out split: the first n batches of the file (mod N) are used.
  EvalResult evaluate(const Model& model, int64_t n) const;
  /// The sums of the evaluation batches i < n with i % parts == part (every batch is still drawn,
  /// so each one is the same batch as in one process). Throws ValueError unless 0 <= part < parts.
  EvalSums evaluate_part(const Model& model, int64_t n, int part, int parts) const;

  /// The number of training batches drawn so far.
  int64_t position() const { return position_; }
  Rng& rng() { return rng_; }
  /// Sets the position (after the generator's state was restored); throws ValueError when
  /// negative.
  void set_position(int64_t position);

 private:
  TrainData(Kind kind, std::unique_ptr<data::Source> source, int64_t T, uint64_t seed);
  // The sums of one evaluation batch.
  static EvalSums score(const Model& model, const data::Batch& batch);

  Kind kind_;
  std::unique_ptr<data::Source> source_;
  int64_t T_;  // positions per row
  uint64_t seed_;
  Rng rng_;
  int64_t position_ = 0;
  std::optional<std::string> vocab_;
};

}  // namespace tg
