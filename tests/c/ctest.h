/* ctest.h — what the C unit tests of tests/c/ share: a CHECK that counts
 * and reports a failure without stopping, and a small deterministic
 * generator (xorshift64; define CTEST_SEED before including for another
 * sequence). Header only: each test is one translation unit. */
#ifndef AMPY_CTEST_H
#define AMPY_CTEST_H

#include <stdint.h>
#include <stdio.h>

#ifndef CTEST_SEED
#define CTEST_SEED 0x9E3779B97F4A7C15ull
#endif

static int failures, checks;
#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        checks++;                                                         \
        if (!(cond)) {                                                    \
            failures++;                                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                   \
            printf(__VA_ARGS__);                                          \
            printf("\n");                                                 \
        }                                                                 \
    } while (0)

static uint64_t rng = CTEST_SEED;
static uint32_t rnd32(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

#endif /* AMPY_CTEST_H */
