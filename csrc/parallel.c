/* parallel.c — a small persistent thread pool for large element loops.
 *
 * Why not OpenMP: libgomp spin-waits after each region, which on a 2-core
 * machine steals the second core from the caller and from other libraries'
 * pools (torch's, OpenBLAS's) running in the same process. Here idle workers
 * sleep on a condition variable; the caller always runs chunk 0 itself.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "ampy/parallel.h"

#define MAX_THREADS 256

typedef struct {
    ampy_range_fn fn;
    void *ctx;
    int64_t n;
    int nchunks;
    int next;    /* next chunk to hand out              */
    int pending; /* chunks not yet finished             */
    unsigned long generation;
} job_t;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t submit_lock = PTHREAD_MUTEX_INITIALIZER; /* one job at a time */
static job_t job;
static int nworkers;       /* workers started          */
static int num_threads;    /* 0: not yet initialised   */
static _Thread_local int in_parallel;

static void chunk_range(const job_t *j, int c, int64_t *b, int64_t *e)
{
    *b = j->n * c / j->nchunks;
    *e = j->n * (c + 1) / j->nchunks;
}

/* Take chunks of the current job until none is left. Called with pool_lock held. */
static void run_chunks(void)
{
    while (job.fn && job.next < job.nchunks) {
        int c = job.next++;
        int64_t b, e;
        chunk_range(&job, c, &b, &e);
        ampy_range_fn fn = job.fn;
        void *ctx = job.ctx;
        pthread_mutex_unlock(&pool_lock);
        in_parallel = 1;
        fn(b, e, ctx);
        in_parallel = 0;
        pthread_mutex_lock(&pool_lock);
        if (--job.pending == 0)
            pthread_cond_broadcast(&done_cv);
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool_lock);
    for (;;) {
        while (!(job.fn && job.next < job.nchunks))
            pthread_cond_wait(&work_cv, &pool_lock);
        run_chunks();
    }
    return NULL;
}

static void after_fork_child(void)
{
    /* Threads do not survive fork: start over with fresh locks and no workers. */
    pthread_mutex_init(&pool_lock, NULL);
    pthread_mutex_init(&submit_lock, NULL);
    pthread_cond_init(&work_cv, NULL);
    pthread_cond_init(&done_cv, NULL);
    job.fn = NULL;
    nworkers = 0;
}

static int default_threads(void)
{
    const char *env = getenv("AMPY_NUM_THREADS");
    if (env && atoi(env) > 0)
        return atoi(env);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static void init_threads(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
    int n = default_threads();
    num_threads = n < 1 ? 1 : (n > MAX_THREADS ? MAX_THREADS : n);
}

int ampy_get_num_threads(void)
{
    pthread_once(&init_once, init_threads);
    return num_threads;
}

void ampy_set_num_threads(int n)
{
    pthread_once(&init_once, init_threads);
    num_threads = n < 1 ? 1 : (n > MAX_THREADS ? MAX_THREADS : n);
}

/* Start workers up to `want` (called with pool_lock held). A failed
 * pthread_create just leaves fewer workers: the caller runs what is left. */
static void ensure_workers(int want)
{
    while (nworkers < want) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        nworkers++;
    }
}

void ampy_parallel_for(int64_t n, int64_t grain, ampy_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    int nt = ampy_get_num_threads();
    int64_t chunks = (grain > 0) ? n / grain : 1;
    if (chunks > nt)
        chunks = nt;
    if (chunks <= 1 || in_parallel) {
        fn(0, n, ctx);
        return;
    }
    pthread_mutex_lock(&submit_lock);
    pthread_mutex_lock(&pool_lock);
    ensure_workers((int)chunks - 1);
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.nchunks = (int)chunks;
    job.next = 0;
    job.pending = (int)chunks;
    job.generation++;
    pthread_cond_broadcast(&work_cv);
    run_chunks(); /* the caller works too */
    while (job.pending > 0)
        pthread_cond_wait(&done_cv, &pool_lock);
    job.fn = NULL;
    pthread_mutex_unlock(&pool_lock);
    pthread_mutex_unlock(&submit_lock);
}
