#include "event/event.h"

namespace ef {

const char* RejectReasonName(RejectReason r) {
  switch (r) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kNotJson:
      return "not_json";
    case RejectReason::kMissingUser:
      return "missing_user";
    case RejectReason::kEmptyUser:
      return "empty_user";
    case RejectReason::kUserLeadingBrace:
      return "user_leading_brace";
    case RejectReason::kMissingItem:
      return "missing_item";
    case RejectReason::kEmptyItem:
      return "empty_item";
    case RejectReason::kIdTooLong:
      return "id_too_long";
    case RejectReason::kTooManyItems:
      return "too_many_items";
    case RejectReason::kBadTimestamp:
      return "bad_timestamp";
    case RejectReason::kMissingTimestamp:
      return "missing_timestamp";
    case RejectReason::kFutureTimestamp:
      return "future_timestamp";
    case RejectReason::kTooOld:
      return "too_old";
    case RejectReason::kBadCluster:
      return "bad_cluster";
    case RejectReason::kBadSimhash:
      return "bad_simhash";
    case RejectReason::kCount_:
      break;
  }
  // Not a reason (kCount_ or a value cast from a bad integer): a fixed label keeps
  // metric label sets bounded.
  return "unknown";
}

}  // namespace ef
