// `exposure-filter serve`: request parsing/validation and response building for
// the HTTP API (docs/HTTP.md). Pure functions over bytes; no I/O.
//
//   POST /v1/filter        {"user_id": "u1", "items": ["i1", "i2", ...]
//                           [, "clusters": ["c1", null, ...]][, "mark_served": true | n]}
//                       -> {"unseen": ["i2", ...], "seen_count": 1
//                           [, "served": [...], "served_count": N][, "marked": N]
//                           [, "near_duplicates": [{"item": "i3", "cluster": "c1"}, ...],
//                              "near_duplicate_count": N]}
//   POST /v1/filter:batch  {"requests": [{"user_id": ..., "items": [...]}, ...]}
//                       -> {"results": [{"unseen": [...], "seen_count": N}, ...]}
//   POST /v1/served        {"user_id": "u1", "items": ["i1", ...]}
//                       -> {"marked": N, "filled": F}
//
// IDs (user_id and items) are JSON strings, or integers used as their decimal
// text (42 -> "42"), like the daemon's events (docs/EVENTS.md), so that an event
// {"user_id": 42, "item_id": 7} is found by {"user_id": 42, "items": [7]} and by
// {"user_id": "42", "items": ["7"]}. An unseen item is echoed with the JSON type
// it came in. Integers must fit in 64 bits (send longer IDs as strings); floats,
// booleans, null, arrays and objects are errors. Other top-level fields are
// ignored; for a duplicated key the first occurrence wins.
//
// "clusters" (optional, filter.near_duplicates, docs/CONTENT.md rule 5): one
// entry per item, its near-duplicate cluster ID (a string or an integer, as IDs),
// or null (or "") when unknown; the server then looks it up in the content map.
// An item answered near_duplicate is in neither "unseen" nor "seen_count".
//
// Errors: a ParseError with the HTTP status (400 or 413) and one line naming
// the problem and where, e.g. `requests[2].items[5]: expected a string or an
// integer, got true`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ef::serve {

struct Limits {
  size_t max_items = 10000;                 // serve.max_items: items in one body
  size_t max_body_bytes = 4 * 1024 * 1024;  // serve.max_body_bytes
  size_t served_items = 500;                // serve.served_items: items in one /v1/served
};

// One user's candidates as received. The items are views into the
// RequestParser that filled the query (its parsed document, or its text of the
// integers): valid until that parser parses another body or is destroyed.
struct ParsedQuery {
  std::string user;
  std::vector<std::string_view> items;  // IDs as text, input order
  // Per item: it came as a JSON integer (echoed back as one). Empty when none did.
  std::vector<bool> integer_items;
  // "clusters": empty when absent, else one per item ("" = null, unknown); views
  // as items.
  std::vector<std::string_view> clusters;
  // No item needs escapes in JSON. Set by the parser when the body holds no
  // backslash: a JSON string can hold '"', '\\' or a control character only
  // escaped. false = unknown (the response builders check each item).
  bool no_escapes = false;
  // /v1/filter's "mark_served": how many unseen items to mark served, the first
  // ones in input order (true: SIZE_MAX, all of them; absent, false or 0: none).
  size_t mark_served = 0;
  bool IsInteger(size_t i) const { return !integer_items.empty() && integer_items[i]; }
};

struct ParseError {
  int status = 400;     // 400 bad request, 413 over a limit
  std::string message;  // one line
};

// Parses request bodies. Holds the JSON parser's buffers, which grow to the
// largest body seen and are reused, and the items of the queries it returns (no
// copy per item): one RequestParser per thread (not thread-safe). Rules
// (checked in this order; the first problem is reported):
//   413 body longer than limits.max_body_bytes;
//   400 not JSON / not an object / a missing or wrong-typed field / an invalid
//       user ID (empty or starting with '}': docs/FORMAT.md rule 4);
//   413 more than limits.max_items items in the body (for a batch, all its
//       requests' items together), or more than max_items requests in a batch;
//   400 a "clusters" that is not an array of strings, integers or nulls, or
//       whose length is not the items' (the message names the field and entry);
//   400 a "mark_served" that is not true, false or a non-negative integer; one
//       that asks for marking (true or n > 0) in a batch;
//   400 more than limits.served_items items in a /v1/served body.
// `items` may be empty (the answer is then empty); a batch's `requests` may be
// empty. Items may repeat and may be "" (answered like any other ID).
class RequestParser {
 public:
  RequestParser();
  ~RequestParser();
  RequestParser(const RequestParser&) = delete;
  RequestParser& operator=(const RequestParser&) = delete;

  // POST /v1/filter. True and *query filled, or false and *error filled.
  bool ParseFilter(std::string_view body, const Limits& limits, ParsedQuery* query,
                   ParseError* error);
  // POST /v1/filter:batch. True and *queries filled (in request order), or false
  // and *error filled.
  bool ParseBatch(std::string_view body, const Limits& limits, std::vector<ParsedQuery>* queries,
                  ParseError* error);
  // POST /v1/served: {"user_id", "items"} as for /v1/filter ("mark_served" is
  // ignored), at most limits.served_items items.
  bool ParseServed(std::string_view body, const Limits& limits, ParsedQuery* query,
                   ParseError* error);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One user's answer, as the response builders need it.
struct Answer {
  const std::vector<bool>* seen = nullptr;  // per item of the query, input order
  bool failed_open = false;                 // Redis failed: every item reported unseen
  // Per item: not seen but served recently (a pseudo-exposure), and how many;
  // nullptr or 0: none.
  const std::vector<bool>* served = nullptr;
  size_t served_count = 0;
  bool marking = false;      // mark_served asked for marks: "marked" (and "served") always written
  size_t marked = 0;         // items marked served by this request
  bool mark_failed = false;  // the marks were not written (fail open): "mark_failed": true
  // The marks are queued, written after the answer (serve.mark_queue):
  // "mark_queued": true.
  bool mark_queued = false;
  // Per item: a near duplicate (docs/CONTENT.md rule 5) of cluster (*clusters)[i];
  // nullptr or 0: none.
  const std::vector<bool>* near_duplicate = nullptr;
  size_t near_duplicate_count = 0;
  const std::vector<std::string>* clusters = nullptr;  // per item, when near_duplicate_count > 0
};

// {"unseen": [...], "seen_count": N}: the items of `query` neither seen nor
// served, in input order, each with the JSON type it came in; then
// "served": [...] and "served_count": N (the served ones, same rules) when some
// item was served or answer.marking; "marked": N when answer.marking;
// "mark_failed": true, "mark_queued": true and "failed_open": true when set. With near duplicates:
// "near_duplicates": [{"item": <item, its JSON type>, "cluster": "<ID>"}, ...] and
// "near_duplicate_count": N (the served fields are then written too), and they
// are left out of "unseen".
// Requires answer.seen->size() == query.items.size() (and served's, if given).
std::string FilterResponse(const ParsedQuery& query, const Answer& answer);
// {"results": [<FilterResponse of each query>, ...]}. Same requirement per pair.
std::string BatchResponse(const std::vector<ParsedQuery>& queries,
                          const std::vector<Answer>& answers);
// POST /v1/served's answer: {"marked": N, "filled": F}, or
// {"marked": 0, "failed_open": true} when failed_open.
std::string ServedResponse(size_t marked, size_t filled, bool failed_open);
// {"error": "<message>"}
std::string ErrorResponse(std::string_view message);
// Appends `s` as a JSON string literal (quotes and escapes included) to *out.
// `s` must be UTF-8 (every ID that ParseFilter/ParseBatch returns is).
void AppendJsonString(std::string_view s, std::string* out);

}  // namespace ef::serve
