// recall: a recall service's use of the client library (include/exposure_filter/client.h).
//   recall [-c CONFIG] [--set KEY=VALUE]... -u USER [--page N] [ITEM...]
//   (items: or one per line on stdin)
// Without --page: prints the candidates USER has not seen, one per line, in input
// order (Client::Seen; nothing is written).
// With --page N: a paged feed (README "Paged feeds"). Page 1 is
// Client::FilterAndMark(user, candidates, N): the first N candidates neither seen
// nor served, marked served in the user's served ring. Page 2 is the same call on
// the same candidate pool right after, with no exposure event in between: it
// leaves page 1 out (Result::served) and returns the next N. Prints
//   page 1: ITEM ITEM ...
//   page 2: ITEM ITEM ...
//   on both pages: 0
// A failure of Redis fails open (every candidate unseen, nothing marked) and is
// reported on stderr.
#include <exposure_filter/client.h>

#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

namespace {

// The candidates a FilterAndMark call marked served: the page it returned.
std::vector<std::string> Page(const std::vector<std::string>& candidates,
                              const exposure_filter::Result& result) {
  std::vector<std::string> page;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (result.marked[i]) page.push_back(candidates[i]);
  return page;
}

// Prints "page N: ..." and the reasons on stderr; false if the call failed.
bool PrintPage(int number, const std::string& user, const std::vector<std::string>& candidates,
               const exposure_filter::Result& result, std::vector<std::string>* page) {
  if (!result.ok) {
    std::cerr << "recall: page " << number << ": " << result.error << "\n";
    return false;
  }
  if (result.failed_open) std::cerr << "recall: failed open: " << result.error << "\n";
  if (result.mark_failed) std::cerr << "recall: page not marked served: " << result.error << "\n";
  *page = Page(candidates, result);
  std::cout << "page " << number << ":";
  for (const std::string& item : *page) std::cout << " " << item;
  std::cout << "\n";
  std::cerr << "recall: page " << number << " for " << user << ": " << page->size()
            << " item(s) marked served; of " << candidates.size() << " candidate(s) "
            << result.seen_count << " seen, " << result.served_count << " served recently\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  exposure_filter::ClientOptions options;
  std::string user;
  size_t page_size = 0;  // 0: no --page
  std::vector<std::string> candidates;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "-c" || arg == "--config") && i + 1 < argc) {
      options.config_path = argv[++i];
    } else if (arg == "--set" && i + 1 < argc) {
      options.overrides.push_back(argv[++i]);
    } else if ((arg == "-u" || arg == "--user") && i + 1 < argc) {
      user = argv[++i];
    } else if (arg == "--page" && i + 1 < argc) {
      page_size = std::strtoul(argv[++i], nullptr, 10);
      if (page_size == 0) {
        std::cerr << "recall: --page: expected a page size of 1 or more\n";
        return 2;
      }
    } else {
      candidates.push_back(arg);
    }
  }
  if (user.empty()) {
    std::cerr << "usage: recall [-c CONFIG] [--set KEY=VALUE]... -u USER [--page N] [ITEM...]\n";
    return 2;
  }
  if (candidates.empty()) {
    for (std::string line; std::getline(std::cin, line);)
      if (!line.empty()) candidates.push_back(line);
  }

  std::string error;
  auto client = exposure_filter::Client::Create(options, &error);
  if (!client) {
    std::cerr << "recall: " << error << "\n";
    return 1;
  }

  if (page_size > 0) {
    // Page 1, then page 2 from the same pool: no exposure event in between, so
    // only the served ring keeps page 1's items off page 2.
    std::vector<std::string> page1, page2;
    if (!PrintPage(1, user, candidates, client->FilterAndMark(user, candidates, page_size),
                   &page1) ||
        !PrintPage(2, user, candidates, client->FilterAndMark(user, candidates, page_size), &page2))
      return 1;
    const std::set<std::string> first(page1.begin(), page1.end());
    size_t both = 0;
    for (const std::string& item : page2) both += first.count(item);
    std::cout << "on both pages: " << both << "\n";
    return 0;
  }

  const exposure_filter::Result result = client->Seen(user, candidates);
  if (!result.ok) {
    std::cerr << "recall: " << result.error << "\n";
    return 1;
  }
  if (result.failed_open) std::cerr << "recall: failed open: " << result.error << "\n";
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!result.seen[i] && !result.served[i]) std::cout << candidates[i] << "\n";
  std::cerr << "recall: " << result.seen_count << " of " << candidates.size()
            << " candidate(s) seen by " << user;
  if (result.served_count > 0) std::cerr << ", " << result.served_count << " served recently";
  std::cerr << "\n";
  return 0;
}
