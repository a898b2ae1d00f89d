#include "client/pool.h"

namespace ef::client {

template class Pool<RedisConnection>;
template class Pooled<RedisConnection>;

}  // namespace ef::client
