/* pagecache_tool: page-cache eviction and residency for a device where Python is not available (an Android phone).
 *
 *   pagecache_tool evict FILE...     posix_fadvise(DONTNEED) each file, then print residency as below
 *   pagecache_tool resident FILE...  print "<resident pages> <total pages>" summed over the files
 *   pagecache_tool preload F FILE... read the first fraction F (0..1) of each file's bytes, then print residency
 *
 * Residency is mincore(2) over a PROT_READ shared mapping (bit 0 of each page's byte). No root needed. Built static
 * for aarch64 with Debian's cross compiler so it runs on Android as well as Linux. Exit status 2 on any error. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static int residency(const char *path, unsigned long long *resident, unsigned long long *total) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { perror(path); close(fd); return -1; }
    long page = sysconf(_SC_PAGESIZE);
    size_t pages = ((size_t)st.st_size + page - 1) / page;
    if (pages == 0) { close(fd); return 0; }
    void *addr = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (addr == MAP_FAILED) { perror(path); return -1; }
    unsigned char *vec = malloc(pages);
    int rc = vec && mincore(addr, st.st_size, vec) == 0 ? 0 : -1;
    if (rc == 0) {
        for (size_t i = 0; i < pages; i++) *resident += vec[i] & 1;
        *total += pages;
    } else {
        perror(path);
    }
    free(vec);
    munmap(addr, st.st_size);
    return rc;
}

static int evict(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return -1; }
    fdatasync(fd);
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc != 0) { fprintf(stderr, "%s: posix_fadvise: %s\n", path, strerror(rc)); return -1; }
    return 0;
}

static int preload(const char *path, double fraction) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) { perror(path); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { perror(path); close(fd); return -1; }
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);  /* no readahead past the prefix */
    static char buf[1 << 20];
    long long todo = (long long)(st.st_size * fraction);
    while (todo > 0) {
        ssize_t got = read(fd, buf, todo < (long long)sizeof buf ? (size_t)todo : sizeof buf);
        if (got < 0) { perror(path); close(fd); return -1; }
        if (got == 0) break;
        todo -= got;
    }
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    int is_evict = argc >= 3 && strcmp(argv[1], "evict") == 0;
    int is_preload = argc >= 4 && strcmp(argv[1], "preload") == 0;
    if (!is_evict && !is_preload && !(argc >= 3 && strcmp(argv[1], "resident") == 0)) {
        fprintf(stderr, "usage: %s evict|resident FILE... | preload FRACTION FILE...\n", argv[0]);
        return 2;
    }
    double fraction = 0;
    if (is_preload) {
        char *end;
        fraction = strtod(argv[2], &end);
        if (*end || !(fraction >= 0 && fraction <= 1)) {
            fprintf(stderr, "preload: fraction must be a number in [0, 1], got %s\n", argv[2]);
            return 2;
        }
    }
    unsigned long long resident = 0, total = 0;
    for (int i = is_preload ? 3 : 2; i < argc; i++) {
        if (is_evict && evict(argv[i]) != 0) return 2;
        if (is_preload && preload(argv[i], fraction) != 0) return 2;
        if (residency(argv[i], &resident, &total) != 0) return 2;
    }
    printf("%llu %llu\n", resident, total);
    return 0;
}
