#include "apps/bench/log_log_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace troupe::apps {
namespace {

constexpr double width = 360, height = 240, left = 56, right = 16, top = 32, bottom = 36;

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

}  // namespace

std::string log_log_svg(const std::string& title, const std::vector<std::pair<double, double>>& points, double slope) {
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + number(width) + "\" height=\"" +
                    number(height) + "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + number(left) + "\" y=\"18\" font-size=\"13\">" + title +
         (std::isnan(slope) ? "" : " (slope " + number(slope) + ")") + "</text>\n";
  if (points.size() < 2)
    return svg + "<text x=\"" + number(left) + "\" y=\"120\">fewer than two points</text>\n</svg>\n";
  double x0 = points.front().first, x1 = x0, y0 = points.front().second, y1 = y0;
  for (const auto& [x, y] : points)
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  // Whole decades around the figures, so the grid lines fall on powers of ten.
  const double lx0 = std::floor(std::log10(x0)), lx1 = std::max(lx0 + 1, std::ceil(std::log10(x1)));
  const double ly0 = std::floor(std::log10(y0)), ly1 = std::max(ly0 + 1, std::ceil(std::log10(y1)));
  const auto px = [&](double x) { return left + (std::log10(x) - lx0) / (lx1 - lx0) * (width - left - right); };
  const auto py = [&](double y) {
    return height - bottom - (std::log10(y) - ly0) / (ly1 - ly0) * (height - top - bottom);
  };
  for (double d = lx0; d <= lx1; ++d) {
    const double x = px(std::pow(10, d));
    svg += "<line x1=\"" + number(x) + "\" y1=\"" + number(top) + "\" x2=\"" + number(x) + "\" y2=\"" +
           number(height - bottom) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + number(x) + "\" y=\"" + number(height - bottom + 14) + "\" text-anchor=\"middle\">" +
           number(std::pow(10, d)) + "</text>\n";
  }
  for (double d = ly0; d <= ly1; ++d) {
    const double y = py(std::pow(10, d));
    svg += "<line x1=\"" + number(left) + "\" y1=\"" + number(y) + "\" x2=\"" + number(width - right) + "\" y2=\"" +
           number(y) + "\" stroke=\"#ddd\"/>\n";
    svg += "<text x=\"" + number(left - 4) + "\" y=\"" + number(y + 4) + "\" text-anchor=\"end\">" +
           number(std::pow(10, d)) + "</text>\n";
  }
  svg +=
      "<text x=\"" + number(width - right) + "\" y=\"" + number(height - 4) + "\" text-anchor=\"end\">ranks N</text>\n";
  std::string line;
  for (const auto& [x, y] : points) {
    line += number(px(x)) + "," + number(py(y)) + " ";
    svg += "<circle cx=\"" + number(px(x)) + "\" cy=\"" + number(py(y)) + "\" r=\"3\" fill=\"#1f77b4\"/>\n";
  }
  svg += "<polyline points=\"" + line + "\" fill=\"none\" stroke=\"#1f77b4\"/>\n";
  return svg + "</svg>\n";
}

}  // namespace troupe::apps
