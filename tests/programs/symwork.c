/* symwork: a C program whose CPU time is spread over a few named functions, with small
 * helpers the compiler inlines into them, so that symbolization has inline chains to
 * name. No library call sits in a hot loop: every sampled frame is the program's own. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static inline uint32_t rotate_left(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static inline uint32_t mix(uint32_t h, uint32_t k) {
  k *= 0xcc9e2d51u;
  k = rotate_left(k, 15);
  k *= 0x1b873593u;
  h ^= k;
  h = rotate_left(h, 13);
  return h * 5 + 0xe6546b64u;
}

__attribute__((noinline)) uint32_t hash_block(const uint32_t *words, size_t count, uint32_t seed) {
  uint32_t h = seed;
  for (size_t i = 0; i < count; i++) h = mix(h, words[i]);
  return h ^ (uint32_t)count;
}

static inline double curve(double x) { return ((0.5 * x - 1.5) * x + 2.0) * x / (1.0 + x * x); }

__attribute__((noinline)) double integrate(double from, double to, int steps) {
  double width = (to - from) / steps, sum = 0.0;
  for (int i = 0; i < steps; i++) sum += curve(from + (i + 0.5) * width);
  return sum * width;
}

static inline void strike(unsigned char *composite, int prime, int limit) {
  for (int multiple = prime * prime; multiple <= limit; multiple += prime) composite[multiple] = 1;
}

__attribute__((noinline)) int sieve(unsigned char *composite, int limit) {
  for (int i = 0; i <= limit; i++) composite[i] = 0;
  int primes = 0;
  for (int n = 2; n <= limit; n++) {
    if (composite[n]) continue;
    primes++;
    if ((long)n * n <= limit) strike(composite, n, limit);
  }
  return primes;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40;
  enum { WORDS = 1 << 16, LIMIT = 1 << 20 };
  uint32_t *words = malloc(WORDS * sizeof *words);
  unsigned char *composite = malloc(LIMIT + 1);
  if (!words || !composite) return 1;
  for (int i = 0; i < WORDS; i++) words[i] = (uint32_t)i * 2654435761u;
  uint32_t hash = 0;
  double area = 0;
  int primes = 0;
  for (int r = 0; r < rounds; r++) {
    hash ^= hash_block(words, WORDS, (uint32_t)r);
    area += integrate(0.0, 4.0 + r, 200000);
    primes += sieve(composite, LIMIT);
  }
  printf("%08x %.3f %d\n", hash, area, primes);
  free(words);
  free(composite);
  return 0;
}
