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
// After a failed re-read, the next one is due this much later.
constexpr auto kLayoutRetry = std::chrono::seconds(1);
// Half the smallest --lead of `layout upgrade --to 3` (20 s; docs/FORMAT.md rule
// 9): a layout below version 3 is never used once its copy is older.
constexpr auto kMaxLayoutAge = std::chrono::seconds(10);
// The period of re-reads of a layout below version 3 (at most; layout_recheck
// may be shorter): half kMaxLayoutAge, so that failed re-reads are retried
// (kLayoutRetry) several times before the copy gets too old.
constexpr auto kUpgradableRecheck = std::chrono::seconds(5);

}  // namespace

std::shared_ptr<const ef::Layout> Client::Impl::CurrentLayout() const {
  std::lock_guard lock(layout_mu);
  return layout;
}

Clock::duration Client::Impl::RecheckPeriod() const {
  if (!stored && options.allow_missing_layout) return kMissingLayoutRecheck;
  if (options.layout_recheck.count() <= 0) return Clock::duration::zero();
  if (layout->version() < 3)
    return std::min<Clock::duration>(options.layout_recheck, kUpgradableRecheck);
  return options.layout_recheck;
}

Client::Impl::Recheck Client::Impl::LayoutRecheckDue() {
  const Clock::time_point now = Clock::now();
  std::lock_guard lock(layout_mu);
  const bool stale = layout_stale.exchange(false);
  const Clock::duration period = RecheckPeriod();
  const bool periodic = period > Clock::duration::zero() && now - layout_checked >= period;
  if (!stale && !periodic) return Recheck::kNo;
  layout_checked = now;
  return stale ? Recheck::kStale : Recheck::kPeriodic;
}

void Client::Impl::LayoutRecheckFailed() {
  const Clock::time_point now = Clock::now();
  layout_read_failed.store(true, std::memory_order_relaxed);
  std::lock_guard lock(layout_mu);
  const Clock::duration period = RecheckPeriod();
  // Due again kLayoutRetry from now (if the period is longer).
  if (period > Clock::duration::zero())
    layout_checked = std::min(layout_checked, now - period + kLayoutRetry);
}

Status Client::Impl::LayoutFresh() const {
  std::lock_guard lock(layout_mu);
  if (options.layout_recheck.count() <= 0 || !stored || layout->version() >= 3) return Status::Ok();
  const Clock::duration age = Clock::now() - layout_read;
  if (age <= kMaxLayoutAge) return Status::Ok();
  return ef::Unavailable(
      "the stored layout (version " + std::to_string(layout->version()) + ") was last read " +
      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(age).count()) +
      " ms ago and reading it again failed: not answering with a layout that `layout upgrade "
      "--to 3` may have replaced (readers re-read it within half the upgrade's --lead)");
}

bool Client::Impl::NoteValueLength(size_t bytes, const ef::Layout& layout) {
  if (bytes <= layout.max_value_bytes) return false;
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
  if (*found) {
    layout = std::make_shared<const ef::Layout>(std::move(effective));
    meta_lost = false;
  } else if (stored || meta_lost) {
    meta_lost = true;  // keep the last stored layout (impl.h)
  } else {
    layout = std::make_shared<const ef::Layout>(configured);
  }
  stored = *found;
  layout_checked = Clock::now();
  layout_read = layout_checked;
  layout_read_failed.store(false, std::memory_order_relaxed);
  return Status::Ok();
}

}  // namespace exposure_filter
