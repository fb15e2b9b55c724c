/* sampler_tool: one process on the device that samples a measured process and the device's sensors into a file,
 * so the harness does not run `cat` over adb every few milliseconds during a timed run (which perturbs a phone).
 *
 *   sampler_tool --pid PID --out FILE [--interval-ms 20] [--pss-every 5] [--max-seconds 3600]
 *                [--current PATH] [--voltage PATH] [--temp NAME=PATH]...
 *
 * Started in the background by the same shell line that then execs the engine (so PID is known before the engine
 * runs), it writes one line per sample until /proc/PID/status has no VmRSS line (the process exited: gone, or a
 * zombie), then a last "# end" line:
 *
 *   # sampler_tool 1 pid=123 interval_ms=20 pss_every=5 started_after_s=0.004
 *   # columns t_s rss_kb hwm_kb pss_kb current_raw voltage_raw temp:cpu0 temp:battery
 *   0.000412 1204 1204 - -412000 3950000 36000 312
 *   ...
 *   # end samples=57 reason=exited
 *
 * t_s: seconds since the sampler started (CLOCK_MONOTONIC); started_after_s: how long after the process's start the
 * sampler began (clock-tick resolution, -1 if unknown), which puts the samples on the process's clock. rss/hwm: VmRSS/VmHWM from /proc/PID/status; pss: Pss
 * from /proc/PID/smaps_rollup every `--pss-every` samples (walking the page tables costs more), "-" in between or
 * where unreadable. Sensors are copied raw (units and sign differ per device; harness/devices/power.py normalises).
 * Every file is reopened at each sample: sysfs values are regenerated on read. Built static for aarch64 like
 * pagecache_tool. Exit status 2 on bad arguments. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TEMPS 16

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The file's text (at most cap-1 bytes, NUL-terminated); 0 when it cannot be read. */
static int read_text(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    return 1;
}

/* The number after "key:" in /proc-style text, -1 when absent. */
static long field_kb(const char *text, const char *key) {
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, k) == 0 && p[k] == ':') return strtol(p + k + 1, NULL, 10);
    return -1;
}

/* First whitespace-delimited token of a sysfs file into out ("-" when unreadable). */
static void sensor(const char *path, char *out, size_t cap) {
    char buf[32];
    if (!path || !read_text(path, buf, sizeof buf)) { snprintf(out, cap, "-"); return; }
    buf[strcspn(buf, " \t\r\n")] = 0;
    snprintf(out, cap, "%s", *buf ? buf : "-");
}

/* Seconds between the process's start (its fork: /proc/PID/stat field 22, in clock ticks since boot) and now, so
 * the harness can put the samples on the process's own clock; -1 when unknown. */
static double started_after(long pid) {
    char path[64], text[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    if (!read_text(path, text, sizeof text)) return -1;
    const char *p = strrchr(text, ')');  /* the command name may hold spaces and parentheses */
    for (int field = 2; p && field < 22; field++) p = strchr(p + 1, ' ');
    if (!p) return -1;
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    const double since_boot = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
    const double started = (double)strtoull(p + 1, NULL, 10) / (double)sysconf(_SC_CLK_TCK);
    const double d = since_boot - started;
    return d >= 0 && d < 3600 ? d : -1;
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s --pid PID --out FILE [--interval-ms N] [--pss-every N] [--max-seconds N] "
                    "[--current PATH] [--voltage PATH] [--temp NAME=PATH]...\n", argv0);
    exit(2);
}

int main(int argc, char **argv) {
    signal(SIGHUP, SIG_IGN);  /* outlive the terminal adbd hangs up when the engine's stream ends */
    long pid = -1, interval_ms = 20, pss_every = 5;
    double max_seconds = 3600;
    const char *out_path = NULL, *current = NULL, *voltage = NULL;
    const char *temp_name[MAX_TEMPS], *temp_path[MAX_TEMPS];
    int ntemps = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) usage(argv[0]);
        const char *v = argv[++i];
        if (!strcmp(a, "--pid")) pid = strtol(v, NULL, 10);
        else if (!strcmp(a, "--out")) out_path = v;
        else if (!strcmp(a, "--interval-ms")) interval_ms = strtol(v, NULL, 10);
        else if (!strcmp(a, "--pss-every")) pss_every = strtol(v, NULL, 10);
        else if (!strcmp(a, "--max-seconds")) max_seconds = strtod(v, NULL);
        else if (!strcmp(a, "--current")) current = v;
        else if (!strcmp(a, "--voltage")) voltage = v;
        else if (!strcmp(a, "--temp")) {
            const char *eq = strchr(v, '=');
            if (!eq || ntemps == MAX_TEMPS) usage(argv[0]);
            temp_name[ntemps] = strndup(v, (size_t)(eq - v));
            temp_path[ntemps++] = eq + 1;
        } else usage(argv[0]);
    }
    if (pid <= 0 || !out_path || interval_ms < 1 || interval_ms > 10000 || pss_every < 0) usage(argv[0]);
    FILE *out = fopen(out_path, "w");
    if (!out) { perror(out_path); return 2; }

    char status_path[64], rollup_path[64];
    snprintf(status_path, sizeof status_path, "/proc/%ld/status", pid);
    snprintf(rollup_path, sizeof rollup_path, "/proc/%ld/smaps_rollup", pid);
    fprintf(out, "# sampler_tool 1 pid=%ld interval_ms=%ld pss_every=%ld started_after_s=%.3f\n# columns t_s rss_kb "
                 "hwm_kb pss_kb current_raw voltage_raw", pid, interval_ms, pss_every, started_after(pid));
    for (int t = 0; t < ntemps; t++) fprintf(out, " temp:%s", temp_name[t]);
    fprintf(out, "\n");

    static char text[16384];
    const double t0 = now_s();
    long samples = 0;
    const char *reason = "max-seconds";
    for (double next = t0;; ) {
        const double t = now_s();
        if (t - t0 > max_seconds) break;
        if (!read_text(status_path, text, sizeof text) || field_kb(text, "VmRSS") < 0) { reason = "exited"; break; }
        long rss = field_kb(text, "VmRSS"), hwm = field_kb(text, "VmHWM"), pss = -1;
        if (pss_every > 0 && samples % pss_every == 0 && read_text(rollup_path, text, sizeof text))
            pss = field_kb(text, "Pss");
        char cur[32], volt[32];
        sensor(current, cur, sizeof cur);
        sensor(voltage, volt, sizeof volt);
        fprintf(out, "%.6f %ld %ld ", t - t0, rss, hwm);
        if (pss >= 0) fprintf(out, "%ld", pss); else fprintf(out, "-");
        fprintf(out, " %s %s", cur, volt);
        for (int k = 0; k < ntemps; k++) {
            char v[32];
            sensor(temp_path[k], v, sizeof v);
            fprintf(out, " %s", v);
        }
        fprintf(out, "\n");
        fflush(out);
        samples++;
        next += interval_ms / 1000.0;
        const double wait = next - now_s();
        if (wait > 0) {
            struct timespec ts = {(time_t)wait, (long)((wait - (time_t)wait) * 1e9)};
            while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {}
        } else {
            next = now_s();  /* fell behind: sample at once and start the grid again */
        }
    }
    fprintf(out, "# end samples=%ld reason=%s\n", samples, reason);
    fclose(out);
    return 0;
}
