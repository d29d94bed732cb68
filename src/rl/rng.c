/* rng.c — xoshiro256** (Blackman & Vigna), seeded with splitmix64 so that any
 * 64-bit seed, including 0, gives a well-mixed non-zero state. */
#include "kgym/rl.h"

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void kg_rng_seed(kg_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

uint64_t kg_rng_next(kg_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kg_rng_uniform(kg_rng *rng)
{
    /* The top 53 bits fill a double's mantissa exactly: no rounding to 1.0. */
    return (double)(kg_rng_next(rng) >> 11) * 0x1.0p-53;
}
