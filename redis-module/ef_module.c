/* The exposure-filter Redis module "ef" (issue 13): EF.SETBITS, EF.CLASSKEY
 * (layout v4's creation step, issue 53) and EF.VERSION.
 * Commands, guarantees, deployment and the module ABI it relies on:
 * redis-module/README.md. */

#include <math.h>
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
static int (*RedisModule_Replicate)(RedisModuleCtx *ctx, const char *cmdname, const char *fmt, ...);
static int (*RedisModule_ReplyWithStringBuffer)(RedisModuleCtx *ctx, const char *buf, size_t len);

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

/* ------------------------------------------------------------------------
 * EF.CLASSKEY key prev1 prev2 expireat m k growth k_step stages fill_ppm
 *             count classed1 classed2
 *
 * Layout v4's creation step (docs/FORMAT.md rule 11), natively: the same
 * arguments, the same steps and the same reply as the writer's Lua creation
 * script (src/write/class_create.cc, kCreateClassKeyScript), which stays the
 * reference and the fallback. If `key` exists, replies with its value.
 * Otherwise estimates the items of the user's two previous buckets (prev1,
 * prev2: classedN 1 if that bucket's keys have a class), chooses the class,
 * creates the key as the class header c + 1 and ceil(m_c / 8) zero bytes,
 * sets its expiry (EXPIREAT expireat) and replies with that value.
 * The arithmetic is the script's, in the same doubles and libm calls (Lua
 * numbers are C doubles), so both choose the same class for every value
 * (tests/module/ef_classkey_test.cc compares them).
 * Replicated as its effect (SET of the value, then EXPIREAT): replicas and the
 * AOF need no module for it.
 * --------------------------------------------------------------------- */

/* A size class's stage-0 bits: 8 * ((4 + c % 4) * 2^(c / 4 + 4) - 17). */
static double ClassBits(int c) { return 8.0 * ((4 + c % 4) * ldexp(1.0, c / 4 + 4) - 17); }

typedef struct {
  double m, k, growth, k_step;
  int stages, count;
  double fill;
} ClassParams;

/* The stage limit of class c: the meta's plus the doublings between m and m_c. */
static int ClassLimit(const ClassParams *p, int c) {
  double mc = ClassBits(c);
  int e = 0;
  while (ldexp(mc, e) < p->m) e++;
  while (ldexp(p->m, 1 - e) <= mc) e--;
  return p->stages + e < 32 ? p->stages + e : 32;
}

/* Set bits of bytes [first, last] of v (clipped to len), as BITCOUNT. */
static double CountBits(const unsigned char *v, size_t len, double first, double last) {
  if (first >= (double)len) return 0;
  size_t end = last >= (double)len ? len : (size_t)last + 1;
  long long n = 0;
  for (size_t i = (size_t)first; i < end; i++) n += __builtin_popcount(v[i]);
  return (double)n;
}

/* Rule 11's estimate of a previous key's items: 1 and *n, *cls (-1: its
 * header names none) when it has one; 0 when it has none (absent, empty, a
 * header that names no class). -1 when the key holds another type. */
static int EstimateItems(RedisModuleCtx *ctx, RedisModuleString *name, int classed,
                         const ClassParams *p, double *n, int *cls) {
  RedisModuleKey *key = RedisModule_OpenKey(ctx, name, RM_READ);
  int type = RedisModule_KeyType(key);
  if (type != RM_KEYTYPE_EMPTY && type != RM_KEYTYPE_STRING) {
    RedisModule_CloseKey(key);
    return -1;
  }
  size_t len = 0;
  const unsigned char *v = type == RM_KEYTYPE_STRING
                               ? (const unsigned char *)RedisModule_StringDMA(key, &len, RM_READ)
                               : NULL;
  int found = len > 0;
  double m0 = p->m, off = 0;
  int limit = p->stages;
  *cls = -1;
  if (found && classed) {
    if (v[0] == 0 || v[0] > p->count) {
      found = 0; /* names no class: no estimate */
    } else {
      *cls = v[0] - 1;
      m0 = ClassBits(*cls);
      limit = ClassLimit(p, *cls);
      off = 8;
    }
  }
  if (found) {
    *n = 0;
    for (int s = 0; s < limit; s++) {
      if (s > 0 && (double)len <= off / 8) break;
      double ks = p->k + s * p->k_step;
      double ms = floor((m0 * pow(p->growth, s) * ks + p->k - 1) / p->k);
      double x = CountBits(v, len, off / 8, floor((off + ms - 1) / 8));
      if (x > ms - 1) x = ms - 1;
      *n = *n + -(ms / ks) * log(1 - x / ms);
      off = off + 8 * ceil(ms / 8);
    }
  }
  RedisModule_CloseKey(key);
  return found;
}

/* The class rule: from the smaller estimate of the two previous buckets, with
 * the newer previous key's class kept when at most one above; with no
 * estimate, the smallest class whose m_c reaches m. -1: another type. */
static int ChooseClass(RedisModuleCtx *ctx, RedisModuleString **prev, const int classed[2],
                       const ClassParams *p) {
  int have_est = 0, prev_class = -1;
  double est = 0;
  for (int i = 0; i < 2; i++) {
    double n;
    int cls;
    int found = EstimateItems(ctx, prev[i], classed[i], p, &n, &cls);
    if (found < 0) return -1;
    if (found && (!have_est || n < est)) {
      est = n;
      have_est = 1;
    }
    if (cls >= 0 && prev_class < 0) prev_class = cls;
  }
  int c = 0;
  if (have_est) {
    while (c < p->count - 1 && -(ClassBits(c) / p->k) * log(1 - p->fill) < est / 3) c++;
    if (prev_class >= c && prev_class <= c + 1) c = prev_class;
  } else {
    while (c < p->count - 1 && ClassBits(c) < p->m) c++;
  }
  return c;
}

/* Parses argv[4..13]; 0 and an error reply sent when one is out of range. */
static int ParseClassArgs(RedisModuleCtx *ctx, RedisModuleString **argv, ClassParams *p,
                          int classed[2]) {
  static const char *names[] = {"expireat", "m",        "k",     "growth",   "k_step",
                                "stages",   "fill_ppm", "count", "classed1", "classed2"};
  static const long long lo[] = {1, 1, 1, 1, 0, 1, 1, 1, 0, 0};
  static const long long hi[] = {EF_MAX_EXPIREAT, 1LL << 32, 1 << 20, 1 << 10, 1 << 20, 32,
                                 999999,          255,       1,       1};
  long long v[10];
  for (int i = 0; i < 10; i++) {
    if (RedisModule_StringToLongLong(argv[4 + i], &v[i]) != RM_OK || v[i] < lo[i] || v[i] > hi[i]) {
      ReplyError(ctx, "ERR EF.CLASSKEY %s must be an integer from %lld to %lld", names[i], lo[i],
                 hi[i]);
      return 0;
    }
  }
  p->m = (double)v[1];
  p->k = (double)v[2];
  p->growth = (double)v[3];
  p->k_step = (double)v[4];
  p->stages = (int)v[5];
  p->fill = (double)v[6] / 1e6;
  p->count = (int)v[7];
  classed[0] = (int)v[8];
  classed[1] = (int)v[9];
  return 1;
}

/* Sets the expiry of a key just created, as the script's EXPIREAT (which
 * deletes it when expireat has passed), replicated as that EXPIREAT. */
static void ExpireCreated(RedisModuleCtx *ctx, RedisModuleString *name, RedisModuleString *at) {
  RedisModuleCallReply *reply = RedisModule_Call(ctx, "EXPIREAT", "!ss", name, at);
  if (reply) {
    RedisModule_FreeCallReply(reply);
    return;
  }
  /* No EXPIREAT (renamed away): as in EF.SETBITS, ms from now. */
  long long expireat = 0;
  RedisModule_StringToLongLong(at, &expireat);
  long long ms = expireat * 1000 - RedisModule_Milliseconds();
  RedisModuleKey *key = RedisModule_OpenKey(ctx, name, RM_READ | RM_WRITE);
  RedisModule_SetExpire(key, ms > 0 ? ms : 0);
  RedisModule_CloseKey(key);
  RedisModule_Replicate(ctx, "PEXPIREAT", "sl", name, expireat * 1000);
}

static int ClassKeyCommand(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
  if (argc != 14) return RedisModule_WrongArity(ctx);
  /* As the script: an existing key's value first, whatever the arguments, and
   * opened for reading only (no WATCH or tracking invalidation). */
  RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], RM_READ);
  int type = RedisModule_KeyType(key);
  if (type == RM_KEYTYPE_STRING) {
    size_t len;
    const char *v = RedisModule_StringDMA(key, &len, RM_READ);
    RedisModule_ReplyWithStringBuffer(ctx, v, len);
    RedisModule_CloseKey(key);
    return RM_OK;
  }
  RedisModule_CloseKey(key);
  if (type != RM_KEYTYPE_EMPTY) return RedisModule_ReplyWithError(ctx, RM_ERRORMSG_WRONGTYPE);
  ClassParams p;
  int classed[2];
  if (!ParseClassArgs(ctx, argv, &p, classed)) return RM_OK;
  int c = ChooseClass(ctx, argv + 2, classed, &p);
  if (c < 0) return RedisModule_ReplyWithError(ctx, RM_ERRORMSG_WRONGTYPE);

  /* A new string of exactly 1 + m_c / 8 zero bytes (one allocation), header c + 1. */
  size_t len = 1 + (size_t)(ClassBits(c) / 8);
  key = RedisModule_OpenKey(ctx, argv[1], RM_READ | RM_WRITE);
  if (RedisModule_StringTruncate(key, len) != RM_OK) {
    RedisModule_CloseKey(key);
    return ReplyError(ctx, "ERR EF.CLASSKEY could not create a string of %zu bytes", len);
  }
  char *v = RedisModule_StringDMA(key, &len, RM_READ | RM_WRITE);
  v[0] = (char)(c + 1);
  RedisModule_Replicate(ctx, "SET", "sb", argv[1], v, len);
  RedisModule_ReplyWithStringBuffer(ctx, v, len);
  RedisModule_CloseKey(key);
  ExpireCreated(ctx, argv[1], argv[4]);
  return RM_OK;
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
      API(CreateCommand),
      API(WrongArity),
      API(ReplyWithError),
      API(ReplyWithLongLong),
      API(StringPtrLen),
      API(StringToLongLong),
      API(Milliseconds),
      API(GetContextFlags),
      API(OpenKey),
      API(CloseKey),
      API(KeyType),
      API(ValueLength),
      API(StringTruncate),
      API(StringDMA),
      API(GetExpire),
      API(Call),
      API(FreeCallReply),
      API(SetExpire),
      API(ReplicateVerbatim),
      API(Replicate),
      API(ReplyWithStringBuffer),
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
      /* Keys at argv[1..3]: the key and its user's two previous buckets (one
       * hash tag, so one slot). */
      RedisModule_CreateCommand(ctx, "ef.classkey", ClassKeyCommand, "write deny-oom", 1, 3, 1) !=
          RM_OK ||
      RedisModule_CreateCommand(ctx, "ef.version", VersionCommand, "readonly fast", 0, 0, 0) !=
          RM_OK) {
    RedisModule_Log(
        ctx, "warning",
        "not loaded: could not register EF.SETBITS / EF.CLASSKEY / EF.VERSION (already loaded?)");
    return RM_ERR;
  }
  RedisModule_Log(ctx, "notice", "version %d loaded: EF.SETBITS, EF.CLASSKEY, EF.VERSION",
                  EF_MODULE_VERSION);
  return RM_OK;
}
