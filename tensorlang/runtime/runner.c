/* The native runner: runs an exported library on a device that has no Python.
 *
 *   runner LIB.so NAME=IN.npy ... --out OUT.npy ... [--repeat N [--number K]]
 *   runner --describe
 *
 * It loads the library, reads its description `tlg_meta` (JSON: "inputs" and "outputs" as
 * [name, shape, dtype] lists), reads each input from the .npy file given for its name (dtype and
 * shape must match), calls `int tlg_run(void *const *inputs, void *const *outputs)` (0: done;
 * k > 0: an index read from data fell outside its buffer in kernel call k - 1) and writes each
 * output, in order, to the file of its `--out`. A kernel library (`Module.export_library`) and
 * a model library (`topi.graph.Module.export_library`) have the same entry point. With
 * `--repeat N` it runs the entry N more times and prints the mean milliseconds per call; with
 * `--number K` as well, it times N rounds of K calls and prints each round's mean on a line of
 * its own (what a tuner reads: one cost per round). `--describe` prints what the device says
 * of its CPU (uname, the auxiliary vector's hardware capabilities, aarch64's MIDR and the lines
 * of /proc/cpuinfo that name the CPU), one `key: value` per line, so that a tuning log can
 * record the machine that timed it.
 * Built by `tensorlang runner --target T -o PATH` with the target's C compiler.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define MAX_TENSORS 256
#define MAX_DIMS 16

typedef struct {
    char name[256];
    char dtype[32];
    int ndim;
    int64_t shape[MAX_DIMS];
    void *data;
    size_t bytes;
} tensor;

static void die(const char *what, const char *detail) {
    fprintf(stderr, "runner: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    exit(1);
}

/* ---- a reader of tlg_meta's JSON: just the "inputs" and "outputs" lists ------------ */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r') p++;
    return p;
}

static const char *read_string(const char *p, char *out, size_t cap) {
    size_t n = 0;
    if (*p != '"') die("malformed tlg_meta", "string expected");
    for (p++; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1]) p++;
        if (n + 1 < cap) out[n++] = *p;
    }
    if (!*p) die("malformed tlg_meta", "unterminated string");
    out[n] = 0;
    return p + 1;
}

/* The list of [name, [dims...], dtype] under `key`; returns how many. */
static int read_tensors(const char *meta, const char *key, tensor *out) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *p = strstr(meta, pattern);
    if (!p) die("tlg_meta lists no", key);
    p = skip_ws(skip_ws(p + strlen(pattern)) + 1);
    if (*p != '[') die("malformed tlg_meta", key);
    p = skip_ws(p + 1);
    int count = 0;
    while (*p == '[') {
        if (count == MAX_TENSORS) die("too many tensors in", key);
        tensor *t = &out[count++];
        memset(t, 0, sizeof *t);
        p = skip_ws(read_string(skip_ws(p + 1), t->name, sizeof t->name));
        p = skip_ws(skip_ws(p + 1) + 1); /* ',' '[' */
        while (*p != ']') {
            if (*p == '"' || *p == '[') die("symbolic shapes are not supported", t->name);
            if (t->ndim == MAX_DIMS) die("too many dimensions", t->name);
            t->shape[t->ndim++] = strtoll(p, (char **)&p, 10);
            p = skip_ws(p);
            if (*p == ',') p = skip_ws(p + 1);
        }
        p = skip_ws(skip_ws(p + 1) + 1); /* ']' ',' */
        p = skip_ws(read_string(p, t->dtype, sizeof t->dtype));
        p = skip_ws(p + 1); /* ']' */
        if (*p == ',') p = skip_ws(p + 1);
    }
    return count;
}

/* ---- .npy files ------------------------------------------------------------------------ */

static const char *const DESCR[][2] = {
    {"float32", "<f4"}, {"float64", "<f8"}, {"float16", "<f2"}, {"int8", "|i1"},
    {"uint8", "|u1"}, {"int16", "<i2"}, {"uint16", "<u2"}, {"int32", "<i4"}, {"uint32", "<u4"},
    {"int64", "<i8"}, {"uint64", "<u8"}, {"bool", "|b1"},
};

static const char *descr_of(const char *dtype) {
    for (size_t k = 0; k < sizeof DESCR / sizeof DESCR[0]; k++)
        if (!strcmp(DESCR[k][0], dtype)) return DESCR[k][1];
    die("unsupported dtype", dtype);
    return NULL;
}

static size_t nbytes(const tensor *t) {
    size_t n = (size_t)atoi(descr_of(t->dtype) + 2);
    for (int d = 0; d < t->ndim; d++) n *= (size_t)t->shape[d];
    return n;
}

static void *alloc(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64)) die("out of memory", NULL);
    memset(p, 0, bytes);
    return p;
}

static void read_npy(const char *path, tensor *t) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open", path);
    unsigned char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6)) die("not a .npy file", path);
    uint32_t len = 0;
    unsigned char b[4] = {0};
    if (fread(b, 1, magic[6] == 1 ? 2 : 4, f) < 2) die("truncated .npy header", path);
    len = b[0] | b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    char *header = calloc(len + 1, 1);
    if (!header || fread(header, 1, len, f) != len) die("truncated .npy header", path);
    const char *descr = strstr(header, "'descr'"), *shape = strstr(header, "'shape'");
    if (!descr || !shape || strstr(header, "'fortran_order': True"))
        die("need a C-ordered .npy array", path);
    char want[64];
    snprintf(want, sizeof want, "'%s'", descr_of(t->dtype));
    const char *value = strchr(descr + 7, '\'');
    if (!value || strncmp(value, want, strlen(want))) {
        fprintf(stderr, "runner: %s: %s must be %s (%s)\n", path, t->name, t->dtype, want);
        exit(1);
    }
    const char *p = strchr(shape, '(') + 1;
    for (int d = 0;; d++) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') {
            if (d != t->ndim) die("wrong number of dimensions in", path);
            break;
        }
        long long size = strtoll(p, (char **)&p, 10);
        if (d >= t->ndim || size != t->shape[d]) die("shape does not match the model's", path);
    }
    t->bytes = nbytes(t);
    t->data = alloc(t->bytes);
    if (fread(t->data, 1, t->bytes, f) != t->bytes) die("truncated .npy data", path);
    free(header);
    fclose(f);
}

static void write_npy(const char *path, const tensor *t) {
    char header[512], dims[400] = "";
    size_t n = 0;
    for (int d = 0; d < t->ndim; d++)
        n += (size_t)snprintf(dims + n, sizeof dims - n, "%lld,%s", (long long)t->shape[d],
                              d + 1 < t->ndim ? " " : "");
    if (t->ndim > 1) dims[strlen(dims) - 1] = 0; /* (2, 3) but (5,) */
    int len = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, "
                       "'shape': (%s), }", descr_of(t->dtype), dims);
    int total = (10 + len + 1 + 63) / 64 * 64;
    memset(header + len, ' ', (size_t)(total - 10 - len));
    header[total - 10 - 1] = '\n';
    FILE *f = fopen(path, "wb");
    if (!f) die("cannot write", path);
    unsigned char head[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    head[8] = (unsigned char)((total - 10) & 0xff);
    head[9] = (unsigned char)((total - 10) >> 8);
    if (fwrite(head, 1, 10, f) != 10 || fwrite(header, 1, (size_t)(total - 10), f) !=
        (size_t)(total - 10) || fwrite(t->data, 1, t->bytes, f) != t->bytes)
        die("cannot write", path);
    fclose(f);
}

/* ---- what the device says of its CPU --------------------------------------------------- */

/* The keys of /proc/cpuinfo that name a CPU (x86's "vendor_id" and "model name" show that a
 * binary runs under an emulator on an x86 machine); flag lists other than aarch64's short
 * "Features" are left out. */
static const char *const CPUINFO_KEYS[] = {
    "processor", "model name", "vendor_id", "Hardware", "CPU implementer", "CPU part",
    "CPU variant", "CPU revision", "Features", "isa", "uarch", "mvendorid", "marchid",
};

static void describe(void) {
    struct utsname u;
    if (uname(&u) == 0) printf("machine: %s\nhostname: %s\nkernel: %s %s\n", u.machine,
                               u.nodename, u.sysname, u.release);
    printf("cpus: %ld\n", sysconf(_SC_NPROCESSORS_ONLN));
    unsigned long hwcap = getauxval(AT_HWCAP);
    printf("hwcap: 0x%lx\n", hwcap);
#ifdef AT_HWCAP2
    printf("hwcap2: 0x%lx\n", getauxval(AT_HWCAP2));
#endif
#ifdef __aarch64__
    FILE *regs = fopen("/sys/devices/system/cpu/cpu0/regs/identification/midr_el1", "r");
    unsigned long long midr = 0;
    if (regs && fscanf(regs, "%llx", &midr) == 1) {
        printf("midr: 0x%llx\n", midr);
    } else if (hwcap & (1UL << 11)) { /* HWCAP_CPUID: the kernel emulates reading MIDR_EL1 */
        unsigned long value;
        __asm__ volatile("mrs %0, MIDR_EL1" : "=r"(value));
        printf("midr: 0x%lx\n", value);
    }
    if (regs) fclose(regs);
#endif
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        for (size_t k = 0; k < sizeof CPUINFO_KEYS / sizeof CPUINFO_KEYS[0]; k++) {
            size_t n = strlen(CPUINFO_KEYS[k]);
            if (!strncmp(line, CPUINFO_KEYS[k], n) && (line[n] == ' ' || line[n] == '\t' ||
                                                      line[n] == ':')) {
                printf("cpuinfo: %s", line);
                if (!strchr(line, '\n')) printf("\n");
                break;
            }
        }
    }
    if (f) fclose(f);
}

/* ---- main ------------------------------------------------------------------------------ */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    static tensor inputs[MAX_TENSORS], outputs[MAX_TENSORS];
    const char *out_paths[MAX_TENSORS];
    int nout_paths = 0, repeat = 0, number = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIB.so NAME=IN.npy ... --out OUT.npy ... [--repeat N "
                "[--number K]]\n       %s --describe\n", argv[0], argv[0]);
        return 1;
    }
    if (!strcmp(argv[1], "--describe")) {
        describe();
        return 0;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) die("cannot load the library", dlerror());
    const char *meta = dlsym(lib, "tlg_meta");
    int (*run)(void *const *, void *const *) =
        (int (*)(void *const *, void *const *))dlsym(lib, "tlg_run");
    if (!meta || !run) die("the library has no tlg_run/tlg_meta entry point", argv[1]);
    if (strstr(meta, "\"vars\"")) die("a library with symbolic sizes is not supported", argv[1]);
    int nin = read_tensors(meta, "inputs", inputs), nout = read_tensors(meta, "outputs", outputs);
    for (int a = 2; a < argc; a++) {
        if (!strcmp(argv[a], "--out") && a + 1 < argc) {
            if (nout_paths == MAX_TENSORS) die("too many --out", NULL);
            out_paths[nout_paths++] = argv[++a];
        } else if (!strcmp(argv[a], "--repeat") && a + 1 < argc) {
            repeat = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "--number") && a + 1 < argc) {
            number = atoi(argv[++a]);
            if (number < 1) die("--number needs a count of at least 1, got", argv[a]);
        } else {
            char *eq = strchr(argv[a], '=');
            int found = 0;
            if (!eq) die("arguments are NAME=IN.npy, --out OUT.npy, --repeat N or --number K; "
                         "got", argv[a]);
            *eq = 0;
            for (int k = 0; k < nin; k++)
                if (!strcmp(inputs[k].name, argv[a])) {
                    read_npy(eq + 1, &inputs[k]);
                    found = 1;
                }
            if (!found) die("the library has no input named", argv[a]);
        }
    }
    if (nout_paths != nout) {
        fprintf(stderr, "runner: the library has %d outputs; give one --out per output\n", nout);
        return 1;
    }
    void *in_ptrs[MAX_TENSORS], *out_ptrs[MAX_TENSORS];
    for (int k = 0; k < nin; k++) {
        if (!inputs[k].data) die("no file given for input", inputs[k].name);
        in_ptrs[k] = inputs[k].data;
    }
    for (int k = 0; k < nout; k++) {
        outputs[k].bytes = nbytes(&outputs[k]);
        out_ptrs[k] = outputs[k].data = alloc(outputs[k].bytes);
    }
    int status = run(in_ptrs, out_ptrs);
    if (status) {
        fprintf(stderr, "runner: status %d (an index read from data fell outside its buffer in "
                "kernel call %d, or no memory)\n", status, status - 1);
        return 2;
    }
    /* Without --number: one round of `repeat` calls; with it: `repeat` rounds of `number`. */
    int rounds = number ? repeat : (repeat > 0), calls = number ? number : repeat;
    for (int round = 0; round < rounds; round++) {
        double t0 = now();
        for (int c = 0; c < calls; c++) run(in_ptrs, out_ptrs);
        printf("%.6f ms per call (%d calls)\n", (now() - t0) * 1e3 / calls, calls);
    }
    for (int k = 0; k < nout; k++) write_npy(out_paths[k], &outputs[k]);
    return 0;
}
