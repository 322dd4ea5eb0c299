#include "actors/worker/trace_gather.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace troupe::actors {

Status gather_trace(MailboxComm& mailbox, comm::Communicator& group, monitor::TraceRecorder& recorder) {
  const int size = group.group().size(), position = group.position();
  const std::string mine = recorder.to_json();
  compute::Tensor lengths = compute::Tensor::zeros({size}, compute::DType::f64);
  lengths.data_as<double>()[position] = static_cast<double>(mine.size());
  if (Status s = mailbox.wait(mailbox.all_reduce(group, lengths)); !s) return s;
  std::int64_t longest = 0;
  for (int p = 0; p < size; ++p) longest = std::max(longest, static_cast<std::int64_t>(lengths.data_as<double>()[p]));
  // Equal segments of whole i32 words, so the all-gather's segment p is exactly position p's text.
  const std::int64_t words = (longest + 3) / 4;
  compute::Tensor text = compute::Tensor::zeros({words * size}, compute::DType::i32);
  auto* bytes = static_cast<char*>(text.data());
  std::memcpy(bytes + position * words * 4, mine.data(), mine.size());
  if (Status s = mailbox.wait(mailbox.all_gather(group, text)); !s) return s;
  if (position != 0) return Status::success();
  for (int p = 1; p < size; ++p) {
    const auto length = static_cast<std::size_t>(lengths.data_as<double>()[p]);
    if (Status s = recorder.add_document(std::string(bytes + p * words * 4, length)); !s) return s;
  }
  return Status::success();
}

}  // namespace troupe::actors
