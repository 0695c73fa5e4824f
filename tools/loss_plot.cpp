// loss.svg: a hand-written SVG line plot (no plotting dependency), readable in any browser.
// Axes get "nice" ticks (1, 2 or 5 times a power of ten), so the numbers on them are round.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "tools/metrics.h"

namespace tg {

namespace {

constexpr double kWidth = 760, kHeight = 460;
constexpr double kLeft = 78, kTop = 48, kBottom = 62;  // margins around the plot
// The right margin: room for the test accuracy's axis when there is one.
constexpr double kRight = 24, kRightWithAccuracy = 56;
constexpr const char* kTrainColor = "#1f77b4";
constexpr const char* kValColor = "#d62728";
constexpr const char* kAccuracyColor = "#2ca02c";

std::string num(double v, int precision = 6) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*g", precision, v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// Ticks covering [lo, hi] at a 1-2-5 spacing, about `target` of them; widens lo and hi to them.
std::vector<double> nice_ticks(double& lo, double& hi, int target) {
  if (!(hi > lo)) {  // a flat curve: open a small range around it
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double step = raw / mag <= 1 ? mag : raw / mag <= 2 ? 2 * mag : raw / mag <= 5 ? 5 * mag
                                                                                       : 10 * mag;
  lo = std::floor(lo / step + 1e-9) * step;
  hi = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> ticks;
  for (double t = lo; t <= hi + step * 1e-6; t += step) ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

struct Axes {
  double x0, x1, y0, y1;  // data ranges
  double right;           // the right margin
  double px(double x) const { return kLeft + (x - x0) / (x1 - x0) * (kWidth - kLeft - right); }
  double py(double y) const {
    return kHeight - kBottom - (y - y0) / (y1 - y0) * (kHeight - kTop - kBottom);
  }
};

std::string polyline(const std::vector<std::pair<double, double>>& pts, const Axes& a,
                     const char* color, double width) {
  std::string s = "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"" +
                  num(width) + "\" stroke-linejoin=\"round\" points=\"";
  for (const auto& [x, y] : pts) s += num(a.px(x), 7) + "," + num(a.py(y), 7) + " ";
  return s + "\"/>\n";
}

// The test accuracy on an axis of its own, 0 to 1 on the right edge, a marker per evaluation.
std::string accuracy_curve(const std::vector<std::pair<double, double>>& pts, const Axes& a) {
  const Axes right{a.x0, a.x1, 0, 1};
  const double R = kWidth - a.right;
  std::string s;
  for (int i = 0; i <= 5; ++i) {
    const std::string py = num(right.py(i / 5.0), 7);
    s += "<line x1=\"" + num(R) + "\" y1=\"" + py + "\" x2=\"" + num(R + 5) + "\" y2=\"" + py +
         "\" stroke=\"" + kAccuracyColor + "\"/>\n";
    s += "<text x=\"" + num(R + 8) + "\" y=\"" + py + "\" dominant-baseline=\"middle\" fill=\"" +
         kAccuracyColor + "\">" + num(i / 5.0) + "</text>\n";
  }
  s += "<text transform=\"translate(" + num(kWidth - 8) + "," + num((kTop + kHeight - kBottom) / 2) +
       ") rotate(90)\" text-anchor=\"middle\" font-size=\"13\" fill=\"" + kAccuracyColor +
       "\">test accuracy</text>\n";
  if (pts.size() > 1) s += polyline(pts, right, kAccuracyColor, 2);
  for (const auto& [x, y] : pts)
    s += "<circle cx=\"" + num(right.px(x), 7) + "\" cy=\"" + num(right.py(y), 7) +
         "\" r=\"3\" fill=\"" + kAccuracyColor + "\"/>\n";
  return s;
}

}  // namespace

std::string loss_svg(const std::vector<MetricsRow>& rows, const std::string& title) {
  // A run by epochs has no validation loss; its test loss takes that curve's place.
  std::vector<std::pair<double, double>> train, val, accuracy;
  bool test = false;
  for (const MetricsRow& r : rows) {
    const auto x = static_cast<double>(r.step);
    if (std::isfinite(r.loss)) train.emplace_back(x, r.loss);
    if (std::isfinite(r.val_loss)) val.emplace_back(x, r.val_loss);
    if (std::isfinite(r.test_loss)) {
      val.emplace_back(x, r.test_loss);
      test = true;
    }
    if (std::isfinite(r.test_accuracy)) accuracy.emplace_back(x, r.test_accuracy);
  }
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (!train.empty() || !val.empty()) {
    x1 = 0;
    y0 = INFINITY;
    y1 = -INFINITY;
    for (const auto* pts : {&train, &val})
      for (const auto& [x, y] : *pts) {
        x1 = std::max(x1, x);
        y0 = std::min(y0, y);
        y1 = std::max(y1, y);
      }
    if (x1 == 0) x1 = 1;  // one update: a single point at step 0
  }
  const std::vector<double> xt = nice_ticks(x0, x1, 8), yt = nice_ticks(y0, y1, 6);
  const Axes a{x0, x1, y0, y1, accuracy.empty() ? kRight : kRightWithAccuracy};
  const double L = kLeft, R = kWidth - a.right, T = kTop, B = kHeight - kBottom;

  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kWidth) +
                  "\" height=\"" + num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " +
                  num(kHeight) + "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<text x=\"" + num(kWidth / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">" +
       escape(title) + "</text>\n";
  // Grid lines and tick labels.
  for (double x : xt) {
    const std::string px = num(a.px(x), 7);
    s += "<line x1=\"" + px + "\" y1=\"" + num(T) + "\" x2=\"" + px + "\" y2=\"" + num(B) +
         "\" stroke=\"#e5e5e5\"/>\n";
    s += "<line x1=\"" + px + "\" y1=\"" + num(B) + "\" x2=\"" + px + "\" y2=\"" + num(B + 5) +
         "\" stroke=\"black\"/>\n";
    s += "<text x=\"" + px + "\" y=\"" + num(B + 19) + "\" text-anchor=\"middle\">" + num(x) +
         "</text>\n";
  }
  for (double y : yt) {
    const std::string py = num(a.py(y), 7);
    s += "<line x1=\"" + num(L) + "\" y1=\"" + py + "\" x2=\"" + num(R) + "\" y2=\"" + py +
         "\" stroke=\"#e5e5e5\"/>\n";
    s += "<line x1=\"" + num(L - 5) + "\" y1=\"" + py + "\" x2=\"" + num(L) + "\" y2=\"" + py +
         "\" stroke=\"black\"/>\n";
    s += "<text x=\"" + num(L - 8) + "\" y=\"" + py +
         "\" text-anchor=\"end\" dominant-baseline=\"middle\">" + num(y) + "</text>\n";
  }
  s += "<rect x=\"" + num(L) + "\" y=\"" + num(T) + "\" width=\"" + num(R - L) + "\" height=\"" +
       num(B - T) + "\" fill=\"none\" stroke=\"black\"/>\n";
  s += "<text x=\"" + num((L + R) / 2) + "\" y=\"" + num(kHeight - 18) +
       "\" text-anchor=\"middle\" font-size=\"13\">step</text>\n";
  s += "<text transform=\"translate(22," + num((T + B) / 2) +
       ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">loss (cross-entropy)</text>\n";
  // The curves: training loss every update, validation loss with a marker per evaluation.
  if (train.size() > 1) s += polyline(train, a, kTrainColor, 1.2);
  if (val.size() > 1) s += polyline(val, a, kValColor, 2);
  for (const auto* pts : {&train, &val}) {
    if (pts == &train && train.size() > 1) continue;
    for (const auto& [x, y] : *pts)
      s += "<circle cx=\"" + num(a.px(x), 7) + "\" cy=\"" + num(a.py(y), 7) + "\" r=\"3\" fill=\"" +
           (pts == &train ? kTrainColor : kValColor) + "\"/>\n";
  }
  if (!accuracy.empty()) s += accuracy_curve(accuracy, a);
  // Legend, top right inside the plot.
  const double lx = R - 150, ly = T + 12;
  const int entries = 1 + !val.empty() + !accuracy.empty();
  s += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"138\" height=\"" +
       num(6 + 20 * entries) + "\" fill=\"white\" fill-opacity=\"0.9\" stroke=\"#999\"/>\n";
  auto entry = [&](double y, const char* color, const char* label) {
    s += "<line x1=\"" + num(lx + 10) + "\" y1=\"" + num(y) + "\" x2=\"" + num(lx + 36) +
         "\" y2=\"" + num(y) + "\" stroke=\"" + color + "\" stroke-width=\"2\"/>\n";
    s += "<text x=\"" + num(lx + 44) + "\" y=\"" + num(y) + "\" dominant-baseline=\"middle\">" +
         label + "</text>\n";
  };
  entry(ly + 13, kTrainColor, "training loss");
  if (!val.empty()) entry(ly + 33, kValColor, test ? "test loss" : "validation loss");
  if (!accuracy.empty()) entry(ly + 53, kAccuracyColor, "test accuracy");
  return s + "</svg>\n";
}

}  // namespace tg
