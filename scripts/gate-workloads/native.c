// A native workload for scripts/gate-fpr.sh, profiled with `perf record -g`: a fixed
// amount of work spread over functions of different weights (percent of the work in
// the comment of each), so that the profile has a few heavy functions, several of a few
// percent, and one whose share varies from run to run (cache_miss: 2 to 6 %, as a cache
// or the data would make it). GATE_SLOW_PERCENT=N gives compress extra work equal to N %
// of the program's (a slowdown of N % of the run, all in one function). Build with
// frame pointers set up on entry, so that perf's stacks have every caller (GCC would
// set one up only around the final call, or make that call a jump, without
// -fno-shrink-wrap -fno-optimize-sibling-calls):
//   cc -O2 -fno-omit-frame-pointer -fno-shrink-wrap -fno-optimize-sibling-calls \
//      -fno-inline -fno-ipa-icf -fno-ipa-cp -o native native.c
// (-fno-ipa-icf: the work functions are alike, and identical code folding would make
// them one; -fno-ipa-cp keeps their names free of .constprop clones).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

// Units of work for the whole run; about one second at -O2.
#define REQUESTS 800
#define UNIT 5000

static volatile uint64_t sink;

// Keeps a result. A call, so that the work functions are not leaves: GCC 12 sets up no
// frame pointer in a leaf (-mno-omit-leaf-frame-pointer notwithstanding), and perf's
// stacks would then skip its caller.
__attribute__((noinline, noipa)) static void keep(uint64_t x) { sink += x; }

// A function that does `units` × UNIT steps of its own (xorshift: no memory traffic,
// nothing the compiler can fold), so that its samples are its flat time.
#define WORK(name)                                          \
  __attribute__((noinline)) static void name(long units) { \
    uint64_t x = 88172645463325252ull + (uint64_t)units;  \
    for (long i = 0; i < units * UNIT; i++) {             \
      x ^= x << 13;                                       \
      x ^= x >> 7;                                        \
      x ^= x << 17;                                       \
    }                                                     \
    keep(x);                                              \
  }

WORK(parse)      // 30
WORK(hash)       // 20
WORK(compress)   // 15, the one GATE_SLOW_PERCENT slows
WORK(sort_keys)  // 10
WORK(encode)     // 8
WORK(checksum)   // 5
WORK(cache_miss) // 2 to 6, drawn per run
WORK(log_line)   // 3
WORK(validate)   // 2
WORK(lookup)     // 1

// One request: 96 units (100 with cache_miss at 4) across the functions, and `extra`
// more in compress.
__attribute__((noinline)) static void handle(long cache, long extra) {
  parse(30);
  hash(20);
  compress(15 + extra);
  sort_keys(10);
  encode(8);
  checksum(5);
  cache_miss(cache);
  log_line(3);
  validate(2);
  lookup(1);
}

int main(void) {
  const char *slow = getenv("GATE_SLOW_PERCENT");
  long percent = slow ? atol(slow) : 0;
  srand((unsigned)(time(NULL) ^ getpid()));
  // cache_miss's share for this run: 2 to 6 units a request.
  long cache = 2 + rand() % 5;
  // The extra work: percent % of REQUESTS × 100 units, spread over the requests.
  long extra = REQUESTS * 100 * percent / 100;
  for (long r = 0; r < REQUESTS; r++) {
    handle(cache, extra * (r + 1) / REQUESTS - extra * r / REQUESTS);
  }
  printf("%llu\n", (unsigned long long)sink);
  return 0;
}
