#include "serve/request.h"

#include <simdjson.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "bloom/keys.h"

namespace ef::serve {
namespace dom = simdjson::dom;

namespace {

std::string TypeName(const dom::element& e) {
  switch (e.type()) {
    case dom::element_type::ARRAY:
      return "an array";
    case dom::element_type::OBJECT:
      return "an object";
    case dom::element_type::INT64:
    case dom::element_type::UINT64:
      return "an integer";
    case dom::element_type::DOUBLE:
      return "a number with a fraction or an exponent";
    case dom::element_type::STRING:
      return "a string";
    case dom::element_type::BOOL:
      return e.get_bool().value_unsafe() ? "true" : "false";
    case dom::element_type::NULL_VALUE:
      return "null";
  }
  return "?";
}

// A string, or an integer as its decimal text (written to buf); ok is false
// if `e` is neither. The view lives as long as the parsed document and buf.
// Inlined and returned by value: written through a pointer (or returned in
// memory by a call), the view's two 8-byte halves were read back as one
// 16-byte copy by push_back: a store-forwarding stall per item.
struct IdView {
  std::string_view text;
  bool integer = false;
  bool ok = false;
};

[[gnu::always_inline]] inline IdView IdText(const dom::element& e, char (&buf)[24]) {
  switch (e.type()) {
    case dom::element_type::STRING:
      return {e.get_string().value_unsafe(), false, true};
    case dom::element_type::INT64: {
      const char* end = std::to_chars(buf, buf + sizeof buf, e.get_int64().value_unsafe()).ptr;
      return {std::string_view(buf, static_cast<size_t>(end - buf)), true, true};
    }
    case dom::element_type::UINT64: {
      const char* end = std::to_chars(buf, buf + sizeof buf, e.get_uint64().value_unsafe()).ptr;
      return {std::string_view(buf, static_cast<size_t>(end - buf)), true, true};
    }
    default:
      return {};
  }
}

void Fail(ParseError* error, int status, std::string message) {
  error->status = status;
  error->message = std::move(message);
}

// The JSON text of `e`, cut to 40 bytes: what a message quotes as "got ...".
std::string Quoted(const dom::element& e) {
  std::string text = simdjson::minify(e);
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

std::string TooManyItems(size_t n, const Limits& limits) {
  return std::to_string(n) + " items in the body, more than serve.max_items (" +
         std::to_string(limits.max_items) + ")";
}

}  // namespace

struct RequestParser::Impl {
  dom::parser parser;
  // The decimal text of integer items (strings are views into the parsed
  // document). Reserved to the body's size before the first one is written, so
  // it never reallocates under the views: an integer's text is never longer
  // than its JSON literal (-?(0|[1-9][0-9]*); only "-0" shortens, to "0").
  std::string integer_text;
  size_t body_size = 0;
  bool body_has_backslash = true;

  std::string_view IntegerText(std::string_view digits) {
    if (integer_text.empty() && integer_text.capacity() < body_size)
      integer_text.reserve(body_size);
    const size_t at = integer_text.size();
    if (at + digits.size() > integer_text.capacity()) std::abort();  // the bound above is broken
    integer_text.append(digits);
    return std::string_view(integer_text.data() + at, digits.size());
  }

  // Parses `body` into its top-level object. False and *error on failure.
  bool Root(std::string_view body, const Limits& limits, dom::object* root, ParseError* error) {
    if (body.size() > limits.max_body_bytes) {
      Fail(error, 413,
           "body of " + std::to_string(body.size()) + " bytes, more than serve.max_body_bytes (" +
               std::to_string(limits.max_body_bytes) + ")");
      return false;
    }
    integer_text.clear();
    body_size = body.size();
    body_has_backslash = std::memchr(body.data(), '\\', body.size()) != nullptr;
    dom::element doc;
    // parse() copies a body without simdjson's padding into the parser's buffer.
    simdjson::error_code ec = parser.parse(body.data(), body.size()).get(doc);
    if (ec != simdjson::SUCCESS) {
      std::string why = simdjson::error_message(ec);
      if (ec == simdjson::NUMBER_ERROR)
        why += " (integer IDs must fit in 64 bits: send longer ones as strings)";
      if (body.empty()) why = "empty body";
      Fail(error, 400, "body is not valid JSON: " + why);
      return false;
    }
    if (!doc.is_object()) {
      Fail(error, 400, "body must be a JSON object, got " + TypeName(doc));
      return false;
    }
    *root = doc.get_object().value_unsafe();
    return true;
  }

  // Reads {"user_id": ..., "items": [...]} from `obj`; `where` prefixes messages
  // ("" or "requests[2]."). *total_items counts items across calls.
  bool Query(const dom::object& obj, const std::string& where, const Limits& limits,
             size_t* total_items, ParsedQuery* q, ParseError* error) {
    dom::element user;
    if (obj["user_id"].get(user) != simdjson::SUCCESS) {
      Fail(error, 400, where + "user_id: missing");
      return false;
    }
    char buf[24];
    const IdView id = IdText(user, buf);
    if (!id.ok) {
      Fail(error, 400, where + "user_id: expected a string or an integer, got " + TypeName(user));
      return false;
    }
    q->user.assign(id.text);
    if (!IsValidUserId(q->user)) {
      Fail(error, 400, where + "user_id: " + CheckUserId(q->user).message());
      return false;
    }
    dom::element items;
    if (obj["items"].get(items) != simdjson::SUCCESS) {
      Fail(error, 400, where + "items: missing");
      return false;
    }
    dom::array array;
    if (items.get_array().get(array) != simdjson::SUCCESS) {
      Fail(error, 400,
           where + "items: expected an array of strings or integers, got " + TypeName(items));
      return false;
    }
    const size_t n = array.size();
    *total_items += n;
    if (*total_items > limits.max_items) {
      Fail(error, 413, TooManyItems(*total_items, limits));
      return false;
    }
    q->no_escapes = !body_has_backslash;
    q->items.clear();
    q->items.reserve(n);
    q->integer_items.clear();
    size_t i = 0;
    for (dom::element e : array) {
      const IdView id = IdText(e, buf);
      if (!id.ok) {
        Fail(error, 400,
             where + "items[" + std::to_string(i) + "]: expected a string or an integer, got " +
                 TypeName(e));
        return false;
      }
      q->items.push_back(id.integer ? IntegerText(id.text) : id.text);
      if (id.integer) {
        if (q->integer_items.empty()) q->integer_items.resize(n, false);
        q->integer_items[i] = true;
      }
      ++i;
    }
    return true;
  }

  // "clusters" of `obj` into q->clusters (empty when absent); `where` as for
  // Query, which must have filled q->items.
  bool Clusters(const dom::object& obj, const std::string& where, ParsedQuery* q,
                ParseError* error) {
    q->clusters.clear();
    dom::element e;
    if (obj["clusters"].get(e) != simdjson::SUCCESS) return true;
    dom::array array;
    if (e.get_array().get(array) != simdjson::SUCCESS) {
      Fail(error, 400,
           where + "clusters: expected an array of strings, integers or null (one per item), got " +
               TypeName(e));
      return false;
    }
    if (array.size() != q->items.size()) {
      Fail(error, 400,
           where + "clusters: " + std::to_string(array.size()) + " entries for " +
               std::to_string(q->items.size()) + " items (one per item, null when unknown)");
      return false;
    }
    q->clusters.reserve(array.size());
    char buf[24];
    size_t i = 0;
    for (dom::element c : array) {
      if (c.is_null()) {
        q->clusters.emplace_back();
      } else {
        const IdView id = IdText(c, buf);
        if (!id.ok) {
          Fail(error, 400,
               where + "clusters[" + std::to_string(i) +
                   "]: expected a string, an integer or null, got " + TypeName(c));
          return false;
        }
        q->clusters.push_back(id.integer ? IntegerText(id.text) : id.text);
      }
      ++i;
    }
    return true;
  }

  // "mark_served" of `obj` into *n (0 when absent); `where` as for Query.
  static bool MarkServed(const dom::object& obj, const std::string& where, size_t* n,
                         ParseError* error) {
    *n = 0;
    dom::element e;
    if (obj["mark_served"].get(e) != simdjson::SUCCESS) return true;
    switch (e.type()) {
      case dom::element_type::BOOL:
        *n = e.get_bool().value_unsafe() ? SIZE_MAX : 0;
        return true;
      case dom::element_type::UINT64:
        *n = static_cast<size_t>(e.get_uint64().value_unsafe());
        return true;
      case dom::element_type::INT64:
        if (e.get_int64().value_unsafe() >= 0) {
          *n = static_cast<size_t>(e.get_int64().value_unsafe());
          return true;
        }
        break;
      default:
        break;
    }
    Fail(error, 400,
         where + "mark_served: expected true, false or a non-negative integer, got " + Quoted(e));
    return false;
  }
};

RequestParser::RequestParser() : impl_(std::make_unique<Impl>()) {}
RequestParser::~RequestParser() = default;

bool RequestParser::ParseFilter(std::string_view body, const Limits& limits, ParsedQuery* query,
                                ParseError* error) {
  dom::object root;
  if (!impl_->Root(body, limits, &root, error)) return false;
  size_t total = 0;
  return impl_->Query(root, "", limits, &total, query, error) &&
         impl_->Clusters(root, "", query, error) &&
         Impl::MarkServed(root, "", &query->mark_served, error);
}

bool RequestParser::ParseServed(std::string_view body, const Limits& limits, ParsedQuery* query,
                                ParseError* error) {
  dom::object root;
  if (!impl_->Root(body, limits, &root, error)) return false;
  size_t total = 0;
  if (!impl_->Query(root, "", limits, &total, query, error)) return false;
  query->mark_served = 0;
  query->clusters.clear();
  if (query->items.size() > limits.served_items) {
    Fail(error, 400,
         "items: " + std::to_string(query->items.size()) +
             " items, more than serve.served_items (" + std::to_string(limits.served_items) +
             "): the served ring keeps only the newest " + std::to_string(limits.served_items));
    return false;
  }
  return true;
}

bool RequestParser::ParseBatch(std::string_view body, const Limits& limits,
                               std::vector<ParsedQuery>* queries, ParseError* error) {
  dom::object root;
  if (!impl_->Root(body, limits, &root, error)) return false;
  dom::element requests;
  if (root["requests"].get(requests) != simdjson::SUCCESS) {
    Fail(error, 400, "requests: missing");
    return false;
  }
  dom::array array;
  if (requests.get_array().get(array) != simdjson::SUCCESS) {
    Fail(error, 400,
         "requests: expected an array of {\"user_id\", \"items\"} objects, got " +
             TypeName(requests));
    return false;
  }
  if (array.size() > limits.max_items) {
    Fail(error, 413,
         std::to_string(array.size()) + " requests in the batch, more than serve.max_items (" +
             std::to_string(limits.max_items) + ")");
    return false;
  }
  queries->clear();
  queries->resize(array.size());
  size_t total = 0;
  size_t i = 0;
  for (dom::element e : array) {
    const std::string where = "requests[" + std::to_string(i) + "].";
    dom::object obj;
    if (e.get_object().get(obj) != simdjson::SUCCESS) {
      Fail(error, 400,
           "requests[" + std::to_string(i) + "]: expected an object, got " + TypeName(e));
      return false;
    }
    ParsedQuery& q = (*queries)[i];
    if (!impl_->Query(obj, where, limits, &total, &q, error) ||
        !impl_->Clusters(obj, where, &q, error) ||
        !Impl::MarkServed(obj, where, &q.mark_served, error))
      return false;
    if (q.mark_served > 0) {
      Fail(error, 400, where + "mark_served: not supported in a batch; use /v1/filter");
      return false;
    }
    ++i;
  }
  return true;
}

namespace {

// Whether any byte of `s` must be escaped in a JSON string (a control
// character, '"' or '\\'), eight bytes at a time. Per word w: some byte is < n
// iff (w - n * 0x01..01) & ~w & 0x80..80 != 0 (n <= 0x80), and some byte is 0
// iff the same with n = 1 (Hacker's Delight 6-1; exact for "some byte": a
// borrow can only mark bytes above one that really is).
bool NeedsEscape(std::string_view s) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  auto special = [](uint64_t w) {
    const uint64_t quote = w ^ (kOnes * '"'), backslash = w ^ (kOnes * '\\');
    return (((w - kOnes * 0x20) & ~w) | ((quote - kOnes) & ~quote) |
            ((backslash - kOnes) & ~backslash)) &
           kHigh;
  };
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    if (special(w) != 0) return true;
  }
  if (i == s.size()) return false;
  uint64_t w;
  if (s.size() >= 8) {  // the last 8 bytes (overlapping the ones checked)
    std::memcpy(&w, s.data() + s.size() - 8, 8);
  } else {            // in a register (a memcpy to memory and a word load stall)
    w = kOnes * 'a';  // padding that needs no escape
    for (; i < s.size(); ++i) {
      w = (w & ~(uint64_t{0xff} << (8 * i))) | uint64_t{static_cast<unsigned char>(s[i])}
                                                   << (8 * i);
    }
  }
  return special(w) != 0;
}

// The bytes of `s` as a JSON string literal, quotes included.
size_t JsonStringSize(std::string_view s) {
  size_t n = s.size() + 2;
  if (!NeedsEscape(s)) return n;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    n += (c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t') ? 1 : 5;
  }
  return n;
}

// Writes `s` as a JSON string literal of `size` bytes (JsonStringSize(s)) at p;
// returns the end.
char* WriteJsonString(std::string_view s, size_t size, char* p) {
  *p++ = '"';
  if (size == s.size() + 2) {  // nothing to escape: the common case
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  } else {
    static constexpr char kHex[] = "0123456789abcdef";
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != '"' && c != '\\') {
        *p++ = ch;
        continue;
      }
      *p++ = '\\';
      switch (c) {
        case '"':
        case '\\':
          *p++ = ch;
          break;
        case '\n':
          *p++ = 'n';
          break;
        case '\r':
          *p++ = 'r';
          break;
        case '\t':
          *p++ = 't';
          break;
        default:
          std::memcpy(p, "u00", 3);
          p[3] = kHex[c >> 4];
          p[4] = kHex[c & 15];
          p += 5;
      }
    }
  }
  *p++ = '"';
  return p;
}

// Copies s to p (at least s.size() bytes writable there); returns the end. Short
// IDs, the common case, without a call: two overlapping loads and stores.
char* CopyId(std::string_view s, char* p) {
  const size_t n = s.size();
  const char* src = s.data();
  if (n >= 8 && n <= 16) {
    uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(p, &a, 8);
    std::memcpy(p + n - 8, &b, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(p, &a, 4);
    std::memcpy(p + n - 4, &b, 4);
  } else if (n > 0) {
    std::memcpy(p, src, n);
  }
  return p + n;
}

// Appends {"unseen": [...], "seen_count": N[, "failed_open": true]}, written in
// place. Without escapes (the common case) the items go out branch-free: every
// item is written, and the end moves past it only if it is unseen (a seen one
// is overwritten by the next), so the random seen/unseen pattern costs no
// mispredicted branches; the buffer is sized for all the items, then trimmed.
[[gnu::noinline]] void AppendUnseenResponse(const ParsedQuery& query, const Answer& answer,
                                            std::string* out) {
  static constexpr std::string_view kHead = "{\"unseen\":[";
  static constexpr std::string_view kCount = "],\"seen_count\":";
  static constexpr std::string_view kFailedOpen = ",\"failed_open\":true";
  const std::vector<bool>& seen = *answer.seen;
  const size_t n = query.items.size();
  size_t all_bytes = 0;  // room for every item, quoted, with its comma
  bool escapes = false;  // some string item needs escapes
  for (size_t i = 0; i < n; ++i) {
    const std::string_view item = query.items[i];
    all_bytes += item.size() + 3;
    if (!query.no_escapes) escapes |= NeedsEscape(item) && !query.IsInteger(i);
  }
  if (escapes) {  // rare: the exact size
    all_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view item = query.items[i];
      all_bytes += (query.IsInteger(i) ? item.size() : JsonStringSize(item)) + 1;
    }
  }
  const size_t start = out->size();
  out->resize(start + kHead.size() + all_bytes + kCount.size() + 24 + kFailedOpen.size() + 1);
  char* p = out->data() + start;
  auto put = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  put(kHead);
  const char* items_start = p;
  size_t seen_count = 0;
  if (!escapes) {
    for (size_t i = 0; i < n; ++i) {
      const std::string_view item = query.items[i];
      const size_t quote = query.IsInteger(i) ? 0 : 1;
      const bool unseen = !seen[i];
      seen_count += !unseen;
      // An integer's opening quote and closing quote are overwritten by its
      // digits and its comma.
      p[0] = '"';
      CopyId(item, p + quote);
      p[quote + item.size()] = '"';
      p[2 * quote + item.size()] = ',';
      p += (2 * quote + item.size() + 1) & (size_t{0} - unseen);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (seen[i]) {
        ++seen_count;
        continue;
      }
      const std::string_view item = query.items[i];
      p = query.IsInteger(i) ? CopyId(item, p) : WriteJsonString(item, JsonStringSize(item), p);
      *p++ = ',';
    }
  }
  if (p != items_start) --p;  // the last comma
  put(kCount);
  p = std::to_chars(p, p + 24, seen_count).ptr;
  if (answer.failed_open) put(kFailedOpen);
  *p++ = '}';
  out->resize(static_cast<size_t>(p - out->data()));
}

// Appends {"unseen": [...], "seen_count": N, "served": [...], "served_count":
// N[, "marked": N][, "mark_failed": true][, "mark_queued": true][, "failed_open":
// true]}: the answer
// when some item was served or mark_served asked for marks. Apart from
// AppendUnseenResponse, whose loop stays as tight as it was without served
// items (sharing it cost ~10% of BM_ServeFilterResponse). The buffer is sized
// for all the items once: the unseen and the served items are disjoint (the
// branch-free writer writes each item before deciding whether to keep it, at
// most all_bytes past the start of the list).
[[gnu::noinline]] void AppendServedResponse(const ParsedQuery& query, const Answer& answer,
                                            std::string* out) {
  static constexpr std::string_view kHead = "{\"unseen\":[";
  static constexpr std::string_view kCount = "],\"seen_count\":";
  static constexpr std::string_view kServedHead = ",\"served\":[";
  static constexpr std::string_view kServedCount = "],\"served_count\":";
  static constexpr std::string_view kMarked = ",\"marked\":";
  static constexpr std::string_view kMarkFailed = ",\"mark_failed\":true";
  static constexpr std::string_view kMarkQueued = ",\"mark_queued\":true";
  static constexpr std::string_view kFailedOpen = ",\"failed_open\":true";
  const std::vector<bool>& seen = *answer.seen;
  const bool with_served = answer.served != nullptr && answer.served_count > 0;
  const bool with_near = answer.near_duplicate != nullptr && answer.near_duplicate_count > 0;
  const size_t n = query.items.size();
  size_t all_bytes = 0;  // room for every item, quoted, with its comma
  bool escapes = false;  // some string item needs escapes
  for (size_t i = 0; i < n; ++i) {
    const std::string_view item = query.items[i];
    all_bytes += item.size() + 3;
    if (!query.no_escapes) escapes |= NeedsEscape(item) && !query.IsInteger(i);
  }
  if (escapes) {  // rare: the exact size
    all_bytes = 0;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view item = query.items[i];
      all_bytes += (query.IsInteger(i) ? item.size() : JsonStringSize(item)) + 1;
    }
  }
  // The near duplicates' entries: {"item":<item>,"cluster":<cluster>} each.
  static constexpr std::string_view kNearHead = ",\"near_duplicates\":[";
  static constexpr std::string_view kNearCount = "],\"near_duplicate_count\":";
  static constexpr std::string_view kNearItem = "{\"item\":";
  static constexpr std::string_view kNearCluster = ",\"cluster\":";
  size_t near_bytes = 0;
  if (with_near) {
    for (size_t i = 0; i < n; ++i) {
      if (!(*answer.near_duplicate)[i]) continue;
      const std::string_view item = query.items[i];
      near_bytes += kNearItem.size() + (query.IsInteger(i) ? item.size() : JsonStringSize(item)) +
                    kNearCluster.size() + JsonStringSize((*answer.clusters)[i]) + 2;
    }
    near_bytes += kNearHead.size() + kNearCount.size() + 24;
  }
  const size_t start = out->size();
  out->resize(start + kHead.size() + all_bytes + kCount.size() + 24 + kServedHead.size() +
              kServedCount.size() + 24 + kMarked.size() + 24 + kMarkFailed.size() +
              kMarkQueued.size() + kFailedOpen.size() + near_bytes + 1);
  char* p = out->data() + start;
  auto put = [&p](std::string_view s) {
    std::memcpy(p, s.data(), s.size());
    p += s.size();
  };
  auto item_at = [&](size_t i) {
    const std::string_view item = query.items[i];
    if (query.IsInteger(i)) {
      p = CopyId(item, p);
    } else if (escapes) {
      p = WriteJsonString(item, JsonStringSize(item), p);
    } else {
      *p++ = '"';
      p = CopyId(item, p);
      *p++ = '"';
    }
    *p++ = ',';
  };
  put(kHead);
  const char* items_start = p;
  size_t seen_count = 0;
  if (!escapes && with_served && !with_near) {  // branch-free, as in AppendUnseenResponse
    const std::vector<bool>& served = *answer.served;
    for (size_t i = 0; i < n; ++i) {
      const std::string_view item = query.items[i];
      const size_t quote = query.IsInteger(i) ? 0 : 1;
      const bool is_seen = seen[i];
      const bool unseen = !is_seen & !served[i];
      seen_count += is_seen;
      p[0] = '"';
      CopyId(item, p + quote);
      p[quote + item.size()] = '"';
      p[2 * quote + item.size()] = ',';
      p += (2 * quote + item.size() + 1) & (size_t{0} - unseen);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (seen[i]) {
        ++seen_count;
      } else if ((!with_served || !(*answer.served)[i]) &&
                 (!with_near || !(*answer.near_duplicate)[i])) {
        item_at(i);
      }
    }
  }
  if (p != items_start) --p;  // the last comma
  put(kCount);
  p = std::to_chars(p, p + 24, seen_count).ptr;
  put(kServedHead);
  const char* served_start = p;
  if (with_served) {
    for (size_t i = 0; i < n; ++i)
      if ((*answer.served)[i]) item_at(i);
  }
  if (p != served_start) --p;
  put(kServedCount);
  p = std::to_chars(p, p + 24, with_served ? answer.served_count : 0).ptr;
  if (answer.marking) {
    put(kMarked);
    p = std::to_chars(p, p + 24, answer.marked).ptr;
  }
  if (answer.mark_failed) put(kMarkFailed);
  if (answer.mark_queued) put(kMarkQueued);
  if (with_near) {
    put(kNearHead);
    const char* near_start = p;
    for (size_t i = 0; i < n; ++i) {
      if (!(*answer.near_duplicate)[i]) continue;
      put(kNearItem);
      const std::string_view item = query.items[i];
      p = query.IsInteger(i) ? CopyId(item, p) : WriteJsonString(item, JsonStringSize(item), p);
      put(kNearCluster);
      const std::string& cluster = (*answer.clusters)[i];
      p = WriteJsonString(cluster, JsonStringSize(cluster), p);
      *p++ = '}';
      *p++ = ',';
    }
    if (p != near_start) --p;
    put(kNearCount);
    p = std::to_chars(p, p + 24, answer.near_duplicate_count).ptr;
  }
  if (answer.failed_open) put(kFailedOpen);
  *p++ = '}';
  out->resize(static_cast<size_t>(p - out->data()));
}

void AppendFilterResponse(const ParsedQuery& query, const Answer& answer, std::string* out) {
  if ((answer.served != nullptr && answer.served_count > 0) || answer.marking ||
      answer.mark_failed || (answer.near_duplicate != nullptr && answer.near_duplicate_count > 0))
    return AppendServedResponse(query, answer, out);
  AppendUnseenResponse(query, answer, out);
}

size_t ReserveFor(const ParsedQuery& q) {
  size_t n = 32;
  for (const auto& item : q.items) n += item.size() + 3;
  return n;
}

}  // namespace

void AppendJsonString(std::string_view s, std::string* out) {
  const size_t size = JsonStringSize(s);
  const size_t start = out->size();
  out->resize(start + size);
  WriteJsonString(s, size, out->data() + start);
}

std::string FilterResponse(const ParsedQuery& query, const Answer& answer) {
  std::string out;
  AppendFilterResponse(query, answer, &out);
  return out;
}

std::string BatchResponse(const std::vector<ParsedQuery>& queries,
                          const std::vector<Answer>& answers) {
  std::string out;
  size_t reserve = 16;
  for (const auto& q : queries) reserve += ReserveFor(q);
  out.reserve(reserve);
  out.append("{\"results\":[");
  for (size_t i = 0; i < queries.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendFilterResponse(queries[i], answers[i], &out);
  }
  out.append("]}");
  return out;
}

std::string ServedResponse(size_t marked, size_t filled, bool failed_open) {
  if (failed_open) return "{\"marked\":0,\"failed_open\":true}";
  return "{\"marked\":" + std::to_string(marked) + ",\"filled\":" + std::to_string(filled) + "}";
}

std::string ErrorResponse(std::string_view message) {
  std::string out = "{\"error\":";
  AppendJsonString(message, &out);
  out.push_back('}');
  return out;
}

}  // namespace ef::serve
