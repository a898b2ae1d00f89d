// Commits offsets for a consumer group the way a client outside any membership
// does (no join, no commit metadata): a group with exactly the lag a test wants,
// without running a consumer.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "support/stack.h"

namespace ef::test {

// Commits `offsets` (partition -> next offset to read) of the stack's topic for
// `group`; the test fails (REQUIRE) when the broker refuses.
void Commit(Stack& stack, const std::string& group, const std::map<int, int64_t>& offsets);

}  // namespace ef::test
