/*
 * mocknvml: a mock libnvidia-ml.so.1 for running NVIDIA's own device plugin and GPU Feature Discovery on
 * machines without GPUs. The hardware comes from a line-based config file named by $MOCK_NVML_CONFIG, else
 * mocknvml.conf next to the library (re-read
 * on every nvmlInit, so a running bed can change it). Every other function declared in go-nvml's nvml.h is a
 * generated stub (gen_stubs.py) returning NVML_ERROR_NOT_SUPPORTED; with MOCK_NVML_TRACE=1 each stub call is
 * printed on stderr.
 *
 * go-nvml's nvml.h wraps each handle in a struct ({struct nvmlDevice_st *handle;}): passed by value that is the
 * same as NVIDIA's plain pointer handle on the C ABI, so the library also stands in for code built on NVIDIA's
 * own header. The structs behind the handles are ours (below).
 *
 * Faults: a GPU can be lost (the per-GPU config key `lost 1`, or a `lost` line in the events file), and the events
 * file feeds Xid events to event sets (nvmlEventSetWait), the way NVIDIA's k8s-device-plugin health check
 * (v0.19.3 internal/rm/health.go, checkHealth) consumes them. See the section "faults" below.
 *
 * Thread safety: the plugin waits on an event set in one goroutine while others query devices; `mu` guards what
 * they share (init and the config, lost GPUs, event sets, the events file's reading).
 *
 * Only functions defined at the start of a line as `nvmlReturn_t nvml...(` or `const char *nvml...(` count as
 * implemented for gen_stubs.py: keep that shape.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <libgen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "nvml.h"

#define MAX_GPUS 16
#define MAX_MIGS 8

struct nvmlDevice_st {
    int gpu;   /* index of the physical GPU */
    int mig;   /* -1: the GPU itself; else the MIG device's index on that GPU */
};
struct nvmlGpuInstance_st {
    int gpu;
    int mig;
};
struct nvmlComputeInstance_st {
    int gpu;
    int mig;
};

/* A MIG GPU-instance profile as NVML reports it (A100 values, nvidia-smi mig -lgip / -lcip). */
struct gi_profile {
    unsigned index;              /* NVML_GPU_INSTANCE_PROFILE_* */
    unsigned id;                 /* profile id NVML returns */
    const char *name40, *name80; /* the profile's name on the 40 GB and the 80 GB A100 (NULL: not offered) */
    unsigned slices, instances, sms, ce, dec, enc, jpeg, ofa;
    unsigned long long mem40, mem80; /* memorySizeMB */
};
static const struct gi_profile GI_PROFILES[] = {
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, "1g.5gb", "1g.10gb", 1, 7, 14, 1, 0, 0, 0, 0, 4864, 9728},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "1g.5gb+me", "1g.10gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 4864, 9728},
    {NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, NULL, "1g.20gb", 1, 4, 14, 1, 1, 0, 0, 0, 0, 19968},
    {NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, "2g.10gb", "2g.20gb", 2, 3, 28, 2, 1, 0, 0, 0, 9984, 19968},
    {NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "3g.20gb", "3g.40gb", 3, 2, 42, 3, 2, 0, 0, 0, 20096, 40192},
    {NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, "4g.20gb", "4g.40gb", 4, 1, 56, 4, 2, 0, 0, 0, 20096, 40192},
    {NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, "7g.40gb", "7g.80gb", 7, 1, 98, 7, 5, 0, 1, 1, 40448, 81152},
};
#define N_GI_PROFILES (sizeof(GI_PROFILES) / sizeof(GI_PROFILES[0]))
/* Compute-instance profile index -> slices (NVML_COMPUTE_INSTANCE_PROFILE_*); the id NVML returns is the index. */
static const unsigned CI_SLICES[NVML_COMPUTE_INSTANCE_PROFILE_COUNT] = {1, 2, 3, 4, 7, 8, 6, 1};

struct mig {
    const struct gi_profile *p;
    unsigned gi_id, start;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    struct nvmlDevice_st dev;
    struct nvmlGpuInstance_st gi;
    struct nvmlComputeInstance_st ci;
};
enum {
    EVENTS_UNSUPPORTED, /* config `events 0`: nvmlDeviceGetSupportedEventTypes returns NOT_SUPPORTED */
    EVENTS_XID_ECC,     /* default: Xid and ECC events */
    EVENTS_NONE,        /* config `events none`: an empty mask, and nvmlDeviceRegisterEvents NOT_SUPPORTED */
};
struct gpu {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    char bus[32];
    unsigned long long memory_mib;
    int cc_major, cc_minor;
    unsigned arch, brand, minor, pci_device_id, mig_capable, mig_mode, mig_pending, max_migs;
    int nmigs;
    struct mig migs[MAX_MIGS];
    struct nvmlDevice_st dev;
    int events;      /* EVENTS_*: what nvmlDeviceGetSupportedEventTypes says */
    int lost;        /* fallen off the bus: every query on its handles returns GPU_IS_LOST (guarded by mu) */
};

static struct gpu gpus[MAX_GPUS];
static int ngpus;
static char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "550.127.05";
static int cuda_version = 12040;
static int init_count;
static char events_path[1024]; /* the events file (config key events_file; default $MOCK_NVML_CONFIG.events) */
static long lost_scan_off;     /* bytes of the events file already scanned for `lost` lines (guarded by mu) */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void mocknvml_trace(const char *fmt, ...) {
    const char *t = getenv("MOCK_NVML_TRACE");
    if (!t || !*t || strcmp(t, "0") == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("mocknvml: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int is80(const struct gpu *g) { return g->memory_mib > 60000; }

static const char *profile_name(const struct gpu *g, const struct gi_profile *p) {
    return is80(g) ? p->name80 : p->name40;
}

static unsigned long long profile_mem(const struct gpu *g, const struct gi_profile *p) {
    return is80(g) ? p->mem80 : p->mem40;
}

static unsigned parse_arch(const char *s) {
    static const struct { const char *n; unsigned v; } t[] = {
        {"kepler", NVML_DEVICE_ARCH_KEPLER}, {"maxwell", NVML_DEVICE_ARCH_MAXWELL},
        {"pascal", NVML_DEVICE_ARCH_PASCAL}, {"volta", NVML_DEVICE_ARCH_VOLTA},
        {"turing", NVML_DEVICE_ARCH_TURING}, {"ampere", NVML_DEVICE_ARCH_AMPERE},
        {"ada", NVML_DEVICE_ARCH_ADA},       {"hopper", NVML_DEVICE_ARCH_HOPPER},
        {"blackwell", NVML_DEVICE_ARCH_BLACKWELL}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (strcmp(s, t[i].n) == 0)
            return t[i].v;
    return NVML_DEVICE_ARCH_UNKNOWN;
}

static unsigned parse_brand(const char *s) {
    if (strcmp(s, "tesla") == 0) return NVML_BRAND_TESLA;
    if (strcmp(s, "nvidia") == 0) return NVML_BRAND_NVIDIA;
    if (strcmp(s, "quadro") == 0) return NVML_BRAND_QUADRO;
    if (strcmp(s, "geforce") == 0) return NVML_BRAND_GEFORCE;
    if (strcmp(s, "nvidia_rtx") == 0) return NVML_BRAND_NVIDIA_RTX;
    return NVML_BRAND_UNKNOWN;
}

static void new_gpu(void) {
    struct gpu *g = &gpus[ngpus];
    memset(g, 0, sizeof(*g));
    g->minor = ngpus;
    snprintf(g->uuid, sizeof(g->uuid), "GPU-%08x-0000-4000-8000-%012x", 0x6d6f636b + ngpus, ngpus + 1);
    snprintf(g->bus, sizeof(g->bus), "00000000:%02X:00.0", 0x07 + 0x10 * ngpus);
    g->cc_major = 8;
    g->arch = NVML_DEVICE_ARCH_AMPERE;
    g->brand = NVML_BRAND_NVIDIA;
    g->pci_device_id = 0x20b010de;
    g->memory_mib = 40960;
    g->max_migs = 7;
    g->events = EVENTS_XID_ECC;
    g->dev.gpu = ngpus;
    g->dev.mig = -1;
    ngpus++;
}

static int add_migs(struct gpu *g, const char *prof, int count, const char *path, int line) {
    const struct gi_profile *p = NULL;
    for (size_t i = 0; i < N_GI_PROFILES; i++) {
        const char *n = profile_name(g, &GI_PROFILES[i]);
        if (n && strcmp(n, prof) == 0)
            p = &GI_PROFILES[i];
    }
    if (!p) {
        fprintf(stderr, "mocknvml: %s:%d: no MIG profile %s for a %llu MiB GPU\n", path, line, prof, g->memory_mib);
        return -1;
    }
    unsigned used = 0;
    for (int i = 0; i < g->nmigs; i++)
        used += g->migs[i].p->slices;
    for (int i = 0; i < count; i++) {
        if (g->nmigs >= MAX_MIGS || used + p->slices > 7) {
            fprintf(stderr, "mocknvml: %s:%d: MIG devices exceed the GPU's 7 slices\n", path, line);
            return -1;
        }
        struct mig *m = &g->migs[g->nmigs];
        m->p = p;
        m->gi_id = g->nmigs + 1;
        m->start = used;
        used += p->slices;
        snprintf(m->uuid, sizeof(m->uuid), "MIG-%08x-%04x-4000-8000-%012x", 0x6d6f636b + g->dev.gpu, g->nmigs,
                 g->dev.gpu + 1);
        m->dev.gpu = m->gi.gpu = m->ci.gpu = g->dev.gpu;
        m->dev.mig = m->gi.mig = m->ci.mig = g->nmigs;
        g->nmigs++;
    }
    return 0;
}

static char *trim(char *s) {
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/*
 * Config: one setting a line, `key value`; `#` starts a comment. `gpu` starts a new GPU; the keys after it
 * describe that GPU. Top level: driver <version>, cuda <int, e.g. 12040>. Per GPU: name <rest of line>, uuid,
 * bus <PCI bus id>, memory_mib, compute <major.minor>, arch <ampere|turing|hopper|...>, brand <tesla|nvidia|...>,
 * minor, pci_device_id <0xDDDDVVVV>, mig_capable <0|1>, mig_mode <0|1>, mig_pending <0|1> (default: mig_mode),
 * mig <profile> <count> (GPU instances of that profile, each with one full compute instance), events <1|0|none>
 * (event support, see EVENTS_*), lost <0|1> (1: lost from init on). Top level too: events_file <path>.
 */
/* The config file: $MOCK_NVML_CONFIG, else mocknvml.conf in the directory this library was loaded from, as a
 * driver's files sit together under its root (the test bed puts both under its driver root, and the container
 * runtime mounts both into containers it gives GPUs; no environment variable in the vendor's pod specs). */
static char default_config[1024];
static const char *config_path(void) {
    const char *path = getenv("MOCK_NVML_CONFIG");
    if (path && *path)
        return path;
    Dl_info info;
    if (dladdr((void *)config_path, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        char dir[1024];
        snprintf(dir, sizeof(dir), "%s", info.dli_fname);
        snprintf(default_config, sizeof(default_config), "%s/mocknvml.conf", dirname(dir));
        return default_config;
    }
    return NULL;
}

static int load_config(void) {
    const char *path = config_path();
    ngpus = 0;
    if (!path || !*path) {
        fprintf(stderr, "mocknvml: MOCK_NVML_CONFIG is not set and the library's own path is unknown\n");
        return -1;
    }
    snprintf(events_path, sizeof(events_path), "%s.events", path);
    lost_scan_off = 0; /* a re-init reads the whole events file again: a lost GPU stays lost */
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "mocknvml: cannot open %s\n", path);
        return -1;
    }
    char buf[512];
    int line = 0, pending_set[MAX_GPUS] = {0}, rc = 0;
    while (fgets(buf, sizeof(buf), f)) {
        line++;
        char *c = strchr(buf, '#');
        if (c)
            *c = 0;
        char *s = trim(buf);
        if (!*s)
            continue;
        char *v = s;
        while (*v && !isspace((unsigned char)*v))
            v++;
        if (*v)
            *v++ = 0;
        v = trim(v);
        struct gpu *g = ngpus ? &gpus[ngpus - 1] : NULL;
        if (strcmp(s, "gpu") == 0) {
            if (ngpus == MAX_GPUS) { rc = -1; break; }
            new_gpu();
        } else if (strcmp(s, "driver") == 0) {
            snprintf(driver_version, sizeof(driver_version), "%s", v);
        } else if (strcmp(s, "cuda") == 0) {
            cuda_version = atoi(v);
        } else if (strcmp(s, "events_file") == 0) {
            snprintf(events_path, sizeof(events_path), "%s", v);
        } else if (!g) {
            fprintf(stderr, "mocknvml: %s:%d: %s before any `gpu` line\n", path, line, s);
            rc = -1;
        } else if (strcmp(s, "name") == 0) {
            snprintf(g->name, sizeof(g->name), "%s", v);
        } else if (strcmp(s, "uuid") == 0) {
            snprintf(g->uuid, sizeof(g->uuid), "%s", v);
        } else if (strcmp(s, "bus") == 0) {
            snprintf(g->bus, sizeof(g->bus), "%s", v);
        } else if (strcmp(s, "memory_mib") == 0) {
            g->memory_mib = strtoull(v, NULL, 10);
        } else if (strcmp(s, "compute") == 0) {
            sscanf(v, "%d.%d", &g->cc_major, &g->cc_minor);
        } else if (strcmp(s, "arch") == 0) {
            g->arch = parse_arch(v);
        } else if (strcmp(s, "brand") == 0) {
            g->brand = parse_brand(v);
        } else if (strcmp(s, "minor") == 0) {
            g->minor = (unsigned)atoi(v);
        } else if (strcmp(s, "pci_device_id") == 0) {
            g->pci_device_id = (unsigned)strtoul(v, NULL, 0);
        } else if (strcmp(s, "mig_capable") == 0) {
            g->mig_capable = (unsigned)atoi(v);
        } else if (strcmp(s, "mig_mode") == 0) {
            g->mig_mode = (unsigned)atoi(v);
            if (!pending_set[ngpus - 1])
                g->mig_pending = g->mig_mode;
        } else if (strcmp(s, "mig_pending") == 0) {
            g->mig_pending = (unsigned)atoi(v);
            pending_set[ngpus - 1] = 1;
        } else if (strcmp(s, "mig") == 0) {
            char prof[64];
            int count = 1;
            if (sscanf(v, "%63s %d", prof, &count) < 1 || add_migs(g, prof, count, path, line) != 0)
                rc = -1;
        } else if (strcmp(s, "events") == 0) {
            g->events = strcmp(v, "none") == 0 ? EVENTS_NONE : atoi(v) ? EVENTS_XID_ECC : EVENTS_UNSUPPORTED;
        } else if (strcmp(s, "lost") == 0) {
            g->lost = atoi(v) != 0;
        } else {
            fprintf(stderr, "mocknvml: %s:%d: unknown key %s\n", path, line, s);
            rc = -1;
        }
    }
    fclose(f);
    return rc;
}

static struct gpu *gpu_of(nvmlDevice_t h) {
    struct nvmlDevice_st *d = h.handle;
    if (!d || d->gpu < 0 || d->gpu >= ngpus)
        return NULL;
    return &gpus[d->gpu];
}

static struct mig *mig_of(nvmlDevice_t h) {
    struct gpu *g = gpu_of(h);
    if (!g || h.handle->mig < 0 || h.handle->mig >= g->nmigs)
        return NULL;
    return &g->migs[h.handle->mig];
}

static nvmlReturn_t copy_str(char *dst, unsigned int len, const char *src) {
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- faults: lost GPUs and the events file */

/*
 * The events file is the test bed's fault log, appended to while the plugin runs; one fault a line:
 *
 *   xid <gpu> <code>   an Xid critical error on GPU <gpu>: its index or UUID, or a MIG device's UUID (the event
 *                      then names that MIG device's GPU and compute instance)
 *   lost <gpu>         the GPU falls off the bus (a MIG UUID: its GPU)
 *
 * `#` starts a comment; blank lines are skipped; a malformed line is skipped (one message with MOCK_NVML_TRACE=1).
 * Only complete lines count: one not yet ending in '\n' is read again on the next look.
 *
 * `lost` is a state of the machine: whoever reads the file (every device query looks, cheaply, via gpu_check;
 * every nvmlEventSetWait poll) marks the GPU lost for good in this process, and a re-init, which re-reads the
 * config, reads the whole file again. Both lines are also events: an event set delivers, in order and once each,
 * the lines appended after its creation (nvml.h, nvmlDeviceRegisterEvents: "All events that occurred before this
 * call are not recorded"; the plugin creates its set just before registering), so a restarted plugin does not
 * see old faults again, and a fault written before the plugin's health check started is never delivered.
 */
#define SUPPORTED_EVENTS /* what a GPU supports here, and the mask health.go registers */ \
    ((unsigned long long)(nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError | \
                          nvmlEventTypeSingleBitEccError))
#define POLL_MS 100
#define NO_INSTANCE 0xFFFFFFFFu /* nvmlEventData_t's gpuInstanceId/computeInstanceId for a whole GPU (nvml.h) */

struct nvmlEventSet_st {
    long off;                          /* bytes of the events file this set has read */
    unsigned long long mask[MAX_GPUS]; /* event types registered, per GPU */
    int lost_seen[MAX_GPUS];           /* GPU_IS_LOST returned for this GPU already */
};

enum ev_kind { EV_NONE, EV_XID, EV_LOST };
struct ev {
    enum ev_kind kind;
    int gpu;
    unsigned gi, ci;
    unsigned long long code;
};

/* A GPU named by index, GPU UUID or MIG UUID (gi/ci: the MIG device's ids, else NO_INSTANCE). */
static int find_gpu(const char *t, int *gpu, unsigned *gi, unsigned *ci) {
    *gi = *ci = NO_INSTANCE;
    if (isdigit((unsigned char)*t)) {
        char *end;
        long i = strtol(t, &end, 10);
        if (*end || i >= ngpus)
            return -1;
        *gpu = (int)i;
        return 0;
    }
    for (int i = 0; i < ngpus; i++) {
        if (strcmp(gpus[i].uuid, t) == 0) { *gpu = i; return 0; }
        for (int j = 0; j < gpus[i].nmigs; j++)
            if (strcmp(gpus[i].migs[j].uuid, t) == 0) {
                *gpu = i;
                *gi = gpus[i].migs[j].gi_id;
                *ci = 0; /* one compute instance per GPU instance, id 0 (nvmlDeviceGetComputeInstanceId) */
                return 0;
            }
    }
    return -1;
}

/* Parses one line of the events file; -1: malformed. */
static int parse_event(const char *line, struct ev *e) {
    char buf[512], *save, *w[3] = {0};
    snprintf(buf, sizeof(buf), "%s", line);
    char *c = strchr(buf, '#');
    if (c)
        *c = 0;
    int n = 0;
    for (char *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
        if (n == 3)
            return -1; /* no line has more than three words */
        w[n++] = t;
    }
    memset(e, 0, sizeof(*e));
    if (n == 0)
        return 0; /* EV_NONE */
    if (strcmp(w[0], "xid") == 0 && n == 3) {
        char *end;
        if (!isdigit((unsigned char)*w[2]))
            return -1;
        e->code = strtoull(w[2], &end, 10);
        if (*end || find_gpu(w[1], &e->gpu, &e->gi, &e->ci) != 0)
            return -1;
        e->kind = EV_XID;
        return 0;
    }
    if (strcmp(w[0], "lost") == 0 && n == 2) {
        if (find_gpu(w[1], &e->gpu, &e->gi, &e->ci) != 0)
            return -1;
        e->gi = e->ci = NO_INSTANCE;
        e->kind = EV_LOST;
        return 0;
    }
    return -1;
}

/*
 * Calls fn on each complete line of the events file from *off on, until fn returns nonzero; *off ends past the
 * last line handed to fn. A file now shorter than *off was rewritten: reading starts over. No file: no lines.
 * Caller holds mu.
 */
static void read_events(long *off, int (*fn)(const char *line, void *ctx), void *ctx) {
    FILE *f = fopen(events_path, "r");
    if (!f)
        return;
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size < *off)
        *off = 0;
    if (fseek(f, *off, SEEK_SET) == 0) {
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while ((n = getline(&line, &cap, f)) > 0 && line[n - 1] == '\n') {
            *off += n;
            if (fn && fn(line, ctx))
                break;
        }
        free(line);
    }
    fclose(f);
}

static int apply_lost(const char *line, void *ctx) {
    struct ev e;
    (void)ctx;
    if (parse_event(line, &e) != 0) {
        mocknvml_trace("%s: skipping malformed line: %.*s", events_path, (int)strcspn(line, "\n"), line);
    } else if (e.kind == EV_LOST && !gpus[e.gpu].lost) {
        gpus[e.gpu].lost = 1;
        mocknvml_trace("GPU %d (%s) is lost", e.gpu, gpus[e.gpu].uuid);
    }
    return 0;
}

/* Reads the events file's new lines for `lost` (and reports malformed lines, once). Caller holds mu. */
static void scan_lost(void) {
    struct stat st;
    if (stat(events_path, &st) != 0 || st.st_size == lost_scan_off)
        return;
    read_events(&lost_scan_off, apply_lost, NULL);
}

static int gpu_lost(int gpu) {
    pthread_mutex_lock(&mu);
    scan_lost();
    int lost = gpus[gpu].lost;
    pthread_mutex_unlock(&mu);
    return lost;
}

/*
 * The GPU behind a device handle (a GPU's or a MIG device's), or why not: INVALID_ARGUMENT for a bad handle,
 * GPU_IS_LOST once the GPU has fallen off the bus (nvml.h: "NVML_ERROR_GPU_IS_LOST if the target GPU has fallen
 * off the bus or is otherwise inaccessible", on every per-device query).
 */
static nvmlReturn_t gpu_check(nvmlDevice_t h, struct gpu **out) {
    struct gpu *g = gpu_of(h);
    *out = g;
    if (!g)
        return NVML_ERROR_INVALID_ARGUMENT;
    return gpu_lost(h.handle->gpu) ? NVML_ERROR_GPU_IS_LOST : NVML_SUCCESS;
}

#define CHECK_INIT() do { if (init_count <= 0) return NVML_ERROR_UNINITIALIZED; } while (0)
#define GPU_OR_FAIL(g, d) \
    struct gpu *g; \
    do { nvmlReturn_t r_ = gpu_check(d, &g); if (r_ != NVML_SUCCESS) return r_; } while (0)
/* For GPU-instance and compute-instance handles, which name their GPU too. */
#define LOST_FAIL(gpu) do { if (gpu_lost(gpu)) return NVML_ERROR_GPU_IS_LOST; } while (0)

/* ---------------------------------------------------------------- init */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    pthread_mutex_lock(&mu);
    if (init_count == 0 && load_config() != 0) {
        pthread_mutex_unlock(&mu);
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    init_count++;
    mocknvml_trace("init (%d GPUs)", ngpus);
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&mu);
    nvmlReturn_t r = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0)
        init_count--;
    pthread_mutex_unlock(&mu);
    return r;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    default: return "Unknown Error";
    }
}

/* ---------------------------------------------------------------- system */

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    CHECK_INIT();
    return copy_str(version, length, driver_version);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    char v[96];
    snprintf(v, sizeof(v), "12.%s", driver_version);
    return copy_str(version, length, v);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    CHECK_INIT();
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = cuda_version;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ---------------------------------------------------------------- device enumeration */

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    CHECK_INIT();
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)ngpus;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    CHECK_INIT();
    if (!device || index >= (unsigned)ngpus) return NVML_ERROR_INVALID_ARGUMENT;
    device->handle = &gpus[index].dev;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    CHECK_INIT();
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < ngpus; i++) {
        if (strcmp(gpus[i].uuid, uuid) == 0) { device->handle = &gpus[i].dev; return NVML_SUCCESS; }
        for (int j = 0; j < gpus[i].nmigs; j++)
            if (strcmp(gpus[i].migs[j].uuid, uuid) == 0) { device->handle = &gpus[i].migs[j].dev; return NVML_SUCCESS; }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus, nvmlDevice_t *device) {
    CHECK_INIT();
    if (!bus || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < ngpus; i++) {
        const char *b = gpus[i].bus;
        size_t lb = strlen(b), lq = strlen(bus);
        /* "00000000:07:00.0" matches "0000:07:00.0" and "07:00.0" */
        if (lq <= lb && strcasecmp(b + lb - lq, bus) == 0) { device->handle = &gpus[i].dev; return NVML_SUCCESS; }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!index || device.handle->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)device.handle->gpu;
    (void)g;
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- device properties */

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    struct mig *m = mig_of(device);
    return copy_str(uuid, length, m ? m->uuid : g->uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    struct mig *m = mig_of(device);
    if (m) {
        char n[NVML_DEVICE_NAME_V2_BUFFER_SIZE + 32]; /* name + " MIG " + profile; copy_str checks the fit */
        snprintf(n, sizeof(n), "%s MIG %s", g->name, profile_name(g, m->p));
        return copy_str(name, length, n);
    }
    return copy_str(name, length, g->name);
}

nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *type) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = (nvmlBrandType_t)g->brand;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
    if (device.handle->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    *minor = g->minor;
    return NVML_SUCCESS;
}

/* go-gpuallocator (the plugin's GetPreferredAllocation, internal/links/device.go GetP2PLink) asks this for every
 * pair of GPUs and fails the RPC on any error, so the kubelet rejects the pod (UnexpectedAdmissionError). The bed's
 * PCI tree has one host bridge above every GPU: two different GPUs meet at it. NVLink queries stay stubs
 * (NOT_SUPPORTED): go-gpuallocator skips those links. */
nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                 nvmlGpuTopologyLevel_t *pathInfo) {
    CHECK_INIT();
    GPU_OR_FAIL(g1, device1);
    GPU_OR_FAIL(g2, device2);
    if (!pathInfo) return NVML_ERROR_INVALID_ARGUMENT;
    *pathInfo = g1 == g2 ? NVML_TOPOLOGY_INTERNAL : NVML_TOPOLOGY_HOSTBRIDGE;
    return NVML_SUCCESS;
}

static unsigned long long mem_bytes(nvmlDevice_t device, struct gpu *g) {
    struct mig *m = mig_of(device);
    return (m ? profile_mem(g, m->p) : g->memory_mib) * 1024ULL * 1024ULL;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = mem_bytes(device, g);
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    memory->total = mem_bytes(device, g);
    memory->reserved = 0;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof(*pci));
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    sscanf(g->bus, "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
    snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.%X", dom, bus, dev, fn);
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.%X", dom, bus, dev, fn);
    pci->domain = dom;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = g->pci_device_id;
    pci->pciSubSystemId = 0x145f10de;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetPciInfo_v3(device, pci);
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) { return nvmlDeviceGetPciInfo_v3(device, pci); }

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = g->cc_major;
    *minor = g->cc_minor;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
    *arch = g->arch;
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- MIG */

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable || device.handle->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    *current = g->mig_mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pending = g->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable || device.handle->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    *count = g->max_migs;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!mig || device.handle->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    if (!g->mig_mode || index >= (unsigned)g->nmigs) return NVML_ERROR_NOT_FOUND;
    mig->handle = &g->migs[index].dev;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMig) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    (void)g;
    if (!isMig) return NVML_ERROR_INVALID_ARGUMENT;
    *isMig = device.handle->mig >= 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device) {
    CHECK_INIT();
    GPU_OR_FAIL(g, migDevice);
    if (!device || !mig_of(migDevice)) return NVML_ERROR_INVALID_ARGUMENT;
    device->handle = &g->dev;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    (void)g;
    struct mig *m = mig_of(device);
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!m) return NVML_ERROR_NOT_SUPPORTED;
    *id = m->gi_id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    (void)g;
    struct mig *m = mig_of(device);
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!m) return NVML_ERROR_NOT_SUPPORTED;
    *id = 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *a) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!a) return NVML_ERROR_INVALID_ARGUMENT;
    struct mig *m = mig_of(device);
    memset(a, 0, sizeof(*a));
    if (!m) {
        a->multiprocessorCount = 108;
        a->memorySizeMB = g->memory_mib;
        return NVML_SUCCESS;
    }
    a->multiprocessorCount = m->p->sms;
    a->sharedCopyEngineCount = m->p->ce;
    a->sharedDecoderCount = m->p->dec;
    a->sharedEncoderCount = m->p->enc;
    a->sharedJpegCount = m->p->jpeg;
    a->sharedOfaCount = m->p->ofa;
    a->gpuInstanceSliceCount = m->p->slices;
    a->computeInstanceSliceCount = m->p->slices;
    a->memorySizeMB = profile_mem(g, m->p);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *a) {
    return nvmlDeviceGetAttributes_v2(device, a);
}

static const struct gi_profile *gi_profile_at(struct gpu *g, unsigned index) {
    for (size_t i = 0; i < N_GI_PROFILES; i++)
        if (GI_PROFILES[i].index == index && profile_name(g, &GI_PROFILES[i]))
            return &GI_PROFILES[i];
    return NULL;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t *info) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!info || profile >= NVML_GPU_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable || device.handle->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    const struct gi_profile *p = gi_profile_at(g, profile);
    if (!p) return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof(*info));
    info->id = p->id;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->sms;
    info->copyEngineCount = p->ce;
    info->decoderCount = p->dec;
    info->encoderCount = p->enc;
    info->jpegCount = p->jpeg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = profile_mem(g, p);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t *info) {
    nvmlGpuInstanceProfileInfo_t v1;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = nvmlDeviceGetGpuInstanceProfileInfo(device, profile, &v1);
    if (r != NVML_SUCCESS) return r;
    const struct gi_profile *p = gi_profile_at(gpu_of(device), profile);
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    snprintf(name, sizeof(name), "MIG %s", profile_name(gpu_of(device), p));
    if (info->version == nvmlGpuInstanceProfileInfo_v3) {
        nvmlGpuInstanceProfileInfo_v3_t *v3 = (nvmlGpuInstanceProfileInfo_v3_t *)info;
        v3->id = v1.id; v3->sliceCount = v1.sliceCount; v3->instanceCount = v1.instanceCount;
        v3->multiprocessorCount = v1.multiprocessorCount; v3->copyEngineCount = v1.copyEngineCount;
        v3->decoderCount = v1.decoderCount; v3->encoderCount = v1.encoderCount; v3->jpegCount = v1.jpegCount;
        v3->ofaCount = v1.ofaCount; v3->memorySizeMB = v1.memorySizeMB; v3->capabilities = 0;
        snprintf(v3->name, sizeof(v3->name), "%s", name);
        return NVML_SUCCESS;
    }
    if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    info->id = v1.id; info->isP2pSupported = 0; info->sliceCount = v1.sliceCount;
    info->instanceCount = v1.instanceCount; info->multiprocessorCount = v1.multiprocessorCount;
    info->copyEngineCount = v1.copyEngineCount; info->decoderCount = v1.decoderCount;
    info->encoderCount = v1.encoderCount; info->jpegCount = v1.jpegCount; info->ofaCount = v1.ofaCount;
    info->memorySizeMB = v1.memorySizeMB;
    snprintf(info->name, sizeof(info->name), "%s", name);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!gi || device.handle->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (!g->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
    for (int i = 0; i < g->nmigs; i++)
        if (g->migs[i].gi_id == id) { gi->handle = &g->migs[i].gi; return NVML_SUCCESS; }
    return NVML_ERROR_NOT_FOUND;
}

static struct mig *mig_at(int gpu, int mig) {
    if (gpu < 0 || gpu >= ngpus || mig < 0 || mig >= gpus[gpu].nmigs) return NULL;
    return &gpus[gpu].migs[mig];
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info) {
    CHECK_INIT();
    struct mig *m = gi.handle ? mig_at(gi.handle->gpu, gi.handle->mig) : NULL;
    if (!m || !info) return NVML_ERROR_INVALID_ARGUMENT;
    LOST_FAIL(gi.handle->gpu);
    memset(info, 0, sizeof(*info));
    info->device.handle = &gpus[gi.handle->gpu].dev;
    info->id = m->gi_id;
    info->profileId = m->p->id;
    info->placement.start = m->start;
    info->placement.size = m->p->slices;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi, unsigned int id, nvmlComputeInstance_t *ci) {
    CHECK_INIT();
    struct mig *m = gi.handle ? mig_at(gi.handle->gpu, gi.handle->mig) : NULL;
    if (!m || !ci) return NVML_ERROR_INVALID_ARGUMENT;
    LOST_FAIL(gi.handle->gpu);
    if (id != 0) return NVML_ERROR_NOT_FOUND;
    ci->handle = &m->ci;
    return NVML_SUCCESS;
}

static unsigned ci_profile_index(unsigned slices) {
    for (unsigned i = 0; i < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; i++)
        if (CI_SLICES[i] == slices) return i;
    return 0;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info) {
    CHECK_INIT();
    struct mig *m = ci.handle ? mig_at(ci.handle->gpu, ci.handle->mig) : NULL;
    if (!m || !info) return NVML_ERROR_INVALID_ARGUMENT;
    LOST_FAIL(ci.handle->gpu);
    memset(info, 0, sizeof(*info));
    info->device.handle = &gpus[ci.handle->gpu].dev;
    info->gpuInstance.handle = &m->gi;
    info->id = 0;
    info->profileId = ci_profile_index(m->p->slices); /* one compute instance spanning the GPU instance */
    info->placement.start = 0;
    info->placement.size = m->p->slices;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info) {
    return nvmlComputeInstanceGetInfo_v2(ci, info);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t *info) {
    CHECK_INIT();
    struct mig *m = gi.handle ? mig_at(gi.handle->gpu, gi.handle->mig) : NULL;
    if (!m || !info || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile >= NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    LOST_FAIL(gi.handle->gpu);
    /* offered: the plain 1/2/3/4/7-slice compute instances that fit in the GPU instance */
    unsigned s = CI_SLICES[profile];
    if (profile > NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE || profile == NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE ||
        s > m->p->slices)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof(*info));
    info->id = profile;
    info->sliceCount = s;
    info->instanceCount = m->p->slices / s;
    info->multiprocessorCount = 14 * s;
    info->sharedCopyEngineCount = m->p->ce;
    info->sharedDecoderCount = m->p->dec;
    info->sharedEncoderCount = m->p->enc;
    info->sharedJpegCount = m->p->jpeg;
    info->sharedOfaCount = m->p->ofa;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfoV(nvmlGpuInstance_t gi, unsigned int profile,
                                                           unsigned int engProfile,
                                                           nvmlComputeInstanceProfileInfo_v2_t *info) {
    nvmlComputeInstanceProfileInfo_t v1;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, profile, engProfile, &v1);
    if (r != NVML_SUCCESS) return r;
    if (info->version != nvmlComputeInstanceProfileInfo_v2 && info->version != nvmlComputeInstanceProfileInfo_v3)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    /* v2 and v3 share their layout up to v3's trailing capabilities */
    info->id = v1.id; info->sliceCount = v1.sliceCount; info->instanceCount = v1.instanceCount;
    info->multiprocessorCount = v1.multiprocessorCount; info->sharedCopyEngineCount = v1.sharedCopyEngineCount;
    info->sharedDecoderCount = v1.sharedDecoderCount; info->sharedEncoderCount = v1.sharedEncoderCount;
    info->sharedJpegCount = v1.sharedJpegCount; info->sharedOfaCount = v1.sharedOfaCount;
    snprintf(info->name, sizeof(info->name), "MIG %uc", v1.sliceCount);
    if (info->version == nvmlComputeInstanceProfileInfo_v3)
        ((nvmlComputeInstanceProfileInfo_v3_t *)info)->capabilities = 0;
    return NVML_SUCCESS;
}

/* ---------------------------------------------------------------- events (XID health checks) */

/*
 * What NVIDIA's k8s-device-plugin health check calls (v0.19.3 internal/rm/health.go, checkHealth): EventSetCreate;
 * per device, DeviceGetHandleByUUID of the GPU (of the parent GPU for a MIG device), GetSupportedEventTypes
 * (failure: that device unhealthy) and RegisterEvents(XidCriticalError|DoubleBitEcc|SingleBitEcc & supported;
 * NOT_SUPPORTED: "too old to support healthchecking", other failures: unhealthy); then EventSetWait(5000) in a
 * loop: TIMEOUT continues, any other error marks every device unhealthy, an XidCriticalError event whose xid is
 * not ignored marks the device with the event's UUID (and, for MIG, GI/CI ids) unhealthy. go-nvml calls
 * nvmlEventSetWait_v2 when the library has it (pkg/nvml/lib.go), nvmlEventSetWait otherwise.
 */

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    CHECK_INIT();
    if (!set) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlEventSet_st *s = calloc(1, sizeof(*s));
    if (!s) return NVML_ERROR_MEMORY;
    pthread_mutex_lock(&mu);
    scan_lost();
    read_events(&s->off, NULL, NULL); /* start past what is already written: NVML records no earlier event */
    pthread_mutex_unlock(&mu);
    set->handle = s;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    CHECK_INIT();
    free(set.handle);
    return NVML_SUCCESS;
}

/*
 * GPUs support Xid and ECC events unless their config says otherwise: `events 0` fails the query (health.go then
 * marks the device unhealthy: "unable to determine the supported events"); `events none` answers an empty mask,
 * as nvml.h documents for platforms without events, and RegisterEvents then returns NOT_SUPPORTED (health.go: "too
 * old to support healthchecking", the device stays healthy). MIG device handles: NOT_SUPPORTED (nvml.h,
 * nvmlEventSetWait_v2: "This API does not currently support per-instance event reporting using MIG device
 * handles"; the plugin registers the parent GPU).
 */
nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!eventTypes) return NVML_ERROR_INVALID_ARGUMENT;
    if (g->events == EVENTS_UNSUPPORTED || device.handle->mig >= 0) return NVML_ERROR_NOT_SUPPORTED;
    *eventTypes = g->events == EVENTS_NONE ? 0 : SUPPORTED_EVENTS;
    return NVML_SUCCESS;
}

/* nvml.h: NOT_SUPPORTED "if the platform does not support this feature or some of requested event types"; then
 * none of them is registered. */
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set) {
    CHECK_INIT();
    GPU_OR_FAIL(g, device);
    if (!set.handle) return NVML_ERROR_INVALID_ARGUMENT;
    if (g->events != EVENTS_XID_ECC || device.handle->mig >= 0 || (eventTypes & ~SUPPORTED_EVENTS))
        return NVML_ERROR_NOT_SUPPORTED;
    pthread_mutex_lock(&mu);
    set.handle->mask[device.handle->gpu] |= eventTypes;
    pthread_mutex_unlock(&mu);
    return NVML_SUCCESS;
}

struct wait_ctx {
    struct nvmlEventSet_st *set;
    nvmlEventData_t *data;
    nvmlReturn_t ret; /* TIMEOUT: nothing for this set yet */
};

/*
 * One line of the events file for one set: `lost` of a GPU the set registered returns GPU_IS_LOST (once per set:
 * the plugin's loop would otherwise spin, every Wait failing at once and every device sent again); `xid` of a GPU
 * the set registered for XidCriticalError, not lost, is the event. Everything else is consumed unseen.
 */
static int deliver(const char *line, void *p) {
    struct wait_ctx *w = p;
    struct nvmlEventSet_st *s = w->set;
    struct ev e;
    if (parse_event(line, &e) != 0 || e.kind == EV_NONE || !s->mask[e.gpu] || s->lost_seen[e.gpu])
        return 0;
    if (e.kind == EV_LOST) {
        s->lost_seen[e.gpu] = 1;
        w->ret = NVML_ERROR_GPU_IS_LOST;
        return 1;
    }
    if (!(s->mask[e.gpu] & nvmlEventTypeXidCriticalError))
        return 0;
    memset(w->data, 0, sizeof(*w->data));
    w->data->device.handle = &gpus[e.gpu].dev;
    w->data->eventType = nvmlEventTypeXidCriticalError;
    w->data->eventData = e.code;
    w->data->gpuInstanceId = e.gi;
    w->data->computeInstanceId = e.ci;
    mocknvml_trace("event: xid %llu on GPU %d (gi %u ci %u)", e.code, e.gpu, e.gi, e.ci);
    w->ret = NVML_SUCCESS;
    return 1;
}

static long ms_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000L + (t.tv_nsec - t0->tv_nsec) / 1000000L;
}

/* Polls the events file every POLL_MS until an event for this set arrives or timeoutms pass (then TIMEOUT). */
nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    CHECK_INIT();
    if (!set.handle || !data) return NVML_ERROR_INVALID_ARGUMENT;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct wait_ctx w = {set.handle, data, NVML_ERROR_TIMEOUT};
        pthread_mutex_lock(&mu);
        scan_lost();
        read_events(&set.handle->off, deliver, &w);
        pthread_mutex_unlock(&mu);
        if (w.ret != NVML_ERROR_TIMEOUT)
            return w.ret;
        long left = (long)timeoutms - ms_since(&t0);
        if (left <= 0)
            return NVML_ERROR_TIMEOUT;
        long ms = left < POLL_MS ? left : POLL_MS;
        struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&d, NULL);
    }
}

nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    return nvmlEventSetWait_v2(set, data, timeoutms);
}
