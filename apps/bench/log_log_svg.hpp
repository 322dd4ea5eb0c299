#pragma once
// One figure against N as an SVG line plot on log-log axes: points, a decade grid, the axes'
// ends labelled, and the least-squares slope in the title (bench scale's plots, docs/scale.md).

#include <string>
#include <utility>
#include <vector>

namespace troupe::apps {

// `points` are (N, figure) with both positive; fewer than two give a plot with a note instead.
std::string log_log_svg(const std::string& title, const std::vector<std::pair<double, double>>& points, double slope);

}  // namespace troupe::apps
