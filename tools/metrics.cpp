#include "tools/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include <tapegrad/autograd/error.h>

namespace tg {

MetricsRow::MetricsRow()
    : val_loss(std::numeric_limits<double>::quiet_NaN()),
      accuracy(std::numeric_limits<double>::quiet_NaN()),
      epoch(std::numeric_limits<double>::quiet_NaN()),
      test_loss(std::numeric_limits<double>::quiet_NaN()),
      test_accuracy(std::numeric_limits<double>::quiet_NaN()) {}

const char* const kMetricsHeader = "step,lr,loss,grad_norm,val_loss,accuracy,tokens_per_s,elapsed_s";
const char* const kEpochMetricsHeader =
    "step,lr,loss,grad_norm,val_loss,accuracy,tokens_per_s,elapsed_s,epoch,test_loss,test_accuracy";

namespace {

std::string cell(double v) {
  if (std::isnan(v)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// One cell of a row: a number, or NaN for an empty cell where `empty_ok`.
double parse_cell(const std::string& s, bool empty_ok, const std::string& where) {
  if (s.empty()) {
    if (empty_ok) return std::numeric_limits<double>::quiet_NaN();
    throw IoError(where + ": an empty cell where a number belongs");
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || std::isnan(v))
    throw IoError(where + ": '" + s + "' is not a number");
  return v;
}

}  // namespace

std::string metrics_csv(const std::vector<MetricsRow>& rows, bool epochs) {
  std::string out = std::string(epochs ? kEpochMetricsHeader : kMetricsHeader) + "\n";
  for (const MetricsRow& r : rows) {
    out += std::to_string(r.step) + "," + cell(r.lr) + "," + cell(r.loss) + "," +
           cell(r.grad_norm) + "," + cell(r.val_loss) + "," + cell(r.accuracy) + "," +
           cell(r.tokens_per_s) + "," + cell(r.elapsed_s);
    if (epochs) out += "," + cell(r.epoch) + "," + cell(r.test_loss) + "," + cell(r.test_accuracy);
    out += "\n";
  }
  return out;
}

Tensor metrics_tensor(const std::vector<MetricsRow>& rows) {
  constexpr int64_t kColumns = 11;
  std::vector<double> v;
  v.reserve(rows.size() * kColumns);
  for (const MetricsRow& r : rows)
    v.insert(v.end(), {static_cast<double>(r.step), r.lr, r.loss, r.grad_norm, r.val_loss,
                       r.accuracy, r.tokens_per_s, r.elapsed_s, r.epoch, r.test_loss,
                       r.test_accuracy});
  return from_vector(v, {static_cast<int64_t>(rows.size()), kColumns}, Dtype::f64);
}

std::vector<MetricsRow> metrics_rows(const Tensor& table, const std::string& file) {
  if (table.dtype() != Dtype::f64 || table.rank() != 2 || (table.size(1) != 8 && table.size(1) != 11))
    throw IoError(file + ": tensor 'metrics' must be float64 of shape (rows, 11) or (rows, 8), got " +
                  dtype_name(table.dtype()) + " " + table.shape().str());
  const std::vector<double> v = table.to_vector();
  const auto columns = static_cast<std::size_t>(table.size(1));
  std::vector<MetricsRow> rows(static_cast<std::size_t>(table.size(0)));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const double* c = &v[i * columns];
    const std::string where = file + " metrics row " + std::to_string(i);
    if (c[0] != static_cast<double>(i))
      throw IoError(where + ": step " + cell(c[0]) + ", expected " + std::to_string(i));
    if (std::isnan(c[1]) || std::isnan(c[2]) || std::isnan(c[3]))
      throw IoError(where + ": NaN where lr, loss and grad_norm belong");
    MetricsRow& r = rows[i];
    r.step = static_cast<int64_t>(i);
    r.lr = c[1];
    r.loss = c[2];
    r.grad_norm = c[3];
    r.val_loss = c[4];
    r.accuracy = c[5];
    r.tokens_per_s = c[6];
    r.elapsed_s = c[7];
    if (columns == 11) {
      r.epoch = c[8];
      r.test_loss = c[9];
      r.test_accuracy = c[10];
    }
  }
  return rows;
}

std::vector<MetricsRow> parse_metrics_csv(const std::string& text, const std::string& file) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != kMetricsHeader)
    throw IoError(file + ": the first line is not the header " + kMetricsHeader);
  std::vector<MetricsRow> rows;
  for (int line_no = 2; std::getline(in, line); ++line_no) {
    const std::string where = file + " line " + std::to_string(line_no);
    std::vector<std::string> cells;
    std::string c;
    std::istringstream fields(line);
    while (std::getline(fields, c, ',')) cells.push_back(c);
    if (!line.empty() && line.back() == ',') cells.emplace_back();
    if (cells.size() != 8)
      throw IoError(where + ": " + std::to_string(cells.size()) + " cells, the header has 8");
    MetricsRow r;
    const double step = parse_cell(cells[0], false, where);
    if (step != static_cast<double>(rows.size()))
      throw IoError(where + ": step " + cells[0] + ", expected " + std::to_string(rows.size()));
    r.step = static_cast<int64_t>(step);
    r.lr = parse_cell(cells[1], false, where);
    r.loss = parse_cell(cells[2], false, where);
    r.grad_norm = parse_cell(cells[3], false, where);
    r.val_loss = parse_cell(cells[4], true, where);
    r.accuracy = parse_cell(cells[5], true, where);
    r.tokens_per_s = parse_cell(cells[6], true, where);
    r.elapsed_s = parse_cell(cells[7], true, where);
    rows.push_back(r);
  }
  return rows;
}

}  // namespace tg
