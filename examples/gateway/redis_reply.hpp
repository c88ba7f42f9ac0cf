// An owned hiredis reply (freeReplyObject on destruction), shared by the gateway's two Redis
// clients: the replica sync (replica_sync_redis.cpp) and the replica feed (replica_feed_redis.cpp).
//
// Thread safety: a Reply is owned by one thread, as the reply it holds.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>

namespace holdback::gateway {

struct RedisReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using RedisReply = std::unique_ptr<redisReply, RedisReplyDeleter>;

}  // namespace holdback::gateway
