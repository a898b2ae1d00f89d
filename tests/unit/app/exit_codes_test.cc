// The exit-code table of src/app/exit_codes.h is the one docs/CLI.md shows.
#include "app/exit_codes.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace ef::app {
namespace {

struct DocRow {
  std::string name;
  std::string restart;  // "yes", "no", or prose for 0
};

// Rows "| `N` | `name` | meaning | restart |" of the table under "## Exit codes".
std::map<int, DocRow> DocumentedTable() {
  std::ifstream in(std::string(EF_SOURCE_DIR) + "/docs/CLI.md");
  REQUIRE(in);
  std::map<int, DocRow> rows;
  const std::regex row(R"(^\|\s*`(\d+)`\s*\|\s*`([a-z]+)`\s*\|[^|]*\|\s*([^|]*?)\s*\|\s*$)");
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Exit codes";
    std::smatch m;
    if (in_section && std::regex_match(line, m, row)) rows[std::stoi(m[1])] = {m[2], m[3]};
  }
  return rows;
}

}  // namespace

TEST_CASE("exit codes: docs/CLI.md's table is the code's, row by row", "[exit_codes]") {
  const auto doc = DocumentedTable();
  CHECK(doc.size() == kExitCodeTable.size());
  for (const ExitCodeRow& r : kExitCodeTable) {
    INFO("exit code " << r.code << " (" << r.name << ")");
    REQUIRE(doc.count(r.code) == 1);
    CHECK(doc.at(r.code).name == r.name);
    if (r.code != kExitOk) CHECK(doc.at(r.code).restart == (r.restart ? "yes" : "no"));
  }
}

TEST_CASE("exit codes: kNoRestartCodes are the rows a restart cannot cure", "[exit_codes]") {
  std::set<int> no_restart;
  std::set<int> codes;
  for (const ExitCodeRow& r : kExitCodeTable) {
    codes.insert(r.code);
    if (!r.restart && r.code != kExitOk) no_restart.insert(r.code);
  }
  CHECK(codes.size() == kExitCodeTable.size());  // no code twice
  CHECK(no_restart == std::set<int>(kNoRestartCodes.begin(), kNoRestartCodes.end()));
}

TEST_CASE("exit codes: errors at start map by kind", "[exit_codes]") {
  CHECK(ExitCodeForStart(Status::Ok()) == kExitOk);
  CHECK(ExitCodeForStart(PermissionDenied("x")) == kExitDenied);
  CHECK(ExitCodeForStart(Unavailable("x")) == kExitUnreachable);
  CHECK(ExitCodeForStart(FailedPrecondition("x")) == kExitLayout);
  CHECK(ExitCodeForStart(InvalidArgument("x")) == kExitConfig);
  CHECK(ExitCodeForStart(Internal("x")) == kExitFailure);
}

}  // namespace ef::app
