/*
 * mocknvml: a mock libnvidia-ml.so.1 for running NVIDIA's own device plugin and GPU Feature Discovery on
 * machines without GPUs. The hardware comes from a line-based config file named by $MOCK_NVML_CONFIG (re-read
 * on every nvmlInit, so a running bed can change it). Every other function declared in go-nvml's nvml.h is a
 * generated stub (gen_stubs.py) returning NVML_ERROR_NOT_SUPPORTED; with MOCK_NVML_TRACE=1 each stub call is
 * printed on stderr.
 *
 * go-nvml's nvml.h wraps each handle in a struct ({struct nvmlDevice_st *handle;}): passed by value that is the
 * same as NVIDIA's plain pointer handle on the C ABI, so the library also stands in for code built on NVIDIA's
 * own header. The structs behind the handles are ours (below).
 *
 * Only functions defined at the start of a line as `nvmlReturn_t nvml...(` or `const char *nvml...(` count as
 * implemented for gen_stubs.py: keep that shape.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
};

static struct gpu gpus[MAX_GPUS];
static int ngpus;
static char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = "550.127.05";
static int cuda_version = 12040;
static int init_count;

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
 * mig <profile> <count> (GPU instances of that profile, each with one full compute instance).
 */
static int load_config(void) {
    const char *path = getenv("MOCK_NVML_CONFIG");
    ngpus = 0;
    if (!path || !*path) {
        fprintf(stderr, "mocknvml: MOCK_NVML_CONFIG is not set\n");
        return -1;
    }
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

#define CHECK_INIT() do { if (init_count <= 0) return NVML_ERROR_UNINITIALIZED; } while (0)
#define GPU_OR_FAIL(g, d) struct gpu *g = gpu_of(d); if (!g) return NVML_ERROR_INVALID_ARGUMENT

/* ---------------------------------------------------------------- init */

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    if (init_count == 0 && load_config() != 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    init_count++;
    mocknvml_trace("init (%d GPUs)", ngpus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    CHECK_INIT();
    init_count--;
    return NVML_SUCCESS;
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
        char n[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
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
    struct mig *m = mig_of(device);
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    if (!m) return NVML_ERROR_NOT_SUPPORTED;
    *id = m->gi_id;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    CHECK_INIT();
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
