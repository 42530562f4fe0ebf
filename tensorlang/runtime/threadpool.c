/* The tensorlang runtime: a persistent thread pool for parallel loops and aligned allocation.
 *
 * Generated code calls tl_parallel_for(fn, closure, n): tasks 0..n-1 run fn(task, n, closure),
 * task 0 on the calling thread, the others on persistent workers that spin briefly after a job
 * (back-to-back parallel loops then start in well under a microsecond) and then sleep on a
 * condition variable. A parallel loop started from inside a task runs serially.
 * The same source is compiled into JIT processes (via cffi) and into exported libraries.
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef void (*tl_task_fn)(int32_t task, int32_t num_tasks, void *closure);

#define TL_MAX_THREADS 256
#define TL_SPIN_ITERS 20000

static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;     /* workers' sleep */
static pthread_cond_t tl_wake = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t tl_submit = PTHREAD_MUTEX_INITIALIZER;   /* one job at a time */
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

static int tl_num_threads = 0;      /* threads a parallel loop uses, the caller included */
static int tl_num_workers = 0;      /* started worker threads */
static volatile int tl_generation = 0;
static tl_task_fn tl_job_fn;
static void *tl_job_closure;
/* Tasks are claimed with one fetch_add on a word that holds the job's task count (high half)
 * and the next task id (low half), so a claim and the count it is checked against come from the
 * same job. Between jobs the word is 0: a worker that arrives late claims nothing. (With the
 * count in a field of its own, a worker whose claim failed at the end of one job could read the
 * next job's larger count, run a task of that job that was never claimed for it, and count it
 * done twice: the caller then returned while a task still read its closure from the stack.) */
static int64_t tl_claims = 0;
static int tl_pending;              /* tasks not finished */
static __thread int tl_in_task = 0;

/* The caller's floating-point mode travels with each job (x86: MXCSR's control bits, rounding,
 * flush-to-zero and denormals-are-zero; its sticky exception flags stay each thread's own). A
 * worker would otherwise keep the mode of whichever thread created it, and one kernel's tasks
 * would flush denormals or not (results apart, and on CPUs that handle denormals in microcode,
 * speeds far apart) depending on the thread that ran them and on what another library did to
 * the creating thread before the pool started. */
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define TL_FP_CONTROL 0xffc0u
static inline unsigned tl_fp_mode(void) { return _mm_getcsr() & TL_FP_CONTROL; }
static inline void tl_set_fp_mode(unsigned mode) {
    unsigned csr = _mm_getcsr();
    if ((csr & TL_FP_CONTROL) != mode) _mm_setcsr((csr & ~TL_FP_CONTROL) | mode);
}
#else
static inline unsigned tl_fp_mode(void) { return 0; }
static inline void tl_set_fp_mode(unsigned mode) { (void)mode; }
#endif
static unsigned tl_job_fp_mode;

static inline void tl_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void tl_run_tasks(void) {
    tl_in_task = 1;
    for (;;) {
        int64_t claim = __atomic_fetch_add(&tl_claims, 1, __ATOMIC_ACQ_REL);
        int32_t task = (int32_t)(claim & 0xffffffff), tasks = (int32_t)(claim >> 32);
        if (task >= tasks) break;
        tl_set_fp_mode(tl_job_fp_mode);  /* published with the job, as its fn and closure */
        tl_job_fn(task, tasks, tl_job_closure);
        __atomic_fetch_sub(&tl_pending, 1, __ATOMIC_ACQ_REL);
    }
    tl_in_task = 0;
}

static void *tl_worker(void *arg) {
    /* The generation at creation: a job posted before this thread first runs is not missed. */
    int seen = (int)(intptr_t)arg;
    for (;;) {
        int spins = 0;
        while (__atomic_load_n(&tl_generation, __ATOMIC_ACQUIRE) == seen && spins < TL_SPIN_ITERS) {
            tl_pause();
            spins++;
        }
        if (__atomic_load_n(&tl_generation, __ATOMIC_ACQUIRE) == seen) {
            pthread_mutex_lock(&tl_lock);
            while (tl_generation == seen) pthread_cond_wait(&tl_wake, &tl_lock);
            pthread_mutex_unlock(&tl_lock);
        }
        seen = __atomic_load_n(&tl_generation, __ATOMIC_ACQUIRE);
        tl_run_tasks();
    }
    return NULL;
}

static void tl_init(void) {
    const char *env = getenv("TL_NUM_THREADS");
    int n = env ? atoi(env) : 0;
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0) n = 1;
    if (n > TL_MAX_THREADS) n = TL_MAX_THREADS;
    tl_num_threads = n;
}

static void tl_ensure_workers(int wanted) {
    while (tl_num_workers < wanted) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        void *generation = (void *)(intptr_t)__atomic_load_n(&tl_generation, __ATOMIC_ACQUIRE);
        if (pthread_create(&thread, &attr, tl_worker, generation) != 0) {
            pthread_attr_destroy(&attr);
            break;
        }
        pthread_attr_destroy(&attr);
        tl_num_workers++;
    }
}

int tl_get_num_threads(void) {
    pthread_once(&tl_once, tl_init);
    return tl_num_threads;
}

void tl_set_num_threads(int n) {
    pthread_once(&tl_once, tl_init);
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (n > TL_MAX_THREADS) n = TL_MAX_THREADS;
    __atomic_store_n(&tl_num_threads, n < 1 ? 1 : n, __ATOMIC_RELEASE);
}

static void tl_run_serial(tl_task_fn fn, void *closure, int n) {
    for (int i = 0; i < n; i++) fn(i, n, closure);
}

void tl_parallel_for(tl_task_fn fn, void *closure, int32_t n) {
    if (n <= 0) return;
    pthread_once(&tl_once, tl_init);
    /* Nested loops, single tasks, and a pool busy with another caller's job run serially. */
    if (n == 1 || tl_in_task || tl_num_threads <= 1 || pthread_mutex_trylock(&tl_submit) != 0) {
        int outer = tl_in_task;
        tl_in_task = 1;
        tl_run_serial(fn, closure, n);
        tl_in_task = outer;
        return;
    }
    int workers = (n < tl_num_threads ? n : tl_num_threads) - 1;
    tl_ensure_workers(workers);
    tl_job_fn = fn;
    tl_job_closure = closure;
    tl_job_fp_mode = tl_fp_mode();
    __atomic_store_n(&tl_pending, n, __ATOMIC_RELEASE);
    /* Task 0 is the caller's; workers claim the others. */
    __atomic_store_n(&tl_claims, ((int64_t)n << 32) | 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&tl_lock);
    __atomic_add_fetch(&tl_generation, 1, __ATOMIC_ACQ_REL);
    pthread_cond_broadcast(&tl_wake);
    pthread_mutex_unlock(&tl_lock);
    tl_in_task = 1;
    fn(0, n, closure);
    __atomic_fetch_sub(&tl_pending, 1, __ATOMIC_ACQ_REL);
    tl_in_task = 0;
    tl_run_tasks();
    while (__atomic_load_n(&tl_pending, __ATOMIC_ACQUIRE) > 0) tl_pause();
    __atomic_store_n(&tl_claims, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&tl_submit);
}

void *tl_aligned_alloc(int64_t size) {
    void *ptr = NULL;
    size_t bytes = size > 0 ? (size_t)((size + 63) & ~(int64_t)63) : 64;
    if (posix_memalign(&ptr, 64, bytes) != 0) abort(); /* generated code has no error path */
    return ptr;
}

void tl_free(void *ptr) { free(ptr); }

/* LLVM lowers some float16 conversions to libgcc routines (__truncdfhf2, ...) that the JIT
 * cannot see; these wrappers let the runtime register them under those names. */
#ifdef __FLT16_MAX__
static _Float16 tl_truncdfhf2(double x) { return (_Float16)x; }
static _Float16 tl_truncsfhf2(float x) { return (_Float16)x; }
static float tl_extendhfsf2(_Float16 x) { return (float)x; }
#endif

void *tl_half_helper(int which) {
#ifdef __FLT16_MAX__
    switch (which) {
    case 0: return (void *)&tl_truncdfhf2;
    case 1: return (void *)&tl_truncsfhf2;
    case 2: return (void *)&tl_extendhfsf2;
    }
#endif
    (void)which;
    return NULL;
}

/* Seconds per call of a packed kernel, averaged over `number` calls (the timing loop of
 * Module.time_evaluator, kept out of Python so that its overhead does not count). */
double tl_time_packed(void (*fn)(int64_t *), int64_t *args, int number) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < number; i++) fn(args);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return number > 0 ? seconds / number : 0.0;
}

/* Runs packed kernel calls in order: desc[0] is their count, then per call the kernel's packed
 * entry point and its argument array. A model's executor crosses from Python into native code
 * once per run of kernels instead of once per kernel (about 0.3 us each, which a decoder's
 * thousand small kernel calls a token add up to a third of a millisecond). Its own signature is
 * a packed call's, so the executor calls it as it calls a kernel. */
void tl_run_packed(int64_t *desc) {
    for (int64_t i = 0; i < desc[0]; i++)
        ((void (*)(int64_t *))(intptr_t)desc[1 + 2 * i])((int64_t *)(intptr_t)desc[2 + 2 * i]);
}
