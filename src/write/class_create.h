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
// The writer (write/bit_writer.h) sends it as EVALSHA (the first of a connection
// whole, as EVAL) in the round of reads it already makes; the script is tested
// against a real Redis (tests/integration/class_create_test.cc): its class agrees
// with ChooseClassFrom (bloom/layout.h) of the C++ estimate and the previous key's
// class (hysteresis), and racing callers get one value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bloom/layout.h"

namespace ef {

// The script's text (EVAL; then EVALSHA of its SHA1, common/sha1.h).
extern const char kCreateClassKeyScript[];

// A classed key's exact growth (the writer's, not the contract's): KEYS[1] the key,
// ARGV[1] the length through the newest stage a write is about to start. If the key
// exists and is shorter, it is SET (KEEPTTL) to its value and zero bytes up to that
// length, so that Redis allocates the grown value exactly; BITFIELD, SETBIT and
// EF.SETBITS would grow it greedily (sdsMakeRoomFor doubles a string below 1 MB:
// up to twice the bytes). Replies 1 if it grew the key, else 0 (absent, or long
// enough: a concurrent writer grew it). Sent before the bits that start the stage,
// in the same round.
extern const char kGrowClassKeyScript[];

// The EVAL arguments that create (or get) the key of `user`'s bucket starting at
// bucket_start under `layout` (version 4, bucket_start >= v4_from): the key, the
// keys of the two buckets before it, and the layout's parameters.
std::vector<std::string> CreateClassKeyArgs(const Layout& layout, const std::string& user,
                                            int64_t bucket_start);

// The same call's arguments after the number of keys (its 3 keys, then ARGV), for
// `key`, the key of a bucket starting at bucket_start (`<prefix>{<user>}:<bucket>`):
// the previous buckets' keys are `key` with its bucket name replaced.
std::vector<std::string> ClassKeyCall(const Layout& layout, std::string_view key,
                                      int64_t bucket_start);

}  // namespace ef
