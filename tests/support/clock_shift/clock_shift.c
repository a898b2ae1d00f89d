// An LD_PRELOAD library for the fault suite: shifts the wall clock of the
// process it is loaded into by EF_TEST_CLOCK_SHIFT_MS milliseconds (time,
// gettimeofday, clock_gettime of the CLOCK_REALTIME clocks; monotonic clocks are
// left alone). A daemon and a redis-server started with the same shift share a
// wall clock that reaches e.g. the end of an hour bucket within seconds.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

typedef int (*ClockGettime)(clockid_t, struct timespec*);

static ClockGettime real_clock_gettime;
static long long shift_ms;

__attribute__((constructor)) static void Init(void) {
  real_clock_gettime = (ClockGettime)dlsym(RTLD_NEXT, "clock_gettime");
  const char* v = getenv("EF_TEST_CLOCK_SHIFT_MS");
  shift_ms = v ? strtoll(v, NULL, 10) : 0;
}

static void Shift(struct timespec* tp) {
  long long ns = (long long)tp->tv_nsec + (shift_ms % 1000) * 1000000LL;
  long long s = (long long)tp->tv_sec + shift_ms / 1000;
  while (ns < 0) {
    ns += 1000000000LL;
    --s;
  }
  while (ns >= 1000000000LL) {
    ns -= 1000000000LL;
    ++s;
  }
  tp->tv_sec = (time_t)s;
  tp->tv_nsec = (long)ns;
}

int clock_gettime(clockid_t id, struct timespec* tp) {
  if (!real_clock_gettime) Init();
  int r = real_clock_gettime(id, tp);
  if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) Shift(tp);
  return r;
}

int gettimeofday(struct timeval* restrict tv, void* restrict tz) {
  (void)tz;
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  if (r == 0) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return r;
}

time_t time(time_t* out) {
  struct timespec ts;
  if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
  if (out) *out = ts.tv_sec;
  return ts.tv_sec;
}
