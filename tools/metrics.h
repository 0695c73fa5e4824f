#pragma once
// The rows of metrics.csv (one per update) and the loss.svg plot drawn from them.
//   step,lr,loss,grad_norm,val_loss,accuracy,tokens_per_s,elapsed_s
// and for a run by epochs (images) three more, filled on an epoch's last row:
//   ...,epoch,test_loss,test_accuracy
// Numbers are written with 17 significant digits (%.17g), which read back to the same double,
// so the rows a resumed run carries over are rewritten byte for byte; a value that does not
// apply (no evaluation before that update, no accuracy outside the induction task) is NaN in
// memory and an empty cell in the file.

#include <cstdint>
#include <string>
#include <vector>

#include <tapegrad/autograd/tensor.h>

namespace tg {

struct MetricsRow {
  int64_t step = 0;
  double lr = 0, loss = 0, grad_norm = 0;
  double val_loss, accuracy;  // NaN: not evaluated / not applicable
  double tokens_per_s = 0, elapsed_s = 0;
  double epoch, test_loss, test_accuracy;  // NaN but on an epoch's last update (from 1)
  MetricsRow();
};

/// The header line, without the newline, and the one of a run by epochs.
extern const char* const kMetricsHeader;
extern const char* const kEpochMetricsHeader;

/// The whole file: header and rows, with the epoch columns when `epochs`. Never throws.
std::string metrics_csv(const std::vector<MetricsRow>& rows, bool epochs = false);

/// Parses a metrics.csv written by metrics_csv; throws IoError naming `file` and the line when
/// the header or a row is malformed.
std::vector<MetricsRow> parse_metrics_csv(const std::string& text, const std::string& file);

/// The rows as one float64 tensor of shape (rows, 11), the columns of a run by epochs in their
/// order (NaN for an empty cell): how train_state.safetensors carries them, bit for bit. Never
/// throws.
Tensor metrics_tensor(const std::vector<MetricsRow>& rows);
/// Back from metrics_tensor (or the (rows, 8) table of a tapegrad before the epoch columns);
/// throws IoError naming `file` when the tensor is not such a table (dtype, shape, a step other
/// than its row's index, a NaN where a number belongs).
std::vector<MetricsRow> metrics_rows(const Tensor& table, const std::string& file);

/// An SVG line plot of the training loss (every row), the validation loss (the rows that have
/// one) and, for a run by epochs, the test loss and the test accuracy (on an axis of its own,
/// right) against step, with axes, ticks, labels, a legend and `title`. Never throws.
std::string loss_svg(const std::vector<MetricsRow>& rows, const std::string& title);

}  // namespace tg
