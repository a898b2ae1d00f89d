/* The exposure-filter Redis module "ef" (issue 13): EF.SETBITS and EF.VERSION.
 * Commands, guarantees, deployment and the module ABI it relies on:
 * redis-module/README.md. */

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ------------------------------------------------------------------------
 * The Redis module ABI, declared here: Debian ships no redismodule.h.
 *
 * Redis passes the module a context whose first word is a pointer to
 * RedisModule_GetApi(name, &slot), which stores the address of the API
 * function called `name` into `slot` and returns 0, or 1 when this Redis has
 * no such function. Functions are looked up by name and never change
 * signature once released, so a module built once loads on every later Redis.
 * Only what this file uses is declared; every signature below is the one of
 * redismodule.h since the Redis version noted.
 * --------------------------------------------------------------------- */

#define RM_OK 0
#define RM_ERR 1
#define RM_APIVER_1 1
#define RM_READ (1 << 0)
#define RM_WRITE (1 << 1)
#define RM_KEYTYPE_EMPTY 0
#define RM_KEYTYPE_STRING 1
#define RM_NO_EXPIRE (-1LL)
#define RM_CTX_FLAGS_REPLICATED (1 << 12) /* sent by our master */
#define RM_CTX_FLAGS_LOADING (1 << 13)    /* replayed from the AOF at start */
#define RM_ERRORMSG_WRONGTYPE "WRONGTYPE Operation against a key holding the wrong kind of value"

typedef struct RedisModuleCtx RedisModuleCtx;
typedef struct RedisModuleKey RedisModuleKey;
typedef struct RedisModuleString RedisModuleString;
typedef struct RedisModuleCallReply RedisModuleCallReply;
typedef int (*RedisModuleCmdFunc)(RedisModuleCtx *ctx, RedisModuleString **argv, int argc);

/* Since 4.0 unless noted. */
static int (*RedisModule_GetApi)(const char *name, void *slot);
static void (*RedisModule_SetModuleAttribs)(RedisModuleCtx *ctx, const char *name, int ver,
                                            int apiver);
static void (*RedisModule_Log)(RedisModuleCtx *ctx, const char *level, const char *fmt, ...);
static int (*RedisModule_GetServerVersion)(void); /* 6.0.9: 0x00MMmmpp */
static int (*RedisModule_CreateCommand)(RedisModuleCtx *ctx, const char *name,
                                        RedisModuleCmdFunc cmdfunc, const char *strflags,
                                        int firstkey, int lastkey, int keystep);
static int (*RedisModule_WrongArity)(RedisModuleCtx *ctx);
static int (*RedisModule_ReplyWithError)(RedisModuleCtx *ctx, const char *err);
static int (*RedisModule_ReplyWithLongLong)(RedisModuleCtx *ctx, long long ll);
static const char *(*RedisModule_StringPtrLen)(RedisModuleString *str, size_t *len);
static int (*RedisModule_StringToLongLong)(RedisModuleString *str, long long *ll);
static long long (*RedisModule_Milliseconds)(void);
static int (*RedisModule_GetContextFlags)(RedisModuleCtx *ctx);
static RedisModuleKey *(*RedisModule_OpenKey)(RedisModuleCtx *ctx, RedisModuleString *keyname,
                                              int mode);
static void (*RedisModule_CloseKey)(RedisModuleKey *key);
static int (*RedisModule_KeyType)(RedisModuleKey *key);
static size_t (*RedisModule_ValueLength)(RedisModuleKey *key);
static int (*RedisModule_StringTruncate)(RedisModuleKey *key, size_t newlen);
static char *(*RedisModule_StringDMA)(RedisModuleKey *key, size_t *len, int mode);
static long long (*RedisModule_GetExpire)(RedisModuleKey *key); /* ms left or RM_NO_EXPIRE */
static RedisModuleCallReply *(*RedisModule_Call)(RedisModuleCtx *ctx, const char *cmdname,
                                                 const char *fmt, ...);
static void (*RedisModule_FreeCallReply)(RedisModuleCallReply *reply);
static int (*RedisModule_SetExpire)(RedisModuleKey *key, long long ms_from_now);
static int (*RedisModule_ReplicateVerbatim)(RedisModuleCtx *ctx);

#define EF_MODULE_NAME "ef"
/* Bumped whenever a command's contract changes; writers check it (MODULE LIST,
 * EF.VERSION). */
/* The project version, major*10000 + minor*100 + patch (0.1.0 = 100), set by
 * CMake; writers accept any version >= 1 (kMinEfModuleVersion). */
#ifndef EF_MODULE_VERSION
#define EF_MODULE_VERSION 1
#endif
#define EF_MIN_REDIS_VERSION 0x00070000 /* 7.0.0 */
/* 9999-12-31T23:59:59Z: keeps expireat * 1000 far from overflow. */
#define EF_MAX_EXPIREAT 253402300799LL

/* ------------------------------------------------------------------------
 * EF.SETBITS key positions expireat
 *
 * positions: packed little-endian uint32 bit offsets (SETBIT numbering: bit p
 * is mask 0x80 >> (p & 7) of byte p >> 3). Sets them all (OR), growing the
 * string with zero bytes as SETBIT does; sets the key's expiry to expireat
 * (Unix seconds) only if the key has none. Replies with how many of the bits
 * were 0 before (a position repeated in one call counts once). Atomic, like
 * any command; arguments are checked before the key is touched, so an error
 * reply means nothing changed.
 * --------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3))) static int ReplyError(RedisModuleCtx *ctx, const char *fmt,
                                                            ...) {
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return RedisModule_ReplyWithError(ctx, msg);
}

static uint32_t LoadLe32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static int SetBitsCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (argc != 4) return RedisModule_WrongArity(ctx);

  size_t positions_len;
  const unsigned char *positions =
      (const unsigned char *)RedisModule_StringPtrLen(argv[2], &positions_len);
  if (positions_len == 0 || positions_len % 4 != 0)
    return ReplyError(ctx,
                      "ERR EF.SETBITS positions must be packed little-endian uint32s, at "
                      "least one: got %zu bytes",
                      positions_len);

  long long expireat;
  if (RedisModule_StringToLongLong(argv[3], &expireat) != RM_OK || expireat <= 0 ||
      expireat > EF_MAX_EXPIREAT)
    return RedisModule_ReplyWithError(
        ctx, "ERR EF.SETBITS expireat must be an integer of Unix seconds in the future");
  long long now_ms = RedisModule_Milliseconds();
  /* A command replayed from our master or from the AOF passed this check on
   * the master; it must apply here too, expireat past or not. */
  if (expireat * 1000 <= now_ms &&
      !(RedisModule_GetContextFlags(ctx) & (RM_CTX_FLAGS_REPLICATED | RM_CTX_FLAGS_LOADING)))
    return ReplyError(ctx, "ERR EF.SETBITS expireat %lld is not in the future (now %lld)", expireat,
                      now_ms / 1000);

  size_t count = positions_len / 4;
  uint32_t max_byte = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t byte = LoadLe32(positions + 4 * i) >> 3;
    if (byte > max_byte) max_byte = byte;
  }

  RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], RM_READ | RM_WRITE);
  int type = RedisModule_KeyType(key);
  if (type != RM_KEYTYPE_EMPTY && type != RM_KEYTYPE_STRING) {
    RedisModule_CloseKey(key);
    return RedisModule_ReplyWithError(ctx, RM_ERRORMSG_WRONGTYPE);
  }
  size_t needed = (size_t)max_byte + 1;
  if ((type == RM_KEYTYPE_EMPTY || RedisModule_ValueLength(key) < needed) &&
      RedisModule_StringTruncate(key, needed) != RM_OK) {
    RedisModule_CloseKey(key);
    return ReplyError(ctx, "ERR EF.SETBITS could not grow the string to %zu bytes (max 512 MB)",
                      needed);
  }
  size_t len;
  unsigned char *bits = (unsigned char *)RedisModule_StringDMA(key, &len, RM_READ | RM_WRITE);

  long long newly_set = 0;
  for (size_t i = 0; i < count; i++) {
    uint32_t p = LoadLe32(positions + 4 * i);
    unsigned char mask = (unsigned char)(0x80u >> (p & 7));
    unsigned char *byte = bits + (p >> 3);
    if (!(*byte & mask)) {
      *byte |= mask;
      newly_set++;
    }
  }

  int set_expiry = RedisModule_GetExpire(key) == RM_NO_EXPIRE;
  RedisModule_CloseKey(key);
  if (set_expiry) {
    /* EXPIREAT itself, not RM_SetExpire: Redis 7.0 has no absolute-expiry
     * module call (RM_SetAbsExpire is 7.2), and "expireat - now" ms from now
     * lands a millisecond late now and then, differently on master and replica.
     * Replayed with a past expireat (replica, AOF), EXPIREAT keeps the key
     * with that expiry, as for Redis's own. Once per key (README: cost). */
    RedisModuleCallReply *reply = RedisModule_Call(ctx, "EXPIREAT", "ss", argv[1], argv[3]);
    if (reply) {
      RedisModule_FreeCallReply(reply);
    } else {
      /* No EXPIREAT (renamed away by rename-command): milliseconds from now,
       * never a key left without expiry. */
      long long ms = expireat * 1000 - RedisModule_Milliseconds();
      key = RedisModule_OpenKey(ctx, argv[1], RM_READ | RM_WRITE);
      RedisModule_SetExpire(key, ms > 0 ? ms : 0);
      RedisModule_CloseKey(key);
    }
  }

  /* Replicas and the AOF get the command itself (replicas must load the
   * module: README.md). Nothing changed, nothing to send, as BITFIELD. */
  if (newly_set > 0 || set_expiry) RedisModule_ReplicateVerbatim(ctx);
  return RedisModule_ReplyWithLongLong(ctx, newly_set);
}

/* EF.VERSION: the module's version (EF_MODULE_VERSION), for writers whose ACL
 * user may not run MODULE LIST. */
static int VersionCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  (void)argv;
  if (argc != 1) return RedisModule_WrongArity(ctx);
  return RedisModule_ReplyWithLongLong(ctx, EF_MODULE_VERSION);
}

/* ------------------------------------------------------------------------
 * Loading
 * --------------------------------------------------------------------- */

#define API(name) \
  { "RedisModule_" #name, (void *)&RedisModule_##name }

__attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx *ctx,
                                                              RedisModuleString **argv, int argc) {
  (void)argv;
  RedisModule_GetApi = (int (*)(const char *, void *))((void **)ctx)[0];
  if (RedisModule_GetApi("RedisModule_SetModuleAttribs", (void *)&RedisModule_SetModuleAttribs) !=
          RM_OK ||
      RedisModule_GetApi("RedisModule_Log", (void *)&RedisModule_Log) != RM_OK)
    return RM_ERR;
  RedisModule_SetModuleAttribs(ctx, EF_MODULE_NAME, EF_MODULE_VERSION, RM_APIVER_1);

  int server_version = 0;
  if (RedisModule_GetApi("RedisModule_GetServerVersion", (void *)&RedisModule_GetServerVersion) ==
      RM_OK)
    server_version = RedisModule_GetServerVersion();
  if (server_version < EF_MIN_REDIS_VERSION) {
    RedisModule_Log(ctx, "warning",
                    "version %d not loaded: needs Redis 7.0.0 or later, this is %d.%d.%d%s",
                    EF_MODULE_VERSION, server_version >> 16, (server_version >> 8) & 0xff,
                    server_version & 0xff, server_version ? "" : " (older than 6.0.9)");
    return RM_ERR;
  }
  if (argc != 0) {
    RedisModule_Log(ctx, "warning", "not loaded: the module takes no arguments, got %d", argc);
    return RM_ERR;
  }

  const struct {
    const char *name;
    void *slot;
  } api[] = {
      API(CreateCommand),  API(WrongArity),       API(ReplyWithError),    API(ReplyWithLongLong),
      API(StringPtrLen),   API(StringToLongLong), API(Milliseconds),      API(GetContextFlags),
      API(OpenKey),        API(CloseKey),         API(KeyType),           API(ValueLength),
      API(StringTruncate), API(StringDMA),        API(GetExpire),         API(Call),
      API(FreeCallReply),  API(SetExpire),        API(ReplicateVerbatim),
  };
  for (size_t i = 0; i < sizeof(api) / sizeof(api[0]); i++) {
    if (RedisModule_GetApi(api[i].name, api[i].slot) != RM_OK) {
      RedisModule_Log(ctx, "warning", "not loaded: this Redis has no %s", api[i].name);
      return RM_ERR;
    }
  }

  /* Key at argv[1] (first = last = 1, step 1): Redis Cluster routes and checks
   * the slot, ACL key patterns apply. */
  if (RedisModule_CreateCommand(ctx, "ef.setbits", SetBitsCommand, "write deny-oom", 1, 1, 1) !=
          RM_OK ||
      RedisModule_CreateCommand(ctx, "ef.version", VersionCommand, "readonly fast", 0, 0, 0) !=
          RM_OK) {
    RedisModule_Log(ctx, "warning",
                    "not loaded: could not register EF.SETBITS / EF.VERSION (already loaded?)");
    return RM_ERR;
  }
  RedisModule_Log(ctx, "notice", "version %d loaded: EF.SETBITS, EF.VERSION", EF_MODULE_VERSION);
  return RM_OK;
}
