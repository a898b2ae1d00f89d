#include "support/doc_tables.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

namespace ef::test {

std::string DocSection(const std::string& doc, const std::string& heading) {
  std::ifstream in(std::string(EF_SOURCE_DIR) + "/docs/" + doc);
  INFO("docs/" << doc << ", " << heading);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  const size_t from = all.find("\n" + heading + "\n");
  REQUIRE(from != std::string::npos);
  const size_t start = from + heading.size() + 2;
  const size_t end = all.find("\n#", start);
  return all.substr(start, end == std::string::npos ? std::string::npos : end + 1 - start);
}

std::vector<DocRow> DocTableRows(const std::string& doc, const std::string& heading, size_t nth) {
  std::istringstream section(DocSection(doc, heading));
  INFO("docs/" << doc << ", " << heading << ", table " << nth);
  std::vector<std::vector<DocRow>> tables;
  std::vector<DocRow>* rows = nullptr;  // the table being read
  bool body = false;
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("|", 0) != 0) {
      rows = nullptr;
      continue;
    }
    if (rows == nullptr) {
      rows = &tables.emplace_back();
      body = false;
    }
    if (line.rfind("|--", 0) == 0) {
      body = true;
      continue;
    }
    if (!body) continue;  // the header
    DocRow cells;
    std::istringstream cs(line.substr(1));
    for (std::string c; std::getline(cs, c, '|');) {
      const size_t b = c.find_first_not_of(' '), e = c.find_last_not_of(' ');
      cells.push_back(b == std::string::npos ? "" : c.substr(b, e - b + 1));
    }
    rows->push_back(cells);
  }
  REQUIRE(nth < tables.size());
  return tables[nth];
}

std::string DocItem(const std::string& cell) {
  const size_t b = cell.find("`\"");
  const size_t e = b == std::string::npos ? b : cell.find("\"`", b + 2);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  return cell.substr(b + 2, e - b - 2);
}

std::vector<uint64_t> DocNumbers(const std::string& cell) {
  std::vector<uint64_t> out;
  std::istringstream in(cell);
  for (std::string n; std::getline(in, n, ',');) out.push_back(std::stoull(n));
  return out;
}

std::map<std::string, std::string> DefaultMetaFields(int version) {
  std::map<std::string, std::string> f = {{"version", std::to_string(version)},
                                          {"m", "3345"},
                                          {"k", "12"},
                                          {"seed", "0"},
                                          {"prefix", "ef:"},
                                          {"bucket_seconds", "86400"},
                                          {"window_seconds", "2592000"},
                                          {"growth", "2"},
                                          {"k_step", "2"},
                                          {"stages", "8"},
                                          {"fill_ppm", "512024"}};
  if (version >= 3) f["v3_from"] = "0";
  if (version >= 4) f["v4_from"] = "0";
  return f;
}

}  // namespace ef::test
