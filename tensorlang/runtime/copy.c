/* Box copies for the copy stages of generated code (padding, panel packing, slicing).
 *
 * A copy stage writes every element p of its (row-major, contiguous) output box: the element
 * of the source at  src_base + sum_d src_coef[d] * p[d]  where every condition k holds,
 * cond_base[k] + sum_d cond_coef[k][d] * p[d] >= 0, and a fill value elsewhere. Generated code
 * calls tl_copy_box once for such a stage instead of compiling loops of its own: LLVM spent
 * about as long on a packing or padding loop nest as on the kernel it fed.
 *
 * A condition on one dimension (a pad's edges) becomes a range of that dimension; the innermost
 * dimensions are merged where the source runs on across them; each output row is then filled,
 * copied and filled again, its other conditions solved for the row's bounds.
 *
 * The descriptor (int64 values):
 *   elem_bytes, ndim, nconds, parallel, fill_bits, src_base,
 *   extent[ndim], src_coef[ndim], then per condition: base, coef[ndim].
 * Compiled into JIT processes together with threadpool.c, and into exported libraries.
 */
#include <stdint.h>
#include <string.h>

/* 16 bytes in a register: SSE2 on x86, GCC's vector type elsewhere (aarch64, riscv64: a
 * constant-size memcpy becomes one vector load or store, or a pair of 8-byte ones). */
#if defined(__SSE2__)
#include <emmintrin.h>
typedef __m128i tl_v16;
#define tl_load16(p) _mm_loadu_si128((const __m128i *)(p))
#define tl_store16(p, v) _mm_storeu_si128((__m128i *)(p), (v))
#define tl_store8(p, v) _mm_storel_epi64((__m128i *)(p), (v))
#define tl_low32(v) _mm_cvtsi128_si32(v)
#else
typedef int32_t tl_v16 __attribute__((vector_size(16)));
static inline tl_v16 tl_load16(const void *p) { tl_v16 v; memcpy(&v, p, 16); return v; }
static inline void tl_store16(void *p, tl_v16 v) { memcpy(p, &v, 16); }
static inline void tl_store8(void *p, tl_v16 v) { memcpy(p, &v, 8); }
#define tl_low32(v) ((v)[0])
#endif

typedef void (*tl_task_fn)(int32_t task, int32_t num_tasks, void *closure);
void tl_parallel_for(tl_task_fn fn, void *closure, int32_t n);
int tl_get_num_threads(void);

#define TL_COPY_MAX_DIMS 8
#define TL_COPY_MAX_CONDS 16
#define TL_COPY_TASKS_PER_THREAD 4
/* Runs up to this many bytes are moved inline, 16 bytes at a time: a call of memcpy per
 * 64-byte panel row cost more than the copy. */
#define TL_INLINE_BYTES 256

typedef struct {
    char *dst;
    const char *src;
    int64_t elem, ndim, nconds, src_base, rows;
    int64_t extent[TL_COPY_MAX_DIMS], src_coef[TL_COPY_MAX_DIMS];
    int64_t lo[TL_COPY_MAX_DIMS], hi[TL_COPY_MAX_DIMS]; /* each dimension's copied range */
    int64_t order[TL_COPY_MAX_DIMS], row_stride[TL_COPY_MAX_DIMS]; /* of the outer dimensions */
    int64_t cond_base[TL_COPY_MAX_CONDS], cond_coef[TL_COPY_MAX_CONDS][TL_COPY_MAX_DIMS];
    unsigned char pattern[16]; /* the fill value, repeated */
} tl_box;

static int64_t tl_floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t tl_max(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t tl_min(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t tl_abs(int64_t a) { return a < 0 ? -a : a; }

/* Narrow [*lo, *hi) to the x where s + c * x >= 0. */
static void tl_solve(int64_t s, int64_t c, int64_t *lo, int64_t *hi) {
    if (c > 0)
        *lo = tl_max(*lo, c == 1 ? -s : -tl_floor_div(s, c));  /* x >= ceil(-s / c) */
    else if (c < 0)
        *hi = tl_min(*hi, (c == -1 ? s : tl_floor_div(s, -c)) + 1);  /* x <= floor(s / -c) */
    else if (s < 0)
        *hi = *lo;
}

/* The dimension a condition involves alone, -1 for none, -2 for several. */
static int64_t tl_single_dim(const tl_box *b, int64_t k) {
    int64_t found = -1;
    for (int64_t d = 0; d < b->ndim; d++) {
        if (b->cond_coef[k][d] == 0) continue;
        if (found != -1) return -2;
        found = d;
    }
    return found;
}

/* Conditions on one dimension become its range; the others stay conditions. */
static void tl_ranges_from_conditions(tl_box *b) {
    int64_t kept = 0;
    for (int64_t k = 0; k < b->nconds; k++) {
        int64_t d = tl_single_dim(b, k);
        if (d == -2) {
            b->cond_base[kept] = b->cond_base[k];
            memmove(b->cond_coef[kept], b->cond_coef[k], sizeof b->cond_coef[k]);
            kept++;
        } else if (d == -1) {
            if (b->cond_base[k] < 0) b->hi[0] = b->lo[0]; /* never holds: all fill */
        } else {
            tl_solve(b->cond_base[k], b->cond_coef[k][d], &b->lo[d], &b->hi[d]);
        }
    }
    b->nconds = kept;
    for (int64_t d = 0; d < b->ndim; d++) {
        b->lo[d] = tl_min(tl_max(b->lo[d], 0), b->extent[d]);
        b->hi[d] = tl_max(tl_min(b->hi[d], b->extent[d]), b->lo[d]);
    }
}

/* Dimensions of extent 1 add nothing to an offset (an empty range empties the whole box). */
static void tl_drop_single_points(tl_box *b) {
    int64_t kept = 0, empty = 0;
    for (int64_t d = 0; d < b->ndim; d++) {
        if (b->extent[d] == 1 && !(kept == 0 && d == b->ndim - 1)) {
            empty |= b->lo[d] == b->hi[d];
            continue;
        }
        b->extent[kept] = b->extent[d];
        b->src_coef[kept] = b->src_coef[d];
        b->lo[kept] = b->lo[d];
        b->hi[kept] = b->hi[d];
        for (int64_t k = 0; k < b->nconds; k++) b->cond_coef[k][kept] = b->cond_coef[k][d];
        kept++;
    }
    b->ndim = kept;
    if (empty) b->hi[0] = b->lo[0];
}

/* Merge the two innermost dimensions where that keeps the copy exact: the source runs on
 * from the inner one into the outer one, the inner one is copied whole, and every remaining
 * condition is linear in the merged index. Returns whether it merged. */
static int tl_merge_inner(tl_box *b) {
    int64_t o = b->ndim - 2, i = b->ndim - 1, n = b->extent[i];
    if (b->src_coef[o] != b->src_coef[i] * n || b->lo[i] != 0 || b->hi[i] != n) return 0;
    for (int64_t k = 0; k < b->nconds; k++)
        if (b->cond_coef[k][o] != b->cond_coef[k][i] * n) return 0;
    for (int64_t k = 0; k < b->nconds; k++) b->cond_coef[k][o] = b->cond_coef[k][i];
    b->lo[o] *= n;
    b->hi[o] *= n;
    b->extent[o] *= n;
    b->src_coef[o] = b->src_coef[i];
    b->ndim--;
    return 1;
}

/* The row helpers are inlined into the loop over rows: as calls, a 64-byte panel row took
 * twice as long as the same copy written out in place. */
#define TL_INLINE static inline __attribute__((always_inline))

TL_INLINE void tl_move(char *dst, const char *src, int64_t bytes) {
    if (bytes > TL_INLINE_BYTES) {
        memcpy(dst, src, (size_t)bytes);
        return;
    }
    int64_t j = 0;
    for (; j + 16 <= bytes; j += 16)  /* intrinsics: a memcpy here would become a call */
        tl_store16(dst + j, tl_load16(src + j));
    for (; j < bytes; j++) dst[j] = src[j];
}

/* `bytes` (a multiple of the element size) of the fill value, whose 16 bytes `fill` holds in
 * a register: reading the pattern from memory after each row's stores cost as much as the row. */
TL_INLINE void tl_fill(char *dst, int64_t bytes, tl_v16 fill, int zero) {
    if (bytes <= 0) return;
    if (zero && bytes > TL_INLINE_BYTES) {
        memset(dst, 0, (size_t)bytes);
        return;
    }
    int64_t j = 0;
    for (; j + 16 <= bytes; j += 16) tl_store16(dst + j, fill);
    if (j + 8 <= bytes) { tl_store8(dst + j, fill); j += 8; }
    int32_t word = tl_low32(fill);  /* the pattern's first 4 bytes */
    if (j + 4 <= bytes) { memcpy(dst + j, &word, 4); j += 4; }
    for (; j < bytes; j++, word >>= 8) dst[j] = (char)word;
}

/* One output row: the fill value before `lo` and from `hi`, the source's run between. */
TL_INLINE void tl_copy_row(char *row, const char *src, int64_t lo, int64_t hi, int64_t n,
                           int64_t step, int64_t elem, tl_v16 pattern, int zero) {
    if (hi < lo) hi = lo;
    tl_fill(row, lo * elem, pattern, zero);
    if (step == 1) {
        tl_move(row + lo * elem, src + lo * elem, (hi - lo) * elem);
    } else {
        for (int64_t j = lo; j < hi; j++)
            memcpy(row + j * elem, src + j * step * elem, (size_t)elem);
    }
    tl_fill(row + hi * elem, (n - hi) * elem, pattern, zero);
}

/* Rows [first, last) of the box, counted in the order of `b->order`: each row is the innermost
 * dimension. They go in runs along the last dimension of that order, whose steps move the
 * source, the destination and the conditions' sums by constants; everything a run needs is
 * copied out of the box first, since reading it back after each row's stores cost more than
 * the copy itself. */
static void tl_copy_rows(const tl_box *b, int64_t first, int64_t last) {
    int64_t outer = b->ndim - 1, n = b->extent[outer], step = b->src_coef[outer];
    int64_t elem = b->elem, nconds = b->nconds, lo = b->lo[outer], hi = b->hi[outer];
    int64_t m = outer > 0 ? b->order[outer - 1] : 0, extent_m = outer > 0 ? b->extent[m] : 1;
    int64_t lo_m = outer > 0 ? b->lo[m] : 0, hi_m = outer > 0 ? b->hi[m] : 1;
    int64_t row_bytes = n * elem, src_step = outer > 0 ? b->src_coef[m] * elem : 0;
    int64_t dst_step = outer > 0 ? b->row_stride[m] * row_bytes : 0;
    int64_t cond_step[TL_COPY_MAX_CONDS], cond_inner[TL_COPY_MAX_CONDS], sum[TL_COPY_MAX_CONDS];
    tl_v16 pattern = tl_load16(b->pattern);
    int zero = 1;
    for (int q = 0; q < 16; q++) zero &= b->pattern[q] == 0;
    for (int64_t k = 0; k < nconds; k++) {
        cond_step[k] = outer > 0 ? b->cond_coef[k][m] : 0;
        cond_inner[k] = b->cond_coef[k][outer];
    }
    for (int64_t r = first; r < last;) {
        int64_t p[TL_COPY_MAX_DIMS], rest = r, offset = b->src_base, row_index = 0, inside = 1;
        for (int64_t j = outer - 1; j >= 0; j--) {
            int64_t d = b->order[j];
            p[d] = rest % b->extent[d];
            rest /= b->extent[d];
        }
        for (int64_t k = 0; k < nconds; k++) sum[k] = b->cond_base[k];
        for (int64_t d = 0; d < outer; d++) {
            offset += b->src_coef[d] * p[d];
            row_index += b->row_stride[d] * p[d];
            for (int64_t k = 0; k < nconds; k++) sum[k] += b->cond_coef[k][d] * p[d];
            if (d != m) inside &= p[d] >= b->lo[d] && p[d] < b->hi[d];
        }
        int64_t q = outer > 0 ? p[m] : 0, end = r + (extent_m - q);
        if (end > last) end = last;
        char *row = b->dst + row_index * row_bytes;
        const char *src = b->src + offset * elem;
        if (nconds == 0 && step == 1) {  /* every row of the run copies [lo, hi) or nothing */
            int64_t head = lo * elem, run = (hi - lo) * elem, tail = (n - hi) * elem;
            for (; r < end; r++, q++, row += dst_step, src += src_step) {
                if (!inside || q < lo_m || q >= hi_m) {
                    tl_fill(row, row_bytes, pattern, zero);
                    continue;
                }
                tl_fill(row, head, pattern, zero);
                tl_move(row + head, src + head, run);
                tl_fill(row + head + run, tail, pattern, zero);
            }
            continue;
        }
        for (; r < end; r++, q++, row += dst_step, src += src_step) {
            int64_t row_lo = lo, row_hi = hi;
            if (!inside || q < lo_m || q >= hi_m) row_hi = row_lo = 0;
            for (int64_t k = 0; k < nconds; k++) {
                tl_solve(sum[k], cond_inner[k], &row_lo, &row_hi);
                sum[k] += cond_step[k];
            }
            tl_copy_row(row, src, row_lo, row_hi, n, step, elem, pattern, zero);
        }
    }
}

/* The order rows are visited in: the source's, its largest steps outermost (a panel packing
 * then reads its source row by row, in address order, and writes one run into each panel,
 * instead of reading a run a page apart for every row it writes), ties in the output's. */
static void tl_order_rows(tl_box *b) {
    int64_t outer = b->ndim - 1, stride = 1;
    for (int64_t d = outer - 1; d >= 0; d--) {
        b->row_stride[d] = stride;
        stride *= b->extent[d];
    }
    for (int64_t j = 0; j < outer; j++) {
        int64_t d = j, at = j;
        for (; at > 0 && tl_abs(b->src_coef[b->order[at - 1]]) < tl_abs(b->src_coef[d]); at--)
            b->order[at] = b->order[at - 1];
        b->order[at] = d;
    }
}

static void tl_copy_task(int32_t task, int32_t tasks, void *closure) {
    const tl_box *b = (const tl_box *)closure;
    tl_copy_rows(b, b->rows * task / tasks, b->rows * (task + 1) / tasks);
}

void tl_copy_box(void *dst, const void *src, const int64_t *desc) {
    tl_box b;
    int64_t ndim = desc[1], parallel = desc[3], fill = desc[4];
    const int64_t *extent = desc + 6, *src_coef = extent + ndim, *conds = src_coef + ndim;
    b.dst = (char *)dst;
    b.src = (const char *)src;
    b.elem = desc[0];
    b.ndim = ndim;
    b.nconds = desc[2];
    b.src_base = desc[5];
    for (int q = 0; q < 16; q++) b.pattern[q] = (unsigned char)(fill >> (8 * (q % b.elem)));
    for (int64_t d = 0; d < ndim; d++) {
        if (extent[d] <= 0) return;
        b.extent[d] = extent[d];
        b.src_coef[d] = src_coef[d];
        b.lo[d] = 0;
        b.hi[d] = extent[d];
    }
    for (int64_t k = 0; k < b.nconds; k++) {
        b.cond_base[k] = conds[k * (ndim + 1)];
        for (int64_t d = 0; d < ndim; d++) b.cond_coef[k][d] = conds[k * (ndim + 1) + 1 + d];
    }
    tl_ranges_from_conditions(&b);
    tl_drop_single_points(&b);
    while (b.ndim > 1 && tl_merge_inner(&b)) {}
    tl_order_rows(&b);
    b.rows = 1;
    for (int64_t d = 0; d < b.ndim - 1; d++) b.rows *= b.extent[d];
    int64_t tasks = parallel ? (int64_t)tl_get_num_threads() * TL_COPY_TASKS_PER_THREAD : 1;
    if (tasks > b.rows) tasks = b.rows;
    if (tasks > 1)
        tl_parallel_for(tl_copy_task, &b, (int32_t)tasks);
    else
        tl_copy_rows(&b, 0, b.rows);
}
