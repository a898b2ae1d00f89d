// Client::Impl (client/impl.h): the layout calls read with, and when to read
// the stored meta again.
#include <mutex>

#include "client/impl.h"

namespace exposure_filter {

using namespace client_internal;  // NOLINT: the client's own internals
using ef::Status;
using ef::StatusCode;

namespace {

// How often a client without a stored layout (allow_missing_layout) looks for one.
constexpr auto kMissingLayoutRecheck = std::chrono::seconds(1);
// Least time between two meta re-reads caused by values longer than the layout.
constexpr auto kStaleLayoutRecheck = std::chrono::seconds(1);

}  // namespace

std::shared_ptr<const ef::Layout> Client::Impl::CurrentLayout() const {
  std::lock_guard lock(layout_mu);
  return layout;
}

Client::Impl::Recheck Client::Impl::LayoutRecheckDue() {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(layout_mu);
  const bool stale = layout_stale.exchange(false);
  bool periodic = false;
  if (!stored && options.allow_missing_layout)
    periodic = now - layout_checked >= kMissingLayoutRecheck;
  else if (options.layout_recheck.count() > 0)
    periodic = now - layout_checked >= options.layout_recheck;
  if (!stale && !periodic) return Recheck::kNo;
  layout_checked = now;
  return stale ? Recheck::kStale : Recheck::kPeriodic;
}

bool Client::Impl::NoteValueLength(size_t bytes, const ef::Layout& layout) {
  const ef::Stage& last = layout.stage_table.back();
  if (bytes <= (last.offset + last.m + 7) / 8) return false;
  {
    std::lock_guard lock(layout_mu);
    const Clock::time_point now = Clock::now();
    if (now - stale_reread < kStaleLayoutRecheck) return false;
    stale_reread = now;
  }
  layout_stale.store(true);
  return true;
}

Status Client::Impl::RefreshLayout(ef::MetaTarget conn, bool* found) {
  ef::Layout effective;
  Status st = ef::ReadLayout(conn, configured, &effective, found);
  if (!st.ok()) return st;
  std::lock_guard lock(layout_mu);
  layout = *found ? std::make_shared<const ef::Layout>(std::move(effective))
                  : std::make_shared<const ef::Layout>(configured);
  stored = *found;
  layout_checked = Clock::now();
  return Status::Ok();
}

}  // namespace exposure_filter
