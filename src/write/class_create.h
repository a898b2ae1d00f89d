// Layout v4's creation step (docs/FORMAT.md rule 11, "Writers"): one Lua script
// per key whose state a writer does not know, sent in the round of reads it
// already makes. If the key exists, the script returns its value. Otherwise it
// chooses the key's class by rule 11's class rule from the user's two previous
// buckets (the same hash tag, so the same slot), creates the key at its full
// stage-0 length (the header c + 1 and ceil(m_c / 8) zero bytes: one jemalloc
// allocation) with its EXPIREAT, and returns that value.
//
// Invariant (two writers racing to create one key): a script runs atomically, so
// the first creates the key and every later one returns the stored value; a
// writer takes the key's class from the value it gets back, never from its own
// choice, so no value ever holds bits of two geometries.
//
// Not yet called by the writers (they refuse a version-4 meta); the script is
// tested against a real Redis (tests/integration/class_create_test.cc): its class
// agrees with ChooseClass of the C++ estimate, and racing callers get one value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bloom/layout.h"

namespace ef {

// The script's text (EVAL; a writer loads it and sends EVALSHA).
extern const char kCreateClassKeyScript[];

// The EVAL arguments that create (or get) the key of `user`'s bucket starting at
// bucket_start under `layout` (version 4, bucket_start >= v4_from): the key, the
// keys of the two buckets before it, and the layout's parameters.
std::vector<std::string> CreateClassKeyArgs(const Layout& layout, const std::string& user,
                                            int64_t bucket_start);

}  // namespace ef
