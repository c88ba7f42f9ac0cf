// The Pareto data and picture of an evaluation (src/sim/evaluate.hpp): pareto.csv and pareto.gp,
// whose labels are placed here so that close points stay readable.
#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "sim/evaluate.hpp"
#include "sim/text_table.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {
namespace sim {

std::string paretoCsv(const Evaluation& e) {
  std::ostringstream out;
  out << "scenario,detector,arm,goodput_mean,goodput_min,goodput_max,p99_burst_mean,"
         "p99_burst_min,p99_burst_max,p99_onset_mean,p99_onset_min,p99_onset_max\n";
  auto csv = [](const Spread& s) {
    return text::fixed(s.mean, 3) + "," + text::fixed(s.min, 3) + "," + text::fixed(s.max, 3);
  };
  for (const DetectorReport& report : e.reports) {
    for (const ArmSummary& a : report.arms) {
      const auto [top, bottom] = topAndBottomClass(a.classes);
      const WindowSummary* burst = findWindow(a.classes[top], "burst");
      const WindowSummary* onset = findWindow(a.classes[top], "onset");
      if (burst == nullptr) burst = findWindow(a.classes[top], "all");
      if (onset == nullptr) onset = burst;
      out << e.scenario.name << ',' << toString(report.detector) << ',' << a.name << ','
          << csv(findWindow(a.classes[bottom], "all")->outputTokensPerSec) << ','
          << csv(burst->ttftP99) << ',' << csv(onset->ttftP99) << '\n';
    }
  }
  return out.str();
}

namespace {

// Label placement for the Pareto picture. The script fixes the terminal size, the margins and
// the axis ranges, so a text's extent is known in graph units (0-1) and the labels can be placed
// here: the arms whose points (nearly) coincide share one label, one name a line; each label goes
// beside its point, or as close above or below it as it fits without covering another label or
// point, with a thin line to its point when moved.
constexpr double kGraphWidthPx = 1000.0 * (0.97 - 0.09);  // terminal width x margins below
constexpr double kGraphHeightPx = 650.0 * (0.92 - 0.15);
constexpr double kCharWidth = 7.0 / kGraphWidthPx;  // Sans 9
constexpr double kLineHeight = 14.0 / kGraphHeightPx;
constexpr double kPointX = 5.0 / kGraphWidthPx;  // half a point's extent
constexpr double kPointY = 5.0 / kGraphHeightPx;

struct Box {
  double left, right, bottom, top;
  [[nodiscard]] bool overlaps(const Box& o) const {
    return left < o.right && o.left < right && bottom < o.top && o.bottom < top;
  }
  [[nodiscard]] bool inside() const {
    return left >= 0.0 && right <= 1.0 && bottom >= 0.0 && top <= 1.0;
  }
};

std::string gnuplotQuoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The xrange, yrange, labels and arrows of one detector's picture.
std::string paretoLabels(const DetectorReport& report) {
  struct Point {
    std::string name;
    double goodput, burst, onset;  // burst and onset: the top class's p99, ms
  };
  std::vector<Point> points;
  double x0 = kNoValue, x1 = kNoValue, y0 = kNoValue, y1 = kNoValue;
  const auto widen = [](double& lo, double& hi, double v) {
    if (std::isnan(v)) return;
    lo = std::isnan(lo) ? v : std::min(lo, v);
    hi = std::isnan(hi) ? v : std::max(hi, v);
  };
  for (const ArmSummary& a : report.arms) {
    if (a.classes.empty()) continue;
    const auto [top, bottom] = topAndBottomClass(a.classes);
    const WindowSummary* burst = findWindow(a.classes[top], "burst");
    const WindowSummary* onset = findWindow(a.classes[top], "onset");
    if (burst == nullptr) burst = findWindow(a.classes[top], "all");
    if (onset == nullptr) onset = burst;
    const Spread& g = findWindow(a.classes[bottom], "all")->outputTokensPerSec;
    widen(x0, x1, g.min);
    widen(x0, x1, g.max);
    for (const Spread* y : {&burst->ttftP99, &onset->ttftP99}) {
      if (y->min > 0.0) widen(y0, y1, y->min);
      if (y->max > 0.0) widen(y0, y1, y->max);
    }
    points.push_back({a.name, g.mean, burst->ttftP99.mean, onset->ttftP99.mean});
  }
  if (std::isnan(x0) || std::isnan(y0)) return "";
  const double span = std::max(x1 - x0, 1.0);
  x0 -= 0.08 * span;
  x1 += 0.08 * span;
  const double ly0 = std::floor(std::log10(y0));
  const double ly1 = std::max(std::ceil(std::log10(y1)), ly0 + 1.0);
  const auto gx = [&](double x) { return (x - x0) / (x1 - x0); };
  const auto gy = [&](double y) { return (std::log10(y) - ly0) / (ly1 - ly0); };

  std::vector<Box> taken;  // every point, then every placed label
  for (const Point& p : points) {
    for (const double y : {p.burst, p.onset}) {
      if (std::isnan(p.goodput) || !(y > 0.0)) continue;
      taken.push_back(
          {gx(p.goodput) - kPointX, gx(p.goodput) + kPointX, gy(y) - kPointY, gy(y) + kPointY});
    }
  }
  // Groups of arms whose burst points nearly coincide, in order of goodput.
  struct Group {
    double x, y;
    std::vector<std::string> names;
  };
  std::vector<Group> groups;
  for (const Point& p : points) {
    if (std::isnan(p.goodput) || !(p.burst > 0.0)) continue;
    const double x = gx(p.goodput);
    const double y = gy(p.burst);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const Group& o) {
      return std::abs(o.x - x) < 2 * kPointX && std::abs(o.y - y) < 2 * kPointY;
    });
    if (g == groups.end()) {
      groups.push_back({x, y, {p.name}});
    } else {
      g->names.push_back(p.name);
    }
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.x < b.x; });

  std::ostringstream g;
  g << "set xrange [" << x0 << ":" << x1 << "]\nset yrange [" << std::pow(10.0, ly0) << ":"
    << std::pow(10.0, ly1) << "]\nunset label\nunset arrow\n";
  int id = 0;
  for (const Group& group : groups) {
    std::size_t longest = 0;
    std::string text;
    for (const std::string& n : group.names) {
      longest = std::max(longest, n.size());
      text += (text.empty() ? "" : "\n") + n;
    }
    const double width = static_cast<double>(longest) * kCharWidth;
    const double lines = static_cast<double>(group.names.size());
    // The first line is centred on the label's y; the others follow below it.
    const auto box = [&](double x, double y, bool right) {
      const double left = right ? x : x - width;
      return Box{left, left + width, y - (lines - 0.5) * kLineHeight, y + 0.5 * kLineHeight};
    };
    double bestX = group.x + 2 * kPointX;
    double bestY = group.y;
    bool bestRight = true;
    bool found = false;
    for (int step = 0; step <= 24 && !found; ++step) {
      // Odd steps move up, the whole label above the point; even steps move down.
      const double k = static_cast<double>((step + 1) / 2);
      const double dy = (step % 2 == 1 ? k + lines - 1.0 : -k) * kLineHeight;
      for (const bool right : {true, false}) {
        const double x = right ? group.x + 2 * kPointX : group.x - 2 * kPointX;
        const double y = group.y + (step == 0 ? 0.0 : dy);
        const Box b = box(x, y, right);
        if (!b.inside() ||
            std::any_of(taken.begin(), taken.end(), [&](const Box& t) { return t.overlaps(b); })) {
          continue;
        }
        bestX = x;
        bestY = y;
        bestRight = right;
        found = true;
        break;
      }
    }
    taken.push_back(box(bestX, bestY, bestRight));
    ++id;
    // gnuplot reads "\n" in a double-quoted string as a line break.
    std::string quoted = gnuplotQuoted(text);
    for (std::size_t at = quoted.find('\n'); at != std::string::npos; at = quoted.find('\n', at)) {
      quoted.replace(at, 1, "\\n");
    }
    g << "set label " << id << " " << quoted << " at graph " << bestX << "," << bestY << " "
      << (bestRight ? "left" : "right") << " front\n";
    if (std::abs(bestY - group.y) > kLineHeight / 2) {
      g << "set arrow " << id << " from graph " << bestX << "," << bestY << " to graph " << group.x
        << "," << group.y << " nohead lw 1 lc rgb 'gray40'\n";
    }
  }
  return g.str();
}

}  // namespace

std::string paretoGnuplot(const Evaluation& e) {
  std::ostringstream g;
  g << "# Generated by `holdback simulate --plot`: the trade-off, one point per arm (mean over\n"
       "# seeds, bars min-max). Run with `gnuplot pareto.gp` next to pareto.csv.\n"
       "set datafile separator ','\nset datafile missing '-'\n"
       "set terminal pngcairo size 1000,650 noenhanced font 'Sans,9'\nset grid\nset logscale y\n"
       "set lmargin at screen 0.09\nset rmargin at screen 0.97\n"
       "set tmargin at screen 0.92\nset bmargin at screen 0.15\n"
       "set key below\n"
       "set xlabel 'lowest class goodput (output tokens/s, whole measured time)'\n"
       "set ylabel 'top class TTFT p99 (ms, log)'\n";
  for (const DetectorReport& report : e.reports) {
    const std::string d(toString(report.detector));
    g << "set output 'pareto-" << e.scenario.name << "-" << d << ".png'\n"
      << "set title 'Trade-off: " << e.scenario.name << ", " << d << " detector, " << e.seeds.size()
      << " seed(s); labels at the p99 burst points'\n"
      << paretoLabels(report) << "plot 'pareto.csv' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):7:5:6:8:9 with xyerrorbars pt 7 title 'p99 burst', \\\n"
      << "     '' using (strcol(2) eq '" << d
      << "' ? $4 : NaN):10:5:6:11:12 with xyerrorbars pt 5 title 'p99 onset'\n";
  }
  g << "set output\n";
  return g.str();
}

}  // namespace sim
}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
