// recall: prints the candidates a user has not seen, one per line, in input order.
//   recall [-c CONFIG] [--set KEY=VALUE]... -u USER [ITEM...]   (items: or one per line on stdin)
// A failure of Redis fails open (every candidate printed) and is reported on stderr.
#include <exposure_filter/client.h>

#include <cstring>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  exposure_filter::ClientOptions options;
  std::string user;
  std::vector<std::string> candidates;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "-c" || arg == "--config") && i + 1 < argc) {
      options.config_path = argv[++i];
    } else if (arg == "--set" && i + 1 < argc) {
      options.overrides.push_back(argv[++i]);
    } else if ((arg == "-u" || arg == "--user") && i + 1 < argc) {
      user = argv[++i];
    } else {
      candidates.push_back(arg);
    }
  }
  if (user.empty()) {
    std::cerr << "usage: recall [-c CONFIG] [--set KEY=VALUE]... -u USER [ITEM...]\n";
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
  const exposure_filter::Result result = client->Seen(user, candidates);
  if (!result.ok) {
    std::cerr << "recall: " << result.error << "\n";
    return 1;
  }
  if (result.failed_open) std::cerr << "recall: failed open: " << result.error << "\n";
  for (size_t i = 0; i < candidates.size(); ++i)
    if (!result.seen[i]) std::cout << candidates[i] << "\n";
  std::cerr << "recall: " << result.seen_count << " of " << candidates.size()
            << " candidate(s) seen by " << user << "\n";
  return 0;
}
