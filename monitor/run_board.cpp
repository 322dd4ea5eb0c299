#include "monitor/run_board.hpp"

#include <filesystem>

namespace troupe::monitor {

Expected<RunBoard> RunBoard::open(const std::string& dir, int rank, bool reports) {
  auto events = EventFile::create((std::filesystem::path(dir) / ("rank-" + std::to_string(rank))).string());
  if (!events) return events.error();
  return RunBoard(std::move(*events), reports);
}

Status RunBoard::step(const BoardStep& s) {
  Status written = events_.scalar(s.step, "rank/step_seconds", s.seconds);
  if (!written || !reports_) return written;
  const double tokens_per_second = s.seconds > 0 ? static_cast<double>(s.tokens) / s.seconds : 0;
  for (const auto& [tag, value] : {std::pair<std::string_view, double>{"train/loss", s.loss},
                                   {"train/lr", s.lr},
                                   {"train/grad_norm", s.grad_norm},
                                   {"train/tokens_per_second", tokens_per_second}}) {
    if (written = events_.scalar(s.step, tag, value); !written) return written;
  }
  if (s.mfu > 0) return events_.scalar(s.step, "train/mfu", s.mfu);
  return Status::success();
}

Status RunBoard::validation(std::int64_t step, double loss) { return events_.scalar(step, "val/loss", loss); }

Status RunBoard::note(std::int64_t step, std::string_view text) { return events_.text(step, "events", text); }

}  // namespace troupe::monitor
