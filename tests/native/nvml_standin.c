/*
 * A stand-in for libnvidia-ml.so.1 (NVML) for envdoctor's native tests.
 *
 * Written for envdoctor: only the entry points envdoctor reaches through nvidia-ml-py, declared
 * here from the facts of NVIDIA's public NVML API (C signatures, structure layouts, version
 * words, return codes). Nothing of nvml.h is copied.
 *
 * The machine comes from the file named by NVML_STANDIN_SCENARIO: `key=value` lines, `#`
 * comments. System keys: driver, cuda, gpus (count), fabric_max_version (2 or 3: the newest
 * nvmlGpuFabricInfo version the versioned query accepts). GPU keys, as `gpu.N.KEY` (one GPU) or
 * `gpu.KEY` (every GPU): name, uuid, bus, cc (e.g. 9.0), mem_total, mem_reserved, mem_used,
 * persistence, compute_mode, mig, mig_count, temperature, power, power_limit, util_gpu,
 * util_mem, ecc_unc_vol, ecc_unc_agg, ecc_cor_vol, ecc_cor_agg, pcie_gen, pcie_width, procs
 * (`pid:bytes,pid:bytes`), fabric_state, fabric_status, fabric_clique.
 * Per-GPU health keys (issue 39; the section "per-GPU health" below): field.ID (the value of
 * NVML field ID, e.g. field.230 the recovery action; a field with no key answers NotSupported
 * in its own nvmlReturn, as a driver that does not know it does; field_ret.ID its return code),
 * temp_shutdown, temp_slowdown, temp_gpu_max, sm_clock, sm_clock_max, retired_pending,
 * retired_sbe, retired_dbe (set any of them: the GPU is pre-Ampere and answers page
 * retirement), remap_corr, remap_unc, remap_pending, remap_failure.
 *
 * Control, FUNC being the C entry point (or `*` for every query of a GPU), N a GPU index:
 *   fail.FUNC[.N]=CODE    return that NVML return code
 *   sleep.FUNC[.N]=SECS   take that long first (sleep.nvmlInitWithFlags: a slow init)
 *   block.FUNC[.N]=1      never return
 *   crash.FUNC[.N]=1      SIGSEGV (a write through a null pointer)
 *   abort.FUNC[.N]=1      SIGABRT (abort(), as a failed assertion in the library does)
 * NVML_STANDIN_LOG, when set, names a file that gets one line per call: `FUNC N`.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* return codes (nvmlReturn_t) */
#define OK 0
#define E_UNINITIALIZED 1
#define E_INVALID_ARGUMENT 2
#define E_NOT_SUPPORTED 3
#define E_NOT_FOUND 6
#define E_INSUFFICIENT_SIZE 7
#define E_ARGUMENT_VERSION_MISMATCH 25

#define MAX_GPUS 16
#define MAX_MIG 7
#define MAX_KEYS 512

/* a device handle (nvmlDevice_t is a pointer to an opaque structure) */
typedef struct {
    int gpu;
    int slot; /* -1: the GPU itself, else a MIG device's slot */
} device_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_info_t; /* nvmlPciInfo_t, 68 bytes */

typedef struct {
    unsigned long long total, free, used;
} memory_t; /* nvmlMemory_t */

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} memory_v2_t; /* nvmlMemory_v2_t, 40 bytes: version 0x02000028 */

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} process_t; /* nvmlProcessInfo_t (v2 and v3 layouts) */

typedef struct {
    unsigned int gpu, memory;
} utilization_t;

typedef struct {
    unsigned int version;
    int sensorType;
    int temperature;
} temperature_v1_t; /* nvmlTemperature_v1_t, 12 bytes: version 0x0100000C */

typedef struct {
    unsigned char clusterUuid[16];
    int status;
    unsigned int cliqueId; /* partitionId in R535's header */
    unsigned char state;
} fabric_v1_t; /* nvmlGpuFabricInfo_t, 28 bytes */

typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    int status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
    unsigned char healthSummary; /* v3 only */
} fabric_v3_t; /* nvmlGpuFabricInfo_v2_t is its first 36 bytes; v3 is 40 */

#define MEMORY_V2 0x02000028u
#define TEMPERATURE_V1 0x0100000Cu
#define FABRIC_V2 0x02000024u
#define FABRIC_V3 0x03000028u

static char *keys[MAX_KEYS], *values[MAX_KEYS];
static int nkeys;
static device_t devices[MAX_GPUS], migs[MAX_GPUS][MAX_MIG];
static int initialised;

__attribute__((constructor)) static void load_scenario(void) {
    for (int i = 0; i < MAX_GPUS; i++) {
        devices[i].gpu = i;
        devices[i].slot = -1;
        for (int s = 0; s < MAX_MIG; s++) {
            migs[i][s].gpu = i;
            migs[i][s].slot = s;
        }
    }
    const char *path = getenv("NVML_STANDIN_SCENARIO");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[1024];
    while (nkeys < MAX_KEYS && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        char *eq = strchr(line, '=');
        if (line[0] == '#' || !eq) continue;
        *eq = 0;
        keys[nkeys] = strdup(line);
        values[nkeys++] = strdup(eq + 1);
    }
    fclose(f);
}

static const char *get(const char *key) {
    for (int i = nkeys - 1; i >= 0; i--)
        if (strcmp(keys[i], key) == 0) return values[i];
    return NULL;
}

static const char *gpu_str(int gpu, const char *key, const char *fallback) {
    char k[128];
    snprintf(k, sizeof k, "gpu.%d.%s", gpu, key);
    const char *v = get(k);
    if (!v) {
        snprintf(k, sizeof k, "gpu.%s", key);
        v = get(k);
    }
    return v ? v : fallback;
}

static unsigned long long gpu_num(int gpu, const char *key, unsigned long long fallback) {
    const char *v = gpu_str(gpu, key, NULL);
    return v ? strtoull(v, NULL, 0) : fallback;
}

static int gpu_count(void) {
    const char *v = get("gpus");
    int n = v ? atoi(v) : 1;
    return n < 0 ? 0 : n > MAX_GPUS ? MAX_GPUS : n;
}

/* the control value for FUNC on GPU `gpu` (-1: a system call) */
static const char *control(const char *what, const char *fn, int gpu) {
    char k[160];
    const char *v = NULL;
    if (gpu >= 0) {
        snprintf(k, sizeof k, "%s.%s.%d", what, fn, gpu);
        if ((v = get(k))) return v;
        snprintf(k, sizeof k, "%s.*.%d", what, gpu);
        if ((v = get(k))) return v;
    }
    snprintf(k, sizeof k, "%s.%s", what, fn);
    return get(k);
}

static void log_call(const char *fn, int gpu) {
    const char *path = getenv("NVML_STANDIN_LOG");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
    if (fd < 0) return;
    char line[160];
    int n = snprintf(line, sizeof line, "%s %d\n", fn, gpu);
    if (write(fd, line, (size_t)n) < 0) { /* nothing to do: the log is best effort */
    }
    close(fd);
}

/* what every entry point does first: log, then obey the scenario's controls */
static int enter(const char *fn, int gpu) {
    log_call(fn, gpu);
    const char *v;
    if ((v = control("sleep", fn, gpu))) {
        double s = atof(v);
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        while (nanosleep(&ts, &ts) != 0) {
        }
    }
    if (control("crash", fn, gpu)) {
        volatile int *nowhere = NULL;
        *nowhere = 1;
    }
    if (control("abort", fn, gpu)) abort();
    if (control("block", fn, gpu))
        for (;;) pause();
    if ((v = control("fail", fn, gpu))) return atoi(v);
    return OK;
}

#define ENTER_SYSTEM(fn)                               \
    do {                                               \
        int rc_ = enter(fn, -1);                       \
        if (rc_) return rc_;                           \
        if (!initialised) return E_UNINITIALIZED;      \
    } while (0)

#define ENTER_DEVICE(fn, handle)                                        \
    const device_t *dev = (const device_t *)(handle);                   \
    do {                                                                \
        if (!initialised) return E_UNINITIALIZED;                       \
        if (!dev || dev->gpu < 0 || dev->gpu >= gpu_count())            \
            return E_INVALID_ARGUMENT;                                  \
        int rc_ = enter(fn, dev->gpu);                                  \
        if (rc_) return rc_;                                            \
    } while (0)

static int copy_text(char *out, unsigned int size, const char *text) {
    if (!out) return E_INVALID_ARGUMENT;
    if (strlen(text) + 1 > size) return E_INSUFFICIENT_SIZE;
    strcpy(out, text);
    return OK;
}

/* --- the library ------------------------------------------------------------------------- */

int nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    int rc = enter("nvmlInitWithFlags", -1);
    if (rc) return rc;
    initialised++;
    return OK;
}

int nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

int nvmlShutdown(void) {
    int rc = enter("nvmlShutdown", -1);
    if (rc) return rc;
    if (!initialised) return E_UNINITIALIZED;
    initialised--;
    return OK;
}

const char *nvmlErrorString(int result) {
    static char text[64];
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 15: return "GPU is lost";
    case 16: return "GPU requires reset";
    case 25: return "Argument version mismatch";
    case 26: return "Deprecated";
    case 27: return "Not ready";
    default:
        snprintf(text, sizeof text, "Unknown Error %d", result);
        return text;
    }
}

int nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    ENTER_SYSTEM("nvmlSystemGetDriverVersion");
    const char *v = get("driver");
    return copy_text(version, length, v ? v : "580.159.04");
}

static int cuda_version(int *version) {
    if (!version) return E_INVALID_ARGUMENT;
    const char *v = get("cuda");
    *version = v ? atoi(v) : 13000;
    return OK;
}

int nvmlSystemGetCudaDriverVersion(int *version) {
    ENTER_SYSTEM("nvmlSystemGetCudaDriverVersion");
    return cuda_version(version);
}

int nvmlSystemGetCudaDriverVersion_v2(int *version) {
    ENTER_SYSTEM("nvmlSystemGetCudaDriverVersion_v2");
    return cuda_version(version);
}

int nvmlDeviceGetCount_v2(unsigned int *count) {
    ENTER_SYSTEM("nvmlDeviceGetCount_v2");
    if (!count) return E_INVALID_ARGUMENT;
    *count = (unsigned int)gpu_count();
    return OK;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, device_t **device) {
    if (!initialised) return E_UNINITIALIZED;
    int rc = enter("nvmlDeviceGetHandleByIndex_v2", (int)index);
    if (rc) return rc;
    if (!device || index >= (unsigned int)gpu_count()) return E_INVALID_ARGUMENT;
    *device = &devices[index];
    return OK;
}

int nvmlDeviceGetName(device_t *handle, char *name, unsigned int length) {
    ENTER_DEVICE("nvmlDeviceGetName", handle);
    if (dev->slot >= 0) return copy_text(name, length, "NVIDIA H100 80GB HBM3 MIG 1g.10gb");
    return copy_text(name, length, gpu_str(dev->gpu, "name", "NVIDIA H100 80GB HBM3"));
}

int nvmlDeviceGetUUID(device_t *handle, char *uuid, unsigned int length) {
    ENTER_DEVICE("nvmlDeviceGetUUID", handle);
    char text[96];
    if (dev->slot >= 0)
        snprintf(text, sizeof text, "MIG-%08x-0000-4000-8000-%012x", dev->gpu, dev->slot);
    else
        snprintf(text, sizeof text, "%s",
                 gpu_str(dev->gpu, "uuid", "GPU-00000000-1111-2222-3333-444455556666"));
    if (dev->slot < 0 && !gpu_str(dev->gpu, "uuid", NULL))
        snprintf(text, sizeof text, "GPU-%08x-1111-2222-3333-444455556666", dev->gpu);
    return copy_text(uuid, length, text);
}

int nvmlDeviceGetPciInfo_v3(device_t *handle, pci_info_t *pci) {
    ENTER_DEVICE("nvmlDeviceGetPciInfo_v3", handle);
    if (!pci) return E_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x18 + 0x10 * (unsigned int)dev->gpu;
    char fallback[32];
    snprintf(fallback, sizeof fallback, "00000000:%02X:00.0", pci->bus);
    snprintf(pci->busId, sizeof pci->busId, "%s", gpu_str(dev->gpu, "bus", fallback));
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", pci->busId + 4);
    pci->pciDeviceId = 0x233010de;
    return OK;
}

int nvmlDeviceGetCudaComputeCapability(device_t *handle, int *major, int *minor) {
    ENTER_DEVICE("nvmlDeviceGetCudaComputeCapability", handle);
    if (!major || !minor) return E_INVALID_ARGUMENT;
    const char *cc = gpu_str(dev->gpu, "cc", "9.0");
    *major = atoi(cc);
    const char *dot = strchr(cc, '.');
    *minor = dot ? atoi(dot + 1) : 0;
    return OK;
}

static void memory_of(int gpu, unsigned long long *total, unsigned long long *reserved,
                      unsigned long long *used) {
    *total = gpu_num(gpu, "mem_total", 150754820096ULL); /* an H200's 143771 MiB */
    *reserved = gpu_num(gpu, "mem_reserved", 629145600ULL); /* ~600 MiB, idle */
    *used = gpu_num(gpu, "mem_used", 0);
}

int nvmlDeviceGetMemoryInfo(device_t *handle, memory_t *memory) {
    ENTER_DEVICE("nvmlDeviceGetMemoryInfo", handle);
    if (!memory) return E_INVALID_ARGUMENT;
    unsigned long long total, reserved, used;
    memory_of(dev->gpu, &total, &reserved, &used);
    memory->total = total;
    memory->used = used + reserved; /* the original query counts the reserved part as used */
    memory->free = total - used - reserved;
    return OK;
}

int nvmlDeviceGetMemoryInfo_v2(device_t *handle, memory_v2_t *memory) {
    ENTER_DEVICE("nvmlDeviceGetMemoryInfo_v2", handle);
    if (!memory) return E_INVALID_ARGUMENT;
    if (memory->version != MEMORY_V2) return E_ARGUMENT_VERSION_MISMATCH;
    unsigned long long total, reserved, used;
    memory_of(dev->gpu, &total, &reserved, &used);
    memory->total = total;
    memory->reserved = reserved;
    memory->used = used;
    memory->free = total - used - reserved;
    return OK;
}

static int get_uint(device_t *handle, const char *fn, unsigned int *out, const char *key,
                    unsigned long long fallback) {
    ENTER_DEVICE(fn, handle);
    if (!out) return E_INVALID_ARGUMENT;
    *out = (unsigned int)gpu_num(dev->gpu, key, fallback);
    return OK;
}

int nvmlDeviceGetPersistenceMode(device_t *handle, unsigned int *mode) {
    return get_uint(handle, "nvmlDeviceGetPersistenceMode", mode, "persistence", 1);
}

int nvmlDeviceGetComputeMode(device_t *handle, unsigned int *mode) {
    return get_uint(handle, "nvmlDeviceGetComputeMode", mode, "compute_mode", 0);
}

int nvmlDeviceGetMigMode(device_t *handle, unsigned int *current, unsigned int *pending) {
    ENTER_DEVICE("nvmlDeviceGetMigMode", handle);
    if (!current || !pending) return E_INVALID_ARGUMENT;
    *current = *pending = (unsigned int)gpu_num(dev->gpu, "mig", 0);
    return OK;
}

int nvmlDeviceGetMaxMigDeviceCount(device_t *handle, unsigned int *count) {
    ENTER_DEVICE("nvmlDeviceGetMaxMigDeviceCount", handle);
    if (!count) return E_INVALID_ARGUMENT;
    *count = gpu_num(dev->gpu, "mig", 0) ? MAX_MIG : 0;
    return OK;
}

int nvmlDeviceGetMigDeviceHandleByIndex(device_t *handle, unsigned int index,
                                        device_t **mig) {
    ENTER_DEVICE("nvmlDeviceGetMigDeviceHandleByIndex", handle);
    if (!mig || index >= MAX_MIG) return E_INVALID_ARGUMENT;
    if (index >= gpu_num(dev->gpu, "mig_count", 0)) return E_NOT_FOUND;
    *mig = &migs[dev->gpu][index];
    return OK;
}

int nvmlDeviceGetTotalEccErrors(device_t *handle, int errorType, int counterType,
                                unsigned long long *count) {
    ENTER_DEVICE("nvmlDeviceGetTotalEccErrors", handle);
    if (!count || errorType < 0 || errorType > 1 || counterType < 0 || counterType > 1)
        return E_INVALID_ARGUMENT;
    static const char *names[2][2] = {{"ecc_cor_vol", "ecc_cor_agg"},
                                      {"ecc_unc_vol", "ecc_unc_agg"}};
    *count = gpu_num(dev->gpu, names[errorType][counterType], 0);
    return OK;
}

/* a pre-Ampere GPU (page retirement) when the scenario sets any retired_* key (issue 39) */
static int retires_pages(int gpu) {
    return gpu_str(gpu, "retired_pending", NULL) || gpu_str(gpu, "retired_sbe", NULL) ||
           gpu_str(gpu, "retired_dbe", NULL);
}

int nvmlDeviceGetRetiredPagesPendingStatus(device_t *handle, unsigned int *pending) {
    ENTER_DEVICE("nvmlDeviceGetRetiredPagesPendingStatus", handle);
    if (!retires_pages(dev->gpu)) return E_NOT_SUPPORTED; /* Ampere and later remap rows */
    if (!pending) return E_INVALID_ARGUMENT;
    *pending = (unsigned int)gpu_num(dev->gpu, "retired_pending", 0);
    return OK;
}

int nvmlDeviceGetRetiredPages(device_t *handle, int cause, unsigned int *count,
                              unsigned long long *addresses) {
    ENTER_DEVICE("nvmlDeviceGetRetiredPages", handle);
    if (!retires_pages(dev->gpu)) return E_NOT_SUPPORTED;
    /* cause 0: multiple single-bit errors, 1: a double-bit error (nvmlPageRetirementCause_t) */
    if (!count || cause < 0 || cause > 1) return E_INVALID_ARGUMENT;
    unsigned int n = (unsigned int)gpu_num(dev->gpu, cause ? "retired_dbe" : "retired_sbe", 0);
    if (!addresses || *count < n) {
        *count = n;
        return n ? E_INSUFFICIENT_SIZE : OK;
    }
    for (unsigned int i = 0; i < n; i++) addresses[i] = 0x1000ULL * (i + 1);
    *count = n;
    return OK;
}

int nvmlDeviceGetRemappedRows(device_t *handle, unsigned int *corr, unsigned int *unc,
                              unsigned int *pending, unsigned int *failure) {
    ENTER_DEVICE("nvmlDeviceGetRemappedRows", handle);
    if (!corr || !unc || !pending || !failure) return E_INVALID_ARGUMENT;
    if (retires_pages(dev->gpu)) return E_NOT_SUPPORTED; /* no row remapper before Ampere */
    *corr = (unsigned int)gpu_num(dev->gpu, "remap_corr", 0);
    *unc = (unsigned int)gpu_num(dev->gpu, "remap_unc", 0);
    *pending = (unsigned int)gpu_num(dev->gpu, "remap_pending", 0);
    *failure = (unsigned int)gpu_num(dev->gpu, "remap_failure", 0);
    return OK;
}

static int processes(const device_t *dev, unsigned int *count, process_t *infos) {
    if (!count) return E_INVALID_ARGUMENT;
    const char *list = gpu_str(dev->gpu, "procs", "");
    unsigned int n = 0;
    process_t found[32];
    while (*list && n < 32) {
        char *end;
        found[n].pid = (unsigned int)strtoul(list, &end, 10);
        found[n].usedGpuMemory = *end == ':' ? strtoull(end + 1, &end, 10) : 0;
        found[n].gpuInstanceId = found[n].computeInstanceId = 0xFFFFFFFFu;
        n++;
        list = *end == ',' ? end + 1 : end;
        if (*list && *list != ',' && (*list < '0' || *list > '9')) break;
    }
    if (n == 0) {
        *count = 0;
        return OK;
    }
    if (!infos || *count < n) {
        *count = n;
        return E_INSUFFICIENT_SIZE;
    }
    memcpy(infos, found, n * sizeof *found);
    *count = n;
    return OK;
}

#define PROCESS_QUERY(fn)                                                    \
    int fn(device_t *handle, unsigned int *count, process_t *infos) {        \
        ENTER_DEVICE(#fn, handle);                                           \
        return processes(dev, count, infos);                                 \
    }
PROCESS_QUERY(nvmlDeviceGetComputeRunningProcesses_v3)
PROCESS_QUERY(nvmlDeviceGetComputeRunningProcesses_v2)
PROCESS_QUERY(nvmlDeviceGetGraphicsRunningProcesses_v3)
PROCESS_QUERY(nvmlDeviceGetGraphicsRunningProcesses_v2)

int nvmlDeviceGetCurrentClocksEventReasons(device_t *handle, unsigned long long *reasons) {
    ENTER_DEVICE("nvmlDeviceGetCurrentClocksEventReasons", handle);
    if (!reasons) return E_INVALID_ARGUMENT;
    *reasons = gpu_num(dev->gpu, "clocks_event", 0x1);
    return OK;
}

int nvmlDeviceGetCurrentClocksThrottleReasons(device_t *handle, unsigned long long *reasons) {
    ENTER_DEVICE("nvmlDeviceGetCurrentClocksThrottleReasons", handle);
    if (!reasons) return E_INVALID_ARGUMENT;
    *reasons = gpu_num(dev->gpu, "clocks_event", 0x1);
    return OK;
}

int nvmlDeviceGetCurrPcieLinkGeneration(device_t *handle, unsigned int *v) {
    return get_uint(handle, "nvmlDeviceGetCurrPcieLinkGeneration", v, "pcie_gen", 5);
}

int nvmlDeviceGetCurrPcieLinkWidth(device_t *handle, unsigned int *v) {
    return get_uint(handle, "nvmlDeviceGetCurrPcieLinkWidth", v, "pcie_width", 16);
}

int nvmlDeviceGetMaxPcieLinkGeneration(device_t *handle, unsigned int *v) {
    return get_uint(handle, "nvmlDeviceGetMaxPcieLinkGeneration", v, "pcie_max_gen", 5);
}

int nvmlDeviceGetMaxPcieLinkWidth(device_t *handle, unsigned int *v) {
    return get_uint(handle, "nvmlDeviceGetMaxPcieLinkWidth", v, "pcie_max_width", 16);
}

int nvmlDeviceGetTemperature(device_t *handle, int sensor, unsigned int *temp) {
    ENTER_DEVICE("nvmlDeviceGetTemperature", handle);
    if (!temp || sensor != 0) return E_INVALID_ARGUMENT;
    *temp = (unsigned int)gpu_num(dev->gpu, "temperature", 33);
    return OK;
}

int nvmlDeviceGetTemperatureV(device_t *handle, temperature_v1_t *temp) {
    ENTER_DEVICE("nvmlDeviceGetTemperatureV", handle);
    if (!temp) return E_INVALID_ARGUMENT;
    if (temp->version != TEMPERATURE_V1) return E_ARGUMENT_VERSION_MISMATCH;
    if (temp->sensorType != 0) return E_INVALID_ARGUMENT;
    temp->temperature = (int)gpu_num(dev->gpu, "temperature", 33);
    return OK;
}

int nvmlDeviceGetPowerUsage(device_t *handle, unsigned int *v) {
    return get_uint(handle, "nvmlDeviceGetPowerUsage", v, "power", 71234);
}

int nvmlDeviceGetEnforcedPowerLimit(device_t *handle, unsigned int *v) {
    return get_uint(handle, "nvmlDeviceGetEnforcedPowerLimit", v, "power_limit", 700000);
}

int nvmlDeviceGetUtilizationRates(device_t *handle, utilization_t *rates) {
    ENTER_DEVICE("nvmlDeviceGetUtilizationRates", handle);
    if (!rates) return E_INVALID_ARGUMENT;
    rates->gpu = (unsigned int)gpu_num(dev->gpu, "util_gpu", 3);
    rates->memory = (unsigned int)gpu_num(dev->gpu, "util_mem", 1);
    return OK;
}

static void fabric_fill(int gpu, unsigned char uuid[16], int *status, unsigned int *clique,
                        unsigned char *state) {
    memset(uuid, 0xab, 16);
    *status = (int)gpu_num(gpu, "fabric_status", 0);
    *clique = (unsigned int)gpu_num(gpu, "fabric_clique", 32766);
    *state = (unsigned char)gpu_num(gpu, "fabric_state", 3);
}

int nvmlDeviceGetGpuFabricInfo(device_t *handle, fabric_v1_t *info) {
    ENTER_DEVICE("nvmlDeviceGetGpuFabricInfo", handle);
    if (!info) return E_INVALID_ARGUMENT;
    fabric_fill(dev->gpu, info->clusterUuid, &info->status, &info->cliqueId, &info->state);
    return OK;
}

int nvmlDeviceGetGpuFabricInfoV(device_t *handle, fabric_v3_t *info) {
    ENTER_DEVICE("nvmlDeviceGetGpuFabricInfoV", handle);
    if (!info) return E_INVALID_ARGUMENT;
    const char *max = get("fabric_max_version");
    int newest = max ? atoi(max) : 3;
    if (info->version != FABRIC_V2 && !(newest >= 3 && info->version == FABRIC_V3))
        return E_ARGUMENT_VERSION_MISMATCH;
    fabric_fill(dev->gpu, info->clusterUuid, &info->status, &info->cliqueId, &info->state);
    info->healthMask = 0;
    if (info->version == FABRIC_V3) info->healthSummary = 1; /* healthy */
    return OK;
}

/* --- per-GPU health (issue 39): field values, temperature thresholds, clocks ------------ */

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType; /* nvmlValueType_t: 1 unsigned int */
    int nvmlReturn;
    union {
        double dVal;
        unsigned int uiVal;
        unsigned long ulVal;
        unsigned long long ullVal;
        long long sllVal;
        int siVal;
        unsigned short usVal;
    } value;
} field_value_t; /* nvmlFieldValue_t, 40 bytes */

int nvmlDeviceGetFieldValues(device_t *handle, int count, field_value_t *values) {
    ENTER_DEVICE("nvmlDeviceGetFieldValues", handle);
    if (!values || count <= 0) return E_INVALID_ARGUMENT;
    for (int i = 0; i < count; i++) {
        char key[64];
        snprintf(key, sizeof key, "field.%u", values[i].fieldId);
        const char *v = gpu_str(dev->gpu, key, NULL);
        snprintf(key, sizeof key, "field_ret.%u", values[i].fieldId);
        values[i].nvmlReturn = (int)gpu_num(dev->gpu, key, v ? OK : E_NOT_SUPPORTED);
        values[i].valueType = 1;
        values[i].timestamp = 1764662400000000LL;
        values[i].latencyUsec = 0;
        values[i].value.ullVal = 0;
        if (v) values[i].value.uiVal = (unsigned int)strtoul(v, NULL, 0);
    }
    return OK;
}

int nvmlDeviceGetTemperatureThreshold(device_t *handle, int threshold, unsigned int *temp) {
    ENTER_DEVICE("nvmlDeviceGetTemperatureThreshold", handle);
    if (!temp) return E_INVALID_ARGUMENT;
    /* nvmlTemperatureThresholds_t: 0 shutdown, 1 slowdown, 3 GPU max operating */
    const char *key = threshold == 0 ? "temp_shutdown" : threshold == 1 ? "temp_slowdown"
                      : threshold == 3 ? "temp_gpu_max" : NULL;
    if (!key) return E_NOT_SUPPORTED;
    unsigned long long fallback = threshold == 0 ? 92 : threshold == 1 ? 89 : 87;
    *temp = (unsigned int)gpu_num(dev->gpu, key, fallback);
    return OK;
}

int nvmlDeviceGetClockInfo(device_t *handle, int type, unsigned int *clock) {
    ENTER_DEVICE("nvmlDeviceGetClockInfo", handle);
    if (!clock) return E_INVALID_ARGUMENT;
    if (type != 1) return E_NOT_SUPPORTED; /* NVML_CLOCK_SM only */
    *clock = (unsigned int)gpu_num(dev->gpu, "sm_clock", 345);
    return OK;
}

int nvmlDeviceGetMaxClockInfo(device_t *handle, int type, unsigned int *clock) {
    ENTER_DEVICE("nvmlDeviceGetMaxClockInfo", handle);
    if (!clock) return E_INVALID_ARGUMENT;
    if (type != 1) return E_NOT_SUPPORTED;
    *clock = (unsigned int)gpu_num(dev->gpu, "sm_clock_max", 1980);
    return OK;
}

_Static_assert(sizeof(field_value_t) == 40, "nvmlFieldValue_t");

/* --- end of per-GPU health ---------------------------------------------------------------- */
/* --- the interconnect (issue 39, items 4-6): NVLink, P2P, topology, PCIe replays -----------
 * GPU keys: nvlinks (how many links the GPU has; 0, the default: NotSupported on link 0),
 * nvlink_down (a comma list of links that are not active), nvlink_remote (`switch`, the default,
 * or `gpu`: a peer GPU at the far end; the peer of link L is GPU (N + 1 + L % (gpus - 1)) % gpus),
 * nvlink_replay, nvlink_recovery, nvlink_crc_flit, nvlink_crc_data (each link's counter),
 * nvlink_step (added to every counter of every link at each read: errors climbing now),
 * pcie_replay, pcie_replay_step (likewise for the PCIe replay counter), p2p (the status of every
 * pair's read and write: nvmlGpuP2PStatus_t, default 0), p2p_nvlink (default 0 with NVLink, else
 * 5), topo (nvmlGpuTopologyLevel_t of every pair, default 40: NODE). */

static unsigned long long reads[MAX_GPUS][4];
static unsigned long long replay_reads[MAX_GPUS];

static int link_down(int gpu, unsigned int link) {
    const char *list = gpu_str(gpu, "nvlink_down", "");
    while (*list) {
        char *end;
        unsigned long v = strtoul(list, &end, 10);
        if (end == list) break;
        if (v == link) return 1;
        list = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int link_arg(const device_t *dev, unsigned int link) {
    unsigned long long links = gpu_num(dev->gpu, "nvlinks", 0);
    if (links == 0) return E_NOT_SUPPORTED;
    if (link >= links) return E_INVALID_ARGUMENT;
    return OK;
}

int nvmlDeviceGetNvLinkState(device_t *handle, unsigned int link, unsigned int *active) {
    ENTER_DEVICE("nvmlDeviceGetNvLinkState", handle);
    if (!active) return E_INVALID_ARGUMENT;
    int rc = link_arg(dev, link);
    if (rc) return rc;
    *active = link_down(dev->gpu, link) ? 0 : 1;
    return OK;
}

int nvmlDeviceGetNvLinkRemoteDeviceType(device_t *handle, unsigned int link, int *type) {
    ENTER_DEVICE("nvmlDeviceGetNvLinkRemoteDeviceType", handle);
    if (!type) return E_INVALID_ARGUMENT;
    int rc = link_arg(dev, link);
    if (rc) return rc;
    *type = strcmp(gpu_str(dev->gpu, "nvlink_remote", "switch"), "gpu") == 0 ? 0 : 2;
    return OK;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(device_t *handle, unsigned int link, pci_info_t *pci) {
    ENTER_DEVICE("nvmlDeviceGetNvLinkRemotePciInfo_v2", handle);
    if (!pci) return E_INVALID_ARGUMENT;
    int rc = link_arg(dev, link);
    if (rc) return rc;
    memset(pci, 0, sizeof *pci);
    int n = gpu_count();
    if (strcmp(gpu_str(dev->gpu, "nvlink_remote", "switch"), "gpu") == 0 && n > 1) {
        int peer = (dev->gpu + 1 + (int)(link % (unsigned int)(n - 1))) % n;
        pci->bus = 0x18 + 0x10 * (unsigned int)peer;
        char fallback[32];
        snprintf(fallback, sizeof fallback, "00000000:%02X:00.0", pci->bus);
        snprintf(pci->busId, sizeof pci->busId, "%s", gpu_str(peer, "bus", fallback));
    } else {
        pci->bus = 0xa0 + link % 4; /* one of four NVSwitches */
        snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    }
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", pci->busId + 4);
    return OK;
}

int nvmlDeviceGetNvLinkErrorCounter(device_t *handle, unsigned int link, int counter,
                                    unsigned long long *value) {
    ENTER_DEVICE("nvmlDeviceGetNvLinkErrorCounter", handle);
    static const char *names[4] = {"nvlink_replay", "nvlink_recovery", "nvlink_crc_flit",
                                   "nvlink_crc_data"};
    if (!value || counter < 0 || counter > 3) return E_INVALID_ARGUMENT;
    int rc = link_arg(dev, link);
    if (rc) return rc;
    unsigned long long step = gpu_num(dev->gpu, "nvlink_step", 0);
    if (link == 0) reads[dev->gpu][counter]++; /* a reading of the GPU: counted on its link 0 */
    *value = gpu_num(dev->gpu, names[counter], 0) + step * (reads[dev->gpu][counter] - 1);
    return OK;
}

int nvmlDeviceGetPcieReplayCounter(device_t *handle, unsigned int *value) {
    ENTER_DEVICE("nvmlDeviceGetPcieReplayCounter", handle);
    if (!value) return E_INVALID_ARGUMENT;
    unsigned long long step = gpu_num(dev->gpu, "pcie_replay_step", 0);
    *value = (unsigned int)(gpu_num(dev->gpu, "pcie_replay", 0) + step * replay_reads[dev->gpu]++);
    return OK;
}

int nvmlDeviceGetP2PStatus(device_t *handle, device_t *other, int index, int *status) {
    ENTER_DEVICE("nvmlDeviceGetP2PStatus", handle);
    if (!status || !other || index < 0 || index > 4) return E_INVALID_ARGUMENT;
    int nvlink = gpu_num(dev->gpu, "nvlinks", 0) > 0;
    if (index == 2)
        *status = (int)gpu_num(dev->gpu, "p2p_nvlink", nvlink ? 0 : 5);
    else
        *status = (int)gpu_num(dev->gpu, "p2p", 0);
    return OK;
}

int nvmlDeviceGetTopologyCommonAncestor(device_t *handle, device_t *other, int *level) {
    ENTER_DEVICE("nvmlDeviceGetTopologyCommonAncestor", handle);
    if (!level || !other) return E_INVALID_ARGUMENT;
    *level = (int)gpu_num(dev->gpu, "topo", 40);
    return OK;
}

_Static_assert(sizeof(pci_info_t) == 68, "nvmlPciInfo_t");
_Static_assert(sizeof(memory_v2_t) == (MEMORY_V2 & 0xFFFFFF), "nvmlMemory_v2_t");
_Static_assert(sizeof(temperature_v1_t) == (TEMPERATURE_V1 & 0xFFFFFF), "nvmlTemperature_v1_t");
_Static_assert(sizeof(fabric_v1_t) == 28, "nvmlGpuFabricInfo_t");
_Static_assert(sizeof(fabric_v3_t) == (FABRIC_V3 & 0xFFFFFF), "nvmlGpuFabricInfo_v3_t");
_Static_assert(offsetof(fabric_v3_t, healthSummary) == (FABRIC_V2 & 0xFFFFFF), "v2 is v3's head");
_Static_assert(sizeof(process_t) == 24, "nvmlProcessInfo_t");
