// Layout contract version 2, rule 7 (docs/FORMAT.md): what the C++ reader
// (LayoutFromFields) accepts in a stored meta hash and what it refuses. The rows
// are read from FORMAT.md's table "Meta hash: accept or refuse", so the document
// is what is tested (tests/interop/format_ref.py meta-vectors checks the same rows
// against the Python reference's read_meta).
#include <catch2/catch.hpp>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bloom/layout.h"
#include "support/doc_tables.h"

namespace ef {
namespace {

struct MetaRow {
  std::string change;  // the table's first cell
  std::map<std::string, std::string> fields;
  std::string refused;  // empty: accepted
};

std::map<std::string, std::string> DefaultV2Meta() { return test::DefaultMetaFields(2); }

std::vector<MetaRow> MetaVectors() {
  std::istringstream section(test::DocSection("FORMAT.md", "### Meta hash: accept or refuse"));
  const std::regex row(R"(^\|\s*(.*?)\s*\|\s*(accepts|refuses `([^`]*)`)\s*\|\s*$)");
  const std::regex change(R"(`([^`]*)`)");
  std::vector<MetaRow> rows;
  for (std::string line; std::getline(section, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    MetaRow r{m[1], DefaultV2Meta(), m[3]};
    for (std::sregex_iterator it(r.change.begin(), r.change.end(), change), end; it != end; ++it) {
      const std::string c = (*it)[1];
      if (c[0] == '-') {
        REQUIRE(r.fields.erase(c.substr(1)) == 1);
      } else {
        const size_t eq = c.find('=');
        REQUIRE(eq != std::string::npos);
        r.fields[c.substr(0, eq)] = c.substr(eq + 1);
      }
    }
    rows.push_back(r);
  }
  return rows;
}

TEST_CASE("rule 7: the C++ reader accepts and refuses the FORMAT.md meta vectors",
          "[contract][meta]") {
  const std::vector<MetaRow> rows = MetaVectors();
  REQUIRE(rows.size() >= 20);
  for (const MetaRow& r : rows) {
    INFO("row: " << r.change);
    StatusOr<Layout> got = LayoutFromFields(r.fields, "ef:meta");
    if (r.refused.empty()) {
      CHECK(got.ok());
      if (!got.ok()) UNSCOPED_INFO(got.status().message());
      continue;
    }
    CHECK_FALSE(got.ok());
    if (got.ok()) continue;
    const std::string message = got.status().message();
    INFO("message: " << message);
    // A field is named as "field <name>:"; a stage of rule 8 as "stage <n> ".
    const std::string named =
        r.refused.rfind("stage ", 0) == 0 ? r.refused + " " : "field " + r.refused + ":";
    CHECK(message.find(named) != std::string::npos);
    CHECK(message.find("ef:meta") != std::string::npos);
  }
}

TEST_CASE("rule 7: fields the contract does not name are ignored", "[contract][meta]") {
  auto fields = DefaultV2Meta();
  auto plain = LayoutFromFields(fields, "ef:meta");
  REQUIRE(plain.ok());
  fields["created_by"] = "a tool of the operator";
  auto extra = LayoutFromFields(fields, "ef:meta");
  REQUIRE(extra.ok());
  CHECK(extra->ToFields() == plain->ToFields());
  // A writer with the same layout does not count the extra field as a difference.
  CHECK(CompareLayout(fields, *plain, "ef:meta").ok());
  // ... but does count a field of another version (a v2 meta against a v1 layout).
  CHECK_FALSE(CompareLayout(DefaultV2Meta(), plain->SingleStage(), "ef:meta").ok());
}

TEST_CASE("rule 7: a version-1 meta reads its seven fields alone", "[contract][meta]") {
  auto fields = DefaultV2Meta();
  fields["version"] = "1";
  auto l = LayoutFromFields(fields, "ef:meta");
  REQUIRE(l.ok());
  CHECK(l->stages == 1);
  CHECK(l->stage_table.size() == 1);
  CHECK(l->m == 3345);
  CHECK(l->seed == 0);
}

}  // namespace
}  // namespace ef
