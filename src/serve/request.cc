#include "serve/request.h"

#include <simdjson.h>

#include <charconv>

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

// A string, or an integer as its decimal text. False if `e` is neither.
bool IdText(const dom::element& e, std::string* out, bool* integer) {
  char buf[24];
  switch (e.type()) {
    case dom::element_type::STRING: {
      std::string_view s = e.get_string().value_unsafe();
      out->assign(s.data(), s.size());
      *integer = false;
      return true;
    }
    case dom::element_type::INT64: {
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, e.get_int64().value_unsafe());
      out->assign(buf, end);
      *integer = true;
      return true;
    }
    case dom::element_type::UINT64: {
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, e.get_uint64().value_unsafe());
      out->assign(buf, end);
      *integer = true;
      return true;
    }
    default:
      return false;
  }
}

void Fail(ParseError* error, int status, std::string message) {
  error->status = status;
  error->message = std::move(message);
}

std::string TooManyItems(size_t n, const Limits& limits) {
  return std::to_string(n) + " items in the body, more than serve.max_items (" +
         std::to_string(limits.max_items) + ")";
}

}  // namespace

struct RequestParser::Impl {
  dom::parser parser;

  // Parses `body` into its top-level object. False and *error on failure.
  bool Root(std::string_view body, const Limits& limits, dom::object* root, ParseError* error) {
    if (body.size() > limits.max_body_bytes) {
      Fail(error, 413,
           "body of " + std::to_string(body.size()) + " bytes, more than serve.max_body_bytes (" +
               std::to_string(limits.max_body_bytes) + ")");
      return false;
    }
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
    bool integer = false;
    if (!IdText(user, &q->user, &integer)) {
      Fail(error, 400, where + "user_id: expected a string or an integer, got " + TypeName(user));
      return false;
    }
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
    q->items.clear();
    q->items.resize(n);
    q->integer_items.clear();
    size_t i = 0;
    for (dom::element e : array) {
      if (!IdText(e, &q->items[i], &integer)) {
        Fail(error, 400,
             where + "items[" + std::to_string(i) + "]: expected a string or an integer, got " +
                 TypeName(e));
        return false;
      }
      if (integer) {
        if (q->integer_items.empty()) q->integer_items.resize(n, false);
        q->integer_items[i] = true;
      }
      ++i;
    }
    return true;
  }
};

RequestParser::RequestParser() : impl_(std::make_unique<Impl>()) {}
RequestParser::~RequestParser() = default;

bool RequestParser::ParseFilter(std::string_view body, const Limits& limits, ParsedQuery* query,
                                ParseError* error) {
  dom::object root;
  if (!impl_->Root(body, limits, &root, error)) return false;
  size_t total = 0;
  return impl_->Query(root, "", limits, &total, query, error);
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
    if (!impl_->Query(obj, where, limits, &total, &(*queries)[i], error)) return false;
    ++i;
  }
  return true;
}

void AppendJsonString(std::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  size_t run = 0;  // start of the bytes not yet copied
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

namespace {

void AppendFilterResponse(const ParsedQuery& query, const Answer& answer, std::string* out) {
  const std::vector<bool>& seen = *answer.seen;
  size_t seen_count = 0;
  out->append("{\"unseen\":[");
  bool first = true;
  for (size_t i = 0; i < query.items.size(); ++i) {
    if (seen[i]) {
      ++seen_count;
      continue;
    }
    if (!first) out->push_back(',');
    first = false;
    if (query.IsInteger(i)) {
      out->append(query.items[i]);
    } else {
      AppendJsonString(query.items[i], out);
    }
  }
  out->append("],\"seen_count\":");
  out->append(std::to_string(seen_count));
  if (answer.failed_open) out->append(",\"failed_open\":true");
  out->push_back('}');
}

size_t ReserveFor(const ParsedQuery& q) {
  size_t n = 32;
  for (const auto& item : q.items) n += item.size() + 3;
  return n;
}

}  // namespace

std::string FilterResponse(const ParsedQuery& query, const Answer& answer) {
  std::string out;
  out.reserve(ReserveFor(query));
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

std::string ErrorResponse(std::string_view message) {
  std::string out = "{\"error\":";
  AppendJsonString(message, &out);
  out.push_back('}');
  return out;
}

}  // namespace ef::serve
