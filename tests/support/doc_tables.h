// Tables of the documents (docs/*.md) as data, so that a test checks what the
// document says: the contract test vectors of FORMAT.md and CONTENT.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ef::test {

using DocRow = std::vector<std::string>;  // the trimmed cells of one table row

// The text of docs/<doc> from the line after `heading` (a whole line, e.g.
// "### Version 3: positions") up to the next line that starts with '#'. Fails
// the test (REQUIRE) when the document or the heading is missing.
std::string DocSection(const std::string& doc, const std::string& heading);

// The body rows (after the |---| line) of table number `nth` (0: the first) in
// the section that starts with the line `heading` (e.g. "### Version 3:
// positions") of docs/<doc>, up to the next heading. Fails the test (REQUIRE)
// when the document, the heading or the table is missing.
std::vector<DocRow> DocTableRows(const std::string& doc, const std::string& heading,
                                 size_t nth = 0);

// A cell's quoted item: `"hello"` (UTF-8) -> hello. Fails the test (REQUIRE)
// when the cell quotes none.
std::string DocItem(const std::string& cell);

// A cell's list of numbers: "564, 938, 985" -> {564, 938, 985}.
std::vector<uint64_t> DocNumbers(const std::string& cell);

// The default meta of FORMAT.md rule 7 (m 3345, k 12, daily buckets, a 30-day
// window; version 2 adds the default stages) as stored for `version` 2, 3
// (v3_from 0) or 4 (v3_from 0, v4_from 0).
std::map<std::string, std::string> DefaultMetaFields(int version);

}  // namespace ef::test
