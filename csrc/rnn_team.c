/* rnn_team.c — the phase scheduler of rnn_team.h on the thread pool.
 *
 * claim[p] counts the phases of part p handed out; a thread takes phase s
 * of p by moving claim[p] from s to s + 1 (compare-and-swap), so a part
 * runs once whoever takes it. `done` counts finished parts over all phases:
 * phase s is complete when done reaches (s + 1) * parts. Waiting spins
 * (pause) for a few microseconds, then yields the core: on a machine with
 * more runnable threads than cores a spinning thread would steal the time
 * of the one it waits for. After STEAL_NS without progress a waiting thread
 * runs the parts of the current phase that nobody took.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdatomic.h>
#include <time.h>

#include "ampy/parallel.h"
#include "rnn_team.h"

#define SPIN_NS 20000
#define STEAL_NS 50000

typedef struct team {
    int64_t steps;
    int parts;
    rnn_part_fn fn;
    void *ctx;
    _Atomic int64_t claim[RNN_TEAM_MAX];
    _Atomic int64_t done;
    _Atomic int status;
} team;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Runs phase s of part p if it is still free. */
static void try_part(team *t, int64_t s, int p, int slot)
{
    int64_t want = s;
    if (!atomic_compare_exchange_strong_explicit(&t->claim[p], &want, s + 1,
                                                 memory_order_acq_rel, memory_order_relaxed))
        return;
    if (atomic_load_explicit(&t->status, memory_order_relaxed) == AMPY_OK) {
        const ampy_status st = t->fn(t->ctx, s, p, slot);
        if (st != AMPY_OK) {
            int ok = AMPY_OK;
            atomic_compare_exchange_strong(&t->status, &ok, (int)st);
        }
    }
    atomic_fetch_add_explicit(&t->done, 1, memory_order_release);
}

/* Until phase s is complete; takes free parts of it after STEAL_NS. */
static void finish_phase(team *t, int64_t s, int slot)
{
    const int64_t target = (s + 1) * t->parts;
    int64_t t0 = 0;
    for (unsigned spin = 0;; spin++) {
        if (atomic_load_explicit(&t->done, memory_order_acquire) >= target)
            return;
        if ((spin & 63) == 63) {
            const int64_t now = now_ns();
            if (!t0)
                t0 = now;
            if (now - t0 > STEAL_NS)
                for (int p = 0; p < t->parts; p++)
                    try_part(t, s, p, slot);
            if (now - t0 > SPIN_NS)
                sched_yield();
        }
        cpu_relax();
    }
}

static void member(int64_t b, int64_t e, void *vt)
{
    team *t = (team *)vt;
    for (int64_t s = 0; s < t->steps; s++) {
        for (int64_t p = b; p < e; p++)
            try_part(t, s, (int)p, (int)b);
        finish_phase(t, s, (int)b);
    }
}

ampy_status ampy_rnn_team_run(int64_t steps, int parts, rnn_part_fn fn, void *ctx)
{
    if (parts < 1 || parts > RNN_TEAM_MAX)
        return AMPY_ERR_VALUE;
    team t = {.steps = steps, .parts = parts, .fn = fn, .ctx = ctx};
    for (int p = 0; p < parts; p++)
        atomic_init(&t.claim[p], 0);
    atomic_init(&t.done, 0);
    atomic_init(&t.status, AMPY_OK);
    ampy_parallel_for(parts, 1, member, &t);
    return (ampy_status)atomic_load(&t.status);
}
